#!/usr/bin/env bash
# Start one server of a variant on Neuron (vLLM, or a distributed target or draft server:
# $SERVER_PROGRAM with this script's arguments, stackconfig/server.py), from what the model store holds. This script only reads the store
# (S3 through Mountpoint, mounted read-only); it never writes to it.
#
# Weights: each prepared model (stackconfig/store.py) is waited for until its preparation Job has
# marked it complete, then copied to the node's NVMe once per node with parallel reads. The server
# never reaches the hub (HF_HUB_OFFLINE) and loads the local copy.
# Compiled artifacts: a committed set ($ARTIFACT_DIR/complete.json, or commit.json naming a set
# under $STAGING_DIR) is copied the same way and loaded. Otherwise the engine compiles into
# $COMPILE_DIR, and the publisher beside the server (modelstore/publish.py) publishes the set once
# /health answers. COMPILE_DIR is NxDI's NEURON_COMPILED_ARTIFACTS or the vLLM Neuron plugin's
# VLLM_CACHE_ROOT (stackconfig/server.py).
# The store's file names and this script's own markers are declared once (modelstore/layout.py) and
# rendered beside this script as store-layout.sh (components/pairing/serving.py).
set -euo pipefail
: "${ARTIFACT_DIR:?}" "${STAGING_DIR:?}" "${COMPILE_DIR:?}" "${VLLM_PORT:?}" "${WEIGHTS_STORE:?}" "${WEIGHTS_DIR:?}" "${SERVER_PROGRAM:?}"
source "$(dirname "${BASH_SOURCE[0]}")/store-layout.sh"
: "${FILES_DIR:?}" "${WEIGHTS_MARKER:?}" "${COMMIT_FILE:?}" "${COMPLETE_FILE:?}" "${LOCAL_COMPLETE:?}" "${LOCAL_RESTORED:?}"
COPY_PARALLEL=${COPY_PARALLEL:-16}
POLL_SECONDS=${POLL_SECONDS:-30}

# Each step is its own command: under `set -e`, a failure inside `a && b` (but the last) does not
# stop the script, so `rm -rf x && mkdir -p x` would go on after a failed rm.
fresh_dir() {
  rm -rf "$1"
  mkdir -p "$1"
}

parallel_copy() {  # parallel_copy SRC DST: every file of SRC into DST, COPY_PARALLEL reads at a time
  local src=$1 dst=$2 started bytes seconds
  started=$(date +%s)
  (cd "$src" && find . -type d -print0 | xargs -0 -I{} mkdir -p "$dst/{}")
  (cd "$src" && find . -type f -print0 | xargs -0 -P "$COPY_PARALLEL" -I{} cp "{}" "$dst/{}")
  bytes=$(find "$dst" -type f -printf '%s\n' | awk '{ total += $1 } END { print total + 0 }')
  seconds=$(( $(date +%s) - started ))
  echo "copied $bytes bytes from $src in ${seconds}s: $(( bytes / (seconds > 0 ? seconds : 1) / 1048576 )) MiB/s"
}

wait_for_file() {  # wait_for_file PATH WHAT
  until [ -f "$1" ]; do
    echo "waiting for $2 ($1)"
    sleep "$POLL_SECONDS"
  done
}

restore_weights() {  # restore_weights STORE DIR: the prepared model's files on this node, once
  local store=$1 dir=$2
  wait_for_file "$store/$WEIGHTS_MARKER" "the model's preparation Job"
  if [ -f "$dir/$LOCAL_COMPLETE" ]; then
    echo "weights already on this node: $dir"
    return 0
  fi
  fresh_dir "$dir"
  parallel_copy "$store/$FILES_DIR" "$dir"
  touch "$dir/$LOCAL_COMPLETE"
}

committed_set() {  # prints the directory holding the path's committed set, if there is one
  if [ -f "$ARTIFACT_DIR/$COMPLETE_FILE" ]; then
    echo "$ARTIFACT_DIR/$FILES_DIR"
  elif [ -f "$ARTIFACT_DIR/$COMMIT_FILE" ]; then
    local name
    name=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["set"])' "$ARTIFACT_DIR/$COMMIT_FILE")
    if [ -d "$STAGING_DIR/$name/$FILES_DIR" ]; then
      echo "$STAGING_DIR/$name/$FILES_DIR"
    else
      echo "$COMMIT_FILE names set $name, which is gone from $STAGING_DIR (docs/operations.md, "Troubleshooting")" >&2
    fi
  fi
}

healthy() {
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${VLLM_PORT}/health', timeout=5)" 2>/dev/null
}

restore_weights "$WEIGHTS_STORE" "$WEIGHTS_DIR"
if [ -n "${DRAFT_WEIGHTS_STORE:-}" ]; then
  restore_weights "$DRAFT_WEIGHTS_STORE" "${DRAFT_WEIGHTS_DIR:?}"
fi

if [ -f "$COMPILE_DIR/$LOCAL_COMPLETE" ]; then
  echo "compiled artifacts already on this node: $COMPILE_DIR"
  exec "$SERVER_PROGRAM" "$@"
fi
source=$(committed_set)
if [ -n "$source" ]; then
  echo "loading the committed compiled set from $source"
  fresh_dir "$COMPILE_DIR"
  parallel_copy "$source" "$COMPILE_DIR"
  touch "$COMPILE_DIR/$LOCAL_RESTORED" "$COMPILE_DIR/$LOCAL_COMPLETE"
  exec "$SERVER_PROGRAM" "$@"
fi

echo "no committed compiled set at $ARTIFACT_DIR: compiling into $COMPILE_DIR (can take hours); it is published once /health answers"
fresh_dir "$COMPILE_DIR"
"$SERVER_PROGRAM" "$@" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true' TERM INT
until healthy; do
  kill -0 "$server" 2>/dev/null || { wait "$server"; exit $?; }
  sleep "${HEALTH_POLL_SECONDS:-30}"
done
touch "$COMPILE_DIR/$LOCAL_COMPLETE"
echo "compiled and serving"
wait "$server"
