"""Run LLMPerf against every variant for every test case, then publish and upload the run.

    python -m benchmark.driver --config run-config.json --results-dir /results \
        --llmperf-dir /opt/llmperf [--run-id ID] [--namespace NS] [--bucket B --prefix results/]

Waits until every variant's /health answers, then for each test case runs each variant in turn
(interleaved, so drift over a long run hits all variants alike). LLMPerf builds prompts from
lines of its sonnet.txt; a test case replaces that file with its prompt, as the sample did. A
failed LLMPerf run is recorded and the benchmark goes on: the report shows it as missing data.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .results import RUN_FILE, case_dir

PROMPT_FILE = Path("src/llmperf/sonnet.txt")
PROMPT_LINES = 400  # enough lines for LLMPerf to sample the longest configured input from
Runner = Callable[[list[str], dict[str, str], Path], int]


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


def wait_for_endpoints(variants: list[dict], healthy: Callable[[str], bool], timeout_s: float,
                       poll_s: float = 60, sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> None:
    """Block until every variant answers /health (first starts compile for an hour or more)."""
    deadline = clock() + timeout_s
    waiting = [v for v in variants if not healthy(v["endpoint"])]
    while waiting:
        if clock() >= deadline:
            raise TimeoutError(f"endpoints not healthy after {timeout_s:.0f}s: {', '.join(v['name'] for v in waiting)}")
        print(f"waiting for {', '.join(v['name'] for v in waiting)}", flush=True)
        sleep(poll_s)
        waiting = [v for v in waiting if not healthy(v["endpoint"])]


def llmperf_command(python: str, variant: dict, shape: dict, out_dir: Path) -> list[str]:
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
        "--additional-sampling-params", json.dumps({"temperature": 0}),
    ]


def subprocess_runner(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    return subprocess.run(argv, env={**os.environ, **env}, cwd=cwd).returncode


def run_benchmark(config: dict[str, Any], results_dir: Path, run_id: str, llmperf_dir: Path,
                  runner: Runner = subprocess_runner, python: str = sys.executable) -> Path:
    """Run every (test case, variant) pair; write LLMPerf's files and run.json. Returns the run dir."""
    run_dir = results_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    prompt_file = llmperf_dir / PROMPT_FILE
    original_prompts = prompt_file.read_text()
    started = utc_now()
    try:
        for test_case, prompt in config["testCases"].items():
            prompt_file.write_text(original_prompts if prompt is None else (prompt.rstrip("\n") + "\n") * PROMPT_LINES)
            for variant in config["variants"]:
                out_dir = case_dir(results_dir, run_id, variant["name"], test_case)
                out_dir.mkdir(parents=True, exist_ok=True)
                print(f"[{test_case}] {variant['name']}: LLMPerf against {variant['endpoint']}", flush=True)
                code = runner(llmperf_command(python, variant, config["shape"], out_dir),
                              {"OPENAI_API_BASE": variant["endpoint"], "OPENAI_API_KEY": "not-used"}, llmperf_dir)
                if code != 0:
                    (out_dir / "error.txt").write_text(f"LLMPerf exited with {code}\n")
                    print(f"[{test_case}] {variant['name']}: LLMPerf failed ({code}); continuing", flush=True)
    finally:
        prompt_file.write_text(original_prompts)
    run = {
        "runId": run_id,
        "stack": config["stack"],
        "startedAt": started,
        "finishedAt": utc_now(),
        "shape": config["shape"],
        "testCases": config["testCases"],
        "variants": [{k: v[k] for k in ("name", "role", "baseline", "target", "draft", "numSpeculativeTokens", "endpoint")}
                     for v in config["variants"]],
    }
    (run_dir / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    return run_dir


def upload(run_dir: Path, bucket: str, prefix: str, client: Any = None) -> int:
    """Copy the run to s3://bucket/<prefix><run-id>/...; returns the number of files."""
    if client is None:
        import boto3

        client = boto3.client("s3")
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    for path in files:
        key = f"{prefix}{run_dir.name}/{path.relative_to(run_dir).as_posix()}"
        client.upload_file(str(path), bucket, key)
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--llmperf-dir", type=Path, required=True)
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--namespace", help="CloudWatch namespace to publish to")
    parser.add_argument("--bucket", help="S3 bucket to upload the run to")
    parser.add_argument("--prefix", default="results/")
    parser.add_argument("--wait-timeout-seconds", type=float, default=12 * 3600)
    args = parser.parse_args(argv)

    config = json.loads(args.config.read_text())
    run_id = args.run_id or default_run_id(os.environ.get("JOB_NAME"))
    wait_for_endpoints(config["variants"], http_healthy, args.wait_timeout_seconds)
    run_dir = run_benchmark(config, args.results_dir, run_id, args.llmperf_dir)
    if args.namespace:
        from .publish import publish

        print(f"published {publish(args.results_dir, args.namespace, run_id)} datums to {args.namespace}", flush=True)
    if args.bucket:
        print(f"uploaded {upload(run_dir, args.bucket, args.prefix)} files to s3://{args.bucket}/{args.prefix}{run_id}/", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
