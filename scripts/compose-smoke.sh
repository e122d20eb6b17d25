#!/usr/bin/env bash
# Smoke test of the compose cluster (docker-compose.yml): builds the image,
# starts a meta group of three + five datanodes + gateway under a unique
# project name with the secrets and certificates compose generates (read back
# from meta1's volume), checks that meta refuses a clear-text client (mutual
# TLS), puts and gets a 20 MiB object with aws-cli through
# http://127.0.0.1:9878, stops dn3, reads the object again (erasure coding
# must rebuild it), stops the meta group's leader and writes and reads again
# (the other two elect a new one), and always tears the cluster down with its
# volumes. Prints the containers' logs on failure.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TESSERA_ROOT"

S3_PORT=${TESSERA_S3_PORT:-9878}
ENDPOINT=http://127.0.0.1:$S3_PORT
PROJECT=tessera-smoke-$$-$RANDOM
WAIT_SECONDS=${TESSERA_SMOKE_WAIT:-120}
OBJECT_MIB=20

docker_reachable || die "no Docker engine answers (docker info failed)"
compose=$(compose_command) || die "neither 'docker compose' nor 'docker-compose' is installed"
read -r -a COMPOSE <<<"$compose"
COMPOSE+=(--project-name "$PROJECT" --file "$TESSERA_ROOT/docker-compose.yml")

# The cluster generates every secret: none may leak in from this shell.
unset TESSERA_ROOT_ACCESS_KEY TESSERA_ROOT_SECRET_KEY TESSERA_ADMIN_TOKEN
export TESSERA_S3_PORT=$S3_PORT

WORK=$(mktemp -d)
UP=0

cleanup() {
    local status=$?
    set +e
    if [ "$UP" = 1 ]; then
        if [ "$status" -ne 0 ]; then
            log "compose smoke FAILED: container states and logs follow"
            "${COMPOSE[@]}" ps
            "${COMPOSE[@]}" logs --no-color --tail=200
        fi
        log "tearing down $PROJECT (containers and volumes)"
        "${COMPOSE[@]}" down --volumes --remove-orphans --timeout 20 >/dev/null 2>&1 ||
            log "WARNING: '${COMPOSE[*]} down' failed"
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_venv
AWS=$TESSERA_VENV/bin/aws
mkdir -p "$WORK/aws"
printf '[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n' >"$WORK/aws/config"
aws_s3() {
    env -u AWS_PROFILE -u AWS_SESSION_TOKEN \
        AWS_ACCESS_KEY_ID="$TESSERA_ROOT_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$TESSERA_ROOT_SECRET_KEY" \
        AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE="$WORK/aws/config" \
        AWS_SHARED_CREDENTIALS_FILE="$WORK/aws/none" AWS_MAX_ATTEMPTS=1 \
        timeout 300 "$AWS" --endpoint-url "$ENDPOINT" s3 "$@"
}

sha256() {
    sha256sum "$1" | cut -d' ' -f1
}

log "building the image"
bash "$TESSERA_ROOT/scripts/docker-build.sh"

log "starting $PROJECT with ${COMPOSE[0]}"
UP=1
"${COMPOSE[@]}" up -d

log "waiting up to ${WAIT_SECONDS}s for the gateway to be healthy"
deadline=$((SECONDS + WAIT_SECONDS))
while :; do
    gateway=$("${COMPOSE[@]}" ps -q gateway)
    health=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$gateway" 2>/dev/null || echo missing)
    [ "$health" = healthy ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "gateway is '$health' after ${WAIT_SECONDS}s"
    sleep 2
done

# meta_secret FILE: a file of meta's data folder (the image has no shell: docker cp).
meta_secret() {
    docker cp "$("${COMPOSE[@]}" ps -q meta1):/data/$1" - | tar -xO
}
TESSERA_ADMIN_TOKEN=$(meta_secret admin-token | tr -d '\n')
root=$(meta_secret root-credentials)
TESSERA_ROOT_ACCESS_KEY=$(printf '%s\n' "$root" | sed -n 's/^TESSERA_ROOT_ACCESS_KEY=//p')
TESSERA_ROOT_SECRET_KEY=$(printf '%s\n' "$root" | sed -n 's/^TESSERA_ROOT_SECRET_KEY=//p')
[ -n "$TESSERA_ADMIN_TOKEN" ] && [ -n "$TESSERA_ROOT_ACCESS_KEY" ] && [ -n "$TESSERA_ROOT_SECRET_KEY" ] ||
    die "meta generated no admin token or root keys"

log "waiting for meta to see five healthy datanodes"
while :; do
    status=$("${COMPOSE[@]}" exec -T meta1 /tessera admin --meta 127.0.0.1:9879 --token "$TESSERA_ADMIN_TOKEN" --json status 2>/dev/null || true)
    healthy=$(printf '%s' "$status" | "$TESSERA_VENV/bin/python" -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
def nodes(v):
    if isinstance(v, dict):
        if isinstance(v.get("datanodes"), list):
            return v["datanodes"]
        for x in v.values():
            found = nodes(x)
            if found is not None:
                return found
    return None
print(sum(1 for n in nodes(doc) or [] if str(n.get("state", "")).lower() == "healthy"))
')
    [ "$healthy" -ge 5 ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "meta reports $healthy healthy datanodes after ${WAIT_SECONDS}s: $status"
    sleep 1
done

log "checking that meta's RPC refuses a clear-text client (every internal link runs mutual TLS)"
clear=$("${COMPOSE[@]}" exec -T -e TESSERA_CLUSTER_CA= -e TESSERA_CLUSTER_CERT= -e TESSERA_CLUSTER_KEY= meta1 \
    /tessera admin --meta 127.0.0.1:9879 --token "$TESSERA_ADMIN_TOKEN" --json status 2>&1) &&
    die "meta answered a clear-text admin client: $clear"
case "$clear" in
    *--cluster-ca*) ;;
    *) die "a clear-text admin client failed, but not for want of TLS: $clear" ;;
esac

log "writing a ${OBJECT_MIB} MiB object through $ENDPOINT"
head -c $((OBJECT_MIB * 1024 * 1024)) /dev/urandom >"$WORK/in.bin"
want=$(sha256 "$WORK/in.bin")
aws_s3 mb s3://smoke
aws_s3 cp --only-show-errors "$WORK/in.bin" s3://smoke/object.bin
aws_s3 ls s3://smoke/

aws_s3 cp --only-show-errors s3://smoke/object.bin "$WORK/out1.bin"
got=$(sha256 "$WORK/out1.bin")
[ "$got" = "$want" ] || die "object read back differs: sha256 $got, wrote $want"
log "read back identical (sha256 $want)"

log "stopping datanode dn3"
"${COMPOSE[@]}" stop dn3

aws_s3 cp --only-show-errors s3://smoke/object.bin "$WORK/out2.bin"
got=$(sha256 "$WORK/out2.bin")
[ "$got" = "$want" ] || die "object read with dn3 down differs: sha256 $got, wrote $want"
log "read back identical with dn3 stopped"

GROUP=meta1:9879,meta2:9879,meta3:9879
leader=$("${COMPOSE[@]}" exec -T meta1 /tessera admin --meta "$GROUP" --token "$TESSERA_ADMIN_TOKEN" --json meta status |
    "$TESSERA_VENV/bin/python" -c '
import json, sys
views = [m["status"] for m in json.load(sys.stdin) if "status" in m]
leaders = {v["leader"] for v in views}
print(leaders.pop() if len(leaders) == 1 and None not in leaders else "")
')
[ -n "$leader" ] || die "the meta group's members name no single leader"
log "stopping meta$leader, the meta group's leader"
"${COMPOSE[@]}" stop "meta$leader"
aws_s3 cp --only-show-errors "$WORK/in.bin" s3://smoke/after.bin
aws_s3 cp --only-show-errors s3://smoke/after.bin "$WORK/out3.bin"
got=$(sha256 "$WORK/out3.bin")
[ "$got" = "$want" ] || die "object written with meta$leader stopped differs: sha256 $got, wrote $want"
aws_s3 cp --only-show-errors s3://smoke/object.bin "$WORK/out4.bin"
[ "$(sha256 "$WORK/out4.bin")" = "$want" ] || die "object read with meta$leader stopped differs"
log "wrote and read back identical with meta$leader stopped"

log "compose smoke test passed"
