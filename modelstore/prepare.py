r"""Prepare one model in the store, once: download it from the hub at one commit, verify every file,
rescale an FP8 checkpoint for Neuron, upload through the S3 API, then write the manifest and, last,
the completion marker.

    python -m modelstore.prepare --model ORG/NAME --revision SHA|main --form hub|neuron-fp8 \
        --bucket B --prefix weights/<model>/<revision>/<form>/ --work-dir /scratch \
        [--bf16-modules '["lm_head", ...]']

Environment: HF_TOKEN_PATH, a file holding the token (gated models; HF_TOKEN outside the cluster), HF_ENDPOINT (default https://huggingface.co), and the
standard AWS ones. Exit 0 when the model is prepared (by this run or an earlier one), 1 with one
line saying why when it is not: a failed run writes no marker, so nothing reads a partial set.
Layout and names: stackconfig/store.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping

from botocore.exceptions import ClientError

from . import fp8
from .hub import DEFAULT_ENDPOINT, Hub, HubError, RemoteFile, wanted
from .objects import StoreConflict, exists, put_if_absent, put_json_once, upload_tree
from .progress import Progress, human

MANIFEST_FILE, MARKER_FILE, FILES_DIR = "manifest.json", ".complete", "files"
MODULES_FILE = "modules_to_not_convert.json"


class PrepareError(RuntimeError):
    """The preparation cannot go on; the message says why."""


def say(line: str) -> None:
    print(line, flush=True)


def download(hub: Hub, model: str, commit: str, files: tuple[RemoteFile, ...], into: Path, parallel: int) -> None:
    progress = Progress("download", sum(f.size for f in files), say)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(lambda f: hub.download(model, commit, f, into / f.path, progress.add), files))
    progress.finish()


def rescale(source: Path, target: Path, bf16_modules: list[str]) -> list[str]:
    """Neuron's FP8 rescaling of every shard (modelstore/fp8.py), the other files copied as they
    are; checks the checkpoint keeps in BF16 exactly what the program tells NxD Inference to keep."""
    shards = sorted(source.glob("*.safetensors"))
    found = fp8.modules_to_not_convert(fp8.read_header(p)[0] for p in shards)
    if sorted(found) != sorted(bf16_modules):
        missing, extra = sorted(set(bf16_modules) - set(found)), sorted(set(found) - set(bf16_modules))
        raise PrepareError(f"the checkpoint keeps other modules in BF16 than the program renders: only in the program "
                           f"{missing[:5]}{'...' if len(missing) > 5 else ''}, only in the checkpoint {extra[:5]}"
                           f"{'...' if len(extra) > 5 else ''} (stackconfig/catalog.py bf16_modules, or models.<id>.bf16Modules)")
    target.mkdir(parents=True, exist_ok=True)
    progress = Progress("rescale", sum(p.stat().st_size for p in shards), say)
    tensors = 0
    for path in sorted(source.iterdir()):
        if path.suffix == ".safetensors":
            result = fp8.rescale_file(path, target / path.name)
            tensors += result.tensors
            progress.add(path.stat().st_size)
        else:
            shutil.copyfile(path, target / path.name)
    progress.finish()
    (target / MODULES_FILE).write_text(json.dumps(fp8.modules_file(found), indent=2) + "\n")
    say(f"rescaled {tensors} FP8 weights for Neuron; {len(found)} modules stay BF16 ({MODULES_FILE})")
    return found


def prepare(args: argparse.Namespace, client: Any, hub: Hub) -> int:
    prefix = args.prefix
    if exists(client, args.bucket, prefix + MARKER_FILE):
        say(f"{args.model}@{args.revision} ({args.form}) is already prepared at s3://{args.bucket}/{prefix}")
        return 0
    revision = hub.revision(args.model, args.revision)
    if args.revision != "main" and revision.commit != args.revision:
        raise PrepareError(f"the hub resolved {args.revision} to {revision.commit}")
    files = wanted(revision.files)
    work = Path(args.work_dir)
    downloaded, prepared = work / "download", work / "prepared"
    say(f"{args.model} at commit {revision.commit}: {len(files)} files, {human(sum(f.size for f in files))}")
    download(hub, args.model, revision.commit, files, downloaded, args.parallel)
    # Hub files keep the sha256 the hub lists; rescaled shards get theirs while uploading.
    hashes = {f.path: f.sha256 for f in files if f.sha256}
    if args.form == "neuron-fp8":
        rescale(downloaded, prepared, json.loads(args.bf16_modules or "[]"))
        hashes = {}
        source = prepared
    else:
        source = downloaded
    progress = Progress("upload", sum(p.stat().st_size for p in source.rglob("*") if p.is_file()), say)
    entries = upload_tree(client, args.bucket, prefix + FILES_DIR + "/", source, progress, args.parallel, hashes)
    progress.finish()
    # A retried preparation finds its own manifest: the same but for the time (objects.put_json_once).
    put_json_once(client, args.bucket, prefix + MANIFEST_FILE, {
        "model": args.model, "revision": args.revision, "commit": revision.commit, "form": args.form,
        "preparedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "bytes": sum(e.size for e in entries),
        "files": [e.to_json() for e in entries]}, volatile=frozenset({"preparedAt"}))
    marker = json.dumps({"commit": revision.commit, "manifest": MANIFEST_FILE}).encode()
    if put_if_absent(client, args.bucket, prefix + MARKER_FILE, marker):
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
    parser.add_argument("--parallel", type=int, default=8)
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
