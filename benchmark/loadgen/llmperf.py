"""LLMPerf (ray-project/llmperf), unmodified, at a commit verified against its git tree
(benchmark/podsetup.py): its own CLI, flags, files and keys as upstream (docs/facts.md "LLMPerf").

LLMPerf builds prompts from lines of its sonnet.txt; a test case replaces that file with its prompt,
as the EKS sample did. It holds a concurrency (--num-concurrent-requests) and has no request-rate mode.
"""
from __future__ import annotations

import json
import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .base import Case, Invocation, LoadGenerator

NAME = "llmperf"
PROMPT_FILE = Path("src/llmperf/sonnet.txt")
PROMPT_LINES = 400  # enough lines for LLMPerf to sample the longest configured input from
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*$")
# LLMPerf starts a local Ray instance before it sends anything
# (ray-project/llmperf@f1d6bed:token_benchmark_ray.py, ray.init under __main__).
STARTUP_ALLOWANCE_S = 600
IMAGE = "public.ecr.aws/docker/library/python:3.11.14-slim-bookworm"
"""Its source: stackconfig/versions.py BENCHMARK_IMAGE."""
MIN_INPUT_TOKENS = 40
"""LLMPerf redraws a prompt length until it covers its own prompt template; with the driver's
stddev 0 a shorter target never does and LLMPerf spins without sending a request (seen running
ray-project/llmperf f1d6bed; the redraw loop is src/llmperf/utils.py
randomly_sample_sonnet_lines_prompt). It warns below 40 itself (token_benchmark_ray.py
run_token_benchmark)."""


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


def invocation(case: Case) -> Invocation:
    shape = {**case.shape, "concurrency": int(case.level.value)}
    return Invocation(llmperf_command(case.python, case.variant, shape, case.out_dir),
                      llmperf_environment(case.base_url, case.work_dir, case.inherited_path), case.work_dir,
                      llmperf_deadline_s(shape))


def use_prompt(prompt_file: Path, original: str, prompt: str | None) -> None:
    """A test case's prompt as LLMPerf's sonnet.txt (None: LLMPerf's own sonnets)."""
    prompt_file.write_text(original if prompt is None else (prompt.rstrip("\n") + "\n") * PROMPT_LINES)


@contextmanager
def prompts(llmperf_dir: Path) -> Iterator[Callable[[str | None], None]]:
    prompt_file = llmperf_dir / PROMPT_FILE
    original = prompt_file.read_text()
    try:
        yield lambda prompt: use_prompt(prompt_file, original, prompt)
    finally:
        prompt_file.write_text(original)


def last_error_line(stderr: str) -> str | None:
    """The last line of LLMPerf's stderr naming an exception (e.g. "KeyError: 'error_code'")."""
    lines = [line.strip() for line in stderr.splitlines() if _ERROR_LINE.match(line.strip())]
    return lines[-1] if lines else None


def thread_deaths(stderr: str) -> int:
    """LLMPerf worker threads that died: Python's threading.excepthook prints "Exception in thread"
    (a failed request raises ZeroDivisionError in its thread: docs/facts.md "LLMPerf, measured")."""
    return stderr.count("Exception in thread")


def outcome(stderr: str) -> dict[str, Any]:
    return {"llmperfError": last_error_line(stderr), "threadDeaths": thread_deaths(stderr)}


def describe(code: int, facts: dict[str, Any]) -> str:
    if code != 0:
        return f"; LLMPerf failed ({code}): {facts['llmperfError']}"
    if facts["threadDeaths"]:
        return f"; LLMPerf lost {facts['threadDeaths']} worker thread(s): {facts['llmperfError']}"
    return ""


def read_json(path: Path) -> Any:
    """LLMPerf writes bare NaN (one completed request gives NaN standard deviations), which
    Python's json accepts."""
    return json.loads(path.read_text())


def own_results(folder: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """LLMPerf's *_summary.json and *_individual_responses.json (absent when it crashed)."""
    summaries = sorted(folder.glob("*_summary.json"))
    responses = sorted(folder.glob("*_individual_responses.json"))
    return (read_json(summaries[0]) if summaries else None, read_json(responses[0]) if responses else [])


def own_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """From its *_summary.json (key names: ray-project/llmperf@f1d6bed:token_benchmark_ray.py
    metrics_summary)."""
    return {"completed": summary.get("results_num_completed_requests"),
            "itl_p50_s": summary.get("results_inter_token_latency_s_quantiles_p50"),
            "output_tokens_p50": summary.get("results_number_output_tokens_quantiles_p50"),
            "overall_output_throughput": summary.get("results_mean_output_throughput_token_per_s")}


GENERATOR = LoadGenerator(
    name=NAME, title="LLMPerf", load_kinds=("concurrency",), invocation=invocation, prompts=prompts, own_text="LLMPerf sonnets",
    outcome=outcome, error_key="llmperfError", describe=describe, own_results=own_results, own_figures=own_figures,
    own_itl="per chunk",
    own_source=("**LLMPerf** = LLMPerf's own summary, for reference only (its inter-token latency is per chunk and "
                "includes TTFT; its token counts are a Llama-2 re-tokenisation + 1)"),
    min_input_tokens=MIN_INPUT_TOKENS, min_input_tokens_why="LLMPerf's prompt template alone is longer, and it would never start",
    output_name="llmperf",
    image=IMAGE, lock="requirements-pod.lock", setup_flags=lambda commit, deps: ["--commit", commit], sends_sampling_params=True,
    pin=lambda config: config["llmperfCommit"])
