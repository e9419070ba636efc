"""benchmark.driver orchestration: interleaving, LLMPerf's interface, per-case uploads (moto S3),
run.json from start to end, failures and SIGTERM, background telemetry."""
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest
import requests
from moto import mock_aws

from benchmark import driver

from .fake_vllm import FakeVllm

STANDIN = Path(__file__).parent / "standin_llmperf"
SHAPE = {"inputTokens": 64, "outputTokens": 24, "concurrency": 4, "requestsPerTestCase": 20,
         "requestTimeoutSeconds": 600, "samplingParams": {"temperature": 0}}


def config(base_url="http://vllm-base:8000/v1", sd_url="http://vllm-sd:8000/v1", shape=SHAPE) -> dict:
    return {
        "stack": "qwen3-32b-qwen3-1.7b", "clusterName": "sd-qwen3-32b-qwen3-1-7b", "seed": "003",
        "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f", "shape": shape,
        "testCases": {"counting": "counting numbers from 1 ", "sonnets": None},
        "variants": [
            {"name": "base", "role": "baseline", "baseline": None, "numSpeculativeTokens": None, "servedModelName": "Qwen/Qwen3-32B",
             "endpoint": base_url, "podSelector": {"sd-trn2/variant": "base"}},
            {"name": "sd", "role": "sd", "baseline": "base", "numSpeculativeTokens": 7, "servedModelName": "Qwen/Qwen3-32B",
             "endpoint": sd_url, "podSelector": {"sd-trn2/variant": "sd"}},
        ],
    }


@pytest.fixture
def llmperf(tmp_path):
    root = tmp_path / "llmperf"
    (root / "src" / "llmperf").mkdir(parents=True)
    (root / "src" / "llmperf" / "sonnet.txt").write_text("Shall I compare thee\n")
    return root


def quiet_hooks(**changes) -> driver.Hooks:
    """No network: endpoints healthy, /metrics absent."""
    def no_metrics(endpoint):
        raise OSError("connection refused")

    return driver.Hooks(**{"healthy": lambda url: True, "scrape": no_metrics, **changes})


def one_request_runner(calls):
    """Stands in for LLMPerf: one request through the proxy, its output files, its stderr."""
    def runner(argv, env, cwd, out_dir, deadline_s):
        calls.append((argv, env, (cwd / driver.PROMPT_FILE).read_text(), deadline_s))
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True, "max_tokens": 3}
        requests.post(env["OPENAI_API_BASE"] + "/chat/completions", json=body, stream=True, timeout=10).content
        (out_dir / driver.STDERR_FILE).write_text("100%|##########| 1/1\n")
        return 0
    return runner


def test_runs_every_case_for_every_variant_interleaved_with_llmperfs_own_flags(tmp_path, llmperf):
    calls, uploads = [], []
    with FakeVllm(step_s=0.001) as server:
        hooks = quiet_hooks(runner=one_request_runner(calls), python="python3",
                            upload=lambda path: uploads.append((path.relative_to(tmp_path / "results").as_posix(),
                                                                json.loads(path.read_text())["status"] if path.name == "run.json" else None)))
        run = driver.run_benchmark(config(server.url, server.url), tmp_path / "results", "run-1", llmperf, hooks)
    out_dirs = [argv[argv.index("--results-dir") + 1].split("/")[-2:] for argv, _, _, _ in calls]
    assert out_dirs == [["base", "counting"], ["sd", "counting"], ["base", "sonnets"], ["sd", "sonnets"]]
    argv, env, prompt, deadline = calls[0]
    assert deadline == 600 * 6 + 600  # LLMPerf's --timeout, one request more, Ray's start
    for flag, value in (("--model", "Qwen/Qwen3-32B"), ("--mean-input-tokens", "64"), ("--mean-output-tokens", "24"),
                        ("--num-concurrent-requests", "4"), ("--max-num-completed-requests", "20"), ("--llm-api", "openai"),
                        ("--stddev-input-tokens", "0"), ("--stddev-output-tokens", "0"), ("--timeout", str(600 * 5))):
        assert argv[argv.index(flag) + 1] == value, flag
    assert argv[:2] == ["python3", "token_benchmark_ray.py"]
    assert json.loads(argv[argv.index("--additional-sampling-params") + 1]) == {"temperature": 0}
    # LLMPerf talks to the measuring proxy on 127.0.0.1, never to the server directly.
    assert env["OPENAI_API_BASE"].startswith("http://127.0.0.1:") and env["OPENAI_API_BASE"].endswith("/v1")
    assert env["PYTHONPATH"] == str(llmperf / "src") and env["OPENAI_API_KEY"]
    assert prompt.startswith("counting numbers from 1 \ncounting") and calls[2][2] == "Shall I compare thee\n"
    assert (llmperf / driver.PROMPT_FILE).read_text() == "Shall I compare thee\n"
    # run.json is uploaded first, while running, then after every case, then finally.
    assert uploads[0] == ("run-1/run.json", "running") and uploads[-1][0] == "run-1/run.json"
    assert [u for u in uploads if u[0] == "run-1/run.json"][1:-1] == [("run-1/run.json", "running")] * 4
    assert ("run-1/sd/sonnets/requests.jsonl", None) in uploads and ("run-1/base/counting/case.json", None) in uploads
    # One request of the twenty asked per case: every case is short, so the run is incomplete.
    assert run["status"] == "incomplete" and uploads[-1] == ("run-1/run.json", "incomplete")
    assert [(c["testCase"], c["variant"], c["completed"], c["asked"], c["short"]) for c in run["cases"]] == [
        ("counting", "base", 1, 20, True), ("counting", "sd", 1, 20, True), ("sonnets", "base", 1, 20, True), ("sonnets", "sd", 1, 20, True)]
    case = json.loads((tmp_path / "results" / "run-1" / "sd" / "counting" / "case.json").read_text())
    assert case["placement"] == {"error": "not running in a Kubernetes cluster"} and case["startedAt"] <= case["finishedAt"]
    assert json.loads((tmp_path / "results" / "run-1" / "sd" / "counting" / "specdecode.json").read_text()) == {
        "error": "/metrics unreadable: connection refused"}


@mock_aws
def test_a_killed_pod_leaves_every_finished_case_in_s3(tmp_path, llmperf, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    results, calls, seen = tmp_path / "results", [], {}
    inner = one_request_runner(calls)

    def runner(argv, env, cwd, out_dir, deadline_s):
        if len(calls) == 2:  # the third case: the pod is stopped in the middle of it
            seen.update({o["Key"]: o for o in s3.list_objects_v2(Bucket="models")["Contents"]})
            seen["run.json"] = json.loads(s3.get_object(Bucket="models", Key="results/run-1/run.json")["Body"].read())
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return inner(argv, env, cwd, out_dir, deadline_s)

    with FakeVllm(step_s=0.001) as server:
        hooks = quiet_hooks(runner=runner, upload=driver.S3Mirror(s3, "models", "results/", results))
        run = driver.run_benchmark(config(server.url, server.url), results, "run-1", llmperf, hooks)
    for case in ("base/counting", "sd/counting"):
        for name in ("requests.jsonl", "case.json", "specdecode.json", "llmperf.stderr.txt"):
            assert f"results/run-1/{case}/{name}" in seen, (case, name)
    assert seen["run.json"]["status"] == "running" and len(seen["run.json"]["cases"]) == 2
    final = json.loads(s3.get_object(Bucket="models", Key="results/run-1/run.json")["Body"].read())
    assert final == run and final["status"] == "failed" and final["reason"].startswith("Terminated: received signal 15")
    assert final["finishedAt"] and len(final["cases"]) == 2


def test_a_failed_llmperf_run_is_recorded_and_the_rest_goes_on(tmp_path, llmperf):
    seen = []

    def runner(argv, env, cwd, out_dir, deadline_s):
        seen.append(argv[argv.index("--results-dir") + 1])
        if "/sd/" in seen[-1]:
            (out_dir / driver.STDERR_FILE).write_text("Traceback (most recent call last):\n  File ...\nKeyError: 'error_code'\n")
            return 1
        return 0

    run = driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf, quiet_hooks(runner=runner))
    assert len(seen) == 4 and run["status"] == "incomplete"
    case = json.loads((tmp_path / "results" / "run-1" / "sd" / "counting" / "case.json").read_text())
    assert (case["exitCode"], case["llmperfError"], case["asked"]) == (1, "KeyError: 'error_code'", 20)
    assert run["cases"][1]["llmperfError"] == "KeyError: 'error_code'"


def test_a_hung_llmperf_is_stopped_with_everything_it_started(tmp_path):
    """LLMPerf loops forever when asked for prompts shorter than its template; Ray's processes
    are its children. Both must go when the deadline passes."""
    child = tmp_path / "child.pid"
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    code = driver.subprocess_runner([sys.executable, "-c", script], {}, tmp_path, tmp_path, deadline_s=1.0)
    assert code == driver.TIMED_OUT
    assert (tmp_path / driver.STDERR_FILE).read_text().strip() == "TimeoutError: LLMPerf did not finish within 1 s; the driver stopped it"
    assert driver.last_error_line((tmp_path / driver.STDERR_FILE).read_text()).startswith("TimeoutError")
    grandchild = int(child.read_text())
    for _ in range(100):  # SIGKILL is delivered asynchronously: give it up to a second
        if not running(grandchild):
            break
        time.sleep(0.01)
    assert not running(grandchild)


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait for a PID 1 that does not reap it)."""
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_llmperf_stderr_is_read_for_its_last_error_and_dead_threads():
    stderr = ("Exception in thread Thread-3 (launch_request):\nTraceback (most recent call last):\n"
              "ZeroDivisionError: division by zero\n 25%|##5       | 1/4\nException in thread Thread-4 (launch_request):\n"
              "ZeroDivisionError: division by zero\nWarning Or Error: 500 Server Error\n")
    assert driver.thread_deaths(stderr) == 2
    assert driver.last_error_line(stderr) == "ZeroDivisionError: division by zero"
    assert driver.last_error_line("100%|####| 4/4\n") is None


def test_endpoints_that_never_answer_fail_the_run_with_the_reason(tmp_path, llmperf):
    hooks = quiet_hooks(healthy=lambda url: False, wait_timeout_s=0, runner=lambda *a: pytest.fail("must not run"))
    run = driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf, hooks)
    assert run["status"] == "failed" and run["reason"] == "TimeoutError: endpoints not healthy after 0s: base, sd"
    assert json.loads((tmp_path / "results" / "run-1" / "run.json").read_text())["status"] == "failed"


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
        driver.wait_for_endpoints(config()["variants"], healthy, timeout_s=600, poll_s=60, sleep=sleep, clock=lambda: clock[0])
    assert polls["http://vllm-base:8000/v1"] == 3


def test_telemetry_is_read_in_the_background_then_saved_published_and_uploaded(tmp_path, llmperf):
    windows, published, uploads = [], [], []

    def telemetry(placement, start, end):
        windows.append((placement, start, end))
        if placement["pod"] == "vllm-sd-0":
            raise RuntimeError("CloudWatch throttled")
        return {"status": "ok", "utilizationPercent": [[end - 60, 55.0]], "memoryUsedBytes": [[end - 60, 7e9]]}

    hooks = quiet_hooks(runner=lambda *a: 0, telemetry=telemetry, publish=published.extend,
                        locate=lambda variant: {"pod": f"vllm-{variant['name']}-0", "node": "n1", "neuronDevices": ["0"]},
                        upload=lambda path: uploads.append(path.name))
    driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf, hooks)
    assert len(windows) == 4 and all(start <= end for _, start, end in windows)
    base = json.loads((tmp_path / "results" / "run-1" / "base" / "counting" / "telemetry.json").read_text())
    sd = json.loads((tmp_path / "results" / "run-1" / "sd" / "counting" / "telemetry.json").read_text())
    assert base["status"] == "ok" and sd == {"status": "unavailable", "reason": "RuntimeError: CloudWatch throttled"}
    assert uploads.count("telemetry.json") == 4
    assert [d["Values"] for d in published if d["MetricName"] == "NeuronCoreUtilization"] == [[55.0]] * 2


def test_an_upload_failure_fails_the_run(tmp_path, llmperf):
    def upload(path):
        if path.name == "case.json":
            raise OSError("AccessDenied")

    run = driver.run_benchmark(config(shape={**SHAPE, "requestsPerTestCase": 0}), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(runner=lambda *a: 0, upload=upload))
    assert run["status"] == "failed" and run["reason"].startswith("4 upload(s) failed: ") and "AccessDenied" in run["reason"]


def test_sigterm_stops_llmperf_and_marks_the_run_failed(tmp_path):
    """The real entry point, the real signal: the Job's deadline arrives while LLMPerf runs."""
    llmperf = Path(shutil.copytree(STANDIN, tmp_path / "llmperf"))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with FakeVllm(step_s=0.05) as server:
            path = tmp_path / "run-config.json"
            path.write_text(json.dumps(config(server.url, server.url, {**SHAPE, "concurrency": 1, "requestsPerTestCase": 50})))
            timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
            timer.start()
            code = driver.main(["--config", str(path), "--results-dir", str(tmp_path / "results"), "--llmperf-dir", str(llmperf),
                                "--run-id", "run-1", "--wait-timeout-seconds", "5"])
            timer.join()
    finally:
        signal.signal(signal.SIGTERM, previous)
    run = json.loads((tmp_path / "results" / "run-1" / "run.json").read_text())
    assert code == 1 and run["status"] == "failed" and run["reason"].startswith("Terminated: received signal 15")
    assert run["cases"] == [] and (llmperf / driver.PROMPT_FILE).read_text() == (STANDIN / driver.PROMPT_FILE).read_text()
    assert sys.executable  # the stand-in ran under this interpreter and was stopped with the driver
