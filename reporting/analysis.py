"""The figures of a run: per (test case, variant), and each variant against the baseline it names.

Sources (each figure says which it has):
- "proxy": timed by the measuring proxy in the benchmark pod (TTFT, end-to-end, chunks);
- "server usage": token counts the server reported in vLLM's final usage chunk;
- "/metrics": the server's speculative-decoding counters, before and after the case;
- "implied": derived from the stream, assuming one streamed chunk per target step;
- "LLMPerf" (or the generator that ran): its own summary, kept for reference (LLMPerf's: per-chunk
  ITL, Llama-2 token counts; benchmark/loadgen/ says what each generator's figures are);
- "Container Insights": node-level Neuron metrics of the variant's devices;
- "approximate"/"assumed": the catalog's list price, and parameter counts as the draft's cost.

Statistics follow LLMPerf's summary: linear-interpolation percentiles, sample standard deviation,
overall output throughput = all output tokens / the case's wall time, completed requests per
minute = completed / wall time x 60 (ray-project/llmperf@f1d6bed:token_benchmark_ray.py
metrics_summary, with pandas' default quantile and std). The wall time here runs from the first
request reaching the proxy to the last one ending (LLMPerf's also counts starting its Ray actors).
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable

from benchmark import acceptance
from benchmark.acceptance import acceptance_figures
from benchmark.loadgen import Level, generator
from benchmark.results import CaseResult, RequestResult, list_runs, load_case, load_run, percentile

QUANTILES = ("p50", "p90", "p99")
REQUEST_FIGURES: dict[str, Callable[[RequestResult], float | None]] = {
    "ttft_s": lambda r: r.ttft_s,
    "tpot_s": lambda r: r.time_per_output_token_s,
    "e2e_s": lambda r: r.e2e_s,
    "tokens_per_s": lambda r: r.output_throughput,
    "output_tokens": lambda r: r.output_tokens,
    "input_tokens": lambda r: r.input_tokens,
}


def statistic(values: list[float], name: str) -> float | None:
    """pNN (linear interpolation), mean, min, max or stddev (sample, as pandas) of `values`."""
    if not values:
        return None
    if name.startswith("p"):
        return percentile(values, float(name[1:]))
    if name == "stddev":
        return statistics.stdev(values) if len(values) > 1 else None
    return {"mean": statistics.fmean, "min": min, "max": max}[name](values)


def values(requests: list[RequestResult], figure: str) -> list[float]:
    return [v for v in (REQUEST_FIGURES[figure](r) for r in requests) if v is not None]


def wall_time_s(requests: list[RequestResult]) -> float | None:
    ends = [r.start + r.e2e_s for r in requests if r.e2e_s is not None]
    return max(ends) - min(r.start for r in requests) if ends else None


def token_source(ok: list[RequestResult]) -> str:
    counted = sum(r.output_tokens is not None for r in ok)
    if counted == len(ok):
        return "server usage"
    if counted == 0:
        return "none: the server sent no usage"
    return f"server usage for {counted} of {len(ok)} requests"


def generator_figures(case: CaseResult) -> dict[str, Any]:
    """How the case's load generator ended, and the figures of its own summary (kept under the key
    "llmperf" in report.json and report.csv, as before runs could name another generator)."""
    ran = generator(case.case.get("generator"))
    return {"exit_code": case.case.get("exitCode"), "error": case.case.get(ran.error_key),
            "thread_deaths": case.case.get("threadDeaths", 0), **ran.own_figures(case.llmperf_summary or {})}


def telemetry_figures(case: CaseResult) -> dict[str, Any]:
    data = case.telemetry or {"status": "not collected"}
    utilization = [v for _, v in data.get("utilizationPercent", [])]
    memory = [v for _, v in data.get("memoryUsedBytes", [])]
    return {"status": data["status"], "reason": data.get("reason"), "node": data.get("node"),
            "neuron_devices": data.get("neuronDevices"),
            "utilization_mean_pct": statistic(utilization, "mean"), "utilization_max_pct": statistic(utilization, "max"),
            "memory_mean_bytes": statistic(memory, "mean"), "memory_max_bytes": statistic(memory, "max")}


def case_figures(case: CaseResult, variant: dict[str, Any]) -> dict[str, Any]:
    ok = case.ok
    figures: dict[str, Any] = {
        "asked": case.asked, "sent": len(case.requests), "completed": len(ok), "failed": case.failed,
        "short": case.short, "token_source": token_source(ok) if ok else None,
    }
    for name in ("ttft_s", "tpot_s", "e2e_s", "tokens_per_s"):
        figures[name] = {q: statistic(values(ok, name), q) for q in QUANTILES}
    outputs = values(ok, "output_tokens")
    wall = wall_time_s(case.requests)
    figures.update(
        output_tokens_mean=statistic(outputs, "mean"), input_tokens_mean=statistic(values(ok, "input_tokens"), "mean"),
        output_tokens_total=sum(outputs),
        overall_output_throughput=sum(outputs) / wall if wall and outputs else None,
        completed_per_min=len(ok) / wall * 60 if wall else None,
        acceptance=acceptance_figures(case, variant.get("numSpeculativeTokens"), ok),
        llmperf=generator_figures(case), telemetry=telemetry_figures(case),
    )
    hourly = variant.get("costPerHourUsd")
    throughput = figures["overall_output_throughput"]
    figures["usd_per_million_output_tokens"] = hourly / (throughput * 3600) * 1e6 if hourly and throughput else None
    return figures


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def greedy(sampling_params: dict[str, Any]) -> bool:
    return sampling_params.get("temperature") == 0


def lossless(sd: CaseResult, base: CaseResult, sampling_params: dict[str, Any]) -> dict[str, Any]:
    """How many SD responses are the baseline's response to the same request (greedy decoding
    with a shared target must not change the text)."""
    if not greedy(sampling_params):
        return {"checked": False, "reason": f"sampling is not greedy ({sampling_params or 'server defaults'})"}
    answers: dict[str, set[str]] = {}
    for r in base.ok:
        answers.setdefault(r.request_sha256, set()).add(r.response_sha256)
    pairs = [r for r in sd.ok if r.request_sha256 in answers]
    mismatched = sorted({r.request_sha256[:12] for r in pairs if r.response_sha256 not in answers[r.request_sha256]})
    return {"checked": True, "compared": len(pairs), "matching": sum(r.response_sha256 in answers[r.request_sha256] for r in pairs),
            "mismatched_requests": mismatched}


def leviathan(sd: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any] | None:
    """The Leviathan bound for the measured acceptance, beside the measured speedup.

    Leviathan's speedup is E[tokens per target step] / (k c + 1); its closed form in the acceptance
    rate a assumes each draft token is accepted independently. Real acceptance is correlated (a
    structured reply accepts whole windows), so the per-token rate would understate the tokens per
    step actually achieved. The bound therefore uses the measured mean acceptance length (the
    counters' 1 + accepted / drafts, else the implied tokens per step) and reports the a that gives
    it in the closed form."""
    k = variant.get("numSpeculativeTokens")
    length, source = sd["acceptance"]["counters"].get("mean_acceptance_length"), "/metrics mean acceptance length"
    if length is None:
        length, source = sd["acceptance"]["tokens_per_step_implied"], "implied tokens per step"
    draft, target = variant.get("draftParamsBillion"), variant.get("targetParamsBillion")
    if length is None or not k or not draft or not target:
        return None
    # No stack serves the draft alone, so its cost per step cannot be measured; parameter counts
    # stand in for it (decode is memory-bound, so cost scales roughly with the weights read).
    c = draft / target
    a = acceptance.implied_acceptance(length, k)
    return {"tokens_per_step": length, "acceptance_source": source, "acceptance_rate": a, "k": k, "cost_ratio": c,
            "cost_ratio_source": f"assumed: draft / target parameters ({draft:g}B / {target:g}B)",
            "speedup_bound": acceptance.leviathan_speedup(a, k, c)}


def sweep_levels(run: dict[str, Any]) -> list[Level]:
    """A sweep's levels, ascending; [] for a run of one level (run.json lists its levels since runs
    could have several; one written before has none)."""
    levels = [Level.from_dict(load) for load in run.get("loads") or []]
    return levels if len(levels) > 1 else []


def sweep_cases(run: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """The run's cases as the report keys them, each (test case, level folder): a run of one level
    keys them by test case; a sweep by "<test case>/<level>" (e.g. "counting/concurrency-4"),
    levels in ascending order under each test case."""
    levels = sweep_levels(run)
    if not levels:
        return {test_case: (test_case, None) for test_case in run["testCases"]}
    return {f"{test_case}/{level.slug}": (test_case, level.slug) for test_case in run["testCases"] for level in levels}


def sweep(run: dict[str, Any]) -> dict[str, Any] | None:
    """What the load-sweep plots need: the kind of load, its levels, and each test case's keys in
    the run's cases, level by level (None for a run of one level)."""
    levels = sweep_levels(run)
    if not levels:
        return None
    return {"kind": levels[0].kind, "levels": [level.value for level in levels],
            "cases": {test_case: [f"{test_case}/{level.slug}" for level in levels] for test_case in run["testCases"]}}


def compare_run(results_dir: Path, run_id: str) -> dict[str, Any]:
    run = load_run(results_dir, run_id)
    sampling = (run.get("shape") or {}).get("samplingParams", {})
    by_name = {v["name"]: v for v in run["variants"]}
    keys = sweep_cases(run)
    cases: dict[str, Any] = {}
    for key, (test_case, level) in keys.items():
        loaded = {v["name"]: load_case(results_dir, run_id, v["name"], test_case, level) for v in run["variants"]}
        figures = {v["name"]: case_figures(loaded[v["name"]], v) for v in run["variants"]}
        for variant in run["variants"]:
            # Every variant that names a baseline is compared with it: an SD variant with the
            # target it speeds up, and a baseline with another baseline (seed 004's FP8 target
            # against the BF16 one). Draft acceptance and losslessness concern SD only.
            if variant.get("baseline") not in figures:
                continue
            current, base = figures[variant["name"]], figures[variant["baseline"]]
            comparison = {
                "baseline": variant["baseline"],
                "speedup_tpot": ratio(base["tpot_s"]["p50"], current["tpot_s"]["p50"]),
                "speedup_e2e": ratio(base["e2e_s"]["p50"], current["e2e_s"]["p50"]),
                "throughput_ratio": ratio(current["tokens_per_s"]["p50"], base["tokens_per_s"]["p50"]),
            }
            decoding = (variant.get("decoding"), by_name[variant["baseline"]].get("decoding"))
            if None not in decoding and decoding[0] != decoding[1]:
                comparison["unlike_decoding"] = {"variant": decoding[0], "baseline": decoding[1]}
            if variant["role"] == "sd":
                comparison["leviathan"] = leviathan(current, variant)
                comparison["lossless"] = lossless(loaded[variant["name"]], loaded[variant["baseline"]], sampling)
            current["vs_baseline"] = comparison
        cases[key] = figures
    compared = {**{k: run.get(k) for k in ("stack", "status", "reason", "startedAt", "finishedAt", "shape", "seed",
                                           "llmperfCommit")},
                # The generator and its pin, where the run recorded them (the report's header).
                **{k: run[k] for k in ("loadGenerator", "loadGeneratorPin") if k in run},
                "variants": run["variants"], "testCases": {key: run["testCases"][tc] for key, (tc, _) in keys.items()},
                "cases": cases}
    if (levels := sweep(run)) is not None:
        compared.update(sweep=levels)
    return compared


def build(results_dir: Path) -> dict[str, Any]:
    return {"runs": {run_id: compare_run(results_dir, run_id) for run_id in list_runs(results_dir)}}
