"""benchmark.driver orchestration, with LLMPerf replaced by a recorder that writes its files."""
import json

import boto3
import pytest
from moto import mock_aws

from benchmark import driver

from .llmperf_files import VARIANTS, request, write_case

CONFIG = {
    "stack": "qwen3-32b-qwen3-1.7b",
    "shape": {"inputTokens": 64, "outputTokens": 600, "concurrency": 4, "requestsPerTestCase": 20,
              "requestTimeoutSeconds": 600, "temperature": 0},
    "testCases": {"counting": "counting numbers from 1 ", "sonnets": None},
    "variants": [{**v, "servedModelName": "Qwen/Qwen3-32B", "endpoint": f"http://vllm-{v['name']}:8000/v1"} for v in VARIANTS],
}


@pytest.fixture
def llmperf(tmp_path):
    root = tmp_path / "llmperf"
    (root / "src" / "llmperf").mkdir(parents=True)
    (root / "src" / "llmperf" / "sonnet.txt").write_text("Shall I compare thee\n")
    return root


def test_runs_every_case_for_every_variant_interleaved(tmp_path, llmperf):
    calls = []

    def runner(argv, env, cwd):
        prompt = (cwd / driver.PROMPT_FILE).read_text()
        out = argv[argv.index("--results-dir") + 1]
        calls.append((out, env["OPENAI_API_BASE"], prompt.splitlines()[0], argv))
        variant, case = out.split("/")[-2:]
        write_case(tmp_path / "results", "run-1", variant, case, [request(ttft=0.05, e2e=3.0, output_tokens=600)])
        return 0

    run_dir = driver.run_benchmark(CONFIG, tmp_path / "results", "run-1", llmperf, runner=runner, python="python3")
    assert [c[0].split("/")[-2:] for c in calls] == [["base", "counting"], ["sd", "counting"], ["base", "sonnets"], ["sd", "sonnets"]]
    assert calls[0][1] == "http://vllm-base:8000/v1" and calls[1][1] == "http://vllm-sd:8000/v1"
    assert calls[0][2] == "counting numbers from 1 " and calls[2][2] == "Shall I compare thee"
    argv = calls[0][3]
    for flag, value in (("--model", "Qwen/Qwen3-32B"), ("--mean-input-tokens", "64"), ("--mean-output-tokens", "600"),
                        ("--num-concurrent-requests", "4"), ("--max-num-completed-requests", "20"), ("--llm-api", "openai"),
                        ("--stddev-input-tokens", "0"), ("--timeout", str(600 * 5))):
        assert argv[argv.index(flag) + 1] == value, flag
    assert json.loads(argv[argv.index("--additional-sampling-params") + 1]) == {"temperature": 0}
    assert (llmperf / driver.PROMPT_FILE).read_text() == "Shall I compare thee\n"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["stack"] == CONFIG["stack"] and run["testCases"] == CONFIG["testCases"] and run["shape"] == CONFIG["shape"]
    assert [(v["name"], v["role"], v["baseline"]) for v in run["variants"]] == [("base", "baseline", None), ("sd", "sd", "base")]
    assert run["startedAt"] <= run["finishedAt"]


def test_a_failed_llmperf_run_is_recorded_and_the_rest_goes_on(tmp_path, llmperf):
    seen = []

    def runner(argv, env, cwd):
        seen.append(env["OPENAI_API_BASE"])
        return 1 if "vllm-sd" in env["OPENAI_API_BASE"] else 0

    driver.run_benchmark(CONFIG, tmp_path / "results", "run-1", llmperf, runner=runner)
    assert len(seen) == 4
    assert (tmp_path / "results" / "run-1" / "sd" / "counting" / "error.txt").exists()


def test_waits_for_every_endpoint_then_times_out_naming_the_slow_one():
    healthy_after = {"http://vllm-base:8000/v1": 2, "http://vllm-sd:8000/v1": 10**9}
    polls = {k: 0 for k in healthy_after}
    clock = [0.0]

    def healthy(url):
        polls[url] += 1
        return polls[url] > healthy_after[url]

    def sleep(seconds):
        clock[0] += seconds

    with pytest.raises(TimeoutError, match="sd"):
        driver.wait_for_endpoints(CONFIG["variants"], healthy, timeout_s=600, poll_s=60, sleep=sleep, clock=lambda: clock[0])
    assert polls["http://vllm-base:8000/v1"] == 3


@mock_aws
def test_upload_keeps_each_run_under_its_id(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    run_dir = tmp_path / "20261120T090000Z-llmperf-abc"
    write_case(tmp_path, run_dir.name, "base", "counting", [request(ttft=0.05, e2e=3.0, output_tokens=600)])
    (run_dir / "run.json").write_text("{}")
    assert driver.upload(run_dir, "models", "results/", client=s3) == 3
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="models")["Contents"])
    assert keys[0] == "results/20261120T090000Z-llmperf-abc/base/counting/Qwen-Qwen3-32B_128_512_individual_responses.json"
    assert "results/20261120T090000Z-llmperf-abc/run.json" in keys
