"""inference-perf (kubernetes-sigs/inference-perf, the Kubernetes project's benchmark), from PyPI,
hash-locked (benchmark/requirements-inference-perf.lock), run with a config file written in its own
schema (inference_perf/config/ at 0.7.0: Config, LoadConfig, DataConfig, ...; unknown keys are an
error there, StrictBaseModel extra="forbid").

What it is told, per case and load level:
- `load`: one stage: `concurrent` with num_requests = requestsPerTestCase at the level's
  concurrency_level, or `constant` at the level's rate for as many seconds as it takes to send
  requestsPerTestCase (config/loadgen/config.py ConcurrentLoadStage, StandardLoadStage). The driver
  runs one invocation per level: inference-perf writes no wall-clock window per stage (its
  per-request times are time.perf_counter), so the measuring proxy could not tell the stages of one
  invocation apart.
- `data`: `synthetic` prompts of exactly inputTokens tokens cut from a corpus, the test case's
  prompt repeated as LLMPerf's sonnet.txt is (None: inference-perf's own Shakespeare), asking
  outputTokens; a fixed seed (load.base_seed) so every variant is asked the same prompts, as
  LLMPerf seeds its sampler. The synthetic generator speaks the completions API only
  (datagen/synthetic/synthetic_datagen.py get_supported_apis), so requests go to /v1/completions.
- `tokenizer`: the one in <generator dir>/tokenizer (podsetup puts LLMPerf's there: both cut
  prompts with the same Llama tokenizer).
- `server`: vllm, the served model's name, ignore_eos false (LLMPerf asks max_tokens only).
Its request body carries no sampling parameters (apis/completion.py to_request_body), so the
proxy adds the run's (benchmark/proxy.py fills). Its own reports go to the case folder for
reference; the figures are the proxy's.
"""
from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .base import Case, Invocation, LoadGenerator
from .llmperf import PROMPT_LINES

NAME = "inference-perf"
LOCK = "requirements-inference-perf.lock"
CONFIG_FILE = "inference-perf-config.json"
"""Written to the case folder; inference-perf reads it with yaml.safe_load, which reads JSON."""
CORPUS_FILE = "corpus.txt"
TOKENIZER_DIR = "tokenizer"
PROGRAM = Path("bin") / "inference-perf"
"""Its console script under the generator dir (pip --target puts scripts in <target>/bin)."""
SEED = 11111
"""LLMPerf's sampler seed (ray-project/llmperf@f1d6bed:token_benchmark_ray.py), for the same reason."""
STARTUP_ALLOWANCE_S = 300
"""Loading the tokenizer and starting its worker process, before any request."""
IMAGE = "public.ecr.aws/docker/library/python:3.12.12-slim-bookworm"
"""docker-library/official-images library/python 3.12.12-slim-bookworm (public.ecr.aws/docker/library
mirrors the official images): inference-perf requires Python >= 3.12 (its 0.7.0 wheel's
Requires-Python), and requirements-inference-perf.lock was resolved for 3.12 on manylinux_2_28
(bookworm's glibc is 2.36)."""
MIN_INPUT_TOKENS = 2
"""It counts a prompt's tokens with the tokenizer's special tokens (utils/custom_tokenizer.py
count_tokens, add_special_tokens=True), and the Llama tokenizer the pod gives it puts a
beginning-of-sequence token before any text: no text counts 1, and the search for a prompt of
exactly 1 token gives up (datagen/datagen_utils.py converge_to_exact_length_text raises)."""
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*$")


def locked_version(config: dict[str, Any]) -> str:
    """Its version as its lock pins it (the lock is beside benchmark/'s modules, in the pod too:
    benchmark/pod.py pod_code); no config key chooses it, so `config` is not read."""
    lock = (Path(__file__).resolve().parent.parent / LOCK).read_text()
    return re.search(rf"^{re.escape(NAME)}==(\S+)", lock, re.MULTILINE).group(1)


def fixed(tokens: int) -> dict[str, Any]:
    """A distribution that always draws `tokens` (config/common.py Distribution, type fixed)."""
    return {"type": "fixed", "min": tokens, "max": tokens, "mean": tokens, "std_dev": 0}


def load(case: Case) -> dict[str, Any]:
    requests, level = case.shape["requestsPerTestCase"], case.level
    if level.kind == "concurrency":
        stage = {"num_requests": requests, "concurrency_level": int(level.value)}
        kind = "concurrent"
    else:
        stage = {"rate": level.value, "duration": math.ceil(requests / level.value)}
        kind = "constant"
    # One worker process: asyncio holds any concurrency a stack allows (serving.maxNumSeqs), and
    # the pod's cores stay with the proxy; in-flight requests capped only by what is asked.
    return {"type": kind, "stages": [stage], "num_workers": 1, "worker_max_concurrency": requests,
            "request_timeout": case.shape["requestTimeoutSeconds"], "base_seed": SEED}


def config(case: Case) -> dict[str, Any]:
    """inference-perf's config for one case at one level, in its schema."""
    corpus = case.work_dir / CORPUS_FILE
    return {
        "api": {"type": "completion", "streaming": True},
        "data": {"type": "synthetic", "input_distribution": fixed(case.shape["inputTokens"]),
                 "output_distribution": fixed(case.shape["outputTokens"]),
                 **({"corpus_file_path": str(corpus)} if corpus.exists() else {})},
        "load": load(case),
        "server": {"type": "vllm", "model_name": case.variant["servedModelName"],
                   "base_url": case.base_url.removesuffix("/v1"), "ignore_eos": False},
        "tokenizer": {"pretrained_model_name_or_path": str(case.work_dir / TOKENIZER_DIR)},
        "storage": {"local_storage": {"path": str(case.out_dir)}},
        "report": {"request_lifecycle": {"summary": True, "per_stage": False, "per_request": False}, "prometheus": None},
    }


def deadline_s(case: Case) -> float:
    """Every request one after another at worst, and its start."""
    return case.shape["requestTimeoutSeconds"] * (case.shape["requestsPerTestCase"] + 1) + STARTUP_ALLOWANCE_S


def invocation(case: Case) -> Invocation:
    path = case.out_dir / CONFIG_FILE
    path.write_text(json.dumps(config(case), indent=2, sort_keys=True) + "\n")
    env = {"PYTHONPATH": case.inherited_path} if case.inherited_path else {}
    return Invocation([str(case.work_dir / PROGRAM), "--config_file", str(path)], env, case.out_dir, deadline_s(case))


@contextmanager
def prompts(work_dir: Path) -> Iterator[Callable[[str | None], None]]:
    corpus = work_dir / CORPUS_FILE

    def use(prompt: str | None) -> None:
        if prompt is None:
            corpus.unlink(missing_ok=True)
        else:
            corpus.write_text((prompt.rstrip("\n") + "\n") * PROMPT_LINES)

    try:
        yield use
    finally:
        corpus.unlink(missing_ok=True)


def outcome(stderr: str) -> dict[str, Any]:
    lines = [line.strip() for line in stderr.splitlines() if _ERROR_LINE.match(line.strip())]
    return {"generatorError": lines[-1] if lines else None}


def describe(code: int, facts: dict[str, Any]) -> str:
    return f"; inference-perf failed ({code}): {facts['generatorError']}" if code != 0 else ""


def own_results(folder: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    summary = folder / "summary_lifecycle_metrics.json"
    return (json.loads(summary.read_text()) if summary.exists() else None, [])


def own_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """From its summary_lifecycle_metrics.json (reportgen/base.py summarize_requests: "successes"
    holds the completed requests; each distribution is summarize()'s, whose 50th percentile is
    "median" and which is null when there were no values)."""
    successes = summary.get("successes") or {}
    itl = (successes.get("latency") or {}).get("inter_token_latency") or {}
    return {"completed": successes.get("count"), "itl_p50_s": itl.get("median"),
            "output_tokens_p50": (successes.get("output_tokens") or {}).get("median"),
            "overall_output_throughput": (successes.get("throughput") or {}).get("output_tokens_per_sec")}


GENERATOR = LoadGenerator(
    name=NAME, title="inference-perf", load_kinds=("concurrency", "rate"), invocation=invocation, prompts=prompts,
    own_text="inference-perf's Shakespeare",
    outcome=outcome, error_key="generatorError", describe=describe, own_results=own_results, own_figures=own_figures,
    # reportgen/base.py: correct_streamed_response_metrics (chunks re-tokenised, every token at its
    # chunk's arrival), compute_request_latency_metrics (the deltas), summarize_requests (pooled),
    # summarize_output_token_usage (usage.completion_tokens, else its own count of the response's
    # tokens: the measuring proxy keeps the usage-only chunk from every generator, benchmark/proxy.py).
    own_itl="per token",
    own_source=("**inference-perf** = inference-perf's own summary, for reference only (its inter-token latency is per "
                "token, pooled over the requests: it re-tokenises each streamed chunk with the pod's Llama tokenizer and "
                "gives every token the chunk's arrival time, so a chunk's gap falls on its first token and the others "
                "count 0, and TTFT is not in it; its output token counts are its re-tokenisation of the response with that "
                "tokenizer, as the proxy keeps the server's usage chunk from it)"),
    min_input_tokens=MIN_INPUT_TOKENS,
    min_input_tokens_why="inference-perf counts the tokenizer's beginning-of-sequence token in a prompt's length, "
                         "so it can make no shorter prompt",
    output_name="inference-perf", image=IMAGE, lock=LOCK,
    setup_flags=lambda commit, deps: ["--link-installed", f"{deps}/{PROGRAM}"], sends_sampling_params=False,
    pin=locked_version)


