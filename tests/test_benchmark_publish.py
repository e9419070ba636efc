"""benchmark.publish against moto's CloudWatch, and the batching rules of PutMetricData."""

import boto3
import pytest
from moto import mock_aws

from benchmark import publish
from benchmark.publish import MAX_VALUES_PER_DATUM, METRICS

from .llmperf_files import request, write_case, write_run

UNITS = {"TTFT": "Seconds", "InterTokenLatency": "Seconds", "TimePerOutputToken": "Seconds", "EndToEndLatency": "Seconds",
         "RequestOutputThroughput": "Count/Second", "InputTokens": "Count", "OutputTokens": "Count"}


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
    for variant, e2e in (("base", 4.0), ("sd", 2.0)):
        for case in ("counting", "sonnets"):
            write_case(tmp_path, "r1", variant, case,
                       [request(ttft=0.05, e2e=e2e + i / 100, output_tokens=200) for i in range(5)] + [request(0, 0, 0, error="boom")])


def test_names_dimensions_units_and_one_value_per_request(tmp_path):
    small_run(tmp_path)
    client = Recorder()
    sent = publish.publish(tmp_path, "LLMPerf/test", client=client)
    data = [d for call in client.calls for d in call["MetricData"]]
    assert sent == len(data) == 2 * 2 * len(METRICS)
    assert {call["Namespace"] for call in client.calls} == {"LLMPerf/test"}
    for datum in data:
        assert [d["Name"] for d in datum["Dimensions"]] == ["Variant", "TestCase"]
        assert datum["Unit"] == UNITS[datum["MetricName"]]
        # 5 successful requests each (the failed one contributes no value).
        assert sum(datum["Counts"]) == 5
    e2e = next(d for d in data if d["MetricName"] == "EndToEndLatency" and d["Dimensions"][0]["Value"] == "sd")
    assert e2e["Values"] == pytest.approx([2.0, 2.01, 2.02, 2.03, 2.04])
    tpot = next(d for d in data if d["MetricName"] == "TimePerOutputToken" and d["Dimensions"][0]["Value"] == "base")
    assert tpot["Values"][0] == pytest.approx((4.0 - 0.05) / 199)


def test_more_than_150_distinct_values_are_split_into_datums(tmp_path):
    write_run(tmp_path, "r1", {"counting": "x"})
    write_case(tmp_path, "r1", "base", "counting", [request(ttft=0.05 + i / 10_000, e2e=3 + i / 1000, output_tokens=100) for i in range(400)])
    write_case(tmp_path, "r1", "sd", "counting", [])
    client = Recorder()
    publish.publish(tmp_path, "LLMPerf/test", client=client)
    ttft = [d for call in client.calls for d in call["MetricData"] if d["MetricName"] == "TTFT"]
    assert [len(d["Values"]) for d in ttft] == [150, 150, 100]
    assert all(len(d["Values"]) <= MAX_VALUES_PER_DATUM for call in client.calls for d in call["MetricData"])
    assert sum(sum(d["Counts"]) for d in ttft) == 400


def test_batches_respect_the_per_call_limits():
    datum = {"Values": [1.0] * 150}
    batches = list(publish.batches([datum] * 1500))
    assert all(len(b) <= 1000 and sum(len(d["Values"]) for d in b) <= publish.MAX_VALUES_PER_CALL for b in batches)
    assert sum(len(b) for b in batches) == 1500


@mock_aws
def test_cloudwatch_accepts_the_data(tmp_path):
    small_run(tmp_path)
    assert publish.main(["--results-dir", str(tmp_path), "--namespace", "LLMPerf/test", "--run-id", "r1"]) == 0
    listed = boto3.client("cloudwatch").list_metrics(Namespace="LLMPerf/test")["Metrics"]
    assert {m["MetricName"] for m in listed} == set(METRICS)
    assert {tuple(sorted(d["Name"] for d in m["Dimensions"])) for m in listed} == {("TestCase", "Variant")}
    assert {(d["Value"]) for m in listed for d in m["Dimensions"] if d["Name"] == "Variant"} == {"base", "sd"}


def test_reserved_namespace_is_refused(tmp_path):
    small_run(tmp_path)
    with pytest.raises(ValueError):
        publish.publish(tmp_path, "AWS/EC2", client=Recorder())


def test_endpoint_comes_from_the_standard_environment(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert boto3.client("cloudwatch").meta.endpoint_url == "http://127.0.0.1:4566"
