#!/usr/bin/env bash
# Runs every test of Tessera, stage by stage, stopping at the first failure:
#   1. tools      Python venv (.venv) with s3-tests/requirements.txt
#   2. lint       cargo fmt --check, cargo clippy --all-targets -D warnings, no module cycles,
#                 the crate map of docs/architecture.md matches the manifests
#   3. cargo test the workspace's unit and integration tests (debug build)
#      mutants    one shard of cargo-mutants over the wire protocol (docs/testing.md)
#   4. binaries   tessera and powercut-fs (the FUSE filesystem of the power-loss
#                 test) as the cargo stage built them (debug, dynamically linked)
#   5. s3-tests   the Python conformance suite (pytest) against that binary
#   6. compose    scripts/compose-smoke.sh on an image of that binary, when a
#                 Docker engine answers
# Environment: TESSERA_TEST_RELEASE=1 builds the static release binary in stage 4
# and tests it in stages 5 and 6 instead; TESSERA_SKIP_COMPOSE=1 skips stage 6;
# PYTEST_TIMEOUT (seconds per test, default 300); PYTEST_ARGS (extra pytest
# arguments, e.g. "-k listing").
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TESSERA_ROOT"

STAGES=()
CURRENT_STAGE=""
RUN_START=$SECONDS

print_timings() {
    local status=$?
    {
        echo
        echo "==> stage timings"
        local line
        for line in "${STAGES[@]}"; do
            echo "    $line"
        done
        if [ "$status" -ne 0 ] && [ -n "$CURRENT_STAGE" ]; then
            echo "    $(printf '%-10s FAILED' "$CURRENT_STAGE")"
        fi
        echo "    $(printf '%-10s %5ds' total $((SECONDS - RUN_START)))"
    } >&2
    if [ "$status" -ne 0 ]; then
        log "scripts/test.sh FAILED (exit $status) in stage: ${CURRENT_STAGE:-setup}"
    else
        log "scripts/test.sh: all stages passed"
    fi
}
trap print_timings EXIT

# stage NAME DESCRIPTION COMMAND...: run one stage, timed and logged.
stage() {
    local name=$1 description=$2
    shift 2
    CURRENT_STAGE=$name
    local start=$SECONDS
    echo >&2
    log "==> [$name] $description"
    "$@"
    local took=$((SECONDS - start))
    STAGES+=("$(printf '%-10s %5ds  %s' "$name" "$took" "$description")")
    log "==> [$name] done in ${took}s"
    CURRENT_STAGE=""
}

tools() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install a Rust toolchain (rustup)"
    # S3 clients the smoke tests drive (s3-tests/test_tools.py); FUSE for
    # the power-loss tests (s3-tests/test_power_loss.py); libfaketime for
    # the clock jumps of s3-tests/test_consistency.py.
    apt_install rclone s3cmd fuse3 faketime chromium chromium-driver
    ensure_venv
    "$TESSERA_VENV/bin/python" -c 'import boto3, pytest, pytest_timeout, requests, selenium'
    "$TESSERA_VENV/bin/aws" --version >&2
}

lint() {
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    python3 "$TESSERA_ROOT/scripts/module-cycles.py" --self-test
    python3 "$TESSERA_ROOT/scripts/module-cycles.py"
    python3 "$TESSERA_ROOT/scripts/crate-map.py" --self-test
    python3 "$TESSERA_ROOT/scripts/crate-map.py"
}

cargo_tests() {
    cargo test --workspace
}

# The binaries stages 5 and 6 test. By default the debug builds the cargo
# stage has just made: a release build compiles every dependency again, a
# quarter of a clean run on two cores, and the debug build checks overflows
# and debug assertions besides.
if [ "${TESSERA_TEST_RELEASE:-0}" = 1 ]; then
    TEST_BIN=$TESSERA_RELEASE_BIN
    TEST_POWERCUT_BIN=$TESSERA_ROOT/target/release/powercut-fs
else
    TEST_BIN=$TESSERA_ROOT/target/debug/tessera
    TEST_POWERCUT_BIN=$TESSERA_ROOT/target/debug/powercut-fs
fi

binaries() {
    if [ "${TESSERA_TEST_RELEASE:-0}" = 1 ]; then
        build_release
        is_static "$TEST_BIN" || die "$TEST_BIN is dynamically linked"
        cargo build --release --locked -p powercut-fs
    else
        # With --tests, the features of the cargo stage's build (its dev
        # dependencies' among them): only the binaries that stage did not
        # need are linked, in seconds, where `-p tessera` alone would
        # compile a third of the dependencies again.
        cargo build --locked --workspace --bins --tests
    fi
    [ -x "$TEST_BIN" ] && [ -x "$TEST_POWERCUT_BIN" ] || die "no $TEST_BIN or $TEST_POWERCUT_BIN"
    log "testing $TEST_BIN ($(du -h "$TEST_BIN" | cut -f1)) and $TEST_POWERCUT_BIN"
}

s3_tests() {
    local args=()
    if [ -n "${PYTEST_ARGS:-}" ]; then
        read -r -a args <<<"$PYTEST_ARGS"
    fi
    TESSERA_BIN=$TEST_BIN POWERCUT_FS_BIN=$TEST_POWERCUT_BIN \
        "$TESSERA_VENV/bin/python" -m pytest s3-tests \
        -v --timeout="${PYTEST_TIMEOUT:-300}" --durations=10 "${args[@]}"
}

compose_smoke() {
    if [ "${TESSERA_SKIP_COMPOSE:-0}" = 1 ]; then
        log "skipped: TESSERA_SKIP_COMPOSE=1"
    elif ! docker_reachable; then
        log "skipped: no Docker engine answers (docker info failed)"
    else
        TESSERA_IMAGE_BIN=$TEST_BIN bash "$TESSERA_ROOT/scripts/compose-smoke.sh"
    fi
}

stage tools "Python venv with boto3, aws-cli v1, pytest" tools
stage lint "rustfmt, clippy, module cycles, crate map" lint
stage cargo "cargo test --workspace (debug)" cargo_tests
stage mutants "cargo-mutants: today's shard of the protocol modules" bash scripts/mutants.sh --sample
stage binaries "the tessera and powercut-fs binaries under test" binaries
stage s3-tests "pytest s3-tests against that tessera" s3_tests
stage compose "docker compose cluster smoke test" compose_smoke
