"""The figures of a tuning study (benchmark/tuner.py): per configuration and test case, and overall.

Per repeat, a case gives its median TPOT and end-to-end time over the requests that completed
(reporting/analysis.py case_figures); a case that failed or came up short is left out and listed,
never averaged in. Across repeats:
- speedup: per repeat, the baseline's figure measured next to the configuration (in its block,
  repeat-<r>/beside-<configuration>/; where the pair does not fit the nodes, the repeat's own
  measurement of the baseline) over the configuration's: a paired ratio; their geometric mean
  with the 95 % t interval of their logarithms (reporting/intervals.py); "overall" uses, per
  repeat, the geometric mean over the test cases of that repeat's ratios (a repeat missing a case
  is left out of the overall figure). "Not distinguishable from the best": the per-repeat ratio
  of the best's speedup to the other's, whose interval reaches 1;
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
A study at several load levels (load as its third axis) is summarized level by level, every figure
above from that level's cases only, each speedup paired with the baseline measured at that level
(build: one summary per level).
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from benchmark import acceptance
from benchmark.loadgen import Level, generator
from benchmark.results import STUDY_FILE, load_case, study_run_id

from . import analysis
from .intervals import CONFIDENCE, log_interval, t_quantile


def study_ids(results_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in results_dir.glob(f"*/{STUDY_FILE}"))


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


def case_entry(results_dir: Path, study: dict, variant: dict, test_case: str, run: str, label: str,
               level: str | None = None) -> dict[str, Any] | None:
    """One measured case's usable figures (at `level`, a level folder, in a study of several); a
    short or failed one is marked and carries none; None if it never ran (a failed configuration,
    or a study still running)."""
    case = load_case(results_dir, run, variant["name"], test_case, level)
    if not case.case:
        return None
    f = analysis.case_figures(case, variant)
    usable = not case.short and case.case.get("exitCode") == 0 and f["tpot_s"]["p50"] and f["e2e_s"]["p50"]
    entry: dict[str, Any] = {"usable": bool(usable), "completed": f["completed"], "asked": f["asked"],
                             "exit_code": case.case.get("exitCode"), "label": label,
                             "generator": generator(case.case.get("generator")).title}
    if usable:
        specdecode = case.specdecode or {}
        deltas = (acceptance.counter_deltas(specdecode["before"], specdecode["after"])
                  if "before" in specdecode and "after" in specdecode else None)
        entry.update(tpot_s=f["tpot_s"]["p50"], e2e_s=f["e2e_s"]["p50"], ttft_s=f["ttft_s"]["p50"],
                     usd_per_million=f["usd_per_million_output_tokens"], counters=deltas,
                     implied_length=f["acceptance"]["tokens_per_step_implied"],
                     goodput=goodput(case, study.get("ttftTargetMs"), study.get("tpotTargetMs")))
    return entry


def repeat_figures(results_dir: Path, study: dict, variant: dict, test_case: str, beside: str | None = None,
                   level: str | None = None) -> dict[Any, dict]:
    """Each repeat's figures of one (server, test case, level): measured in its own block, or
    (`beside`) the baseline measured in that configuration's block."""
    labels = {r: f"repeat {r}" + (f" beside {beside}" if beside else "") for r in range(1, study["repeats"] + 1)}
    return {r: entry for r, label in labels.items()
            if (entry := case_entry(results_dir, study, variant, test_case, study_run_id(study["id"], r, beside), label, level))}


def paired_baseline(results_dir: Path, study: dict, baseline: dict, variant: str, test_case: str,
                    level: str | None = None) -> dict[int, dict]:
    """Per repeat, the baseline measured next to `variant` at the same level: in its block (the
    tuner measures the baseline beside each configuration where the pair fits the nodes), else the
    repeat's own measurement of the baseline (one server at a time; and studies from before)."""
    beside = repeat_figures(results_dir, study, baseline, test_case, beside=variant, level=level)
    return {**repeat_figures(results_dir, study, baseline, test_case, level=level), **beside}


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


def derived_cost(figures: dict, bases: dict, variants: dict[str, dict], draft: str, baseline: str,
                 test_case: str) -> dict[str, Any]:
    """c of `draft` in one test case, from the fit of SD step time over the window, repeat by
    repeat: each configuration's step time over the baseline's TPOT measured next to it (so drift
    between blocks moves both), its slope over the window c for that repeat; c is their geometric
    mean, with the t interval of their logarithms. A repeat whose slope is not positive makes c
    unstable: it is not printed, and the draft should be timed alone."""
    names = [n for n, v in variants.items() if v["role"] == "sd" and (v["draft"], v["baseline"]) == (draft, baseline)]
    slopes: dict[Any, float] = {}
    intercepts: list[float] = []
    windows = 0
    for repeat in sorted({r for n in names for r in figures[n][test_case]}):
        points = [(variants[n]["numSpeculativeTokens"], e["tpot_s"] * length / base["tpot_s"]) for n in names
                  for e, base in [(figures[n][test_case].get(repeat), bases[n][test_case].get(repeat))]
                  if e and e["usable"] and base and base["usable"] and (length := repeat_length(e))]
        line = fit_line(points)
        if line is not None:
            slopes[repeat], windows = line[1], max(windows, len(points))
            intercepts.append(line[0])
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
                      f"across {windows} windows of this draft per repeat, each over the baseline's TPOT measured next to it"}


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


def summarize(results_dir: Path, study_record: dict[str, Any], study_id: str | None = None,
              level: Level | None = None) -> dict[str, Any]:
    """The study's figures, or (a study of several load levels) one level's: every figure of it,
    the speedups each paired with the baseline measured at that level, never another's."""
    study, variants = study_record["study"], {v["name"]: v for v in study_record["variants"]}
    test_cases = list(study_record["testCases"])
    outcomes = study_record["configurations"]
    where = level.slug if level else None
    figures = {name: {t: repeat_figures(results_dir, study, v, t, level=where) for t in test_cases} for name, v in variants.items()}
    for name, v in variants.items():
        compared = [n for n, c in variants.items() if c.get("baseline") == name]
        if compared and not any(figures[name].values()):
            # Measured only beside the configurations compared with it (the paired design).
            figures[name] = {t: {f"{r} beside {n}": e for n in compared
                                 for r, e in repeat_figures(results_dir, study, v, t, beside=n, level=where).items()}
                             for t in test_cases}
    bases = {name: {t: paired_baseline(results_dir, study, variants[v["baseline"]], name, t, where) for t in test_cases}
             for name, v in variants.items() if v.get("baseline")}
    # A configuration recorded failed (it stopped serving mid-study) keeps the cases it finished in
    # S3, but they are not a measurement of it: none is used, each is listed.
    failed = [name for name in variants if outcomes.get(name, {}).get("status") == "failed"]
    dropped = [f"{name} / {t} / {e['label']}: the configuration failed ({outcomes[name]['reason']}); not used"
               for name in failed for t in test_cases for e in figures[name][t].values()]
    for name in failed:
        figures[name] = {t: {} for t in test_cases}
    for name in bases:
        if variants[name]["baseline"] in failed:
            bases[name] = {t: {} for t in test_cases}
    # Short or crashed cases, the baseline's measured beside each configuration included, each once.
    short = {f"{name} / {t} / {e['label']}: {e['completed']} of {e['asked']} completed, {e['generator']} exit {e['exit_code']}": None
             for name, by_case in [*figures.items(), *((variants[n]["baseline"], b) for n, b in bases.items())]
             for t, repeats in by_case.items() for e in repeats.values() if not e["usable"]}
    excluded = dropped + list(short)
    table: dict[str, dict[str, dict[str, Any]]] = {}
    derived: dict[tuple[str, str], dict[str, Any]] = {}
    """(configuration, test case) -> its draft's derived c there."""
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
                for key in ("tpot_s", "e2e_s"):
                    ratios = paired_ratios(figures[name], bases[name], test_cases, scope, key)
                    row[f"speedup_{key[:-2]}"] = {**speedup_interval(list(ratios.values())), "per_repeat": ratios}
            rows[name] = row
        # c measured: the draft served alone, its TPOT / the baseline's (1 / its paired speedup).
        alone = {(draft, variants[name]["baseline"]): inverse(rows[name]["speedup_tpot"])
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
                derived[(name, scope)] = derived_cost(figures, bases, variants, *key, scope)
                fit = with_measured(derived[(name, scope)], alone.get(key))
                length = row["acceptance"]["length"]
                bound = length / (fit["c"] * v["numSpeculativeTokens"] + 1) if fit["c"] is not None and length else None
                row["bound"] = {**fit, "speedup_bound": bound, "reached": speedup / bound if bound and speedup else None}
        table[scope] = rows
    return {"study": study, "studyId": study_id or study["id"], "load": level.as_dict() if level else None,
            "status": study_record["status"], "reason": study_record.get("reason"),
            "configurations": study_record["configurations"], "variants": study_record["variants"],
            "testCases": test_cases, "table": table, "excluded": excluded,
            "best": {scope: best(rows, variants) for scope, rows in table.items()}}


def paired_ratios(own: dict[str, dict], base: dict[str, dict], test_cases: list[str], scope: str, key: str) -> dict[Any, float]:
    """Per repeat, the baseline's figure measured next to the configuration over the configuration's
    (a test case), or (overall) the geometric mean of those over every test case, for the repeats
    where every case has a usable pair."""
    def of(t: str) -> dict[Any, float]:
        return {r: base[t][r][key] / e[key] for r, e in own[t].items()
                if e["usable"] and r in base[t] and base[t][r]["usable"]}
    if scope != "overall":
        return of(scope)
    per_case = [of(t) for t in test_cases]
    repeats = sorted(set.intersection(*(set(p) for p in per_case)))
    return {r: math.exp(statistics.fmean(math.log(p[r]) for p in per_case)) for r in repeats}


def speedup_interval(ratios: list[float]) -> dict[str, Any]:
    """The geometric mean of the paired ratios and the t interval of their logarithms (a paired
    t interval: what moves both sides of a pair, drift between blocks, cancels)."""
    if not ratios:
        return {"value": None, "low": None, "high": None, "df": None, "repeats": 0}
    return {**log_interval(ratios), "repeats": len(ratios)}


def inverse(interval: dict[str, Any]) -> dict[str, Any]:
    """1 / a ratio with its interval (the bounds swap)."""
    value, low, high = interval["value"], interval["low"], interval["high"]
    return {"value": 1 / value if value else None, "low": 1 / high if high else None, "high": 1 / low if low else None}


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
    """The SD configuration with the highest TPOT speedup, and those not told apart from it: a
    direct paired comparison, per repeat the best's speedup over the other's (each against the
    baseline measured next to it), whose interval reaches 1."""
    ranked = sorted(((r["speedup_tpot"]["value"], n) for n, r in rows.items()
                     if variants[n]["role"] == "sd" and r.get("speedup_tpot", {}).get("value")), reverse=True)
    if not ranked:
        return None
    value, name = ranked[0]
    close = []
    for _, other in ranked[1:]:
        mine, theirs = rows[name]["speedup_tpot"]["per_repeat"], rows[other]["speedup_tpot"]["per_repeat"]
        common = [r for r in mine if r in theirs]
        comparison = log_interval([mine[r] / theirs[r] for r in common]) if common else None
        if comparison is None or comparison["low"] is None or comparison["low"] <= 1:
            close.append(other)
    return {"variant": name, "speedup_tpot": value, "indistinguishable": close}


def build(results_dir: Path) -> dict[str, Any]:
    """Per study its summary; a study of several load levels (load as its third axis) has one per
    level, <study>-<level> (e.g. ...-concurrency-8), in the order of its levels: the best
    configuration can differ with load."""
    report: dict[str, Any] = {}
    for sid in study_ids(results_dir):
        record = json.loads((results_dir / sid / STUDY_FILE).read_text())
        levels = [Level.from_dict(load) for load in record.get("loads") or []]
        if len(levels) > 1:
            report.update({f"{sid}-{level.slug}": summarize(results_dir, record, sid, level) for level in levels})
        else:
            report[sid] = summarize(results_dir, record, sid)
    return report
