# shellcheck shell=bash
# Helpers shared by scripts/*.sh and .ci/run. Source it; it runs nothing itself.

TESSERA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESSERA_TARGET=x86_64-unknown-linux-gnu
TESSERA_RELEASE_BIN=$TESSERA_ROOT/target/$TESSERA_TARGET/release/tessera
TESSERA_VENV=${TESSERA_VENV:-$TESSERA_ROOT/.venv}
TESSERA_IMAGE=${TESSERA_IMAGE:-tessera:local}
export TESSERA_IMAGE

# rustup installs cargo under ~/.cargo/bin, which a non-login shell may lack.
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    export PATH
fi

log() {
    printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "root is needed for: $*"
    fi
}

TESSERA_APT_UPDATED=0

# apt_install PKG...: install the Debian packages that are not installed yet;
# `apt-get update` runs at most once, and only when something is missing.
apt_install() {
    local pkg missing=()
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]} and no apt-get to install them"
    log "installing Debian packages: ${missing[*]}"
    if [ "$TESSERA_APT_UPDATED" -eq 0 ]; then
        as_root apt-get update -qq
        TESSERA_APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# ensure_python: a python3 that can create virtual environments.
ensure_python() {
    if ! command -v python3 >/dev/null 2>&1; then
        apt_install python3 python3-venv
    fi
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_install python3-venv
    fi
}

# ensure_venv: $TESSERA_VENV with s3-tests/requirements.txt installed
# (reinstalled only when that file changes).
ensure_venv() {
    local req=$TESSERA_ROOT/s3-tests/requirements.txt
    local stamp=$TESSERA_VENV/.tessera-requirements
    if ! "$TESSERA_VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
        ensure_python
        log "creating virtual environment $TESSERA_VENV"
        rm -rf "$TESSERA_VENV"
        python3 -m venv "$TESSERA_VENV"
    fi
    if ! cmp -s "$req" "$stamp"; then
        log "installing $req into $TESSERA_VENV"
        "$TESSERA_VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$req"
        cp "$req" "$stamp"
    fi
}

# build_release: the static release binary at $TESSERA_RELEASE_BIN. With an
# explicit --target, RUSTFLAGS reach only target code, not build scripts or
# proc macros, which cannot be linked statically.
build_release() {
    (
        cd "$TESSERA_ROOT" || exit 1
        RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" \
            cargo build --release --target "$TESSERA_TARGET" -p tessera --bin tessera
    )
    [ -x "$TESSERA_RELEASE_BIN" ] || die "cargo build left no binary at $TESSERA_RELEASE_BIN"
}

# is_static FILE: true when FILE needs no shared libraries (ldd lists none;
# it says "statically linked" for a static-pie and exits 0).
is_static() {
    # grep reads all of ldd's output: with -q it could stop at the first
    # match, and ldd's SIGPIPE would fail the pipeline (pipefail).
    ! ldd "$1" 2>&1 | grep '=>' >/dev/null
}

# docker_reachable: true when a Docker engine answers.
docker_reachable() {
    command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

# compose_command: prints the Compose command available here, the plugin
# (`docker compose`) first, else the standalone v1 `docker-compose`.
compose_command() {
    if docker compose version >/dev/null 2>&1; then
        echo "docker compose"
    elif command -v docker-compose >/dev/null 2>&1; then
        echo "docker-compose"
    else
        return 1
    fi
}
