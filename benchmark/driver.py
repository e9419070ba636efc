"""Run the stack's load generator (LLMPerf or inference-perf: benchmark/loadgen/) against every
variant for every test case at every load level, measuring through a proxy, and keep every result
in S3 as soon as it exists.

    python -m benchmark.driver --config run-config.json --results-dir /results \
        --generator-dir /opt/work/llmperf [--run-id ID] [--namespace NS] [--bucket B --prefix results/]

1. run.json (status "running") is written and uploaded before anything else, then again after
   every case with the cases so far.
2. Wait until every variant's /health answers.
3. For each test case and load level, each variant in turn (interleaved, so drift over a long run
   hits all variants alike): wait again until it answers (a server that restarted mid-run is waited
   for, not measured while it loads), locate the variant's pod and Neuron devices, read its
   speculative-decoding counters, run the load generator (unmodified, its own command line and
   files) through a measuring proxy (benchmark/proxy.py) with its stdout/stderr kept in the case
   folder, read the counters again,
   publish the case to CloudWatch once (a published.json marker in S3 says it was, so a case done
   again after a killed run never counts twice) and upload the case folder; each upload is
   retried. The devices' Neuron telemetry is
   read in the background once CloudWatch has it, then published and uploaded.
4. run.json gets status "complete", "incomplete" (a case completed fewer requests than asked) or
   "failed" (with the reason: endpoints never healthy, SIGTERM at the Job's deadline, ...) and is
   uploaded; the exit code is 0 only for "complete", so the Job shows the failure.

Each generator's module says where a test case's prompt goes (LLMPerf: its sonnet.txt, as the
sample did). A run of several load levels (benchmark.concurrency or benchmark.rate a list) keeps each
level's case in a folder of its own (results.py case_dir); a run of one level keeps today's layout.
"""
from __future__ import annotations

import argparse
import json
import os
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

from . import acceptance, pod
from .loadgen import Case, Invocation, Level, LoadGenerator, generator
from .proxy import RECORDS_FILE, MeasuringProxy
from .publish import case_metric_data, dimension_values, telemetry_metric_data
from .results import CASE_FILE, RUN_FILE, SPECDECODE_FILE, TELEMETRY_FILE, case_dir, load_case, run_levels, streams

Runner = Callable[[Invocation, Path, Path], int]
"""(the generator's invocation, file for its stdout, file for its stderr) -> exit code."""
TIMED_OUT = 124  # as coreutils' timeout(1)
PUBLISHED_FILE = "published.json"
TELEMETRY_PUBLISHED_FILE = "telemetry-published.json"
UPLOAD_ATTEMPTS = 3
"""Tries per file on top of botocore's own retries (production_hooks), for what those do not cover."""


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
    compiled, or those of another of its pods, are not committed to the store yet (its publisher
    would be uploading them from the same node while the benchmark measures: modelstore/publish.py)."""
    if not healthy(variant["endpoint"]):
        return "not healthy"
    if variant.get("commitKey") and not committed(variant["commitKey"]):
        return "compiled artifacts not published yet"
    # The variant's other pods (a distributed variant's target, whose publisher may still upload a
    # first compile from the node the draft is measured on).
    others = [s["part"] for s in variant.get("servers") or [] if s["commitKey"] != variant.get("commitKey")
              and not committed(s["commitKey"])]
    if others:
        return f"compiled artifacts of its {', '.join(others)} not published yet"
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


def subprocess_runner(invocation: Invocation, stdout_file: Path, stderr_file: Path) -> int:
    """Run the load generator in a session of its own, so that when it ends, times out or the pod
    is being stopped, the processes it started go with it (a killed LLMPerf leaves its Ray
    processes running; inference-perf starts worker processes)."""
    with stdout_file.open("w") as stdout, stderr_file.open("w") as stderr:
        process = subprocess.Popen(invocation.argv, env={**os.environ, **invocation.env}, cwd=invocation.cwd,
                                   stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            return process.wait(timeout=invocation.deadline_s)
        except subprocess.TimeoutExpired:
            stderr.write(f"\nTimeoutError: the load generator did not finish within {invocation.deadline_s:.0f} s; "
                         "the driver stopped it\n")
            return TIMED_OUT
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # the generator and everything it started have already exited
            process.wait()


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


def run_case(config: dict, variant: dict, test_case: str, level: Level, results_dir: Path, run_id: str,
             generator_dir: Path, hooks: Hooks, telemetry: ThreadPoolExecutor) -> dict[str, Any]:
    """One (test case, load level, variant): the load generator through the proxy; everything saved
    and uploaded."""
    shape, load_generator = config["shape"], run_generator(config)
    where = level_folder(config, level)
    out = case_dir(results_dir, run_id, variant["name"], test_case, where)
    out.mkdir(parents=True, exist_ok=True)
    placement = hooks.locate(variant)
    before = counters(hooks, variant["endpoint"])
    started = time.time()
    label = f"[{test_case}{' at ' + where if where else ''}] {variant['name']}"
    print(f"{label}: {load_generator.title} against {variant['endpoint']} through the measuring proxy", flush=True)
    fills = {} if load_generator.sends_sampling_params else shape["samplingParams"]
    stdout_file, stderr_file = streams(out, load_generator.output_name)
    with MeasuringProxy(variant["endpoint"], out / RECORDS_FILE, timeout_s=shape["requestTimeoutSeconds"], fills=fills) as proxy:
        invocation = load_generator.invocation(Case(hooks.python, generator_dir, variant, shape, level, out, proxy.base_url,
                                                    os.environ.get("PYTHONPATH")))
        code = hooks.runner(invocation, stdout_file, stderr_file)
    finished = time.time()
    after = counters(hooks, variant["endpoint"])
    facts = load_generator.outcome(stderr_file.read_text(errors="replace") if stderr_file.exists() else "")
    meta = {"testCase": test_case, "variant": variant["name"], "asked": shape["requestsPerTestCase"],
            "concurrency": level.value if level.kind == "concurrency" else None, "load": level.as_dict(),
            "generator": load_generator.name, "exitCode": code, **facts, "startedAt": started, "finishedAt": finished,
            "placement": placement}
    (out / CASE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    specdecode = {"error": before.get("error") or after.get("error")} if "error" in before or "error" in after \
        else {"before": before, "after": after}
    (out / SPECDECODE_FILE).write_text(json.dumps(specdecode, indent=2, sort_keys=True) + "\n")
    case = load_case(results_dir, run_id, variant["name"], test_case, where)
    for path in sorted(p for p in out.iterdir() if p.is_file()):
        hooks.keep(path)
    dimensions = dimension_values(config, variant["name"], test_case, where)
    try:
        hooks.publish_once(out / PUBLISHED_FILE, case_metric_data(case, variant, datetime.fromtimestamp(finished, timezone.utc),
                                                                  dimensions))
    except Exception as error:  # CloudWatch is a view of the results; S3 holds them
        print(f"WARNING: could not publish {label}: {error}", flush=True)
    if hooks.telemetry is not None:
        telemetry.submit(collect_telemetry, hooks, variant, test_case, out, placement, started, finished, dimensions)
    status = f"{len(case.ok)} ok / {case.failed} failed of {case.asked} asked" + load_generator.describe(code, facts)
    print(f"{label}: {status}{' - SHORT' if case.short else ''}", flush=True)
    return {"testCase": test_case, "variant": variant["name"], **({"load": level.as_dict()} if where else {}),
            "asked": case.asked, "completed": len(case.ok), "failed": case.failed, "short": case.short, "exitCode": code,
            load_generator.error_key: facts[load_generator.error_key]}


def run_generator(config: dict) -> LoadGenerator:
    """The run's load generator (a config written before runs named one: LLMPerf)."""
    return generator(config.get("loadGenerator"))


def level_folder(config: dict, level: Level) -> str | None:
    """Where a level's cases go under a test case (benchmark/pod.py level_folder)."""
    return pod.level_folder(run_levels(config), level)


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


def run_record(config: dict, run_id: str) -> dict[str, Any]:
    load_generator = run_generator(config)
    return {"runId": run_id, "status": "running", "reason": None, "startedAt": utc_now(), "finishedAt": None,
            "cases": [], **{k: config[k] for k in ("stack", "shape", "testCases", "variants", "seed", "llmperfCommit")},
            "dimensions": config.get("dimensions"), "loadGenerator": load_generator.name,
            "loadGeneratorPin": load_generator.pin(config), "loads": [level.as_dict() for level in run_levels(config)]}


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


def run_benchmark(config: dict[str, Any], results_dir: Path, run_id: str, generator_dir: Path, hooks: Hooks) -> dict[str, Any]:
    """Run every (test case, load level, variant); returns run.json as finally written."""
    run_dir = results_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run = run_record(config, run_id)
    hooks.save(run_dir / RUN_FILE, run)
    levels = run_levels(config)
    telemetry = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry")
    try:
        with run_generator(config).prompts(generator_dir) as use_prompt:
            wait_ready(config["variants"], hooks)
            progress = Progress(len(config["testCases"]) * len(levels) * len(config["variants"]))
            for test_case, prompt in config["testCases"].items():
                use_prompt(prompt)
                for level in levels:
                    for variant in config["variants"]:
                        wait_ready([variant], hooks)
                        print(f"{progress.next()}: {variant['name']}", flush=True)
                        run["cases"].append(run_case(config, variant, test_case, level, results_dir, run_id, generator_dir,
                                                     hooks, telemetry))
                        run["progress"] = progress.done()
                        hooks.save(run_dir / RUN_FILE, run)
        short = [f"{c['testCase']}/{c['variant']}{at(c)} ({c['completed']} of {c['asked']})" for c in run["cases"] if c["short"]]
        run["status"], run["reason"] = ("incomplete", "short cases: " + ", ".join(short)) if short else ("complete", None)
    except Exception as error:  # Terminated included: whatever stopped the run is its reason
        traceback.print_exc()
        run["status"], run["reason"] = "failed", f"{type(error).__name__}: {error}"
    finally:
        # Telemetry waits for CloudWatch (bounded); a stopped pod has no time for it.
        telemetry.shutdown(wait=run["status"] != "failed", cancel_futures=run["status"] == "failed")
    close_record(run, hooks, run_dir / RUN_FILE)
    return run


def case_level(case: dict[str, Any]) -> str | None:
    """A recorded case's level folder (run_case records the load only in a sweep); None for a run of one level."""
    return Level.from_dict(case["load"]).slug if "load" in case else None


def at_level(folder: str | None) -> str:
    """A level's folder as a case's name ends with it (" at concurrency-4"); "" for a run of one level."""
    return f" at {folder}" if folder else ""


def at(case: dict[str, Any]) -> str:
    """A sweep's recorded case named with its level."""
    return at_level(case_level(case))


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
        hooks.locate = lambda variant: telemetry.locate_variant(api, namespace, variant["servers"])
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
    parser.add_argument("--generator-dir", type=Path, required=True,
                        help="where the load generator is installed (LLMPerf's checkout, inference-perf's folder)")
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
    run = run_benchmark(config, args.results_dir, run_id, args.generator_dir, hooks)
    where = f"s3://{args.bucket}/{args.prefix}{run_id}/" if args.bucket else str(args.results_dir / run_id)
    print(f"run {run_id}: {run['status']}{': ' + run['reason'] if run['reason'] else ''}; results in {where}", flush=True)
    return 0 if run["status"] == "complete" and not hooks.upload_errors else 1


if __name__ == "__main__":
    sys.exit(main())
