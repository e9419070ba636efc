"""The figures of a tuning study (benchmark/tuner.py): per configuration and test case, and overall.

Per repeat, a case gives its median TPOT and end-to-end time over the requests that completed
(benchmark/analysis.py case_figures); a case that failed or came up short is left out and listed,
never averaged in. Across repeats:
- speedup: baseline / configuration, the ratio of geometric means with a 95 % Welch interval on
  the log scale (benchmark/intervals.py); "overall" uses, per repeat, the geometric mean over the
  test cases of that repeat (a repeat missing a case is left out of the overall figure);
- acceptance: accepted / drafted tokens and the mean accepted length (1 + accepted / drafts), from
  the server's counters summed over the repeats (else the streamed chunks' implied length), and
  per position where the counters give it;
- goodput: the requests meeting both the TTFT and the TPOT target (study.ttftTargetMs,
  tpotTargetMs), as a share of every request the proxy saw (the population they are counted
  over) and per minute of the case's wall time;
- cost per million output tokens: the configuration's share of the node's list price over its
  measured overall throughput (analysis.case_figures).
- the bound: Leviathan et al.'s speedup E[tokens per step] / (c k + 1), with E measured (the mean
  accepted length) and c the draft's cost per step relative to the target's, measured, never
  assumed, in one of two ways, each labelled:
  - "measured": a plain draft served alone at the stack's shape (study.timeDraftsAlone): its TPOT
    over the baseline's, the ratio of geometric means over the repeats, with its interval;
  - "derived": one SD step takes a + b k (the target verifying, the draft drafting k tokens), its
    time is TPOT x mean accepted length, so the slope b of step time over k, fitted by least
    squares across a draft's windows in this study, over the baseline's TPOT, is c. It needs two
    windows of the draft; it is the only way for an EAGLE3 head (which cannot run alone: it needs
    the target's hidden states). The fit is made per test case and per repeat (that repeat's TPOT
    and counters, over that repeat's baseline TPOT); c is the geometric mean over the repeats with
    the t interval of their logarithms. A repeat whose slope is not positive leaves c out, and a
    t interval of the slopes reaching 0 marks it unstable: the report then recommends timing the
    draft alone. The intercept a over the baseline's TPOT is printed beside it as the
    verification step's cost relative to a plain decode step.
  Where both exist, the bound uses the measured c and the derived one is printed beside it. The
  bound is per test case, from that case's c and mean accepted length; "overall" is the
  geometric mean of the cases' bounds (as the overall speedup is of the cases' speedups), and the
  overall derived c, per repeat, the geometric mean of the cases' c. (A TPOT averaged over the test
  cases times a length pooled over all their steps is no step time: c came out biased.)
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from . import acceptance, analysis
from .intervals import CONFIDENCE, log_interval, ratio_interval, t_quantile
from .results import load_case

STUDY_FILE = "study.json"


def study_ids(results_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in results_dir.glob(f"*/{STUDY_FILE}"))


def run_id(study_id: str, repeat: int) -> str:
    return f"{study_id}/repeat-{repeat}"


def goodput(case, ttft_ms: int | None, tpot_ms: int | None) -> dict[str, Any]:
    """The requests meeting both targets, counted over one population: every request the proxy
    saw, LLMPerf's discarded extras included, which is also what the share divides by. (Counting
    the good over all of them and dividing by the requests asked gave shares above 100 %.) vLLM's
    benchmark does the same: good and completed both over the outputs of the requests it sent
    (vllm-project/vllm@0049e29c:benchmarks/benchmark_serving.py calculate_metrics)."""
    good = [r for r in case.ok
            if (ttft_ms is None or (r.ttft_s is not None and r.ttft_s * 1000 <= ttft_ms))
            and (tpot_ms is None or (r.time_per_output_token_s is not None and r.time_per_output_token_s * 1000 <= tpot_ms))]
    wall = analysis.wall_time_s(case.requests)
    population = len(case.requests)
    return {"good": len(good), "requests": population, "share": len(good) / population if population else None,
            "per_minute": len(good) / wall * 60 if wall else None}


def repeat_figures(results_dir: Path, study: dict, variant: dict, test_case: str) -> dict[int, dict[str, Any]]:
    """Each repeat's usable figures of one (configuration, test case); short or failed ones are
    marked and carry no figures."""
    figures = {}
    for repeat in range(1, study["repeats"] + 1):
        case = load_case(results_dir, run_id(study["id"], repeat), variant["name"], test_case)
        if not case.case:
            continue  # never ran (a failed configuration, or a study still running)
        f = analysis.case_figures(case, variant)
        usable = not case.short and case.case.get("exitCode") == 0 and f["tpot_s"]["p50"] and f["e2e_s"]["p50"]
        entry: dict[str, Any] = {"usable": bool(usable), "completed": f["completed"], "asked": f["asked"],
                                 "exit_code": case.case.get("exitCode")}
        if usable:
            specdecode = case.specdecode or {}
            deltas = (acceptance.counter_deltas(specdecode["before"], specdecode["after"])
                      if "before" in specdecode and "after" in specdecode else None)
            entry.update(tpot_s=f["tpot_s"]["p50"], e2e_s=f["e2e_s"]["p50"], ttft_s=f["ttft_s"]["p50"],
                         usd_per_million=f["usd_per_million_output_tokens"], counters=deltas,
                         implied_length=f["acceptance"]["tokens_per_step_implied"],
                         goodput=goodput(case, study.get("ttftTargetMs"), study.get("tpotTargetMs")))
        figures[repeat] = entry
    return figures


def pooled_acceptance(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Counters summed over the repeats (the rate of all drafted tokens, not a mean of rates)."""
    counted = [r["counters"] for r in repeats if r.get("counters") and r["counters"].get("drafts")]
    if counted:
        total: dict[str, Any] = {k: sum(c.get(k, 0.0) for c in counted) for k in ("drafts", "draft_tokens", "accepted")}
        if all("per_position" in c for c in counted):
            positions = sorted({p for c in counted for p in c["per_position"]}, key=int)
            total["per_position"] = {p: sum(c["per_position"].get(p, 0.0) for c in counted) for p in positions}
        figures = acceptance.from_counters(total)
        return {"rate": figures["acceptance_rate"], "length": figures["mean_acceptance_length"],
                "per_position": figures["per_position"], "source": "/metrics counters"}
    implied = [r["implied_length"] for r in repeats if r.get("implied_length") is not None]
    return {"rate": None, "length": statistics.fmean(implied) if implied else None, "per_position": None,
            "source": "implied from streamed chunks" if implied else "none"}


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y over x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x, mean_y = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - slope * mean_x, slope


def repeat_length(entry: dict[str, Any]) -> float | None:
    """One repeat's mean accepted length: its counters, else its streamed chunks' implied length."""
    counters = entry.get("counters")
    if counters and counters.get("drafts"):
        return acceptance.from_counters(counters)["mean_acceptance_length"]
    return entry.get("implied_length")


def derived_cost(figures: dict, variants: dict[str, dict], draft: str, baseline: str, test_case: str) -> dict[str, Any]:
    """c of `draft` in one test case, from the fit of SD step time over the window, repeat by
    repeat: each repeat's slope over the baseline's TPOT in that repeat (so drift between repeats
    moves both); c is their geometric mean, with the t interval of their logarithms. A repeat
    whose slope is not positive makes c unstable: it is not printed, and the draft should be timed
    alone."""
    names = [n for n, v in variants.items() if v["role"] == "sd" and (v["draft"], v["baseline"]) == (draft, baseline)]
    slopes: dict[int, float] = {}
    intercepts: list[float] = []
    windows = 0
    for repeat, base in sorted(figures[baseline][test_case].items()):
        if not base["usable"]:
            continue
        points = [(variants[n]["numSpeculativeTokens"], e["tpot_s"] * length) for n in names
                  for e in [figures[n][test_case].get(repeat)] if e and e["usable"] and (length := repeat_length(e))]
        line = fit_line(points)
        if line is not None:
            slopes[repeat], windows = line[1] / base["tpot_s"], max(windows, len(points))
            intercepts.append(line[0] / base["tpot_s"])
    if not slopes:
        return {"c": None, "why": "needs two windows of this draft with measured acceptance, and the baseline, in one repeat",
                "windows": len(names)}
    if any(c <= 0 for c in slopes.values()):
        shown = ", ".join(f"repeat {r}: {c:.3f}" for r, c in slopes.items())
        return {"c": None, "unstable": True, "c_repeats": slopes, "windows": windows,
                "why": f"the fitted slope of step time over the window is not positive in every repeat ({shown}): "
                       "this draft's cost is too small to resolve this way"}
    interval = log_interval(list(slopes.values()))
    return {"c": interval["value"], "c_low": interval["low"], "c_high": interval["high"], "c_repeats": slopes,
            "unstable": reaches_zero(list(slopes.values())),
            "verify_ratio": statistics.fmean(intercepts), "windows": windows, "repeats": len(slopes),
            "source": f"derived: slope of SD step time (TPOT x mean accepted length) over the window, least squares "
                      f"across {windows} windows of this draft per repeat, / that repeat's baseline TPOT"}


def reaches_zero(values: list[float], confidence: float = CONFIDENCE) -> bool:
    """Whether Student's t interval of the mean of `values`, on their own scale, reaches 0: the
    repeats do not tell the slope from none."""
    if len(values) < 2:
        return False
    half = t_quantile(1 - (1 - confidence) / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return statistics.fmean(values) - half <= 0


def overall_cost(per_case: list[dict[str, Any]]) -> dict[str, Any]:
    """c over the test cases: per repeat, the geometric mean of the cases' c (the repeats where
    every case has one), then as for one case."""
    missing = [f for f in per_case if f.get("c") is None]
    if missing:
        return {"c": None, "unstable": any(f.get("unstable") for f in missing),
                "why": f"no c in {len(missing)} of {len(per_case)} test cases ({missing[0]['why']})"}
    repeats = sorted(set.intersection(*(set(f["c_repeats"]) for f in per_case)))
    if not repeats:
        return {"c": None, "why": "no repeat gives c in every test case"}
    interval = log_interval([math.exp(statistics.fmean(math.log(f["c_repeats"][r]) for f in per_case)) for r in repeats])
    return {"c": interval["value"], "c_low": interval["low"], "c_high": interval["high"], "repeats": len(repeats),
            "unstable": any(f["unstable"] for f in per_case),
            "verify_ratio": statistics.fmean(f["verify_ratio"] for f in per_case),
            "source": "derived: per repeat, the geometric mean over the test cases of each case's derived c"}


def with_measured(fit: dict[str, Any], measured: dict[str, Any] | None) -> dict[str, Any]:
    """The derived fit, or the measured c (the draft served alone) with the derived one beside it."""
    if not measured or measured["value"] is None:
        return fit
    return {**{f"derived_{k}": v for k, v in fit.items()}, "c": measured["value"], "c_low": measured["low"],
            "c_high": measured["high"], "source": "measured: the draft served alone at the stack's shape, its TPOT / the baseline's"}


def summarize(results_dir: Path, study_record: dict[str, Any]) -> dict[str, Any]:
    study, variants = study_record["study"], {v["name"]: v for v in study_record["variants"]}
    test_cases = list(study_record["testCases"])
    figures = {name: {t: repeat_figures(results_dir, study, v, t) for t in test_cases} for name, v in variants.items()}
    outcomes = study_record["configurations"]
    # A configuration recorded failed (it stopped serving mid-study) keeps the cases it finished in
    # S3, but they are not a measurement of it: none is used, each is listed.
    dropped = [f"{name} / {t} / repeat {r}: the configuration failed ({outcomes[name]['reason']}); not used"
               for name in variants if outcomes.get(name, {}).get("status") == "failed"
               for t in test_cases for r in figures[name][t]]
    for name in variants:
        if outcomes.get(name, {}).get("status") == "failed":
            figures[name] = {t: {} for t in test_cases}
    table: dict[str, dict[str, dict[str, Any]]] = {}
    derived: dict[tuple[str, str], dict[str, Any]] = {}
    """(configuration, test case) -> its draft's derived c there."""
    excluded = dropped + [f"{name} / {t} / repeat {r}: {e['completed']} of {e['asked']} completed, LLMPerf exit {e['exit_code']}"
                for name, by_case in figures.items() for t, repeats in by_case.items() for r, e in repeats.items() if not e["usable"]]
    for scope in test_cases + ["overall"]:
        rows: dict[str, dict[str, Any]] = {}
        for name, v in variants.items():
            samples = _samples(figures[name], test_cases, scope)
            usable = [e for t in (test_cases if scope == "overall" else [scope]) for e in figures[name][t].values() if e["usable"]]
            row: dict[str, Any] = {"repeats": len(samples["tpot_s"]),
                                   "tpot_s": _geomean(samples["tpot_s"]), "e2e_s": _geomean(samples["e2e_s"]),
                                   "acceptance": pooled_acceptance(usable),
                                   "usd_per_million": _mean([e["usd_per_million"] for e in usable]),
                                   "goodput": _pooled_goodput(usable)}
            if v.get("baseline"):
                base = _samples(figures[v["baseline"]], test_cases, scope)
                row["speedup_tpot"] = ratio_interval(base["tpot_s"], samples["tpot_s"])
                row["speedup_e2e"] = ratio_interval(base["e2e_s"], samples["e2e_s"])
            rows[name] = row
        # c measured: the draft served alone, its TPOT / the baseline's.
        alone = {(draft, variants[name]["baseline"]): ratio_interval(*_alone_pair(figures, variants[name], test_cases, scope))
                 for name, draft in (study.get("draftsAlone") or {}).items()}
        for name in (n for n in rows if variants[n]["role"] == "sd"):
            v, row = variants[name], rows[name]
            key = (v["draft"], v["baseline"])
            speedup = row["speedup_tpot"]["value"]
            if scope == "overall":
                # Over the test cases: c from the cases' fits, and the bound the geometric mean of
                # the cases' bounds, as the overall speedup is of the cases' speedups.
                fit = with_measured(overall_cost([derived[(name, t)] for t in test_cases]), alone.get(key))
                bounds = [table[t][name]["bound"]["speedup_bound"] for t in test_cases]
                bound = _geomean(bounds) if all(bounds) else None
                row["bound"] = {**fit, "speedup_bound": bound, "reached": speedup / bound if bound and speedup else None}
            else:
                derived[(name, scope)] = derived_cost(figures, variants, *key, scope)
                fit = with_measured(derived[(name, scope)], alone.get(key))
                length = row["acceptance"]["length"]
                bound = length / (fit["c"] * v["numSpeculativeTokens"] + 1) if fit["c"] is not None and length else None
                row["bound"] = {**fit, "speedup_bound": bound, "reached": speedup / bound if bound and speedup else None}
        table[scope] = rows
    return {"study": study, "status": study_record["status"], "reason": study_record.get("reason"),
            "configurations": study_record["configurations"], "variants": study_record["variants"],
            "testCases": test_cases, "table": table, "excluded": excluded,
            "best": {scope: best(rows, variants) for scope, rows in table.items()}}


def _alone_pair(figures: dict, variant: dict, test_cases: list[str], scope: str) -> tuple[list[float], list[float]]:
    """(draft-alone TPOTs, baseline TPOTs) per repeat, for c = alone / baseline."""
    return (_samples(figures[variant["name"]], test_cases, scope)["tpot_s"],
            _samples(figures[variant["baseline"]], test_cases, scope)["tpot_s"])


def _samples(by_case: dict[str, dict[int, dict]], test_cases: list[str], scope: str) -> dict[str, list[float]]:
    """Per-repeat medians of one test case, or (overall) per repeat the geometric mean over every
    test case, for the repeats where every case is usable."""
    if scope != "overall":
        usable = [e for _, e in sorted(by_case[scope].items()) if e["usable"]]
        return {k: [e[k] for e in usable] for k in ("tpot_s", "e2e_s")}
    repeats = sorted(set.intersection(*(set(r for r, e in by_case[t].items() if e["usable"]) for t in test_cases)))
    return {k: [math.exp(statistics.fmean(math.log(by_case[t][r][k]) for t in test_cases)) for r in repeats]
            for k in ("tpot_s", "e2e_s")}


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _pooled_goodput(usable: list[dict]) -> dict[str, Any]:
    requests = sum(e["goodput"]["requests"] for e in usable)
    good = sum(e["goodput"]["good"] for e in usable)
    return {"good": good, "requests": requests, "share": good / requests if requests else None,
            "per_minute": _mean([e["goodput"]["per_minute"] for e in usable])}


def best(rows: dict[str, dict[str, Any]], variants: dict[str, dict]) -> dict[str, Any] | None:
    """The SD configuration with the highest TPOT speedup, and those whose interval reaches it
    (not distinguishable from it with these repeats)."""
    ranked = sorted(((r["speedup_tpot"]["value"], n) for n, r in rows.items()
                     if variants[n]["role"] == "sd" and r.get("speedup_tpot", {}).get("value")), reverse=True)
    if not ranked:
        return None
    value, name = ranked[0]
    close = [n for _, n in ranked[1:] if (rows[n]["speedup_tpot"]["high"] or 0) >= (rows[name]["speedup_tpot"]["low"] or value)]
    return {"variant": name, "speedup_tpot": value, "indistinguishable": close}


def build(results_dir: Path) -> dict[str, Any]:
    return {sid: summarize(results_dir, json.loads((results_dir / sid / STUDY_FILE).read_text())) for sid in study_ids(results_dir)}
