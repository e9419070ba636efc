"""`make results STACK=<s>`: download the stack's latest benchmark run and report on it.

    python -m tools.fetch_results --stack S [--bucket B] [--run-id ID] [--out DIR]

The bucket defaults to the stack's `modelBucket` output (needs the Pulumi CLI and a login);
AWS credentials and region come from the standard environment.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmark.report import write_report
from components.benchmark import results_prefix
from offline.stacks import load_stack


def stack_output(stack: str, name: str) -> str:
    return subprocess.run(["pulumi", "stack", "output", name, "--stack", stack], check=True,
                          capture_output=True, text=True).stdout.strip()


def run_ids(client: Any, bucket: str, results: str) -> list[str]:
    ids: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=results, Delimiter="/"):
        ids += [p["Prefix"][len(results):].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return sorted(ids)


def download_run(client: Any, bucket: str, results: str, run_id: str, out_dir: Path) -> int:
    prefix = f"{results}{run_id}/"
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = out_dir / run_id / obj["Key"][len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
            count += 1
    return count


def main(argv: list[str] | None = None, client: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--bucket")
    parser.add_argument("--run-id", help="default: the latest run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if client is None:
        import boto3

        client = boto3.client("s3")
    bucket = args.bucket or stack_output(args.stack, "modelBucket")
    results = results_prefix(load_stack(args.stack).spec())
    runs = run_ids(client, bucket, results)
    if not runs:
        print(f"no benchmark runs under s3://{bucket}/{results} yet (is the llmperf job still running?)", file=sys.stderr)
        return 1
    run_id = args.run_id or runs[-1]
    out_dir = args.out or Path("build") / "results" / args.stack
    count = download_run(client, bucket, results, run_id, out_dir)
    print(f"downloaded {count} files of run {run_id} to {out_dir}\n")
    write_report(out_dir)
    print(f"\nreport: {out_dir / 'report.md'}, {out_dir / 'report.png'}, {out_dir / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
