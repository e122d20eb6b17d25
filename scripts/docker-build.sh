#!/usr/bin/env bash
# Builds the Tessera image ($TESSERA_IMAGE, default tessera:local) FROM scratch
# out of the static release binary, building that binary first if it is missing;
# TESSERA_IMAGE_BIN=FILE packages another build (scripts/test.sh gives its
# debug build, with the shared libraries it needs).
# The build context is target/docker-context, which holds only the binary.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TESSERA_ROOT"

docker_reachable || die "no Docker engine answers (docker info failed)"
binary=${TESSERA_IMAGE_BIN:-$TESSERA_RELEASE_BIN}
if [ -z "${TESSERA_IMAGE_BIN:-}" ] && [ ! -x "$binary" ]; then
    log "no release binary yet: building it"
    build_release
fi
[ -x "$binary" ] || die "no binary at $binary"

context=$TESSERA_ROOT/target/docker-context
rm -rf "$context"
mkdir -p "$context/rootfs"
# Debug info is most of the release binary's size; symbols stay for backtraces.
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$context/rootfs/tessera" "$binary"
else
    cp "$binary" "$context/rootfs/tessera"
fi
cp docker/Dockerfile "$context/Dockerfile"

if ! is_static "$binary"; then
    # Fallback for a dynamically linked binary: carry its loader and libraries.
    log "binary is dynamically linked: copying its shared libraries into the image"
    ldd "$binary" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
        cp --parents -L "$lib" "$context/rootfs/"
    done
fi

log "building image $TESSERA_IMAGE from $context ($(du -sh "$context" | cut -f1))"
docker build --quiet --tag "$TESSERA_IMAGE" "$context" >/dev/null
docker image inspect --format '{{.Id}} {{.Size}} bytes' "$TESSERA_IMAGE" >&2
