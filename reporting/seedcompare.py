"""A seed's published figures beside the run's, in the seed's own statistic, with the shape
differences that make them not directly comparable.

Each seed figure is an LLMPerf metric (reporting/seeds.py). Beside it the report puts the figure
this project measures for the same thing, and LLMPerf's own value from the run's summary, which is
defined as the seed's was (so the gap between those two is LLMPerf's bias, and the gap between the
seed and LLMPerf's column is the difference between the setups).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.results import CaseResult, load_case

from .analysis import statistic, values
from .seeds import SEEDS, Published, Seed

# LLMPerf metric -> (what this project measures for it, how).
MEASURED_AS: dict[str, tuple[str, str]] = {
    "ttft_s": ("ttft_s", "TTFT at the proxy"),
    "end_to_end_latency_s": ("e2e_s", "end-to-end at the proxy"),
    "request_output_throughput_token_per_s": ("tokens_per_s", "server tokens / end-to-end"),
    "number_output_tokens": ("output_tokens", "server usage"),
    "number_input_tokens": ("input_tokens", "server usage (with the chat template)"),
    "inter_token_latency_s": ("tpot_s", "TPOT, per token: (e2e - TTFT) / (tokens - 1)"),
    "mean_output_throughput_token_per_s": ("overall_output_throughput", "server tokens / wall time"),
    "num_completed_requests_per_min": ("completed_per_min", "completed / wall time"),
    "acceptance_rate": ("acceptance_rate", "accepted / draft tokens (/metrics, else implied)"),
    "tpot_speedup": ("speedup_tpot", "baseline TPOT p50 / SD TPOT p50"),
}


def _shape(seed: Seed, run: dict[str, Any]) -> list[dict[str, Any]]:
    shape, sd = run.get("shape") or {}, next((v for v in run["variants"] if v["role"] == "sd"), {})
    base = next((v for v in run["variants"] if v["role"] == "baseline"), {})
    rows = [
        ("input tokens", seed.shape.input_tokens, shape.get("inputTokens")),
        ("output tokens", seed.shape.output_tokens, shape.get("outputTokens")),
        ("concurrency", seed.shape.concurrency, shape.get("concurrency")),
        ("requests per test case", seed.shape.requests, shape.get("requestsPerTestCase")),
        ("sampling params", seed.shape.sampling_params, shape.get("samplingParams")),
        ("target", seed.shape.target, base.get("target")),
        ("draft", seed.shape.draft, sd.get("draft")),
        ("speculative tokens", seed.shape.speculative_tokens, sd.get("numSpeculativeTokens")),
    ]
    if seed.shape.prompts is not None:
        rows.append(("test-case prompts", sorted(map(str, seed.shape.prompts)), sorted(map(str, run["testCases"].values()))))
    return [{"field": name, "seed": want, "run": have,
             "differs": want is not None and (not set(want) <= set(have) if name == "test-case prompts" else want != have)}
            for name, want, have in rows]


def _measured(figure: Published, stat: str, case: CaseResult, figures: dict[str, Any]) -> float | None:
    key = MEASURED_AS[figure.metric][0]
    request_stat = "p50" if stat in ("value", "approx") else stat  # a single or rounded figure: compare medians
    if key in ("overall_output_throughput", "completed_per_min"):
        return figures[key]
    if key == "acceptance_rate":
        counted = figures["acceptance"]["counters"].get("acceptance_rate")
        return counted if counted is not None else figures["acceptance"]["acceptance_rate_implied"]
    if key == "speedup_tpot":
        return (figures.get("vs_baseline") or {}).get("speedup_tpot")
    return statistic(values(case.ok, key), request_stat)


def _llmperf(figure: Published, stat: str, case: CaseResult) -> float | None:
    """LLMPerf's own value, from the run's summary file (key names: ray-project/llmperf@f1d6bed:
    token_benchmark_ray.py metrics_summary, joined with "_" by src/llmperf/utils.py flatten_dict)."""
    summary = case.llmperf_summary or {}
    if figure.metric in ("mean_output_throughput_token_per_s", "num_completed_requests_per_min"):
        key = f"results_{figure.metric}"
    elif stat.startswith("p"):
        key = f"results_{figure.metric}_quantiles_{stat}"
    elif stat in ("mean", "min", "max", "stddev"):
        key = f"results_{figure.metric}_{stat}"
    else:
        key = f"results_{figure.metric}_quantiles_p50"
    value = summary.get(key)
    return float(value) if isinstance(value, (int, float, str)) and str(value) not in ("", "nan") else None


def compare(results_dir: Path, run_id: str, run: dict[str, Any]) -> dict[str, Any] | None:
    """The seed named by the run (None if the stack names none)."""
    seed = SEEDS.get(run.get("seed") or "")
    if seed is None:
        return None
    by_prompt = {prompt: name for name, prompt in run["testCases"].items()}
    rows, missing = [], []
    for figure in seed.figures:
        # The first variant of the figure's role, on the figure's engine when it names one.
        variant = next((v["name"] for v in run["variants"] if v["role"] == figure.role
                        and (figure.engine is None or v.get("engine") == figure.engine)), None)
        test_case = by_prompt.get(figure.prompt)
        if figure.engine is not None and variant is None:
            missing.append(f"{figure.metric} ({figure.role}, {figure.engine}): no {figure.engine} variant in this run")
            continue
        if test_case is None or variant is None:
            missing.append(f"{figure.metric} ({figure.role}) for prompt {figure.prompt!r}: no such test case in this run")
            continue
        case = load_case(results_dir, run_id, variant, test_case)
        figures = run["cases"][test_case][variant]
        for stat, published in figure.values.items():
            # A derived figure is not LLMPerf's: its LLMPerf column would compare unlike units.
            rows.append({"testCase": test_case, "variant": variant, "role": figure.role, "metric": figure.metric,
                         "statistic": stat, "published": published, "measured": _measured(figure, stat, case, figures),
                         "measuredAs": MEASURED_AS[figure.metric][1],
                         "llmperf": None if figure.derived else _llmperf(figure, stat, case),
                         "cite": figure.cite, "derived": figure.derived})
    return {"seed": seed.id, "title": seed.title, "document": seed.document, "statistic": seed.statistic, "notes": list(seed.notes),
            "shape": _shape(seed, run), "shapeCite": seed.shape.cite, "figures": rows, "missing": missing}

