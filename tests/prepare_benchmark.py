"""Preparation throughput against local fakes (not a test): one model of FILES LFS files of MIB MiB
each, streamed by modelstore/prepare.py from rehearse/hub.py (its CDN redirects included) into
moto's S3, in this one process, with --parallel STREAMS and the disk bound the Job would get for
that many streams (STREAMS x the largest file). Prints the bytes moved, the wall time, the rate
(per stream and in all) and the peak local disk, sampled continuously. docs/models.md has the figures.

    python -m tests.prepare_benchmark --streams 4 [--files 8] [--mib 32]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path

MIB = 2 ** 20


def disk_used(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if path.is_file():
                total += path.stat().st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=32)
    args = parser.parse_args()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[name] = "testing"
    import boto3
    from moto import mock_aws

    from modelstore import prepare
    from modelstore.hub import Hub
    from rehearse.hub import LocalHub, Repository

    block = os.urandom(args.mib * MIB)
    files = {f"model-{i + 1:05d}-of-{args.files:05d}.safetensors": bytes([i]) + block[1:] for i in range(args.files)}
    files["config.json"] = b'{"architectures": ["LlamaForCausalLM"]}'
    total = sum(len(c) for c in files.values())
    bound = args.streams * args.mib * MIB
    with mock_aws(), tempfile.TemporaryDirectory() as work, LocalHub({"org/model": Repository(files)}) as hub:
        client = boto3.client("s3", region_name="us-east-2")
        client.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        peak, watching = [0], [True]

        def watch():
            while watching[0]:
                peak[0] = max(peak[0], disk_used(Path(work)))
                time.sleep(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        code = prepare.main(["--model", "org/model", "--revision", "main", "--form", "hub", "--bucket", "models",
                             "--prefix", "weights/org-model/main/hub/", "--work-dir", work, "--parallel", str(args.streams),
                             "--scratch-bytes", str(bound)], client=client, hub=Hub(hub.url))
        seconds = time.monotonic() - started
        watching[0] = False
        watcher.join()
    rate = total / seconds / 1e6
    print(f"RESULT streams={args.streams} exit={code} moved={total / MIB:.0f}MiB wall={seconds:.2f}s "
          f"rate={rate:.1f}MB/s per_stream={rate / args.streams:.1f}MB/s peak_disk={peak[0] / MIB:.0f}MiB "
          f"bound={bound / MIB:.0f}MiB", flush=True)


if __name__ == "__main__":
    main()
