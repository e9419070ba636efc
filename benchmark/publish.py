"""Publish benchmark runs to CloudWatch: one value per request, so CloudWatch can compute
percentiles, under the dimensions Variant and TestCase only (the dashboard matches on them).

    python -m benchmark.publish --results-dir DIR --namespace NS [--run-id ID]

Honours the standard AWS environment (AWS_REGION, AWS_ENDPOINT_URL, credentials).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from .results import RequestResult, case_dir, list_runs, load_requests, load_run

# CloudWatch PutMetricData limits (FACTS.md, CloudWatch).
MAX_VALUES_PER_DATUM = 150
MAX_DATA_PER_CALL = 1000
# A request body is capped at 1 MB; this keeps a batch of full datums well below it.
MAX_VALUES_PER_CALL = 20_000

METRICS: dict[str, tuple[str, Callable[[RequestResult], float | None]]] = {
    "TTFT": ("Seconds", lambda r: r.ttft_s),
    "InterTokenLatency": ("Seconds", lambda r: r.inter_token_latency_s),
    "TimePerOutputToken": ("Seconds", lambda r: r.time_per_output_token_s),
    "EndToEndLatency": ("Seconds", lambda r: r.end_to_end_s),
    "RequestOutputThroughput": ("Count/Second", lambda r: r.output_throughput),
    "InputTokens": ("Count", lambda r: r.input_tokens),
    "OutputTokens": ("Count", lambda r: r.output_tokens),
}
DIMENSIONS = ("Variant", "TestCase")


def metric_data(variant: str, test_case: str, requests: list[RequestResult], timestamp: datetime) -> Iterator[dict[str, Any]]:
    """Datums for one variant and test case; failed requests contribute no values."""
    ok = [r for r in requests if r.ok]
    for name, (unit, extract) in METRICS.items():
        values = Counter(v for v in (extract(r) for r in ok) if v is not None)
        distinct = sorted(values.items())
        for start in range(0, len(distinct), MAX_VALUES_PER_DATUM):
            chunk = distinct[start:start + MAX_VALUES_PER_DATUM]
            yield {
                "MetricName": name,
                "Dimensions": [{"Name": "Variant", "Value": variant}, {"Name": "TestCase", "Value": test_case}],
                "Timestamp": timestamp,
                "Values": [float(v) for v, _ in chunk],
                "Counts": [float(c) for _, c in chunk],
                "Unit": unit,
            }


def run_metric_data(results_dir: Path, run_id: str) -> list[dict[str, Any]]:
    run = load_run(results_dir, run_id)
    timestamp = datetime.fromisoformat(run["finishedAt"].replace("Z", "+00:00")).astimezone(timezone.utc)
    data: list[dict[str, Any]] = []
    for variant in run["variants"]:
        for test_case in run["testCases"]:
            requests = load_requests(case_dir(results_dir, run_id, variant["name"], test_case))
            data += metric_data(variant["name"], test_case, requests, timestamp)
    return data


def batches(data: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    values = 0
    for datum in data:
        if batch and (len(batch) == MAX_DATA_PER_CALL or values + len(datum["Values"]) > MAX_VALUES_PER_CALL):
            yield batch
            batch, values = [], 0
        batch.append(datum)
        values += len(datum["Values"])
    if batch:
        yield batch


def publish(results_dir: Path, namespace: str, run_id: str | None = None, client: Any = None) -> int:
    """Publish one run (or every run in DIR); returns the number of datums sent."""
    if namespace.startswith("AWS/"):
        raise ValueError("CloudWatch namespaces starting with AWS/ are reserved")
    if client is None:
        import boto3

        client = boto3.client("cloudwatch")
    runs = [run_id] if run_id else list_runs(results_dir)
    sent = 0
    for run in runs:
        data = run_metric_data(results_dir, run)
        for batch in batches(data):
            client.put_metric_data(Namespace=namespace, MetricData=batch)
        sent += len(data)
    return sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--run-id")
    args = parser.parse_args(argv)
    if not list_runs(args.results_dir):
        print(f"no runs in {args.results_dir}", file=sys.stderr)
        return 1
    sent = publish(args.results_dir, args.namespace, args.run_id)
    print(f"published {sent} metric datums to {args.namespace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
