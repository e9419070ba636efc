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
from benchmark.loadgen import llmperf as llmperf_module

from .fake_vllm import FakeVllm

STANDIN = Path(__file__).resolve().parents[1] / "rehearse" / "standin_llmperf"
LEVEL = driver.Level("concurrency", 4)
SHAPE = {"inputTokens": 64, "outputTokens": 24, "concurrency": 4, "requestsPerTestCase": 20,
         "requestTimeoutSeconds": 600, "samplingParams": {"temperature": 0}}


def config(base_url="http://vllm-base:8000/v1", sd_url="http://vllm-sd:8000/v1", shape=SHAPE) -> dict:
    return {
        "stack": "qwen3-32b-qwen3-1.7b", "clusterName": "sd-qwen3-32b-qwen3-1-7b", "seed": "003",
        "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f", "shape": shape,
        "testCases": {"counting": "counting numbers from 1 ", "sonnets": None},
        # The EKS sample's dimension values, as that stack publishes (benchmark/pod.py metric_dimensions).
        "dimensions": {"Variant": {"base": "Base", "sd": "SD"},
                       "TestCase": {"counting": "counting_numbers_from_1_", "sonnets": "__SHAKESPEARE__"}},
        "variants": [
            {"name": "base", "role": "baseline", "baseline": None, "numSpeculativeTokens": None, "servedModelName": "Qwen/Qwen3-32B",
             "endpoint": base_url, "servers": [{"part": "", "podSelector": {"sd-trn2/variant": "base"}, "commitKey": None}]},
            {"name": "sd", "role": "sd", "baseline": "base", "numSpeculativeTokens": 7, "servedModelName": "Qwen/Qwen3-32B",
             "endpoint": sd_url, "servers": [{"part": "", "podSelector": {"sd-trn2/variant": "sd"}, "commitKey": None}]},
        ],
    }


SAMPLE_DIMENSIONS = [{"Name": "Variant", "Value": "SD"}, {"Name": "TestCase", "Value": "counting_numbers_from_1_"}]


def quiet_hooks(**changes) -> driver.Hooks:
    """No network: endpoints healthy, /metrics absent."""
    def no_metrics(endpoint):
        raise OSError("connection refused")

    return driver.Hooks(**{"healthy": lambda url: True, "scrape": no_metrics, "sleep": lambda s: None, **changes})


def one_request_runner(calls):
    """Stands in for LLMPerf: one request through the proxy, its output files, its stderr."""
    def runner(invocation, stdout_file, stderr_file):
        calls.append((invocation.argv, invocation.env, (invocation.cwd / llmperf_module.PROMPT_FILE).read_text(),
                      invocation.deadline_s))
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True, "max_tokens": 3}
        _ = requests.post(invocation.env["OPENAI_API_BASE"] + "/chat/completions", json=body, stream=True, timeout=10).content
        stderr_file.write_text("100%|##########| 1/1\n")
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
    assert (llmperf / llmperf_module.PROMPT_FILE).read_text() == "Shall I compare thee\n"
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

    def runner(invocation, stdout_file, stderr_file):
        if len(calls) == 2:  # the third case: the pod is stopped in the middle of it
            seen.update({o["Key"]: o for o in s3.list_objects_v2(Bucket="models")["Contents"]})
            seen["run.json"] = json.loads(s3.get_object(Bucket="models", Key="results/run-1/run.json")["Body"].read())
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return inner(invocation, stdout_file, stderr_file)

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

    def runner(invocation, stdout_file, stderr_file):
        seen.append(invocation.argv[invocation.argv.index("--results-dir") + 1])
        if "/sd/" in seen[-1]:
            stderr_file.write_text("Traceback (most recent call last):\n  File ...\nKeyError: 'error_code'\n")
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
    stdout_file, stderr_file = tmp_path / "out.txt", tmp_path / "err.txt"
    code = driver.subprocess_runner(driver.Invocation([sys.executable, "-c", script], {}, tmp_path, 1.0), stdout_file, stderr_file)
    assert code == driver.TIMED_OUT
    assert stderr_file.read_text().strip() == "TimeoutError: the load generator did not finish within 1 s; the driver stopped it"
    assert llmperf_module.last_error_line(stderr_file.read_text()).startswith("TimeoutError")
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
    assert llmperf_module.thread_deaths(stderr) == 2
    assert llmperf_module.last_error_line(stderr) == "ZeroDivisionError: division by zero"
    assert llmperf_module.last_error_line("100%|####| 4/4\n") is None


def test_endpoints_that_never_answer_fail_the_run_with_the_reason(tmp_path, llmperf):
    hooks = quiet_hooks(healthy=lambda url: False, wait_timeout_s=0, runner=lambda *a: pytest.fail("must not run"))
    run = driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf, hooks)
    assert run["status"] == "failed" and run["reason"] == "TimeoutError: variants not ready after 0s: base (not healthy), sd (not healthy)"
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
        driver.wait_for_variants(config()["variants"], lambda v: driver.not_ready(v, healthy, lambda key: True), timeout_s=600,
                                 poll_s=60, sleep=sleep, clock=lambda: clock[0])
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
            code = driver.main(["--config", str(path), "--results-dir", str(tmp_path / "results"), "--generator-dir", str(llmperf),
                                "--run-id", "run-1", "--wait-timeout-seconds", "5"])
            timer.join()
    finally:
        signal.signal(signal.SIGTERM, previous)
    run = json.loads((tmp_path / "results" / "run-1" / "run.json").read_text())
    assert code == 1 and run["status"] == "failed" and run["reason"].startswith("Terminated: received signal 15")
    assert run["cases"] == [] and (llmperf / llmperf_module.PROMPT_FILE).read_text() == (STANDIN / llmperf_module.PROMPT_FILE).read_text()
    assert sys.executable  # the stand-in ran under this interpreter and was stopped with the driver


# --- Unit level: each piece of the driver called directly, its output asserted exactly. ---

class FlushedStdout:
    """Stands in for sys.stdout: what each flush pushed out, so a line that is printed but left
    in the buffer (a pod's log shows it late, or never if the pod is killed) is seen as such."""

    def __init__(self):
        self.pending, self.flushed = "", []

    def write(self, text):
        self.pending += text
        return len(text)

    def flush(self):
        self.flushed.append(self.pending)
        self.pending = ""


def capture_stdout(monkeypatch) -> FlushedStdout:
    """Call in the test itself: pytest's own capture replaces sys.stdout after fixtures ran."""
    out = FlushedStdout()
    monkeypatch.setattr(sys, "stdout", out)
    return out


class FrozenDatetime(driver.datetime):
    """2026-11-22 08:50:07 UTC; a naive local clock (the pod's TZ) three hours behind."""

    @classmethod
    def now(cls, tz=None):
        if tz is None:
            return driver.datetime(2026, 11, 22, 5, 50, 7)
        return driver.datetime(2026, 11, 22, 8, 50, 7, tzinfo=driver.timezone.utc).astimezone(tz)


def test_run_ids_and_timestamps_are_utc(monkeypatch):
    monkeypatch.setattr(driver, "datetime", FrozenDatetime)
    assert driver.default_run_id("sd-bench-7q2x") == "20261122T085007Z-sd-bench-7q2x"
    assert driver.default_run_id(None) == "20261122T085007Z"
    assert driver.default_run_id("") == "20261122T085007Z"
    assert driver.utc_now() == "2026-11-22T08:50:07Z"


@pytest.fixture
def health_server():
    """/health and /routeX/health answer 200, /sick/health 503, /empty/health 204; every path asked is kept."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    paths = []
    statuses = {"/health": 200, "/sick/health": 503, "/empty/health": 204, "/routeX/health": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            self.send_response(statuses.get(self.path, 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


def test_health_is_asked_of_the_server_root_with_a_bounded_wait(health_server, monkeypatch):
    root, paths = health_server
    timeouts = []
    real_urlopen = driver.urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        timeouts.append(kwargs.get("timeout", args[1] if len(args) > 1 else None))
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(driver.urllib.request, "urlopen", urlopen)
    assert driver.http_healthy(root + "/v1") is True
    assert driver.http_healthy(root + "/v1/") is True
    assert driver.http_healthy(root) is True
    assert driver.http_healthy(root + "/sick/v1") is False  # 503 while the model compiles
    assert driver.http_healthy(root + "/empty/v1") is False  # only 200 is healthy
    assert driver.http_healthy(root + "/routeX") is True  # behind a path prefix, without /v1: only "/" is stripped
    assert paths == ["/health", "/health", "/health", "/sick/health", "/empty/health", "/routeX/health"]
    assert timeouts == [5] * 6


def test_an_endpoint_nobody_listens_on_is_not_healthy():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the connection is refused
        assert driver.http_healthy(f"http://127.0.0.1:{port}/v1") is False


class FakeAws:
    """boto3.client as the pod calls it: each client keeps its service name and its calls."""

    def __init__(self):
        self.services, self.calls = [], []

    def client(self, service, **kwargs):
        self.services.append(service)
        self.configs = {**getattr(self, "configs", {}), service: kwargs.get("config")}
        aws = self

        class Client:
            def upload_file(self, *args):
                aws.calls.append((service, "upload_file", args))

            def put_metric_data(self, **kwargs):
                aws.calls.append((service, "put_metric_data", kwargs))
                return {}

        return Client()


def production_args(tmp_path, **changes):
    return driver.argparse.Namespace(**{"bucket": "models", "prefix": "results/", "results_dir": tmp_path / "results",
                                        "namespace": "SdTrn2/Benchmark", "wait_timeout_seconds": 7200.0, **changes})


def test_production_wiring_uploads_to_s3_publishes_to_cloudwatch_and_locates_pods(tmp_path, monkeypatch):
    from benchmark import telemetry

    aws = FakeAws()
    monkeypatch.setattr(boto3, "client", aws.client)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "namespace").write_text("inference\n")
    monkeypatch.setattr(telemetry, "SERVICE_ACCOUNT_DIR", account)
    api = object()
    monkeypatch.setattr(telemetry.KubernetesApi, "in_cluster", classmethod(lambda cls: api))
    located, collected = [], []
    monkeypatch.setattr(telemetry, "locate", lambda *args: located.append(args) or {"pod": "vllm-sd-0"})
    monkeypatch.setattr(telemetry, "collect", lambda *args: collected.append(args) or {"status": "ok"})

    hooks = driver.production_hooks(config(), production_args(tmp_path))
    assert hooks.wait_timeout_s == 7200.0
    assert hooks.locate(config()["variants"][1]) == {"pod": "vllm-sd-0"}
    assert located == [(api, "inference", {"sd-trn2/variant": "sd"})]
    hooks.upload(tmp_path / "results" / "run-1" / "sd" / "counting" / "case.json")
    datum = {"MetricName": "TTFT", "Values": [0.25], "Counts": [1.0]}
    hooks.publish([datum])
    assert hooks.telemetry({"pod": "vllm-sd-0"}, 100.0, 200.0) == {"status": "ok"}
    assert sorted(aws.services) == ["cloudwatch", "s3"]
    # S3 calls retry throttling and dropped connections with backoff (botocore's standard mode).
    assert aws.configs["s3"].retries == {"max_attempts": 10, "mode": "standard"}
    # Only a study reads its results back (to resume, or not to publish a case twice).
    assert hooks.uploaded(tmp_path / "results" / "x") is False
    cloudwatch = [c for c in aws.calls if c[0] == "cloudwatch"]
    assert aws.calls == [
        ("s3", "upload_file", (str(tmp_path / "results" / "run-1" / "sd" / "counting" / "case.json"), "models",
                               "results/run-1/sd/counting/case.json")),
        ("cloudwatch", "put_metric_data", {"Namespace": "SdTrn2/Benchmark", "MetricData": [datum]})]
    ((client, cluster, placement, start, end),) = collected
    assert (cluster, placement, start, end) == ("sd-qwen3-32b-qwen3-1-7b", {"pod": "vllm-sd-0"}, 100.0, 200.0)
    client.put_metric_data(Namespace="probe")  # the same CloudWatch client publishes and reads telemetry
    assert aws.calls[-1] == ("cloudwatch", "put_metric_data", {"Namespace": "probe"}) and len(cloudwatch) == 1


def test_outside_a_cluster_without_bucket_or_namespace_nothing_leaves_the_pod(tmp_path, monkeypatch):
    from benchmark import telemetry

    aws = FakeAws()
    monkeypatch.setattr(boto3, "client", aws.client)
    monkeypatch.setattr(telemetry, "SERVICE_ACCOUNT_DIR", tmp_path / "no-serviceaccount")
    hooks = driver.production_hooks(config(), production_args(tmp_path, bucket=None, namespace=None))
    assert hooks.locate(config()["variants"][0]) == {"error": "not running in a Kubernetes cluster"}
    assert hooks.upload(tmp_path / "results" / "run.json") is None and hooks.publish([{"MetricName": "TTFT"}]) is None
    assert hooks.telemetry is None and aws.services == [] and aws.calls == []


def test_the_command_line_documents_itself(capsys):
    with pytest.raises(SystemExit) as exit:
        driver.main(["--help"])
    assert exit.value.code == 0
    help_text = capsys.readouterr().out
    # The module docstring, line for line (reflowed, its numbered steps would run together).
    assert driver.__doc__.strip() in help_text and "\n1. run.json (status \"running\") is written" in help_text
    flags = " ".join(help_text.split())
    for text in ("--config CONFIG", "--results-dir RESULTS_DIR", "--generator-dir GENERATOR_DIR", "--run-id RUN_ID",
                 "--namespace NAMESPACE CloudWatch namespace to publish to", "--bucket BUCKET S3 bucket to upload the run to",
                 "--prefix PREFIX", "--wait-timeout-seconds WAIT_TIMEOUT_SECONDS"):
        assert text in flags, text


@pytest.mark.parametrize("missing", ["--config", "--results-dir", "--generator-dir"])
def test_config_results_and_llmperf_folders_are_required(missing, capsys):
    argv = {"--config": "run-config.json", "--results-dir": "/results", "--generator-dir": "/opt/llmperf"}
    argv.pop(missing)
    with pytest.raises(SystemExit) as exit:
        driver.main([part for pair in argv.items() for part in pair])
    assert exit.value.code == 2
    assert f"the following arguments are required: {missing}" in capsys.readouterr().err


@pytest.fixture
def entry_point(tmp_path, monkeypatch):
    """main() with the pod's wiring and the run itself stood in for: what main passes them, what
    it prints, what it returns. SIGTERM's handler is restored afterwards."""
    seen = {}

    def production_hooks(config, args):
        seen["config"], seen["args"] = config, args
        seen["hooks"] = quiet_hooks()
        return seen["hooks"]

    def run_benchmark(config, results_dir, run_id, llmperf_dir, hooks):
        seen["run"] = (config, results_dir, run_id, llmperf_dir, hooks)
        hooks.upload_errors.extend(seen.get("upload_errors", []))
        return seen["outcome"]

    monkeypatch.setattr(driver, "production_hooks", production_hooks)
    monkeypatch.setattr(driver, "run_benchmark", run_benchmark)
    monkeypatch.setattr(driver, "datetime", FrozenDatetime)
    path = tmp_path / "run-config.json"
    path.write_text(json.dumps(config()))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield seen, ["--config", str(path), "--results-dir", str(tmp_path / "results"), "--generator-dir", str(tmp_path / "llmperf")]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_main_runs_the_config_with_the_pods_wiring_and_says_where_the_results_are(entry_point, tmp_path, monkeypatch):
    seen, argv = entry_point
    stdout = capture_stdout(monkeypatch)
    monkeypatch.setenv("JOB_NAME", "sd-bench-7q2x")
    seen["outcome"] = {"status": "complete", "reason": None}
    assert driver.main(argv + ["--bucket", "models", "--namespace", "SdTrn2/Benchmark", "--wait-timeout-seconds", "90"]) == 0
    args = seen["args"]
    assert seen["config"] == config()
    assert (args.bucket, args.prefix, args.namespace, args.wait_timeout_seconds, args.run_id) == (
        "models", "results/", "SdTrn2/Benchmark", 90.0, None)
    assert isinstance(args.wait_timeout_seconds, float) and args.results_dir == tmp_path / "results"
    assert seen["run"] == (config(), tmp_path / "results", "20261122T085007Z-sd-bench-7q2x", tmp_path / "llmperf", seen["hooks"])
    assert stdout.flushed == ["run 20261122T085007Z-sd-bench-7q2x: complete; results in s3://models/results/20261122T085007Z-sd-bench-7q2x/\n"]
    # SIGTERM (the Job's deadline) becomes an exception the run records as its reason.
    with pytest.raises(driver.Terminated, match=r"^received signal 15 \(Job deadline or pod deletion\)$"):
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)


def test_main_defaults_and_a_local_results_folder(entry_point, tmp_path, monkeypatch):
    seen, argv = entry_point
    stdout = capture_stdout(monkeypatch)
    monkeypatch.delenv("JOB_NAME", raising=False)
    seen["outcome"] = {"status": "failed", "reason": "TimeoutError: variants not ready after 43200s: sd (not healthy)"}
    assert driver.main(argv) == 1
    args = seen["args"]
    assert (args.bucket, args.prefix, args.namespace, args.wait_timeout_seconds, args.run_id) == (
        None, "results/", None, 43200.0, None)
    assert seen["run"][2] == "20261122T085007Z"
    assert stdout.flushed == [f"run 20261122T085007Z: failed: TimeoutError: variants not ready after 43200s: sd (not healthy); "
                              f"results in {tmp_path / 'results' / '20261122T085007Z'}\n"]


def test_main_exits_1_unless_the_run_completed_and_every_upload_succeeded(entry_point, tmp_path, monkeypatch):
    seen, argv = entry_point
    stdout = capture_stdout(monkeypatch)
    argv = argv + ["--run-id", "run-9", "--bucket", "models", "--prefix", "bench/"]
    seen["outcome"] = {"status": "incomplete", "reason": "short cases: counting/sd (3 of 20)"}
    assert driver.main(argv) == 1
    assert seen["run"][2] == "run-9"
    assert stdout.flushed[-1] == "run run-9: incomplete: short cases: counting/sd (3 of 20); results in s3://models/bench/run-9/\n"
    seen["outcome"], seen["upload_errors"] = {"status": "complete", "reason": None}, ["case.json: OSError: AccessDenied"]
    assert driver.main(argv) == 1


def test_llmperfs_command_environment_and_deadline():
    shape = {**SHAPE, "concurrency": 4, "requestsPerTestCase": 21, "requestTimeoutSeconds": 300,
             "samplingParams": {"temperature": 0, "top_p": 1}}
    variant = config()["variants"][1]
    assert llmperf_module.llmperf_command("/usr/bin/python3", variant, shape, Path("/results/run-1/sd/counting")) == [
        "/usr/bin/python3", "token_benchmark_ray.py", "--model", "Qwen/Qwen3-32B",
        "--mean-input-tokens", "64", "--stddev-input-tokens", "0", "--mean-output-tokens", "24", "--stddev-output-tokens", "0",
        "--max-num-completed-requests", "21", "--num-concurrent-requests", "4",
        "--timeout", "1800",  # ceil(21 / 4) = 6 rounds of one request timeout each
        "--results-dir", "/results/run-1/sd/counting", "--llm-api", "openai",
        "--additional-sampling-params", '{"temperature": 0, "top_p": 1}']
    assert llmperf_module.llmperf_deadline_s(shape) == 300 * 7 + 600
    assert llmperf_module.llmperf_deadline_s({**shape, "requestsPerTestCase": 20}) == 300 * 6 + 600
    assert llmperf_module.llmperf_environment("http://127.0.0.1:4711/v1", Path("/opt/llmperf")) == {
        "OPENAI_API_BASE": "http://127.0.0.1:4711/v1", "OPENAI_API_KEY": "not-used", "PYTHONPATH": "/opt/llmperf/src",
        "RAY_USAGE_STATS_ENABLED": "0"}
    # The pod's dependencies stay importable behind LLMPerf's src/.
    assert llmperf_module.llmperf_environment("http://x", Path("/opt/work/llmperf"), "/opt/deps:/opt/benchmark")["PYTHONPATH"] == \
        "/opt/work/llmperf/src:/opt/deps:/opt/benchmark"


class InlineExecutor:
    """Keeps what run_case hands to the telemetry thread, to run it when the test says."""

    def __init__(self):
        self.submitted = []

    def submit(self, fn, *args):
        self.submitted.append((fn, *args))


def metrics_pages(*drafts):
    """/metrics as successive scrapes show it: the drafts counter at each value, then unreadable."""
    pages = [f"# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{{engine=\"0\"}} {d}\n"
             for d in drafts]

    def scrape(endpoint):
        assert endpoint == "http://vllm-sd:8000/v1"
        if not pages:
            raise OSError("timed out")
        return pages.pop(0)
    return scrape


def test_one_case_is_run_recorded_uploaded_published_and_reported(tmp_path, llmperf, monkeypatch):
    results, calls, uploads, published = tmp_path / "results", [], [], []
    placement = {"pod": "vllm-sd-0", "node": "n1", "neuronDevices": ["0", "1"]}
    inner = one_request_runner(calls)

    def runner(invocation, stdout_file, stderr_file):
        inner(invocation, stdout_file, stderr_file)
        stderr_file.write_bytes(
            b"Exception in thread Thread-3 (launch_request):\nZeroDivisionError: division by zero\n\xff\xfe\n"
            b"Exception in thread Thread-4 (launch_request):\n")
        return 0

    proxies = []

    class Proxy(driver.MeasuringProxy):
        def __init__(self, upstream, records, timeout_s, fills):
            proxies.append((upstream, records, timeout_s, fills))
            super().__init__(upstream, records, timeout_s, fills)

    monkeypatch.setattr(driver, "MeasuringProxy", Proxy)
    stdout = capture_stdout(monkeypatch)
    executor = InlineExecutor()
    with FakeVllm(step_s=0.001) as server:
        variant = {**config()["variants"][1], "endpoint": server.url}
        hooks = quiet_hooks(runner=runner, python="python3", locate=lambda v: placement, telemetry=lambda *a: {},
                            scrape=lambda endpoint: f"vllm:spec_decode_num_drafts_total {len(calls) * 5 + 10}\n",
                            upload=lambda path: uploads.append(path.relative_to(results).as_posix()), publish=published.append)
        summary = driver.run_case(config(shape={**SHAPE, "requestsPerTestCase": 3}), variant, "counting", LEVEL, results, "run-1",
                                  llmperf, hooks, executor)
    out = results / "run-1" / "sd" / "counting"
    assert proxies == [(server.url, out / "requests.jsonl", 600, {})]  # the proxy gives up on a request when LLMPerf would
    argv, env, _, deadline = calls[0]
    assert argv == llmperf_module.llmperf_command("python3", variant, {**SHAPE, "requestsPerTestCase": 3}, out)
    assert env["PYTHONPATH"] == str(llmperf / "src") and deadline == 600 * 2 + 600
    case = json.loads((out / "case.json").read_text())
    started, finished = case["startedAt"], case["finishedAt"]
    assert isinstance(started, float) and started <= finished <= time.time()
    expected = {"testCase": "counting", "variant": "sd", "asked": 3, "concurrency": 4, "load": {"concurrency": 4},
                "generator": "llmperf", "exitCode": 0,
                "llmperfError": "ZeroDivisionError: division by zero", "threadDeaths": 2, "startedAt": started,
                "finishedAt": finished, "placement": placement}
    assert (out / "case.json").read_text() == json.dumps(expected, indent=2, sort_keys=True) + "\n"
    assert (out / "specdecode.json").read_text() == json.dumps(
        {"after": {"drafts": 15.0}, "before": {"drafts": 10.0}}, indent=2, sort_keys=True) + "\n"
    # The case's files, then the marker that it is published (the data went out before it).
    assert uploads == [f"run-1/sd/counting/{name}" for name in
                       ("case.json", "llmperf.stderr.txt", "requests.jsonl", "specdecode.json", "published.json")]
    (data,) = published
    assert {d["MetricName"] for d in data} >= {"TTFT", "FailedRequests", "OutputTokens"}
    assert all(d["Timestamp"] == driver.datetime.fromtimestamp(finished, driver.timezone.utc) for d in data)
    assert all(d["Dimensions"] == SAMPLE_DIMENSIONS for d in data)
    assert executor.submitted == [(driver.collect_telemetry, hooks, variant, "counting", out, placement, started, finished,
                                   ("SD", "counting_numbers_from_1_"))]
    assert summary == {"testCase": "counting", "variant": "sd", "asked": 3, "completed": 1, "failed": 0, "short": True,
                       "exitCode": 0, "llmperfError": "ZeroDivisionError: division by zero"}
    assert stdout.flushed == [
        f"[counting] sd: LLMPerf against {server.url} through the measuring proxy\n",
        "[counting] sd: 1 ok / 0 failed of 3 asked; LLMPerf lost 2 worker thread(s): ZeroDivisionError: division by zero - SHORT\n"]
    assert stdout.pending == ""


def run_one_case(tmp_path, llmperf, runner, **changes):
    """run_case against an endpoint nobody serves: LLMPerf (the runner) sends nothing."""
    executor = InlineExecutor()
    hooks = quiet_hooks(runner=runner, **changes)
    summary = driver.run_case(config(shape={**SHAPE, "requestsPerTestCase": 0}), config()["variants"][1], "counting", LEVEL,
                              tmp_path / "results", "run-1", llmperf, hooks, executor)
    return summary, tmp_path / "results" / "run-1" / "sd" / "counting", executor


def test_a_case_whose_llmperf_failed_says_so_and_is_not_short(tmp_path, llmperf, monkeypatch):
    def runner(invocation, stdout_file, stderr_file):
        stderr_file.write_text("Traceback (most recent call last):\nKeyError: 'error_code'\n")
        return 1

    def publish(data):
        raise RuntimeError("Throttling: Rate exceeded")

    stdout = capture_stdout(monkeypatch)
    summary, out, executor = run_one_case(tmp_path, llmperf, runner, publish=publish)
    assert summary == {"testCase": "counting", "variant": "sd", "asked": 0, "completed": 0, "failed": 0, "short": False,
                       "exitCode": 1, "llmperfError": "KeyError: 'error_code'"}
    assert stdout.flushed[1:] == ["WARNING: could not publish [counting] sd: Throttling: Rate exceeded\n",
                                  "[counting] sd: 0 ok / 0 failed of 0 asked; LLMPerf failed (1): KeyError: 'error_code'\n"]
    assert executor.submitted == []  # no telemetry hook, nothing in the background
    assert json.loads((out / "specdecode.json").read_text()) == {"error": "/metrics unreadable: connection refused"}


def test_a_clean_case_reports_only_its_counts_and_counters_it_could_not_read_after(tmp_path, llmperf, monkeypatch):
    stdout = capture_stdout(monkeypatch)
    summary, out, _ = run_one_case(tmp_path, llmperf, lambda *a: 0, scrape=metrics_pages(4))
    assert summary["llmperfError"] is None and summary["exitCode"] == 0 and summary["short"] is False
    case = json.loads((out / "case.json").read_text())
    assert (case["llmperfError"], case["threadDeaths"]) == (None, 0)
    assert stdout.flushed[-1] == "[counting] sd: 0 ok / 0 failed of 0 asked\n"
    # Read before the case, unreadable after it: the case has no counters.
    assert json.loads((out / "specdecode.json").read_text()) == {"error": "/metrics unreadable: timed out"}


def test_counters_unreadable_before_the_case_are_reported_even_if_readable_after(tmp_path, llmperf):
    pages = ["", "vllm:spec_decode_num_drafts_total 9\n"]

    def scrape(endpoint):
        page = pages.pop(0)
        if not page:
            raise OSError("connection reset")
        return page

    _, out, _ = run_one_case(tmp_path, llmperf, lambda *a: 0, scrape=scrape)
    assert json.loads((out / "specdecode.json").read_text()) == {"error": "/metrics unreadable: connection reset"}


def test_background_telemetry_is_saved_uploaded_and_published_per_period(tmp_path, monkeypatch):
    placement, uploads, published, windows = {"pod": "vllm-sd-0"}, [], [], []
    data = {"status": "ok", "utilizationPercent": [[1_795_000_000.0, 55.0]], "memoryUsedBytes": [[1_795_000_060.0, 7e9]]}
    hooks = quiet_hooks(telemetry=lambda *window: windows.append(window) or data, publish=published.append,
                        upload=lambda path: uploads.append(path))
    driver.collect_telemetry(hooks, config()["variants"][1], "counting", tmp_path, placement, 1_794_999_990.0, 1_795_000_100.0,
                             ("SD", "counting_numbers_from_1_"))
    assert windows == [(placement, 1_794_999_990.0, 1_795_000_100.0)]
    assert (tmp_path / "telemetry.json").read_text() == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert uploads == [tmp_path / "telemetry.json", tmp_path / "telemetry-published.json"]
    dimensions = SAMPLE_DIMENSIONS
    assert published == [[
        {"MetricName": "NeuronCoreUtilization", "Dimensions": dimensions, "Values": [55.0], "Counts": [1.0], "Unit": "Percent",
         "Timestamp": driver.datetime(2026, 11, 18, 11, 6, 40, tzinfo=driver.timezone.utc)},
        {"MetricName": "NeuronMemoryUsed", "Dimensions": dimensions, "Values": [7e9], "Counts": [1.0], "Unit": "Bytes",
         "Timestamp": driver.datetime(2026, 11, 18, 11, 7, 40, tzinfo=driver.timezone.utc)}]]


def test_telemetry_that_fails_is_recorded_as_unavailable_and_a_failed_publish_only_warns(tmp_path, monkeypatch):
    def telemetry(placement, start, end):
        raise RuntimeError("CloudWatch throttled")

    def publish(data):
        raise RuntimeError("AccessDenied")

    stdout = capture_stdout(monkeypatch)
    hooks = quiet_hooks(telemetry=telemetry, publish=publish)
    driver.collect_telemetry(hooks, config()["variants"][1], "counting", tmp_path, {}, 0.0, 1.0, ("SD", "counting_numbers_from_1_"))
    assert json.loads((tmp_path / "telemetry.json").read_text()) == {
        "status": "unavailable", "reason": "RuntimeError: CloudWatch throttled"}
    assert stdout.flushed == ["WARNING: could not publish telemetry of [counting] sd: AccessDenied\n"]


def test_a_failed_upload_is_kept_as_an_error_and_warned_about(tmp_path, monkeypatch):
    def upload(path):
        raise PermissionError("AccessDenied")

    stdout = capture_stdout(monkeypatch)
    hooks = quiet_hooks(upload=upload)
    hooks.save(tmp_path / "run.json", {"status": "running", "cases": []})
    assert (tmp_path / "run.json").read_text() == '{\n  "cases": [],\n  "status": "running"\n}\n'
    assert hooks.upload_errors == [f"{tmp_path / 'run.json'}: PermissionError: AccessDenied"]
    assert stdout.flushed == [f"WARNING: could not upload {tmp_path / 'run.json'} (3 attempts): AccessDenied\n"]


def test_run_json_from_its_first_upload_to_its_last(tmp_path, llmperf, monkeypatch):
    """run.json says what ran, how it was configured, and when; a case's prompt fills LLMPerf's
    sonnet.txt, and a stale case folder of an earlier attempt of the same run is reused."""
    monkeypatch.setattr(driver, "datetime", FrozenDatetime)
    results, prompts, saved = tmp_path / "results", [], []
    (results / "run-1" / "sd" / "counting").mkdir(parents=True)
    cfg = {**config(shape={**SHAPE, "requestsPerTestCase": 0}), "testCases": {"counting": "count from 1 to X\n\n", "sonnets": None}}

    def runner(invocation, stdout_file, stderr_file):
        prompts.append((invocation.cwd / llmperf_module.PROMPT_FILE).read_text())
        return 0

    hooks = quiet_hooks(runner=runner, upload=lambda path: saved.append(json.loads(path.read_text())) if path.name == "run.json" else None)
    run = driver.run_benchmark(cfg, results, "run-1", llmperf, hooks)
    assert saved[0] == {"runId": "run-1", "status": "running", "reason": None, "startedAt": "2026-11-22T08:50:07Z",
                        "finishedAt": None, "cases": [], "stack": "qwen3-32b-qwen3-1.7b", "shape": cfg["shape"],
                        "testCases": cfg["testCases"], "variants": cfg["variants"], "seed": "003",
                        "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f", "dimensions": cfg["dimensions"],
                        "loadGenerator": "llmperf", "loadGeneratorPin": "f1d6bed47e4501b0e371082b41601b59ab55269f",
                        "loads": [{"concurrency": 4}]}
    assert [len(s["cases"]) for s in saved] == [0, 1, 2, 3, 4, 4]
    # Where the run is, after each case: i of N, the time it has run, the ETA at its pace.
    assert [(s.get("progress") or {}).get("done") for s in saved] == [None, 1, 2, 3, 4, 4]
    assert {s["progress"]["total"] for s in saved[1:]} == {4} and run["progress"]["etaSeconds"] == 0
    assert run == saved[-1] == {**saved[0], "status": "complete", "finishedAt": "2026-11-22T08:50:07Z", "cases": run["cases"],
                                "progress": run["progress"]}
    assert [(c["testCase"], c["variant"]) for c in run["cases"]] == [
        ("counting", "base"), ("counting", "sd"), ("sonnets", "base"), ("sonnets", "sd")]
    assert prompts == ["count from 1 to X\n" * 400] * 2 + ["Shall I compare thee\n"] * 2  # only newlines are stripped
    assert (llmperf / llmperf_module.PROMPT_FILE).read_text() == "Shall I compare thee\n"
    assert (results / "run-1" / "run.json").read_text() == json.dumps(run, indent=2, sort_keys=True) + "\n"


def test_short_cases_are_named_in_the_reason(tmp_path, llmperf):
    run = driver.run_benchmark(config(shape={**SHAPE, "requestsPerTestCase": 3}), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(runner=lambda *a: 0))
    assert (run["status"], run["reason"]) == (
        "incomplete", "short cases: counting/base (0 of 3), counting/sd (0 of 3), sonnets/base (0 of 3), sonnets/sd (0 of 3)")


def test_a_failed_run_keeps_its_own_reason_even_if_uploads_failed_too(tmp_path, llmperf, capsys):
    def upload(path):
        raise OSError("AccessDenied")

    run = driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(healthy=lambda url: False, wait_timeout_s=0, upload=upload))
    assert (run["status"], run["reason"]) == ("failed", "TimeoutError: variants not ready after 0s: base (not healthy), sd (not healthy)")
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n") and err.endswith(
        "TimeoutError: variants not ready after 0s: base (not healthy), sd (not healthy)\n")


def test_upload_failures_are_counted_and_the_first_is_the_reason(tmp_path, llmperf):
    failed = []

    def upload(path):
        if path.name in ("case.json", "specdecode.json"):
            failed.append(path)
            raise OSError(f"AccessDenied {len(failed)}")

    run = driver.run_benchmark(config(shape={**SHAPE, "requestsPerTestCase": 0}), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(runner=lambda *a: 0, upload=upload))
    # Each file is tried three times; the reason is the first file's last error.
    assert (run["status"], run["reason"]) == ("failed", f"8 upload(s) failed: {failed[0]}: OSError: AccessDenied 3")
    assert failed[:3] == [failed[0]] * 3


def test_a_complete_run_waits_for_its_telemetry(tmp_path, llmperf):
    threads = []

    def telemetry(placement, start, end):
        time.sleep(0.02)  # CloudWatch is slower than the cases
        threads.append(threading.current_thread().name)
        return {"status": "ok"}

    run = driver.run_benchmark(config(shape={**SHAPE, "requestsPerTestCase": 0}), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(runner=lambda *a: 0, telemetry=telemetry))
    assert run["status"] == "complete" and len(threads) == 4 and all(t.startswith("telemetry_") for t in threads)
    assert all((tmp_path / "results" / "run-1" / v / c / "telemetry.json").exists()
               for v in ("base", "sd") for c in ("counting", "sonnets"))


def test_a_stopped_run_does_not_wait_for_telemetry_and_drops_what_has_not_started(tmp_path, llmperf):
    """One telemetry read at a time; SIGTERM leaves the pod seconds, not CloudWatch's minutes."""
    gate, started, released = threading.Event(), [], []

    def telemetry(placement, start, end):
        started.append(placement)
        released.append(gate.wait(timeout=1))
        return {"status": "ok"}

    cases = []

    def runner(invocation, stdout_file, stderr_file):
        cases.append(stderr_file.parent)
        if len(cases) == 3:
            for _ in range(100):  # the first case's telemetry read has begun (it blocks on the gate)
                if started:
                    break
                time.sleep(0.01)
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return 0

    run = driver.run_benchmark(config(shape={**SHAPE, "requestsPerTestCase": 0}), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(runner=runner, telemetry=telemetry, locate=lambda v: {"pod": v["name"]}))
    gate.set()
    for thread in threading.enumerate():
        if thread.name.startswith("telemetry_"):
            thread.join(timeout=2)
    assert run["status"] == "failed" and run["reason"] == "Terminated: received signal 15 (Job deadline or pod deletion)"
    assert started == [{"pod": "base"}] and released == [True]


def test_waiting_polls_only_the_endpoints_not_yet_healthy_until_the_deadline(monkeypatch):
    healthy_after = {"http://vllm-base:8000/v1": 2, "http://vllm-sd:8000/v1": 10**9}
    polls = {k: 0 for k in healthy_after}
    clock, sleeps = [1000.0], []

    def healthy(url):
        polls[url] += 1
        return polls[url] > healthy_after[url]

    def sleep(seconds):
        sleeps.append(seconds)
        clock[0] += seconds

    stdout = capture_stdout(monkeypatch)
    with pytest.raises(TimeoutError) as error:
        driver.wait_for_variants(config()["variants"], lambda v: driver.not_ready(v, healthy, lambda key: True), timeout_s=120,
                                 sleep=sleep, clock=lambda: clock[0])
    assert str(error.value) == "variants not ready after 120s: sd (not healthy)"
    assert sleeps == [60, 60]  # a minute apart by default; at the deadline itself it gives up
    assert polls == {"http://vllm-base:8000/v1": 3, "http://vllm-sd:8000/v1": 3}
    assert stdout.flushed == ["waiting for base (not healthy), sd (not healthy)\n"] * 2 and stdout.pending == ""


def test_a_healthy_server_whose_compile_is_not_committed_yet_is_waited_for(monkeypatch):
    """Its publisher uploads from the same node until the commit: the benchmark must not measure then."""
    # As run_config writes it: a one-pod variant's server has the variant's compiled set.
    variants = [{**v, "commitKey": f"compiled/{v['name']}/commit.json",
                 "servers": [{**s, "commitKey": f"compiled/{v['name']}/commit.json"} for s in v["servers"]]} for v in config()["variants"]]
    committed_after = {"compiled/base/commit.json": 0, "compiled/sd/commit.json": 2}
    asked = {key: 0 for key in committed_after}

    def committed(key):
        asked[key] += 1
        return asked[key] > committed_after[key]

    stdout = capture_stdout(monkeypatch)
    driver.wait_for_variants(variants, lambda v: driver.not_ready(v, lambda url: True, committed), timeout_s=600,
                             sleep=lambda s: None, clock=lambda: 0.0)
    assert stdout.flushed == ["waiting for sd (compiled artifacts not published yet)\n"] * 2
    assert asked == {"compiled/base/commit.json": 1, "compiled/sd/commit.json": 3}


def test_a_commit_is_found_by_listing_its_key(aws_credentials):
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-2")
        s3.create_bucket(Bucket="results-bucket", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        s3.put_object(Bucket="results-bucket", Key="compiled/x/commit.json.partial", Body=b"")
        assert not driver.listed(s3, "results-bucket", "compiled/x/commit.json")
        s3.put_object(Bucket="results-bucket", Key="compiled/x/commit.json", Body=b"{}")
        assert driver.listed(s3, "results-bucket", "compiled/x/commit.json")


def test_endpoints_healthy_at_once_are_not_waited_for(monkeypatch):
    stdout = capture_stdout(monkeypatch)
    driver.wait_for_variants(config()["variants"], lambda v: None, timeout_s=0,
                              sleep=lambda s: pytest.fail("slept"), clock=lambda: 0.0)
    assert stdout.flushed == [] and stdout.pending == ""


def test_llmperf_runs_in_its_own_session_with_the_pods_environment_and_its_output_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("POD_NAME", "sd-bench-7q2x")
    script = ("import os, sys; print(os.environ['POD_NAME'], os.environ['OPENAI_API_BASE'], os.getcwd(), "
              "os.getsid(0) == os.getpid()); print('KeyError: 1', file=sys.stderr); sys.exit(3)")
    (tmp_path / "out").mkdir()
    stdout_file, stderr_file = tmp_path / "out" / "llmperf.stdout.txt", tmp_path / "out" / "llmperf.stderr.txt"
    code = driver.subprocess_runner(driver.Invocation([sys.executable, "-c", script], {"OPENAI_API_BASE": "http://127.0.0.1:1/v1"},
                                                      tmp_path, 30), stdout_file, stderr_file)
    assert code == 3
    assert stdout_file.read_text() == f"sd-bench-7q2x http://127.0.0.1:1/v1 {tmp_path} True\n"
    assert stderr_file.read_text() == "KeyError: 1\n"


def test_an_indented_error_line_is_reported_without_its_whitespace():
    assert llmperf_module.last_error_line("Traceback:\n    raise ValueError('x')\n  ValueError: bad prompt  \r\n") == "ValueError: bad prompt"
    assert llmperf_module.thread_deaths("Exception in thread Thread-1:\nException in thread Thread-2:\n") == 2


# --- a long run ---------------------------------------------------------------------------------

def test_a_server_that_restarts_mid_run_is_waited_for_before_its_next_case(tmp_path, llmperf):
    """/health is asked before every case: the SD server goes away after the first test case and
    comes back after two polls; its second case starts only then."""
    answers = {"http://vllm-sd:8000/v1": iter([True, True, False, False, True])}
    events = []

    def healthy(url):
        answer = next(answers[url], True) if url in answers else True
        events.append(("health", url.split("//")[1].split(":")[0], answer))
        return answer

    def runner(invocation, stdout_file, stderr_file):
        events.append(("run", stderr_file.parent.parent.name, stderr_file.parent.name))
        return 0

    run = driver.run_benchmark(config(), tmp_path / "results", "run-1", llmperf,
                               quiet_hooks(healthy=healthy, runner=runner, poll_s=30, sleep=lambda s: events.append(("sleep", s))))
    assert run["status"] == "incomplete"  # no request went through the stand-in LLMPerf
    second_sd = events.index(("run", "sd", "sonnets"))
    assert events[second_sd - 5:second_sd] == [("health", "vllm-sd", False), ("sleep", 30), ("health", "vllm-sd", False),
                                               ("sleep", 30), ("health", "vllm-sd", True)]


def test_uploads_are_retried_before_they_count_as_failed(tmp_path):
    attempts, sleeps = [], []

    def flaky(path):
        attempts.append(path.name)
        if len(attempts) < 3:
            raise OSError("Connection reset by peer")

    hooks = quiet_hooks(upload=flaky, sleep=sleeps.append)
    hooks.save(tmp_path / "run.json", {"status": "running"})
    assert attempts == ["run.json"] * 3 and sleeps == [2, 4] and hooks.upload_errors == []


def test_a_case_published_before_is_never_published_again(tmp_path):
    """A study redoes a case a killed pod left half done; CloudWatch adds every datum it is sent,
    so the marker in the store decides."""
    published, saved = [], []
    hooks = quiet_hooks(publish=published.append, upload=saved.append)
    marker = tmp_path / driver.PUBLISHED_FILE
    hooks.publish_once(marker, [{"MetricName": "TTFT"}])
    assert published == [[{"MetricName": "TTFT"}]] and saved == [marker]
    hooks.uploaded = lambda path: path == marker
    hooks.publish_once(marker, [{"MetricName": "TTFT"}])
    assert len(published) == 1 and saved == [marker]


def test_progress_says_i_of_n_elapsed_and_eta():
    now = [100.0]
    progress = driver.Progress(10, clock=lambda: now[0])
    assert progress.next() == "case 1/10, 0m00s elapsed, ETA after the first case"
    now[0] += 90
    assert progress.done() == {"done": 1, "total": 10, "elapsedSeconds": 90, "etaSeconds": 810}
    progress.skip(4)  # a failed server's cases: never measured, done all the same
    now[0] += 3600
    assert progress.next() == "case 6/10, 1h01m elapsed, ETA 5h07m"  # 3690 s for the 1 case measured, 5 left at that pace


def test_a_distributed_variant_waits_for_its_targets_compiled_set_too():
    """Its draft's /health answers while the target does; the target's publisher may still upload a
    first compile from the node the draft is measured on (a plain run as the tuner: driver.not_ready)."""
    variant = {"name": "dist", "endpoint": "http://dist", "commitKey": "compiled/dist/draft/commit.json",
               "servers": [{"part": "target", "commitKey": "compiled/dist/target/commit.json"},
                           {"part": "draft", "commitKey": "compiled/dist/draft/commit.json"}]}
    published = {"compiled/dist/draft/commit.json"}
    assert driver.not_ready(variant, lambda url: True, published.__contains__) == \
        "compiled artifacts of its target not published yet"
    published.add("compiled/dist/target/commit.json")
    assert driver.not_ready(variant, lambda url: True, published.__contains__) is None
