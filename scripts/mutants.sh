#!/usr/bin/env bash
# Mutation testing (cargo-mutants) of the modules where a wrong line loses
# data or lets someone in; docs/testing.md says why these and reads the score.
#
#   scripts/mutants.sh                 every module below (about 1,100 mutants;
#                                      two to four hours on two cores)
#   scripts/mutants.sh proto meta      only these packages
#   scripts/mutants.sh --iterate [PKG] after tests were added: tests again only
#                                      the mutants the last run did not catch
#                                      (and any new ones), keeping its results
#   scripts/mutants.sh --sample        CI's sample: one shard of the protocol
#                                      modules, rotating by day (built from
#                                      scratch: proto alone builds in a minute)
#
# Each package's mutants are tested by that package's own tests
# (.cargo/mutants.toml). Results go to target/mutants/<package>/mutants.out;
# scripts/mutants-report.py prints the score per module and fails when a
# module catches under 90% of its mutants or a missed mutant is neither
# caught nor listed as equivalent in docs/testing.md.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TESSERA_ROOT"

# package -> the files mutated in it (cargo-mutants --file globs).
declare -A MODULES=(
    [proto]="blockstore/proto/src/wire/*.rs blockstore/proto/src/layout.rs blockstore/proto/src/checksum.rs"
    [codec]="blockstore/codec/src/lib.rs"
    [sse]="sse/src/body.rs sse/src/keys.rs sse/src/packages.rs"
    [access]="access/src/decide.rs access/src/acl.rs access/src/action.rs access/src/policy/mod.rs access/src/policy/condition.rs access/src/policy/pattern.rs"
    [gateway]="gateway/src/auth/sigv4.rs gateway/src/auth/sigv2.rs gateway/src/auth/canonical.rs gateway/src/auth/presign.rs gateway/src/auth/chunked.rs gateway/src/auth/body.rs gateway/src/auth/payload.rs gateway/src/auth/checksum.rs gateway/src/auth/post_policy.rs gateway/src/auth/mod.rs"
    [meta]="meta/service/src/ops/objects.rs meta/service/src/ops/uploads.rs meta/service/src/ops/object_lock.rs meta/service/src/ops/version_listing.rs meta/service/src/store/db.rs meta/service/src/store/group_commit.rs meta/service/src/store/deletions.rs meta/service/src/store/versions.rs meta/service/src/decoded.rs"
    [datanode]="datanode/src/store/mod.rs datanode/src/store/uploads.rs datanode/src/store/recovery.rs datanode/src/store/sidecar.rs datanode/src/store/paths.rs datanode/src/store/direct.rs"
)
# package -> the tests its mutants run, when not all of them: the gateway's
# and the datanode's integration tests start whole clusters and test these
# modules no further than their unit tests do.
declare -A TEST_ARGS=(
    [gateway]="--lib"
    [datanode]="--lib"
)
ORDER=(proto codec sse access gateway meta datanode)
# CI's sample: this many shards of proto's mutants, one a run.
SAMPLE_SHARDS=16

ensure_cargo_mutants() {
    if ! cargo mutants --version >/dev/null 2>&1; then
        log "installing cargo-mutants"
        # Unoptimised: it spends its time waiting for cargo, and so builds
        # in 50 s instead of 115 s here.
        CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false \
            CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
            cargo install --locked cargo-mutants@27.1.0
    fi
}

# run_package PACKAGE [EXTRA cargo-mutants ARGS...]
run_package() {
    local package=$1
    shift
    local args=(-p "$package" -o "target/mutants/$package" --colors never --no-times)
    local glob
    for glob in ${MODULES[$package]}; do
        args+=(-f "$glob")
    done
    local test_arg
    for test_arg in ${TEST_ARGS[$package]:-}; do
        # On every cargo invocation, so that only these tests are built.
        args+=("--cargo-arg=$test_arg")
    done
    mkdir -p "target/mutants/$package"
    # Every mutant of the code as it is now: the report drops results of
    # mutants an earlier run tested in code that has changed since.
    cargo mutants "${args[@]}" --list > "target/mutants/$package/current.txt"
    log "==> cargo mutants ${args[*]} $*"
    local status=0
    cargo mutants "${args[@]}" "$@" || status=$?
    # 2: some mutants were missed, 3: some timed out; the report judges both.
    case $status in
        0 | 2 | 3) ;;
        *) return "$status" ;;
    esac
    # cargo-mutants keeps one earlier run; the report reads them all.
    local history=target/mutants/$package/history
    mkdir -p "$history"
    cp "target/mutants/$package/mutants.out/outcomes.json" "$history/$(date +%s).json"
}

ensure_cargo_mutants
if [ "${1:-}" = --sample ]; then
    shard=$((10#$(date +%j) % SAMPLE_SHARDS))
    run_package proto --shard "$shard/$SAMPLE_SHARDS"
    exec python3 scripts/mutants-report.py --sample target/mutants/proto
fi
iterate=()
if [ "${1:-}" = --iterate ]; then
    iterate=(--iterate)
    shift
fi
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=("${ORDER[@]}")
dirs=()
for package in "${packages[@]}"; do
    [ -n "${MODULES[$package]:-}" ] || die "no modules listed for package $package"
    # The scratch copy starts from this tree's target folder: only the
    # workspace's crates are rebuilt.
    # A full run starts the module's history again.
    [ ${#iterate[@]} -gt 0 ] || rm -rf "target/mutants/$package/history"
    run_package "$package" --copy-target=true "${iterate[@]}"
    dirs+=("target/mutants/$package")
done
exec python3 scripts/mutants-report.py "${dirs[@]}"
