r"""Publish a server's compiled artifacts once, without races: the publisher beside each vLLM server.

    python -m modelstore.publish --bucket B --artifact compiled/<...> --compile-dir DIR \
        --health http://127.0.0.1:8000/health --writer POD-NAME

Runs as a sidecar for the server's life. Once the server answers /health (and, for a compile, once
serve.sh has marked it complete: serve.sh does that after its own health poll, so this polls again
until it has):
- if serve.sh restored the artifacts (DIR/.restored), there is nothing to publish, except to
  finish copying a committed set whose writer stopped half way (below);
- if the server compiled them (DIR/.complete without .restored) and nobody has committed the path,
  it uploads them to its own staging prefix (staging/<artifact>/<writer>/) tagged uncommitted,
  writes that set's manifest, tags the set committed, and commits with a conditional write of
  <artifact>/commit.json naming its set: exactly one writer wins. The loser tags its set
  uncommitted again, keeps serving what it compiled and leaves the committed set alone;
- whoever finds a commit without <artifact>/complete.json copies the committed set, server-side,
  to <artifact>/files/, writes complete.json, and then tags the staging set uncommitted. Every
  copier copies the same bytes from the same set, so two copiers cannot disagree.
The bucket's lifecycle rule expires only staging objects tagged uncommitted (STAGING_STATE_TAG,
components/platform/model_store.py), so a committed set's staging set stays until it is in place:
a commit never names an expired set. A writer killed between tagging its set committed and
tagging it back (a lost race, or after complete.json) leaves that set unexpired (a leak, never a
dangling commit).
It never deletes and never overwrites a committed set with something else. Then it idles (a native
sidecar that exits is restarted). Layout: stackconfig/store.py; names: layout.py.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from botocore.exceptions import ClientError

from .layout import (
    COMMIT_FILE,
    COMPILED_ROOT,
    COMPLETE_FILE,
    FILES_DIR,
    LOCAL_COMPLETE,
    LOCAL_RESTORED,
    MANIFEST_FILE,
    STAGING_ROOT,
)
from .objects import (
    Entry,
    StoreConflict,
    copy_set,
    entries_of,
    exists,
    put_if_absent,
    put_json,
    put_json_once,
    read_json,
    tag_objects,
    upload_tree,
)
from .progress import Progress

SET_FILES = f"{FILES_DIR}/"
"""Below a staging set's or a committed path's prefix: the set's files."""
STAGING_STATE_TAG, UNCOMMITTED, COMMITTED = "sd-trn2-staging", "uncommitted", "committed"
"""The tag on every object of a staging set: the bucket expires the uncommitted ones."""


def state(value: str) -> dict[str, str]:
    return {STAGING_STATE_TAG: value}


def mark(client: Any, bucket: str, staging: str, entries: list[Entry], value: str) -> None:
    """Tag every object of a staging set (its files and manifest)."""
    tag_objects(client, bucket, [staging + SET_FILES + e.path for e in entries] + [staging + MANIFEST_FILE], state(value))


NOT_COMPLETE = "the compile directory is not complete yet"
"""The one pass that is not an outcome: serve.sh writes .complete only after its own /health poll
answers (HEALTH_POLL_SECONDS), so the sidecar often sees a healthy server first and must look again."""


def say(line: str) -> None:
    print(f"publish: {line}", flush=True)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def finish(client: Any, bucket: str, artifact: str, commit: dict[str, Any]) -> None:
    """Copy the committed set into place, then mark it complete (idempotent)."""
    entries = entries_of(commit)
    progress = Progress("copy committed set", sum(e.size for e in entries), say)
    copy_set(client, bucket, entries, commit["staging"] + SET_FILES, f"{artifact}/{SET_FILES}", progress)
    progress.finish()
    put_json_once(client, bucket, f"{artifact}/{COMPLETE_FILE}", {**commit, "files": [e.to_json() for e in entries]})
    mark(client, bucket, commit["staging"], entries, UNCOMMITTED)  # in place: its staging copy may expire
    say(f"s3://{bucket}/{artifact}/{SET_FILES} holds the committed set {commit['set']}")


def publish_once(client: Any, bucket: str, artifact: str, compile_dir: Path, writer: str) -> str:
    """One pass, the server being healthy: returns what happened (for the log and the tests)."""
    commit = read_json(client, bucket, f"{artifact}/{COMMIT_FILE}")
    restored = (compile_dir / LOCAL_RESTORED).exists()
    if commit is None and restored:
        return "restored from a set that is no longer committed: nothing to publish"
    if commit is None:
        if not (compile_dir / LOCAL_COMPLETE).exists():
            return NOT_COMPLETE
        staging = f"{STAGING_ROOT}{artifact}/{writer}/"
        markers = frozenset({LOCAL_COMPLETE, LOCAL_RESTORED})
        size = sum(p.stat().st_size for p in compile_dir.rglob("*") if p.is_file() and p.name not in markers)
        progress = Progress("upload compiled set", size, say)
        entries = upload_tree(client, bucket, staging + SET_FILES, compile_dir, progress, skip=markers, tags=state(UNCOMMITTED))
        progress.finish()
        document = {"set": writer, "staging": staging, "artifact": artifact,
                    "committedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": [e.to_json() for e in entries]}
        put_json(client, bucket, staging + MANIFEST_FILE, document, tags=state(UNCOMMITTED))
        mark(client, bucket, staging, entries, COMMITTED)  # before the commit can name it
        if not put_if_absent(client, bucket, f"{artifact}/{COMMIT_FILE}", json.dumps(document, indent=2).encode()):
            mark(client, bucket, staging, entries, UNCOMMITTED)
            return "another writer committed first: serving this compile, leaving the committed set alone"
        commit = document
        say(f"committed set {writer} at s3://{bucket}/{artifact}/{COMMIT_FILE}")
    if not exists(client, bucket, f"{artifact}/{COMPLETE_FILE}"):
        finish(client, bucket, artifact, commit)
        return f"committed set {commit['set']} is in place"
    return f"set {commit['set']} is committed and in place"


def run(client: Any, args: argparse.Namespace, sleep: Callable[[float], None] = time.sleep,
        is_healthy: Callable[[str], bool] = healthy, passes: int | None = None) -> None:
    """Wait for health and a complete compile, publish, retry a failed pass, until a pass has an
    outcome; `passes` bounds the loop for the tests."""
    done = waiting = 0
    while passes is None or done < passes:
        done += 1
        if not is_healthy(args.health):
            sleep(args.poll_seconds)
            continue
        try:
            outcome = publish_once(client, args.bucket, args.artifact, Path(args.compile_dir), args.writer)
        except (ClientError, OSError, StoreConflict) as error:
            say(f"failed ({error}); retrying in {args.poll_seconds} s")
            sleep(args.poll_seconds)
            continue
        if outcome != NOT_COMPLETE:
            say(outcome)
            return
        if waiting % 20 == 0:  # the first such pass, then now and then: the pod's log stays readable
            say(f"{outcome}; looking again every {args.poll_seconds} s")
        waiting += 1
        sleep(args.poll_seconds)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m modelstore.publish", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--artifact", required=True, help=f"the variant's artifact path, {COMPILED_ROOT}<...>")
    parser.add_argument("--compile-dir", required=True)
    parser.add_argument("--health", required=True)
    parser.add_argument("--writer", required=True, help="this server's unique name (its pod)")
    parser.add_argument("--poll-seconds", type=float, default=30.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, client: Any = None) -> int:
    args = parse_args(argv)
    if client is None:
        import boto3

        client = boto3.client("s3")
    run(client, args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:  # a native sidecar that exits is restarted: idle until the pod ends
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
