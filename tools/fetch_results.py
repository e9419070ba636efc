"""`make results STACK=<s>`: list the stack's benchmark runs with their status, download the
latest (or --run-id) and report on it.

    python -m tools.fetch_results --stack S [--bucket B] [--run-id ID] [--out DIR]

A run's run.json says "running" from its first second until it ends "complete", "incomplete" (a
case completed fewer requests than asked) or "failed" (with the reason); a run whose pod died
stays "running". Cases are uploaded as each finishes, so an unfinished run is reported with the
cases it has. The bucket defaults to the stack's `modelBucket` output (needs the Pulumi CLI and a
login); AWS credentials and region come from the standard environment.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmark.report import write_report
from benchmark.results import RUN_FILE
from components.benchmark import RESULTS_PREFIX


def stack_output(stack: str, name: str) -> str:
    return subprocess.run(["pulumi", "stack", "output", name, "--stack", stack], check=True,
                          capture_output=True, text=True).stdout.strip()


def run_ids(client: Any, bucket: str) -> list[str]:
    ids: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=RESULTS_PREFIX, Delimiter="/"):
        ids += [p["Prefix"][len(RESULTS_PREFIX):].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return sorted(ids)


def run_status(client: Any, bucket: str, run_id: str) -> str:
    try:
        run = json.loads(client.get_object(Bucket=bucket, Key=f"{RESULTS_PREFIX}{run_id}/{RUN_FILE}")["Body"].read())
    except client.exceptions.NoSuchKey:
        return "no run.json"
    return f"{run.get('status')}{': ' + run['reason'] if run.get('reason') else ''}"


def download_run(client: Any, bucket: str, run_id: str, out_dir: Path) -> int:
    prefix = f"{RESULTS_PREFIX}{run_id}/"
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
    runs = run_ids(client, bucket)
    if not runs:
        print(f"no benchmark runs under s3://{bucket}/{RESULTS_PREFIX} yet: a run uploads run.json as soon as its "
              "setup is done; see the llmperf Job's log for a setup failure or the wait for the servers", file=sys.stderr)
        return 1
    print(f"benchmark runs in s3://{bucket}/{RESULTS_PREFIX}:")
    for run in runs:
        print(f"  {run}: {run_status(client, bucket, run)}")
    run_id = args.run_id or runs[-1]
    out_dir = args.out or Path("build") / "results" / args.stack
    count = download_run(client, bucket, run_id, out_dir)
    print(f"downloaded {count} files of run {run_id} ({run_status(client, bucket, run_id)}) to {out_dir}\n")
    write_report(out_dir)
    print(f"\nreport: {out_dir / 'report.md'}, {out_dir / 'report.png'}, {out_dir / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
