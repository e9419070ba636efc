"""benchmark.publish against moto's CloudWatch, and the batching rules of PutMetricData."""
import json
from datetime import datetime, timedelta, timezone

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


def test_llmperf_inter_token_latency_leaves_out_the_responses_it_marked_failed(tmp_path):
    write_run(tmp_path, "r1", {"counting": "x"})
    folder = write_case(tmp_path, "r1", "base", "counting", [record(ttft=0.05, e2e=3.0, tokens=100, start=T0),
                                                            record(ttft=0.06, e2e=3.1, tokens=100, start=T0 + 4)],
                        summary={"results_inter_token_latency_s_quantiles_p50": 0.08})
    # LLMPerf's individual responses: an errored request carries its HTTP status as error_code.
    (responses,) = folder.glob("*_individual_responses.json")
    responses.write_text(json.dumps([
        {"error_code": None, "error_msg": "", "inter_token_latency_s": 0.081},
        {"error_code": 500, "error_msg": "Internal Server Error", "inter_token_latency_s": 0.0},
        {"error_code": None, "error_msg": "", "inter_token_latency_s": 0.083}]))
    data = publish.case_metric_data(load_case(tmp_path, "r1", "base", "counting"), VARIANTS[0], WHEN)
    (itl,) = by_name(data, "InterTokenLatency", "base")
    assert (itl["Values"], itl["Counts"], itl["Unit"]) == ([0.081, 0.083], [1.0, 1.0], "Seconds")


def test_neuron_datums_are_stamped_in_utc_and_unavailable_telemetry_publishes_none():
    neuron = publish.telemetry_metric_data("sd", "counting", TELEMETRY)
    # Aware UTC datetimes: botocore sends a naive one as if it were UTC, whatever the pod's zone.
    assert [d["Timestamp"] for d in neuron] == [datetime(2026, 11, 18, 11, 6, 40, tzinfo=timezone.utc),
                                                datetime(2026, 11, 18, 11, 7, 40, tzinfo=timezone.utc)] * 2
    assert all(d["Timestamp"].utcoffset() == timedelta(0) for d in neuron)
    # benchmark/telemetry.py's forms without a series: nothing to publish, and no error.
    assert publish.telemetry_metric_data("sd", "counting", {"status": "unavailable", "reason": "variant not located: x"}) == []
    utilization_only = {"status": "partial", "utilizationPercent": [[T0, 41.0]]}
    assert [(d["MetricName"], d["Values"]) for d in publish.telemetry_metric_data("sd", "counting", utilization_only)] == [
        ("NeuronCoreUtilization", [41.0])]


def test_a_run_is_published_case_by_case_at_each_finish_in_utc_and_a_missing_case_hides_no_other(tmp_path):
    write_run(tmp_path, "r1", {"counting": "x", "sonnets": None})
    # base/counting has no case.json (its upload failed, or it never ran); base/sonnets ran.
    write_case(tmp_path, "r1", "base", "sonnets", [record(ttft=0.05, e2e=3.0, tokens=100, start=T0)])
    for case, start in (("counting", T0), ("sonnets", T0 + 100)):
        write_case(tmp_path, "r1", "sd", case, [record(ttft=0.05, e2e=2.0, tokens=100, chunks=25, start=start)])
    data = publish.run_metric_data(tmp_path, "r1")
    stamps = {(d["Dimensions"][0]["Value"], d["Dimensions"][1]["Value"]): d["Timestamp"] for d in data}
    assert stamps == {("base", "sonnets"): datetime(2026, 11, 18, 11, 6, 43, tzinfo=timezone.utc),
                      ("sd", "counting"): datetime(2026, 11, 18, 11, 6, 42, tzinfo=timezone.utc),
                      ("sd", "sonnets"): datetime(2026, 11, 18, 11, 8, 22, tzinfo=timezone.utc)}
    assert all(d["Timestamp"].utcoffset() == timedelta(0) for d in data)


def test_a_downloaded_run_is_published_again_under_its_recorded_dimension_values(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "})
    run_file = tmp_path / "r1" / "run.json"
    run = json.loads(run_file.read_text())
    run_file.write_text(json.dumps({**run, "dimensions": {"Variant": {"base": "Base", "sd": "SD"},
                                                          "TestCase": {"counting": "counting_numbers_from_1_"}}}))
    write_case(tmp_path, "r1", "sd", "counting", [record(ttft=0.05, e2e=2.0, tokens=100, start=T0)],
               telemetry={"status": "ok", "utilizationPercent": [[T0, 50.0]]})
    data = publish.run_metric_data(tmp_path, "r1")
    assert {tuple(d["Value"] for d in datum["Dimensions"]) for datum in data} == {("SD", "counting_numbers_from_1_")}
    assert "NeuronCoreUtilization" in {datum["MetricName"] for datum in data}


def test_batches_are_cut_exactly_at_1000_datums_and_20000_values():
    def of(values):
        return {"MetricName": "TTFT", "Values": [0.1] * values, "Counts": [1.0] * values}

    def sizes(data):
        return [len(batch) for batch in publish.batches(data)]

    assert sizes([of(1)] * 1001) == [1000, 1]
    assert sizes([of(150)] * 1500) == [133] * 11 + [37]  # 134 full datums would be 20,100 values
    assert sizes(([of(150)] * 133 + [of(50)]) * 2) == [134, 134]  # exactly 20,000 values each: still one call
    assert sizes([]) == []


def test_reserved_namespace_is_refused_by_name_before_any_call():
    client = Recorder()
    with pytest.raises(ValueError, match="^CloudWatch namespaces starting with AWS/ are reserved$"):
        publish.publish_data(client, "AWS/EC2", [{"Values": [1.0]}])
    assert client.calls == []


def two_runs(results_dir):
    """r1: the baseline alone, one case; r2: baseline and SD, one case each. Per case: six
    request metrics and FailedRequests; the SD case adds ImpliedAcceptanceRate (no counters,
    no LLMPerf summary, no telemetry)."""
    records = [record(ttft=0.05, e2e=3.0, tokens=100, chunks=25, start=T0), record(ttft=0.06, e2e=3.2, tokens=100, chunks=25, start=T0 + 4),
               record(0, 0.01, 0, error="HTTP 500: boom", start=T0 + 8)]
    write_run(results_dir, "r1", {"counting": "x"}, variants=VARIANTS[:1])
    write_case(results_dir, "r1", "base", "counting", records)
    write_run(results_dir, "r2", {"counting": "x"})
    for variant in ("base", "sd"):
        write_case(results_dir, "r2", variant, "counting", records)
    return {"r1": 7, "r2": 7 + 8}


def test_main_publishes_every_run_or_the_one_named_and_says_how_many_datums(tmp_path, capsys):
    counts = two_runs(tmp_path)
    client = Recorder()
    assert publish.main(["--results-dir", str(tmp_path), "--namespace", "LLMPerf/test"], client=client) == 0
    assert capsys.readouterr().out == '{"published": 22, "namespace": "LLMPerf/test"}\n'
    assert [len(call["MetricData"]) for call in client.calls] == [counts["r1"], counts["r2"]]
    assert {call["Namespace"] for call in client.calls} == {"LLMPerf/test"}
    client = Recorder()
    assert publish.main(["--results-dir", str(tmp_path), "--namespace", "Qwen/LLMPerf", "--run-id", "r2"], client=client) == 0
    assert capsys.readouterr().out == '{"published": 15, "namespace": "Qwen/LLMPerf"}\n'
    assert [len(call["MetricData"]) for call in client.calls] == [counts["r2"]]


def test_main_with_no_runs_says_so_on_stderr_and_fails(tmp_path, capsys):
    client = Recorder()
    assert publish.main(["--results-dir", str(tmp_path), "--namespace", "LLMPerf/test"], client=client) == 1
    assert capsys.readouterr() == ("", f"no runs in {tmp_path}\n")
    assert client.calls == []


def test_main_requires_its_options_and_the_help_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        publish.main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("error: the following arguments are required: --results-dir, --namespace")
    with pytest.raises(SystemExit) as exited:
        publish.main(["--help"])
    assert exited.value.code == 0
    assert "\n    python -m benchmark.publish --results-dir DIR --namespace NS [--run-id ID]\n" in capsys.readouterr().out
