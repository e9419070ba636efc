"""`make results STACK=<s> [RUN=<id>] [BUCKET=<b>]`: list the stack's benchmark runs with their
status, download the latest (or RUN) and report on it.

    python -m tools.fetch_results --stack S [--bucket B] [--run-id ID] [--out DIR]

A run's run.json says "running" from its first second until it ends "complete", "incomplete" (a
case completed fewer requests than asked) or "failed" (with the reason); a run whose pod died
stays "running". Cases are uploaded as each finishes, so an unfinished run is reported with the
cases it has. The region is the stack's (its aws:region), whatever the shell's AWS region says.
The bucket defaults to the stack's `modelBucket` output (needs the Pulumi CLI and a login).

A stack with a `study` keeps each study under its id (study-<fingerprint>/, benchmark/tuner.py):
the latest study (or --run-id) is downloaded and its tuning report written (tuning.md, tuning.json,
tuning.csv, a heatmap and a speedup-vs-window plot: reporting/tuning_report.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmark.results import RUN_FILE, STUDY_FILE
from reporting import tuning_report
from reporting.report import write_report
from stackconfig.source import stack_argument

from .stack import ToolError, aws_session, bucket_of, pairing_spec, run_tool


def run_ids(client: Any, bucket: str, results: str) -> list[str]:
    ids: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=results, Delimiter="/"):
        ids += [p["Prefix"][len(results):].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return sorted(ids)


def run_status(client: Any, bucket: str, results: str, run_id: str) -> str:
    record = STUDY_FILE if run_id.startswith("study-") else RUN_FILE
    try:
        run = json.loads(client.get_object(Bucket=bucket, Key=f"{results}{run_id}/{record}")["Body"].read())
    except client.exceptions.NoSuchKey:
        return f"no {record}"
    return f"{run.get('status')}{': ' + run['reason'] if run.get('reason') else ''}"


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


def fetch(args: argparse.Namespace) -> int:
    spec = pairing_spec(args.stack)
    client = aws_session(spec.region).client("s3", region_name=spec.region)
    bucket = args.bucket or bucket_of(args.stack)
    results = spec.results_prefix
    runs = run_ids(client, bucket, results)
    if not runs:
        raise ToolError(f"no benchmark runs under s3://{bucket}/{results} yet: a run uploads run.json as soon as its "
                        "setup is done; see the llmperf Job's log for a setup failure or the wait for the servers")
    if args.run_id and args.run_id not in runs:
        raise ToolError(f"no run {args.run_id} under s3://{bucket}/{results}; runs: {', '.join(runs)}")
    print(f"benchmark runs in s3://{bucket}/{results}:")
    for run in runs:
        print(f"  {run}: {run_status(client, bucket, results, run)}")
    studies = [r for r in runs if r.startswith("study-")]
    run_id = args.run_id or (latest_study(client, bucket, results, studies) if spec.study and studies else runs[-1])
    out_dir = args.out or Path("build") / "results" / args.stack
    count = download_run(client, bucket, results, run_id, out_dir)
    print(f"downloaded {count} files of run {run_id} ({run_status(client, bucket, results, run_id)}) to {out_dir}\n")
    if run_id.startswith("study-"):
        tuning_report.write_report(out_dir)
        # Its charts: a heatmap and a windows plot, per level in a study of several, and then a load plot.
        charts = ", ".join(str(path) for path in sorted(out_dir.glob(f"{run_id}-*.png")))
        print(f"\nreport: {out_dir / 'tuning.md'}, {out_dir / 'tuning.json'}, {out_dir / 'tuning.csv'}, {charts}")
        return 0
    write_report(out_dir)
    print(f"\nreport: {out_dir / 'report.md'}, {out_dir / 'report.png'}, {out_dir / 'report.json'}, {out_dir / 'report.csv'}")
    return 0


def latest_study(client: Any, bucket: str, results: str, studies: list[str]) -> str:
    """The study started last (ids are fingerprints, not times: study.json says when)."""
    def started(study_id: str) -> str:
        try:
            body = client.get_object(Bucket=bucket, Key=f"{results}{study_id}/{STUDY_FILE}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return ""
        return json.loads(body).get("startedAt") or ""
    return max(studies, key=started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools results", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, type=stack_argument)
    parser.add_argument("--bucket", help="default: the stack's modelBucket output")
    parser.add_argument("--run-id", help="default: the latest run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    return run_tool(lambda: fetch(args))


if __name__ == "__main__":
    sys.exit(main())
