r"""Prepare one model in the store, once, in bounded local disk: download it from the hub at one
commit file by file, verify each file, rescale an FP8 shard for Neuron, upload it through the S3 API
and delete the local copies, a few files in flight at once; then write the manifest and, last, the
completion marker.

    python -m modelstore.prepare --model ORG/NAME --revision SHA|main --form hub|neuron-fp8 \
        --bucket B --prefix weights/<model>/<revision>/<form>/ --work-dir /scratch \
        --scratch-bytes N [--parallel 4] [--bf16-modules '["lm_head", ...]']

Local disk never exceeds --scratch-bytes, whatever the model's size: a file in flight holds its size
(twice for a rescaled shard: the download and its rescaled copy) until its copies are deleted, and
waits while the others hold the rest. A file that alone would not fit fails the preparation before
anything is downloaded. Environment: HF_TOKEN_PATH, a file holding the token (gated models; HF_TOKEN
outside the cluster), HF_ENDPOINT (default https://huggingface.co), and the standard AWS ones. Exit
0 when the model is prepared (by this run or an earlier one), 1 with one line saying why when it is
not: a failed run writes no manifest and no marker, so nothing reads a partial set. Layout and
names: stackconfig/store.py, layout.py.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Iterator, Mapping

from botocore.exceptions import ClientError

from . import fp8
from .hub import DEFAULT_ENDPOINT, Hub, HubError, RemoteFile, wanted
from .layout import FILES_DIR, MANIFEST_FILE, WEIGHTS_MARKER
from .objects import Entry, StoreConflict, exists, put_if_absent, put_json_once, upload_file
from .progress import Progress, human

MODULES_FILE = "modules_to_not_convert.json"


class PrepareError(RuntimeError):
    """The preparation cannot go on; the message says why."""


def say(line: str) -> None:
    print(line, flush=True)


class Scratch:
    """The local disk budget: a file in flight holds its bytes until its local copies are gone."""

    def __init__(self, limit: int):
        self.limit, self.free = limit, limit
        self.changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, count: int) -> Iterator[None]:
        with self.changed:
            self.changed.wait_for(lambda: self.free >= count)
            self.free -= count
        try:
            yield
        finally:
            with self.changed:
                self.free += count
                self.changed.notify_all()


class Preparation:
    """One model's files, streamed through the local disk: what each worker does with one file."""

    def __init__(self, args: argparse.Namespace, client: Any, hub: Hub, commit: str, files: tuple[RemoteFile, ...]):
        self.args, self.client, self.hub, self.commit, self.files = args, client, hub, commit, files
        self.work = Path(args.work_dir)
        self.rescaling = args.form == "neuron-fp8"
        self.kept_bf16 = json.loads(args.bf16_modules or "[]")
        self.headers: list[dict[str, Any]] = []
        total = sum(f.size for f in files)
        shards = sum(f.size for f in files if self._rescaled(f))
        self.progress = {"download": Progress("download", total, say), "rescale": Progress("rescale", shards, say),
                         "upload": Progress("upload", total, say)}
        self.scratch = Scratch(args.scratch_bytes)
        self.one_rescale_at_a_time = threading.Lock()
        """Rescaling a shard holds several float32 copies of its largest weight: one at a time bounds
        the memory (components/pairing/model_preparation.py RESOURCES) while other files move."""
        for remote in files:
            if self.local_bytes(remote) > args.scratch_bytes:
                raise PrepareError(f"{remote.path} ({human(remote.size)}) needs {human(self.local_bytes(remote))} of local disk, "
                                   f"more than the preparation's bound of {human(args.scratch_bytes)} (stackconfig/store.py "
                                   "HUB_SHARD_BYTES: the largest file it assumes)")

    def _rescaled(self, remote: RemoteFile) -> bool:
        return self.rescaling and remote.path.endswith(".safetensors")

    def local_bytes(self, remote: RemoteFile) -> int:
        """The download, and its rescaled copy beside it until the download is deleted."""
        return remote.size * (2 if self._rescaled(remote) else 1)

    def one(self, remote: RemoteFile) -> Entry:
        """Download and verify one file, rescale it if asked, upload it, delete the local copies."""
        downloaded, rescaled = self.work / "download" / remote.path, self.work / "rescaled" / remote.path
        with self.scratch.hold(self.local_bytes(remote)):
            try:
                self.hub.download(self.args.model, self.commit, remote, downloaded, self.progress["download"].add)
                if not self._rescaled(remote):
                    return self._upload(remote.path, downloaded, remote.sha256)
                self._check_fp8_modules(fp8.read_header(downloaded)[0])
                rescaled.parent.mkdir(parents=True, exist_ok=True)
                with self.one_rescale_at_a_time:
                    fp8.rescale_file(downloaded, rescaled)
                downloaded.unlink()
                self.progress["rescale"].add(remote.size)
                return self._upload(remote.path, rescaled, None)
            finally:
                downloaded.unlink(missing_ok=True)
                rescaled.unlink(missing_ok=True)

    def _upload(self, relative: str, path: Path, sha256: str | None) -> Entry:
        return upload_file(self.client, self.args.bucket, self.args.prefix + FILES_DIR + "/", relative, path,
                           self.progress["upload"], sha256)

    def _check_fp8_modules(self, header: dict[str, Any]) -> None:
        """A shard that quantizes a module the program keeps in BF16 stops the preparation at once;
        the full comparison needs every shard (modules_found)."""
        self.headers.append({name: {"dtype": info["dtype"]} for name, info in header.items()})
        quantized = sorted(fp8.linear_modules([header])[1] & set(self.kept_bf16))
        if quantized:
            raise PrepareError(f"the checkpoint holds FP8 weights in modules the program keeps in BF16: {quantized[:5]}"
                               f"{'...' if len(quantized) > 5 else ''} (stackconfig/catalog.py bf16_modules, or models.<id>.bf16Modules)")

    def modules_found(self) -> list[str]:
        """Neuron's modules_to_not_convert, read from every shard's header; it must be the program's."""
        found = fp8.modules_to_not_convert(self.headers)
        if sorted(found) != sorted(self.kept_bf16):
            missing, extra = sorted(set(self.kept_bf16) - set(found)), sorted(set(found) - set(self.kept_bf16))
            raise PrepareError(f"the checkpoint keeps other modules in BF16 than the program renders: only in the program "
                               f"{missing[:5]}{'...' if len(missing) > 5 else ''}, only in the checkpoint {extra[:5]}"
                               f"{'...' if len(extra) > 5 else ''} (stackconfig/catalog.py bf16_modules, or models.<id>.bf16Modules)")
        return found

    def run(self) -> list[Entry]:
        """Every file, `parallel` at a time (largest first, so the tail is small files), then the
        rescaling's modules file; the entries of the manifest."""
        order = sorted(self.files, key=lambda f: (-f.size, f.path))
        with ThreadPoolExecutor(max_workers=self.args.parallel) as pool:
            futures = [pool.submit(self.one, remote) for remote in order]
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f.exception() for f in futures if f.done() and f.exception()), None)
            if failed:  # the files not started are not started; those in flight finish and clean up
                pool.shutdown(cancel_futures=True)
                raise failed
            entries = [f.result() for f in futures]
        for progress in self.progress.values():
            if progress.total:
                progress.finish()
        if self.rescaling:
            found = self.modules_found()
            modules = self.work / MODULES_FILE
            modules.write_text(json.dumps(fp8.modules_file(found), indent=2) + "\n")
            entries.append(self._upload(MODULES_FILE, modules, None))
            modules.unlink()
            say(f"rescaled {len(self.headers)} shards for Neuron; {len(found)} modules stay BF16 ({MODULES_FILE})")
        return sorted(entries, key=lambda e: e.path)


def prepare(args: argparse.Namespace, client: Any, hub: Hub) -> int:
    prefix = args.prefix
    if exists(client, args.bucket, prefix + WEIGHTS_MARKER):
        say(f"{args.model}@{args.revision} ({args.form}) is already prepared at s3://{args.bucket}/{prefix}")
        return 0
    revision = hub.revision(args.model, args.revision)
    if args.revision != "main" and revision.commit != args.revision:
        raise PrepareError(f"the hub resolved {args.revision} to {revision.commit}")
    files = wanted(revision.files)
    say(f"{args.model} at commit {revision.commit}: {len(files)} files, {human(sum(f.size for f in files))}, "
        f"{args.parallel} at a time in at most {human(args.scratch_bytes)} of local disk")
    entries = Preparation(args, client, hub, revision.commit, files).run()
    # A retried preparation finds its own manifest: the same but for the time (objects.put_json_once).
    put_json_once(client, args.bucket, prefix + MANIFEST_FILE, {
        "model": args.model, "revision": args.revision, "commit": revision.commit, "form": args.form,
        "preparedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "bytes": sum(e.size for e in entries),
        "files": [e.to_json() for e in entries]}, volatile=frozenset({"preparedAt"}))
    marker = json.dumps({"commit": revision.commit, "manifest": MANIFEST_FILE}).encode()
    if put_if_absent(client, args.bucket, prefix + WEIGHTS_MARKER, marker):
        say(f"prepared s3://{args.bucket}/{prefix} ({len(entries)} files, commit {revision.commit})")
    else:
        say(f"another preparation completed s3://{args.bucket}/{prefix} first; its set stands")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m modelstore.prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--form", required=True, choices=("hub", "neuron-fp8"))
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--bf16-modules", help="neuron-fp8: JSON list the checkpoint must keep in BF16")
    parser.add_argument("--scratch-bytes", type=int, required=True, help="the local disk the preparation may fill")
    parser.add_argument("--parallel", type=int, default=4, help="files in flight at once")
    return parser.parse_args(argv)


def hub_token(environment: Mapping[str, str]) -> str | None:
    """The token from the file HF_TOKEN_PATH names (the pod's secret volume), else HF_TOKEN (a run
    outside the cluster), else none: public models need no token."""
    path = environment.get("HF_TOKEN_PATH")
    if path:
        return Path(path).read_text().strip() or None
    return environment.get("HF_TOKEN") or None


def main(argv: list[str] | None = None, client: Any = None, hub: Hub | None = None) -> int:
    args = parse_args(argv)
    if client is None:
        import boto3

        client = boto3.client("s3")
    try:
        hub = hub or Hub(os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT), hub_token(os.environ))
        return prepare(args, client, hub)
    except (PrepareError, HubError, fp8.RescaleError, ClientError, OSError, StoreConflict) as error:
        print(f"prepare: {args.model}@{args.revision} ({args.form}) failed: {error}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
