"""End to end on 127.0.0.1: the driver runs the LLMPerf stand-in (real HTTP, LLMPerf's arithmetic
and failure behaviour) through the measuring proxy against test servers that stream several tokens
per chunk and fail chosen requests; the report must match what the servers actually sent."""
import json
import shutil
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from benchmark import driver
from benchmark.acceptance import implied_acceptance
from benchmark.results import load_case, percentile
from reporting import analysis

from .fake_vllm import FakeVllm, Speculation

STANDIN = Path(__file__).resolve().parents[1] / "rehearse" / "standin_llmperf"
WITHIN = 0.03  # the tolerance


@pytest.fixture
def llmperf(tmp_path):
    return Path(shutil.copytree(STANDIN, tmp_path / "llmperf"))


@pytest.fixture(autouse=True)
def prompt_thread_switches():
    """The servers, the proxy and the test share one interpreter here (in a cluster they are
    apart); a shorter GIL switch interval keeps one from holding up another's clock by the default
    5 ms, which is 3% of a request of these tests."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(previous)


def run_config(base: FakeVllm, sd: FakeVllm, concurrency: int, requests: int, test_cases: dict) -> dict:
    variant = {"target": "Qwen/Qwen3-32B", "servedModelName": "Qwen/Qwen3-32B", "targetParamsBillion": 32.8,
               "costPerHourUsd": 22.35, "podSelector": {}}
    return {
        "stack": "truth", "clusterName": "sd-truth", "seed": None, "llmperfCommit": "standin",
        "shape": {"inputTokens": 40, "outputTokens": 96, "concurrency": concurrency, "requestsPerTestCase": requests,
                  "requestTimeoutSeconds": 30, "samplingParams": {"temperature": 0}},
        "testCases": test_cases,
        "variants": [
            {**variant, "name": "base", "role": "baseline", "baseline": None, "draft": None, "numSpeculativeTokens": None,
             "draftParamsBillion": None, "endpoint": base.url},
            {**variant, "name": "sd", "role": "sd", "baseline": "base", "draft": "Qwen/Qwen3-1.7B", "numSpeculativeTokens": 4,
             "draftParamsBillion": 1.7, "endpoint": sd.url},
        ],
    }


def hooks(s3=None, published=None) -> driver.Hooks:
    result = driver.Hooks(healthy=lambda url: True, python=sys.executable)
    if published is not None:
        result.publish = published.extend
    return result


def sent_during(server: FakeVllm, case: dict) -> list:
    """What the server sent for one case (cases run one after another)."""
    return [s for s in server.sent if case["startedAt"] <= s.received_wall <= case["finishedAt"]]


def close(measured: float, truth: float) -> bool:
    return abs(measured - truth) <= WITHIN * abs(truth)


@mock_aws
def test_report_matches_what_the_servers_sent(tmp_path, llmperf, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    results, published = tmp_path / "results", []
    speculation = Speculation(num_speculative_tokens=4, accepted=(4, 2, 3, 0, 4, 1))
    with FakeVllm(step_s=0.008) as base, \
            FakeVllm(step_s=0.016, speculation=speculation, fail=frozenset({3}), diverge=frozenset({2})) as sd:
        config = run_config(base, sd, concurrency=2, requests=4, test_cases={"structured": "Repeat the next line exactly 50 times"})
        run_hooks = hooks(published=published)
        run_hooks.upload = driver.S3Mirror(s3, "models", "results/", results)
        run = driver.run_benchmark(config, results, "run-1", llmperf, run_hooks)
        report = analysis.compare_run(results, "run-1")

    assert run["status"] == "complete" and run["reason"] is None and len(run["cases"]) == 2
    for test_case in config["testCases"]:
        figures = report["cases"][test_case]
        for name, server in (("base", base), ("sd", sd)):
            case = load_case(results, "run-1", name, test_case)
            sent = sent_during(server, case.case)
            ok = [s for s in sent if s.status == 200]
            f = figures[name]
            # Every request sent is a result or a counted failure, extras included.
            assert (f["completed"], f["failed"], f["sent"]) == (len(ok), len(sent) - len(ok), len(sent))
            assert f["completed"] >= 4 and f["token_source"] == "server usage"
            assert f["output_tokens_total"] == sum(s.tokens for s in ok) and f["output_tokens_mean"] == 96
            # TPOT and tokens/s against the server's own clock.
            assert close(f["tpot_s"]["p50"], percentile([s.time_per_output_token_s for s in ok], 50))
            assert close(f["tokens_per_s"]["p50"], percentile([s.tokens / (s.finished - s.received) for s in ok], 50))
            steps = [size for s in ok for size in s.steps[1:]]
            assert close(f["acceptance"]["tokens_per_step_implied"], sum(steps) / len(steps))
            # LLMPerf's own figure counts the stand-in's "Llama-2" tokens + 1, not the server's.
            assert not close(f["llmperf"]["output_tokens_p50"], 96)
            if name == "sd":
                sd_steps = steps
                accepted = sum(size - 1 for size in steps)
                counters = f["acceptance"]["counters"]
                assert counters["acceptance_rate"] == pytest.approx(accepted / (4 * len(steps)))
                assert counters["mean_acceptance_length"] == pytest.approx(1 + accepted / len(steps))
                assert counters["per_position"] == pytest.approx(
                    [sum(size - 1 > p for size in steps) / len(steps) for p in range(4)])
                assert f["acceptance"]["acceptance_rate_implied"] == pytest.approx(
                    implied_acceptance(sum(steps) / len(steps), 4), rel=WITHIN)
            else:
                assert f["acceptance"]["tokens_per_step_implied"] == 1.0
                assert f["acceptance"]["counters"]["note"] == "not exposed by this server"
        truth_base = percentile([s.time_per_output_token_s for s in sent_during(base, load_case(results, "run-1", "base", test_case).case) if s.status == 200], 50)
        truth_sd = percentile([s.time_per_output_token_s for s in sent_during(sd, load_case(results, "run-1", "sd", test_case).case) if s.status == 200], 50)
        vs = figures["sd"]["vs_baseline"]
        assert close(vs["speedup_tpot"], truth_base / truth_sd) and vs["speedup_tpot"] > 1.3
        assert vs["leviathan"]["acceptance_source"] == "/metrics mean acceptance length"
        assert close(vs["leviathan"]["tokens_per_step"], sum(sd_steps) / len(sd_steps))
        assert vs["leviathan"]["cost_ratio_source"].startswith("assumed")

    structured = report["cases"]["structured"]
    # The failed request (arrival 3 on the SD server) killed an LLMPerf thread: LLMPerf's files
    # show no error at all; the proxy counted it.
    assert structured["sd"]["failed"] == 1 and structured["sd"]["llmperf"]["completed"] == 4
    assert structured["sd"]["llmperf"]["thread_deaths"] == 1
    assert load_case(results, "run-1", "sd", "structured").llmperf_summary["results_number_errors"] == 0
    # Greedy decoding: SD answers as the baseline does, except the one response made to diverge.
    lossless = structured["sd"]["vs_baseline"]["lossless"]
    assert lossless["checked"] and lossless["compared"] == structured["sd"]["completed"]
    assert lossless["matching"] == lossless["compared"] - 1 and len(lossless["mismatched_requests"]) == 1

    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="models")["Contents"]}
    for name in ("requests.jsonl", "case.json", "specdecode.json", "llmperf.stderr.txt"):
        assert f"results/run-1/sd/structured/{name}" in keys
    assert json.loads(s3.get_object(Bucket="models", Key="results/run-1/run.json")["Body"].read())["status"] == "complete"
    outputs = [d for d in published if d["MetricName"] == "OutputTokens" and d["Dimensions"][0]["Value"] == "sd"]
    assert sum(sum(d["Counts"]) for d in outputs) == structured["sd"]["completed"]


def test_lost_threads_and_a_crash_are_counted_and_make_the_run_incomplete(tmp_path, llmperf):
    results = tmp_path / "results"
    with FakeVllm(step_s=0.001, fail=frozenset({2})) as base, \
            FakeVllm(step_s=0.001, speculation=Speculation(4, (2,)), fail=frozenset(range(1, 100))) as sd:
        config = run_config(base, sd, concurrency=1, requests=3, test_cases={"sonnets": None})
        run = driver.run_benchmark(config, results, "run-2", llmperf, hooks())
        report = analysis.compare_run(results, "run-2")
    figures = report["cases"]["sonnets"]
    # Concurrency 1: the failed second request killed LLMPerf's only thread; it exited 0 with 1 result.
    assert (figures["base"]["completed"], figures["base"]["failed"], figures["base"]["short"]) == (1, 1, True)
    assert figures["base"]["llmperf"]["exit_code"] == 0 and figures["base"]["llmperf"]["completed"] == 1
    assert figures["base"]["llmperf"]["error"] == "ZeroDivisionError: division by zero"
    # Every request failed: LLMPerf crashed with exit 1 and wrote nothing; the proxy counted it.
    assert (figures["sd"]["completed"], figures["sd"]["failed"], figures["sd"]["asked"]) == (0, 1, 3)
    assert figures["sd"]["llmperf"]["exit_code"] == 1 and figures["sd"]["llmperf"]["error"] == "KeyError: 'error_code'"
    assert load_case(results, "run-2", "sd", "sonnets").llmperf_summary is None
    assert run["status"] == "incomplete" and "sonnets/base (1 of 3)" in run["reason"] and "sonnets/sd (0 of 3)" in run["reason"]
    assert [c["short"] for c in run["cases"]] == [True, True]
