#!/usr/bin/env bash
# Start one vLLM variant on Neuron.
#
# Compiled artifacts live in the model store (S3 through Mountpoint) at $ARTIFACT_DIR, a path
# unique to the variant's compile settings. If they are complete (marker file), copy them to
# $COMPILE_DIR on the node's NVMe and load them. Otherwise compile there, serve, and once
# /health answers publish them with plain sequential copies: Mountpoint allows new files written
# in order, and no renames (docs/facts.md, "Mountpoint for Amazon S3 CSI driver"), which the compilers' own writes and safetensors' rename
# would break. COMPILE_DIR is what the engine compiles into: NxDI's NEURON_COMPILED_ARTIFACTS or
# the vLLM Neuron plugin's VLLM_CACHE_ROOT (stackconfig/server.py).
# One Deployment replica with the Recreate strategy per variant means one compiler per path.
set -euo pipefail
: "${ARTIFACT_DIR:?}" "${COMPILE_DIR:?}" "${VLLM_PORT:?}"
MARKER=.complete

copy_complete() {  # copy_complete SRC DST: a full copy of SRC in DST, made at most once
  local src=$1 dst=$2
  if [ -f "$dst/$MARKER" ]; then return 0; fi
  rm -rf "$dst" && mkdir -p "$dst"
  cp -r "$src/." "$dst/"
  touch "$dst/$MARKER"
}

healthy() {
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${VLLM_PORT}/health', timeout=5)" 2>/dev/null
}

if [ -n "${WEIGHTS_STORE:-}" ]; then
  echo "preparing weights: $WEIGHTS_STORE -> $WEIGHTS_DIR (once per node)"
  [ -f "$WEIGHTS_STORE/config.json" ] || { echo "no weights at $WEIGHTS_STORE; see README 'Preparing FP8 weights'" >&2; exit 1; }
  copy_complete "$WEIGHTS_STORE" "$WEIGHTS_DIR"
fi

if [ -f "$ARTIFACT_DIR/$MARKER" ]; then
  echo "loading compiled artifacts from $ARTIFACT_DIR"
  copy_complete "$ARTIFACT_DIR" "$COMPILE_DIR"
  exec vllm "$@"
fi

echo "no compiled artifacts at $ARTIFACT_DIR: compiling into $COMPILE_DIR (can take an hour)"
rm -rf "$COMPILE_DIR" && mkdir -p "$COMPILE_DIR"
vllm "$@" &
server=$!
until healthy; do
  kill -0 "$server" 2>/dev/null || { wait "$server"; exit $?; }
  sleep "${HEALTH_POLL_SECONDS:-30}"
done
echo "compiled and serving; publishing artifacts to $ARTIFACT_DIR"
rm -rf "$ARTIFACT_DIR" && mkdir -p "$ARTIFACT_DIR"
cp -r "$COMPILE_DIR/." "$ARTIFACT_DIR/"
touch "$ARTIFACT_DIR/$MARKER" "$COMPILE_DIR/$MARKER"
echo "artifacts published"
wait "$server"
