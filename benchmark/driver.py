"""Run LLMPerf against every variant for every test case, measuring through a proxy, and keep
every result in S3 as soon as it exists.

    python -m benchmark.driver --config run-config.json --results-dir /results \
        --llmperf-dir /opt/llmperf [--run-id ID] [--namespace NS] [--bucket B --prefix results/]

1. run.json (status "running") is written and uploaded before anything else, then again after
   every case with the cases so far.
2. Wait until every variant's /health answers.
3. For each test case, each variant in turn (interleaved, so drift over a long run hits all variants
   alike): wait again until it answers (a server that restarted mid-run is waited for, not
   measured while it loads), locate the variant's pod and Neuron devices, read its speculative-decoding counters,
   run LLMPerf (unmodified, its flags, files and keys as upstream) through a measuring proxy
   (benchmark/proxy.py) with its stdout/stderr kept in the case folder, read the counters again,
   publish the case to CloudWatch once (a published.json marker in S3 says it was, so a case done
   again after a killed run never counts twice) and upload the case folder; each upload is
   retried. The devices' Neuron telemetry is
   read in the background once CloudWatch has it, then published and uploaded.
4. run.json gets status "complete", "incomplete" (a case completed fewer requests than asked) or
   "failed" (with the reason: endpoints never healthy, SIGTERM at the Job's deadline, ...) and is
   uploaded; the exit code is 0 only for "complete", so the Job shows the failure.

LLMPerf builds prompts from lines of its sonnet.txt; a test case replaces that file with its prompt,
as the sample did.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import acceptance
from .proxy import RECORDS_FILE, MeasuringProxy
from .publish import case_metric_data, dimension_values, telemetry_metric_data
from .results import CASE_FILE, RUN_FILE, SPECDECODE_FILE, STDERR_FILE, STDOUT_FILE, TELEMETRY_FILE, case_dir, load_case

PROMPT_FILE = Path("src/llmperf/sonnet.txt")
PROMPT_LINES = 400  # enough lines for LLMPerf to sample the longest configured input from
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*$")
Runner = Callable[[list[str], dict[str, str], Path, Path, float], int]
"""(argv, extra environment, working directory, case folder for stdout/stderr, deadline in
seconds) -> exit code."""
TIMED_OUT = 124  # as coreutils' timeout(1)
PUBLISHED_FILE = "published.json"
TELEMETRY_PUBLISHED_FILE = "telemetry-published.json"
UPLOAD_ATTEMPTS = 3
"""Tries per file on top of botocore's own retries (production_hooks), for what those do not cover."""
# LLMPerf starts a local Ray instance before it sends anything
# (ray-project/llmperf@f1d6bed:token_benchmark_ray.py, ray.init under __main__).
STARTUP_ALLOWANCE_S = 600


class Terminated(Exception):
    """The pod is being stopped (SIGTERM: the Job's activeDeadlineSeconds, or a deletion)."""


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_run_id(job_name: str | None) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{job_name}" if job_name else stamp


def http_healthy(base_url: str) -> bool:
    health = base_url.rstrip("/").removesuffix("/v1") + "/health"
    try:
        with urllib.request.urlopen(health, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def not_ready(variant: dict, healthy: Callable[[str], bool], committed: Callable[[str], bool]) -> str | None:
    """Why a variant cannot be measured yet: its server does not answer /health, or the artifacts it
    compiled are not committed to the store yet (its publisher would be uploading them from the
    same node while the benchmark measures: modelstore/publish.py)."""
    if not healthy(variant["endpoint"]):
        return "not healthy"
    if variant.get("commitKey") and not committed(variant["commitKey"]):
        return "compiled artifacts not published yet"
    return None


def wait_for_variants(variants: list[dict], reason: Callable[[dict], str | None], timeout_s: float,
                      poll_s: float = 60, sleep: Callable[[float], None] = time.sleep,
                      clock: Callable[[], float] = time.monotonic) -> None:
    """Block until every variant is ready (first starts compile for an hour or more)."""
    deadline = clock() + timeout_s
    waiting = {v["name"]: why for v in variants if (why := reason(v))}
    while waiting:
        listed = ", ".join(f"{name} ({why})" for name, why in waiting.items())
        if clock() >= deadline:
            raise TimeoutError(f"variants not ready after {timeout_s:.0f}s: {listed}")
        print(f"waiting for {listed}", flush=True)
        sleep(poll_s)
        waiting = {v["name"]: why for v in variants if v["name"] in waiting and (why := reason(v))}


def llmperf_command(python: str, variant: dict, shape: dict, out_dir: Path) -> list[str]:
    """LLMPerf's own CLI (docs/facts.md "LLMPerf"; ray-project/llmperf@f1d6bed:token_benchmark_ray.py argparse
    flags)."""
    runs = math.ceil(shape["requestsPerTestCase"] / shape["concurrency"])
    return [
        python, "token_benchmark_ray.py",
        "--model", variant["servedModelName"],
        "--mean-input-tokens", str(shape["inputTokens"]), "--stddev-input-tokens", "0",
        "--mean-output-tokens", str(shape["outputTokens"]), "--stddev-output-tokens", "0",
        "--max-num-completed-requests", str(shape["requestsPerTestCase"]),
        "--num-concurrent-requests", str(shape["concurrency"]),
        "--timeout", str(shape["requestTimeoutSeconds"] * runs),
        "--results-dir", str(out_dir),
        "--llm-api", "openai",
        "--additional-sampling-params", json.dumps(shape["samplingParams"]),
    ]


def llmperf_environment(base_url: str, llmperf_dir: Path, inherited_path: str | None = None) -> dict[str, str]:
    return {
        "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": "not-used",
        # Run from src/: LLMPerf's pyproject refuses `pip install` on Python 3.11
        # (ray-project/llmperf@f1d6bed:pyproject.toml requires-python ">=3.8, <3.11"), in front of
        # the pod's own path (its dependencies live outside site-packages: benchmark/pod.py).
        "PYTHONPATH": os.pathsep.join([str(llmperf_dir / "src"), *([inherited_path] if inherited_path else [])]),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def llmperf_deadline_s(shape: dict) -> float:
    """LLMPerf checks its --timeout only between requests, and can loop before sending any (it
    redraws a prompt length below its template's forever when stddev is 0), so the driver bounds
    it: its own timeout, one more request in flight, and Ray's start."""
    runs = math.ceil(shape["requestsPerTestCase"] / shape["concurrency"])
    return shape["requestTimeoutSeconds"] * (runs + 1) + STARTUP_ALLOWANCE_S


def subprocess_runner(argv: list[str], env: dict[str, str], cwd: Path, out_dir: Path, deadline_s: float) -> int:
    """Run LLMPerf in a session of its own, so that when it ends, times out or the pod is being
    stopped, the Ray processes it started go with it (a killed LLMPerf leaves them running)."""
    with (out_dir / STDOUT_FILE).open("w") as stdout, (out_dir / STDERR_FILE).open("w") as stderr:
        process = subprocess.Popen(argv, env={**os.environ, **env}, cwd=cwd, stdout=stdout, stderr=stderr,
                                   start_new_session=True)
        try:
            return process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            stderr.write(f"\nTimeoutError: LLMPerf did not finish within {deadline_s:.0f} s; the driver stopped it\n")
            return TIMED_OUT
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # LLMPerf and everything it started have already exited
            process.wait()


def last_error_line(stderr: str) -> str | None:
    """The last line of LLMPerf's stderr naming an exception (e.g. "KeyError: 'error_code'")."""
    lines = [line.strip() for line in stderr.splitlines() if _ERROR_LINE.match(line.strip())]
    return lines[-1] if lines else None


def thread_deaths(stderr: str) -> int:
    """LLMPerf worker threads that died: Python's threading.excepthook prints "Exception in thread"
    (a failed request raises ZeroDivisionError in its thread: docs/facts.md "LLMPerf, measured")."""
    return stderr.count("Exception in thread")


@dataclass
class Hooks:
    """The outside world, so tests can stand in for any part of it."""

    runner: Runner = subprocess_runner
    healthy: Callable[[str], bool] = http_healthy
    committed: Callable[[str], bool] = lambda key: True
    """Whether a variant's commit key exists in the store (production: an S3 listing)."""
    wait_timeout_s: float = 12 * 3600
    scrape: Callable[[str], str] = acceptance.scrape
    locate: Callable[[dict], dict] = lambda variant: {"error": "not running in a Kubernetes cluster"}
    upload: Callable[[Path], None] = lambda path: None
    publish: Callable[[list[dict]], None] = lambda data: None
    telemetry: Callable[[dict, float, float], dict] | None = None
    python: str = sys.executable
    upload_errors: list[str] = field(default_factory=list)
    uploaded: Callable[[Path], bool] = lambda path: False
    """Whether a file of the results folder is already in the store (production: an S3 listing,
    for a study, which may redo a case a killed run left half done)."""
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 60

    def save(self, path: Path, content: Any) -> None:
        """Write a JSON file and upload it at once."""
        path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
        self.keep(path)

    def keep(self, path: Path) -> None:
        for attempt in range(1, UPLOAD_ATTEMPTS + 1):
            try:
                self.upload(path)
                return
            except Exception as error:  # an upload failure must not stop the benchmark; it fails the Job at the end
                if attempt == UPLOAD_ATTEMPTS:
                    self.upload_errors.append(f"{path}: {type(error).__name__}: {error}")
                    print(f"WARNING: could not upload {path} ({attempt} attempts): {error}", flush=True)
                else:
                    self.sleep(2 ** attempt)

    def publish_once(self, marker: Path, data: list[dict]) -> None:
        """Publish to CloudWatch unless the marker says this case already was; then leave the
        marker. PutMetricData adds every datum it is sent, so publishing twice would count twice."""
        if self.uploaded(marker):
            print(f"already published ({marker.name} in the store): not publishing again", flush=True)
            return
        self.publish(data)
        self.save(marker, {"publishedAt": utc_now(), "data": len(data)})


def counters(hooks: Hooks, endpoint: str) -> dict[str, Any]:
    try:
        return acceptance.parse_counters(hooks.scrape(endpoint))
    except OSError as error:
        return {"error": f"/metrics unreadable: {error}"}


def run_case(config: dict, variant: dict, test_case: str, results_dir: Path, run_id: str, llmperf_dir: Path,
             hooks: Hooks, telemetry: ThreadPoolExecutor) -> dict[str, Any]:
    """One (test case, variant): LLMPerf through the proxy; everything saved and uploaded."""
    shape = config["shape"]
    out = case_dir(results_dir, run_id, variant["name"], test_case)
    out.mkdir(parents=True, exist_ok=True)
    placement = hooks.locate(variant)
    before = counters(hooks, variant["endpoint"])
    started = time.time()
    print(f"[{test_case}] {variant['name']}: LLMPerf against {variant['endpoint']} through the measuring proxy", flush=True)
    with MeasuringProxy(variant["endpoint"], out / RECORDS_FILE, timeout_s=shape["requestTimeoutSeconds"]) as proxy:
        code = hooks.runner(llmperf_command(hooks.python, variant, shape, out),
                            llmperf_environment(proxy.base_url, llmperf_dir, os.environ.get("PYTHONPATH")), llmperf_dir, out,
                            llmperf_deadline_s(shape))
    finished = time.time()
    after = counters(hooks, variant["endpoint"])
    stderr = (out / STDERR_FILE).read_text(errors="replace") if (out / STDERR_FILE).exists() else ""
    meta = {"testCase": test_case, "variant": variant["name"], "asked": shape["requestsPerTestCase"],
            "concurrency": shape["concurrency"], "exitCode": code, "llmperfError": last_error_line(stderr),
            "threadDeaths": thread_deaths(stderr), "startedAt": started, "finishedAt": finished, "placement": placement}
    (out / CASE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    specdecode = {"error": before.get("error") or after.get("error")} if "error" in before or "error" in after \
        else {"before": before, "after": after}
    (out / SPECDECODE_FILE).write_text(json.dumps(specdecode, indent=2, sort_keys=True) + "\n")
    case = load_case(results_dir, run_id, variant["name"], test_case)
    for path in sorted(p for p in out.iterdir() if p.is_file()):
        hooks.keep(path)
    try:
        hooks.publish_once(out / PUBLISHED_FILE, case_metric_data(case, variant, datetime.fromtimestamp(finished, timezone.utc),
                                                                  dimension_values(config, variant["name"], test_case)))
    except Exception as error:  # CloudWatch is a view of the results; S3 holds them
        print(f"WARNING: could not publish [{test_case}] {variant['name']}: {error}", flush=True)
    if hooks.telemetry is not None:
        telemetry.submit(collect_telemetry, hooks, variant, test_case, out, placement, started, finished,
                         dimension_values(config, variant["name"], test_case))
    status = f"{len(case.ok)} ok / {case.failed} failed of {case.asked} asked"
    if code != 0:
        status += f"; LLMPerf failed ({code}): {meta['llmperfError']}"
    elif meta["threadDeaths"]:
        status += f"; LLMPerf lost {meta['threadDeaths']} worker thread(s): {meta['llmperfError']}"
    print(f"[{test_case}] {variant['name']}: {status}{' - SHORT' if case.short else ''}", flush=True)
    return {"testCase": test_case, "variant": variant["name"], "asked": case.asked, "completed": len(case.ok),
            "failed": case.failed, "short": case.short, "exitCode": code, "llmperfError": meta["llmperfError"]}


def collect_telemetry(hooks: Hooks, variant: dict, test_case: str, out: Path, placement: dict,
                      started: float, finished: float, dimensions: tuple[str, str]) -> None:
    try:
        data = hooks.telemetry(placement, started, finished)
    except Exception as error:  # telemetry is beside the point of a run; never let it end one
        data = {"status": "unavailable", "reason": f"{type(error).__name__}: {error}"}
    hooks.save(out / TELEMETRY_FILE, data)
    try:
        hooks.publish_once(out / TELEMETRY_PUBLISHED_FILE, telemetry_metric_data(*dimensions, data))
    except Exception as error:
        print(f"WARNING: could not publish telemetry of [{test_case}] {variant['name']}: {error}", flush=True)


def wait_ready(variants: list[dict], hooks: Hooks) -> None:
    wait_for_variants(variants, lambda v: not_ready(v, hooks.healthy, hooks.committed), hooks.wait_timeout_s,
                      poll_s=hooks.poll_s, sleep=hooks.sleep)


def use_prompt(prompt_file: Path, original: str, prompt: str | None) -> None:
    """A test case's prompt as LLMPerf's sonnet.txt (None: LLMPerf's own sonnets)."""
    prompt_file.write_text(original if prompt is None else (prompt.rstrip("\n") + "\n") * PROMPT_LINES)


def run_record(config: dict, run_id: str) -> dict[str, Any]:
    return {"runId": run_id, "status": "running", "reason": None, "startedAt": utc_now(), "finishedAt": None,
            "cases": [], **{k: config[k] for k in ("stack", "shape", "testCases", "variants", "seed", "llmperfCommit")},
            "dimensions": config.get("dimensions")}


class Progress:
    """Where a run (or a study) is: case i of N, the time this pod has run, and when it should be
    done at the pace of the cases this pod measured. Cases done before (by a killed pod) or never
    to be measured (a failed server's) count as done."""

    def __init__(self, total: int, done: int = 0, clock: Callable[[], float] = time.monotonic):
        self.total, self.finished, self.measured, self.clock = total, done, 0, clock
        self.started = clock()

    def skip(self, cases: int) -> None:
        self.finished += cases

    def figures(self) -> dict[str, Any]:
        elapsed = self.clock() - self.started
        eta = elapsed / self.measured * (self.total - self.finished) if self.measured else None
        return {"done": self.finished, "total": self.total, "elapsedSeconds": round(elapsed),
                "etaSeconds": None if eta is None else round(eta)}

    def next(self) -> str:
        """The line a case starts with."""
        figures = self.figures()
        eta = duration(figures["etaSeconds"]) if figures["etaSeconds"] is not None else "after the first case"
        return f"case {self.finished + 1}/{self.total}, {duration(figures['elapsedSeconds'])} elapsed, ETA {eta}"

    def done(self) -> dict[str, Any]:
        """One more case measured: what the run's record carries."""
        self.finished, self.measured = self.finished + 1, self.measured + 1
        return self.figures()


def duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def run_benchmark(config: dict[str, Any], results_dir: Path, run_id: str, llmperf_dir: Path, hooks: Hooks) -> dict[str, Any]:
    """Run every (test case, variant); returns run.json as finally written."""
    run_dir = results_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run = run_record(config, run_id)
    hooks.save(run_dir / RUN_FILE, run)
    prompt_file = llmperf_dir / PROMPT_FILE
    original_prompts = prompt_file.read_text()
    telemetry = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry")
    try:
        wait_ready(config["variants"], hooks)
        progress = Progress(len(config["testCases"]) * len(config["variants"]))
        for test_case, prompt in config["testCases"].items():
            use_prompt(prompt_file, original_prompts, prompt)
            for variant in config["variants"]:
                wait_ready([variant], hooks)
                print(f"{progress.next()}: {variant['name']}", flush=True)
                run["cases"].append(run_case(config, variant, test_case, results_dir, run_id, llmperf_dir, hooks, telemetry))
                run["progress"] = progress.done()
                hooks.save(run_dir / RUN_FILE, run)
        short = [f"{c['testCase']}/{c['variant']} ({c['completed']} of {c['asked']})" for c in run["cases"] if c["short"]]
        run["status"], run["reason"] = ("incomplete", "short cases: " + ", ".join(short)) if short else ("complete", None)
    except Exception as error:  # Terminated included: whatever stopped the run is its reason
        traceback.print_exc()
        run["status"], run["reason"] = "failed", f"{type(error).__name__}: {error}"
    finally:
        prompt_file.write_text(original_prompts)
        # Telemetry waits for CloudWatch (bounded); a stopped pod has no time for it.
        telemetry.shutdown(wait=run["status"] != "failed", cancel_futures=run["status"] == "failed")
    close_record(run, hooks, run_dir / RUN_FILE)
    return run


def close_record(record: dict[str, Any], hooks: Hooks, path: Path) -> None:
    """A run's (or study's) last word: a failed upload fails it (S3 would not hold all of it)."""
    if hooks.upload_errors and record["status"] != "failed":
        record["status"], record["reason"] = "failed", f"{len(hooks.upload_errors)} upload(s) failed: {hooks.upload_errors[0]}"
    record["finishedAt"] = utc_now()
    hooks.save(path, record)


def listed(client: Any, bucket: str, key: str) -> bool:
    """Whether `key` exists, by listing it (the pod's s3:ListBucket is scoped by s3:prefix, which only a
    list request carries; a HeadObject of a missing key would answer 403)."""
    found = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    return bool(found) and found[0]["Key"] == key


class S3Mirror:
    """Uploads a file of the results folder to s3://bucket/<prefix><path relative to the folder>."""

    def __init__(self, client: Any, bucket: str, prefix: str, results_dir: Path):
        self.client, self.bucket, self.prefix, self.results_dir = client, bucket, prefix, results_dir

    def key(self, path: Path) -> str:
        return self.prefix + path.relative_to(self.results_dir).as_posix()

    def __call__(self, path: Path) -> None:
        self.client.upload_file(str(path), self.bucket, self.key(path))

    def exists(self, path: Path) -> bool:
        return listed(self.client, self.bucket, self.key(path))


S3_RETRIES = {"max_attempts": 10, "mode": "standard"}
"""botocore's standard retry mode: throttling, 5xx and connection errors retried with jittered
backoff (botocore docs, "Retries": standard mode; max_attempts counts the first try)."""


def production_hooks(config: dict, args: argparse.Namespace) -> Hooks:
    """The pod's wiring: S3, CloudWatch and the in-cluster Kubernetes API."""
    import boto3
    from botocore.config import Config

    from . import telemetry
    from .publish import publish_data

    hooks = Hooks(wait_timeout_s=args.wait_timeout_seconds)
    if args.bucket:
        s3 = boto3.client("s3", config=Config(retries=S3_RETRIES))
        mirror = hooks.upload = S3Mirror(s3, args.bucket, args.prefix, args.results_dir)
        hooks.committed = lambda key: listed(s3, args.bucket, key)
        if "study" in config:  # only a study redoes a case, and only its role may list its results
            hooks.uploaded = mirror.exists
    if telemetry.SERVICE_ACCOUNT_DIR.exists():
        api = telemetry.KubernetesApi.in_cluster()
        namespace = (telemetry.SERVICE_ACCOUNT_DIR / "namespace").read_text().strip()
        hooks.locate = lambda variant: telemetry.locate(api, namespace, variant["podSelector"])
    if args.namespace:
        cloudwatch = boto3.client("cloudwatch")
        hooks.publish = lambda data: publish_data(cloudwatch, args.namespace, data)
        hooks.telemetry = lambda placement, start, end: telemetry.collect(cloudwatch, config["clusterName"], placement, start, end)
    return hooks


def pod_arguments(description: str, argv: list[str] | None, what: str) -> argparse.Namespace:
    """The command line the pod's setup script gives the driver and the tuner alike."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--llmperf-dir", type=Path, required=True)
    if what == "run":
        parser.add_argument("--run-id", default=None)
    parser.add_argument("--namespace", help="CloudWatch namespace to publish to")
    parser.add_argument("--bucket", help=f"S3 bucket to upload the {what} to")
    parser.add_argument("--prefix", default="results/")
    parser.add_argument("--wait-timeout-seconds", type=float, default=12 * 3600)
    return parser.parse_args(argv)


def stop_on_sigterm() -> None:
    """SIGTERM (the Job's deadline, a deletion) raises Terminated, so the run records why it ended."""
    def terminate(signum: int, frame: Any) -> None:
        raise Terminated(f"received signal {signum} (Job deadline or pod deletion)")

    signal.signal(signal.SIGTERM, terminate)


def main(argv: list[str] | None = None) -> int:
    args = pod_arguments(__doc__, argv, "run")
    stop_on_sigterm()
    config = json.loads(args.config.read_text())
    run_id = args.run_id or default_run_id(os.environ.get("JOB_NAME"))
    hooks = production_hooks(config, args)
    run = run_benchmark(config, args.results_dir, run_id, args.llmperf_dir, hooks)
    where = f"s3://{args.bucket}/{args.prefix}{run_id}/" if args.bucket else str(args.results_dir / run_id)
    print(f"run {run_id}: {run['status']}{': ' + run['reason'] if run['reason'] else ''}; results in {where}", flush=True)
    return 0 if run["status"] == "complete" and not hooks.upload_errors else 1


if __name__ == "__main__":
    sys.exit(main())
