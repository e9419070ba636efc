"""benchmark.publish against moto's CloudWatch, and the batching rules of PutMetricData."""
from datetime import datetime, timezone

import boto3
import pytest
from moto import mock_aws

from benchmark import publish
from benchmark.publish import MAX_VALUES_PER_DATUM, REQUEST_METRICS, UNITS
from benchmark.results import load_case

from .results_files import VARIANTS, record, write_case, write_run

T0 = 1_795_000_000.0
WHEN = datetime(2026, 11, 20, 10, tzinfo=timezone.utc)
TELEMETRY = {"status": "ok", "node": "n", "neuronDevices": ["0"], "cores": 4,
             "utilizationPercent": [[T0, 41.0], [T0 + 60, 43.0]], "memoryUsedBytes": [[T0, 5e9], [T0 + 60, 6e9]]}


@pytest.fixture(autouse=True)
def aws_env(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-west-2",
                       "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


class Recorder:
    def __init__(self):
        self.calls = []

    def put_metric_data(self, **kwargs):
        self.calls.append(kwargs)


def small_run(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 ", "sonnets": None})
    for variant, e2e, chunks in (("base", 4.0, 200), ("sd", 2.0, 50)):
        for case in ("counting", "sonnets"):
            specdecode = {"before": {"draft_tokens": 0.0, "accepted": 0.0, "drafts": 0.0},
                          "after": {"draft_tokens": 350.0, "accepted": 140.0, "drafts": 50.0}} if variant == "sd" else None
            write_case(tmp_path, "r1", variant, case,
                       [record(ttft=0.05, e2e=e2e + i / 100, tokens=200, chunks=chunks, start=T0 + i * 5, prompt=f"p{i}")
                        for i in range(5)] + [record(0, 0.01, 0, error="HTTP 500: boom", start=T0 + 30)],
                       summary={"results_inter_token_latency_s_quantiles_p50": 0.08}, specdecode=specdecode, telemetry=TELEMETRY)


def by_name(data, name, variant):
    return [d for d in data if d["MetricName"] == name and d["Dimensions"][0]["Value"] == variant]


def test_names_dimensions_units_and_one_value_per_request(tmp_path):
    small_run(tmp_path)
    sd = VARIANTS[1]
    data = publish.case_metric_data(load_case(tmp_path, "r1", "sd", "counting"), sd, WHEN)
    assert {d["MetricName"] for d in data} == set(UNITS) - {"NeuronCoreUtilization", "NeuronMemoryUsed"}
    for datum in data:
        assert [d["Name"] for d in datum["Dimensions"]] == ["Variant", "TestCase"]
        assert datum["Unit"] == UNITS[datum["MetricName"]] and datum["Timestamp"] == WHEN
        if datum["MetricName"] in REQUEST_METRICS or datum["MetricName"] == "InterTokenLatency":
            assert sum(datum["Counts"]) == 5  # 5 successful requests; the failed one adds no value
    assert by_name(data, "FailedRequests", "sd")[0]["Values"] == [1.0]
    assert by_name(data, "EndToEndLatency", "sd")[0]["Values"] == pytest.approx([2.0, 2.01, 2.02, 2.03, 2.04])
    assert by_name(data, "OutputTokens", "sd")[0]["Values"] == [200.0]
    assert by_name(data, "TimePerOutputToken", "sd")[0]["Values"][0] == pytest.approx((2.0 - 0.05) / 199)
    assert by_name(data, "AcceptanceRate", "sd")[0]["Values"] == pytest.approx([40.0])
    assert by_name(data, "MeanAcceptanceLength", "sd")[0]["Values"] == pytest.approx([1 + 140 / 50])
    assert by_name(data, "ImpliedAcceptanceRate", "sd")[0]["Unit"] == "Percent"
    base = publish.case_metric_data(load_case(tmp_path, "r1", "base", "counting"), VARIANTS[0], WHEN)
    # A baseline has no speculation: nothing is made up for it.
    assert not {"AcceptanceRate", "MeanAcceptanceLength", "ImpliedAcceptanceRate"} & {d["MetricName"] for d in base}
    neuron = publish.telemetry_metric_data("sd", "counting", TELEMETRY)
    assert [(d["MetricName"], d["Values"], d["Timestamp"].timestamp()) for d in neuron] == [
        ("NeuronCoreUtilization", [41.0], T0), ("NeuronCoreUtilization", [43.0], T0 + 60),
        ("NeuronMemoryUsed", [5e9], T0), ("NeuronMemoryUsed", [6e9], T0 + 60)]


def test_more_than_150_distinct_values_are_split_into_datums(tmp_path):
    write_run(tmp_path, "r1", {"counting": "x"})
    write_case(tmp_path, "r1", "base", "counting",
               [record(ttft=0.05 + i / 10_000, e2e=3 + i / 1000, tokens=100, start=T0 + i * 4) for i in range(400)])
    data = publish.case_metric_data(load_case(tmp_path, "r1", "base", "counting"), VARIANTS[0], WHEN)
    ttft = by_name(data, "TTFT", "base")
    assert [len(d["Values"]) for d in ttft] == [150, 150, 100]
    assert all(len(d["Values"]) <= MAX_VALUES_PER_DATUM for d in data)
    assert sum(sum(d["Counts"]) for d in ttft) == 400


def test_batches_respect_the_per_call_limits():
    datum = {"Values": [1.0] * 150}
    batches = list(publish.batches([datum] * 1500))
    assert all(len(b) <= 1000 and sum(len(d["Values"]) for d in b) <= publish.MAX_VALUES_PER_CALL for b in batches)
    assert sum(len(b) for b in batches) == 1500


@mock_aws
def test_cloudwatch_accepts_a_whole_run(tmp_path, capsys):
    small_run(tmp_path)
    assert publish.main(["--results-dir", str(tmp_path), "--namespace", "LLMPerf/test", "--run-id", "r1"]) == 0
    listed = boto3.client("cloudwatch").list_metrics(Namespace="LLMPerf/test")["Metrics"]
    assert {m["MetricName"] for m in listed} == set(UNITS)
    assert {tuple(sorted(d["Name"] for d in m["Dimensions"])) for m in listed} == {("TestCase", "Variant")}
    assert {d["Value"] for m in listed for d in m["Dimensions"] if d["Name"] == "Variant"} == {"base", "sd"}


def test_reserved_namespace_is_refused():
    with pytest.raises(ValueError):
        publish.publish_data(Recorder(), "AWS/EC2", [{"Values": [1.0]}])

