#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of every parser of
# untrusted bytes: the datanode wire protocol, the XML bodies, aws-chunked,
# SigV4 headers and presigned queries, Range headers and POST policies.
# docs/security.md says what was fuzzed, for how long, and what it found.
#
#   scripts/fuzz.sh                  every target, 120 s each
#   scripts/fuzz.sh xml 600          one target for 10 minutes
#
# Each target starts from, and adds what it finds to, fuzz/corpus/TARGET
# (kept in the repository); a crash leaves its input in fuzz/artifacts/.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TESSERA_ROOT/fuzz"

TARGETS=(frames xml aws_chunked sigv4 range post_policy)
targets=("${TARGETS[@]}")
if [ $# -gt 0 ]; then
    targets=("$1")
fi
seconds=${2:-120}

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    log "==> fuzzing $target for ${seconds}s"
    cargo +nightly fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1
done
