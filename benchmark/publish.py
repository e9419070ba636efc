"""Publish benchmark results to CloudWatch under the dimensions Variant and TestCase only (the
dashboard matches a metric only with its full dimension set: docs/facts.md "CloudWatch"), with the
values the run config names (the variant and test-case names, or the EKS sample's: Variant SD /
Base, TestCase the prompt with underscores; benchmark/pod.py metric_dimensions).

- Per request, as Values/Counts so CloudWatch can compute percentiles: TTFT, TimePerOutputToken,
  EndToEndLatency, RequestOutputThroughput, InputTokens, OutputTokens (proxy timings, server token
  counts; OutputTokens is the sample's "primary metric", seed 000). InterTokenLatency is LLMPerf's
  own per-chunk figure from its individual responses, for reference.
- Per case: FailedRequests; ImpliedAcceptanceRate (from streamed chunks); AcceptanceRate and
  MeanAcceptanceLength where the server exposes its speculative-decoding counters.
- Per CloudWatch period of the case: NeuronCoreUtilization and NeuronMemoryUsed of the variant's
  devices (Container Insights, benchmark/telemetry.py); a distributed variant's per pod, with a
  third dimension Server (target, draft).

The driver publishes each case as soon as it finishes. To publish a downloaded run again:

    python -m benchmark.publish --results-dir DIR --namespace NS [--run-id ID]

Honours the standard AWS environment (AWS_REGION, AWS_ENDPOINT_URL, credentials).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from .acceptance import acceptance_figures
from .pod import level_folder, test_case_value
from .results import CaseResult, RequestResult, list_runs, load_case, load_run, run_levels

# CloudWatch PutMetricData limits (docs/facts.md, "CloudWatch").
MAX_VALUES_PER_DATUM = 150
MAX_DATA_PER_CALL = 1000
# A request body is capped at 1 MB; this keeps a batch of full datums well below it.
MAX_VALUES_PER_CALL = 20_000

REQUEST_METRICS: dict[str, tuple[str, Callable[[RequestResult], float | None]]] = {
    "TTFT": ("Seconds", lambda r: r.ttft_s),
    "TimePerOutputToken": ("Seconds", lambda r: r.time_per_output_token_s),
    "EndToEndLatency": ("Seconds", lambda r: r.e2e_s),
    "RequestOutputThroughput": ("Count/Second", lambda r: r.output_throughput),
    "InputTokens": ("Count", lambda r: r.input_tokens),
    "OutputTokens": ("Count", lambda r: r.output_tokens),
}
UNITS = {
    **{name: unit for name, (unit, _) in REQUEST_METRICS.items()},
    "InterTokenLatency": "Seconds",
    "FailedRequests": "Count",
    "ImpliedAcceptanceRate": "Percent",
    "AcceptanceRate": "Percent",
    "MeanAcceptanceLength": "Count",
    "NeuronCoreUtilization": "Percent",
    "NeuronMemoryUsed": "Bytes",
}
DIMENSIONS = ("Variant", "TestCase")
NEURON_METRICS = {"NeuronCoreUtilization": "utilizationPercent", "NeuronMemoryUsed": "memoryUsedBytes"}
"""The Neuron metrics, each from its series in telemetry.json (benchmark/telemetry.py collect)."""
SERVER_DIMENSION = "Server"
"""The Neuron metrics of a variant of several pods (a distributed variant's target and draft, each
on its own devices) carry this third dimension, the pod's part: the dashboard draws each."""


def datums(name: str, variant: str, test_case: str, values: list[float], timestamp: datetime,
           server: str | None = None) -> Iterator[dict[str, Any]]:
    """One metric's values as Values/Counts datums of at most MAX_VALUES_PER_DATUM distinct values."""
    distinct = sorted(Counter(float(v) for v in values).items())
    for start in range(0, len(distinct), MAX_VALUES_PER_DATUM):
        chunk = distinct[start:start + MAX_VALUES_PER_DATUM]
        yield {
            "MetricName": name,
            "Dimensions": [{"Name": "Variant", "Value": variant}, {"Name": "TestCase", "Value": test_case},
                           *([{"Name": SERVER_DIMENSION, "Value": server}] if server else [])],
            "Timestamp": timestamp,
            "Values": [v for v, _ in chunk],
            "Counts": [float(c) for _, c in chunk],
            "Unit": UNITS[name],
        }


def dimension_values(run: dict[str, Any], variant: str, test_case: str, level: str | None = None) -> tuple[str, str]:
    """The Variant and TestCase values a (variant, test case) is published under: the run config's
    "dimensions" (benchmark/pod.py metric_dimensions), else the names themselves; a sweep's level
    folder follows the test case's (benchmark/pod.py test_case_value)."""
    dimensions = run.get("dimensions") or {}
    return (dimensions.get("Variant", {}).get(variant, variant),
            test_case_value(dimensions.get("TestCase", {}).get(test_case, test_case), level))


def case_metric_data(case: CaseResult, variant: dict[str, Any], timestamp: datetime,
                     dimensions: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Datums for one (test case, variant), under `dimensions` (Variant, TestCase values; default
    the names); failed requests contribute only to FailedRequests."""
    ok = case.ok
    variant_value, case_value = dimensions or (case.variant, case.test_case)
    data: list[dict[str, Any]] = []
    for name, (_, extract) in REQUEST_METRICS.items():
        data += datums(name, variant_value, case_value, [v for v in map(extract, ok) if v is not None], timestamp)
    itl = [r["inter_token_latency_s"] for r in case.llmperf_responses if r.get("error_code") is None]
    data += datums("InterTokenLatency", variant_value, case_value, itl, timestamp)
    data += datums("FailedRequests", variant_value, case_value, [case.failed], timestamp)
    figures = acceptance_figures(case, variant.get("numSpeculativeTokens"), ok)
    per_case = {"ImpliedAcceptanceRate": figures["acceptance_rate_implied"],
                "AcceptanceRate": figures["counters"].get("acceptance_rate"),
                "MeanAcceptanceLength": figures["counters"].get("mean_acceptance_length")}
    for name, value in per_case.items():
        if value is not None:
            data += datums(name, variant_value, case_value, [value * 100 if UNITS[name] == "Percent" else value], timestamp)
    return data


def telemetry_metric_data(variant: str, test_case: str, telemetry: dict[str, Any], server: str | None = None) -> list[dict[str, Any]]:
    """One datum per CloudWatch period of the case, at that period's own timestamp; a variant of
    several pods (benchmark/telemetry.py collect), each pod's under its part (SERVER_DIMENSION)."""
    if "servers" in telemetry:
        return [d for part, data in telemetry["servers"].items() for d in telemetry_metric_data(variant, test_case, data, part)]
    data: list[dict[str, Any]] = []
    for name, key in NEURON_METRICS.items():
        for stamp, value in telemetry.get(key, []):
            data += datums(name, variant, test_case, [value], datetime.fromtimestamp(stamp, timezone.utc), server)
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


def publish_data(client: Any, namespace: str, data: list[dict[str, Any]]) -> int:
    if namespace.startswith("AWS/"):
        raise ValueError("CloudWatch namespaces starting with AWS/ are reserved")
    for batch in batches(data):
        client.put_metric_data(Namespace=namespace, MetricData=batch)
    return len(data)


def run_metric_data(results_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """Every datum of a downloaded run, each case (a sweep's at every level) at the time it finished."""
    run = load_run(results_dir, run_id)
    levels = run_levels(run)
    folders = [level_folder(levels, level) for level in levels]
    data: list[dict[str, Any]] = []
    for variant in run["variants"]:
        for test_case, folder in ((t, f) for t in run["testCases"] for f in folders):
            case = load_case(results_dir, run_id, variant["name"], test_case, folder)
            if not case.case:
                continue  # never ran (the run stopped before it)
            dimensions = dimension_values(run, variant["name"], test_case, folder)
            data += case_metric_data(case, variant, datetime.fromtimestamp(case.case["finishedAt"], timezone.utc), dimensions)
            data += telemetry_metric_data(*dimensions, case.telemetry or {})
    return data


def main(argv: list[str] | None = None, client: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--run-id")
    args = parser.parse_args(argv)
    runs = [args.run_id] if args.run_id else list_runs(args.results_dir)
    if not runs:
        print(f"no runs in {args.results_dir}", file=sys.stderr)
        return 1
    if client is None:
        import boto3

        client = boto3.client("cloudwatch")
    sent = sum(publish_data(client, args.namespace, run_metric_data(args.results_dir, run)) for run in runs)
    print(json.dumps({"published": sent, "namespace": args.namespace}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
