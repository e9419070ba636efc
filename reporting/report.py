"""Compare variants per test case and write report.md, report.png, report.json and report.csv.

    python -m reporting.report DIR

The figures and their sources are reporting/analysis.py's; this module lays them out. Each run
opens with a summary across its test cases; every table says where its numbers come from; a short
or failed case is flagged, never averaged away; the stack's seed's published figures are printed
beside the measured ones (reporting/seedcompare.py). report.csv holds every figure, one row per
(run, test case, variant), for a notebook.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from benchmark.loadgen import generator

from . import analysis, seedcompare

GiB = 1024 ** 3
SOURCES = (
    "Sources: **proxy** = timed by the measuring proxy beside {generators} in the benchmark pod; **server** = token "
    "counts from the server's usage chunk; **/metrics** = the server's speculative-decoding counters (before/after "
    "the case); **implied** = from streamed chunks, assuming one chunk per target step; {own_sources}; **Container Insights** = node-level Neuron metrics of the variant's devices; "
    "**approximate** = catalog list price; **assumed** = draft/target parameter ratio as the draft's relative cost. "
    "TPOT = (end-to-end - TTFT) / (output tokens - 1) per request. Speedup = the named baseline / the variant (above 1: the variant is faster). "
    "Implied acceptance and the Leviathan bound's a are the per-token rate that would give the tokens per step "
    "observed if draft tokens were accepted independently (Leviathan et al.); /metrics' acceptance is accepted / "
    "drafted tokens, lower when acceptance comes in runs.")
"""What every figure's source means; {generators}: the load generators of the report's runs, {own_sources}:
what their own summaries' figures are (sources())."""


def number(value: float | None, scale: float = 1.0, digits: int = 1, suffix: str = "") -> str:
    """A figure as the reports print it: scaled, rounded, with its unit; "n/a" when there is none."""
    return "n/a" if value is None else f"{value * scale:.{digits}f}{suffix}"


def _triple(figures: dict[str, float | None], scale: float, digits: int) -> str:
    return " / ".join(number(figures[q], scale, digits) for q in analysis.QUANTILES)


def _pct(value: float | None) -> str:
    return number(value, 100, 1, "%")


def _counts(f: dict[str, Any]) -> str:
    text = f"{f['completed']} / {f['failed']} of {f['asked'] if f['asked'] is not None else '?'}"
    return text + " **SHORT**" if f["short"] else text


def generator_title(run: dict[str, Any]) -> str:
    """The title of the load generator that ran (a run recorded before runs named theirs ran LLMPerf)."""
    return generator(run.get("loadGenerator")).title


def sources(report: dict[str, Any]) -> str:
    """SOURCES, naming the load generators of the report's runs (a report of no run: the default's)."""
    ran = list(dict.fromkeys(generator(run.get("loadGenerator")) for run in report["runs"].values())) or [generator(None)]
    return SOURCES.format(generators=" or ".join(g.title for g in ran), own_sources="; ".join(g.own_source for g in ran))


def generator_and_pin(run: dict[str, Any]) -> str:
    """The generator that ran and what it ran at, as the run recorded them; a run recorded before
    runs named their generator ran LLMPerf at its llmperfCommit."""
    pin = run.get("loadGeneratorPin") or (run.get("llmperfCommit") if "loadGenerator" not in run else None)
    return f"{generator_title(run)} {str(pin)[:12] if pin else '(not recorded)'}"


def _flags(name: str, f: dict[str, Any], title: str) -> list[str]:
    """What to read with care in a variant's case; `title` names the load generator that ran."""
    flags, llmperf = [], f["llmperf"]
    if llmperf["exit_code"] not in (None, 0):
        flags.append(f"- **{name}: {title} failed** (exit {llmperf['exit_code']}): `{llmperf['error']}`")
    elif llmperf["thread_deaths"]:
        flags.append(f"- **{name}: LLMPerf lost {llmperf['thread_deaths']} worker thread(s)** (`{llmperf['error']}`); "
                     f"it recorded {llmperf['completed']} request(s), the proxy {f['completed']} completed and {f['failed']} failed")
    if f["short"]:
        flags.append(f"- **{name}: short case**: {f['completed']} completed + {f['failed']} failed of {f['asked']} requests asked")
    if f["token_source"] not in (None, "server usage"):
        flags.append(f"- {name}: output tokens from {f['token_source']}")
    return flags


def _speedup(vs: dict[str, Any], key: str) -> str:
    """A speedup over the baseline the variant names, or blank for a variant compared with none."""
    return f"{number(vs.get(key), digits=2, suffix='x')} vs {vs['baseline']}" if vs else ""


def _case_tables(run: dict[str, Any], figures: dict[str, Any]) -> list[str]:
    variants, ran = run["variants"], generator(run.get("loadGenerator"))
    lines = ["| variant | completed / failed of asked | out tokens (server, mean) | in tokens (server, mean) | "
             f"overall out tok/s | completed/min | $ per 1M out tokens (approximate) | {ran.title}: completed, ITL p50 ({ran.own_itl}), out tokens p50 |",
             "|---|---|---|---|---|---|---|---|"]
    for v in variants:
        f = figures[v["name"]]
        lp = f["llmperf"]
        lines.append(f"| {v['name']} ({v['role']}) | {_counts(f)} | {number(f['output_tokens_mean'])} | {number(f['input_tokens_mean'])} | "
                     f"{number(f['overall_output_throughput'])} | {number(f['completed_per_min'])} | {number(f['usd_per_million_output_tokens'], digits=2, suffix=' USD')} | "
                     f"{lp['completed'] if lp['completed'] is not None else 'none'}, {number(lp['itl_p50_s'], 1000, 2, ' ms')}, {number(lp['output_tokens_p50'])} |")
    lines += ["", "p50 / p90 / p99 (proxy timings, server tokens):", "",
              "| variant | TTFT (ms) | TPOT (ms) | E2E (s) | out tok/s per request | speedup TPOT | speedup E2E |",
              "|---|---|---|---|---|---|---|"]
    for v in variants:
        f = figures[v["name"]]
        vs = f.get("vs_baseline") or {}
        lines.append(f"| {v['name']} ({v['role']}) | {_triple(f['ttft_s'], 1000, 1)} | {_triple(f['tpot_s'], 1000, 2)} | "
                     f"{_triple(f['e2e_s'], 1, 2)} | {_triple(f['tokens_per_s'], 1, 1)} | "
                     f"{_speedup(vs, 'speedup_tpot')} | {_speedup(vs, 'speedup_e2e')} |")
    lines += ["", "| variant | tokens per step (implied) | acceptance (implied) | acceptance (/metrics) | mean acceptance length (/metrics) | per position (/metrics) | Leviathan bound | lossless (greedy) |",
              "|---|---|---|---|---|---|---|---|"]
    for v in variants:
        f = figures[v["name"]]
        a, vs = f["acceptance"], f.get("vs_baseline") or {}
        counters = a["counters"]
        per_position = ", ".join(f"{p:.2f}" for p in counters["per_position"]) if counters.get("per_position") else "n/a"
        counted = _pct(counters.get("acceptance_rate")) if counters.get("acceptance_rate") is not None else counters.get("note") or "n/a"
        bound = vs.get("leviathan")
        bound_text = (f"{bound['speedup_bound']:.2f}x for {bound['tokens_per_step']:.2f} tokens/step "
                      f"({bound['acceptance_source']}; a={bound['acceptance_rate']:.2f}), k={bound['k']}, "
                      f"c={bound['cost_ratio']:.3f} ({bound['cost_ratio_source']}); measured "
                      f"{number(vs.get('speedup_tpot'), digits=2, suffix='x')}") if bound else ""
        lossless = vs.get("lossless")
        lossless_text = "" if not lossless else (
            f"{lossless['matching']} of {lossless['compared']} match the baseline"
            + (f"; **differ: {', '.join(lossless['mismatched_requests'])}**" if lossless["mismatched_requests"] else "")
            if lossless["checked"] else f"not checked: {lossless['reason']}")
        lines.append(f"| {v['name']} ({v['role']}) | {number(a['tokens_per_step_implied'], digits=2)} | {_pct(a['acceptance_rate_implied'])} | "
                     f"{counted} | {number(counters.get('mean_acceptance_length'), digits=2)} | {per_position} | {bound_text} | {lossless_text} |")
    lines += ["", "| variant | Neuron devices (Container Insights) | NeuronCore utilization mean / max | device memory used mean / max |",
              "|---|---|---|---|"]
    for v in variants:
        t = figures[v["name"]]["telemetry"]
        where = f"{t['node']} {t['neuron_devices']}" if t["node"] else t["reason"] or t["status"]
        lines.append(f"| {v['name']} ({v['role']}) | {where} ({t['status']}) | {number(t['utilization_mean_pct'], suffix='%')} / "
                     f"{number(t['utilization_max_pct'], suffix='%')} | {number(t['memory_mean_bytes'], 1 / GiB, 1, ' GiB')} / "
                     f"{number(t['memory_max_bytes'], 1 / GiB, 1, ' GiB')} |")
    flags = [flag for v in variants for flag in _flags(v["name"], figures[v["name"]], generator_title(run))]
    flags += [_unlike_decoding(v["name"], figures[v["name"]]["vs_baseline"], run) for v in variants
              if (figures[v["name"]].get("vs_baseline") or {}).get("unlike_decoding")]
    return lines + ([""] + flags if flags else [])


def _unlike_decoding(name: str, vs: dict[str, Any], run: dict[str, Any]) -> str:
    unlike = vs["unlike_decoding"]
    sampling = json.dumps((run.get("shape") or {}).get("samplingParams"))
    return (f"- **{name} decodes {'greedily' if unlike['variant'] == 'greedy' else 'by sampling'}, its baseline {vs['baseline']} "
            f"{'greedily' if unlike['baseline'] == 'greedy' else 'by sampling'}** for requests with sampling {sampling}: the "
            "speedup beside it compares unlike decoding (on the legacy engine a baseline follows each request, fused "
            "speculation is compiled greedy; docs/engines.md).")


def _seed_section(seed: dict[str, Any]) -> list[str]:
    lines = [f"### Seed {seed['seed']}: {seed['title']}", "",
             f"Published in {seed['document']}; its statistic: {seed['statistic']}. "
             f"'LLMPerf' is this run's LLMPerf summary at the seed's statistic, defined as the seed's figure was.", ""]
    differs = [row for row in seed["shape"] if row["differs"]]
    lines += [f"Shape ({seed['shapeCite']}): " + ("same as the seed where it says." if not differs else
              "**differs**: " + "; ".join(f"{r['field']} seed {r['seed']!r}, run {r['run']!r}" for r in differs)), ""]
    if seed["figures"]:
        lines += ["| test case | variant | metric | statistic | seed | measured | measured as | LLMPerf | where in the document |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in seed["figures"]:
            derived = f"; **derived**: {row['derived']}" if row.get("derived") else ""
            lines.append(f"| {row['testCase']} | {row['variant']} | {row['metric']} | {row['statistic']} | {row['published']:.6g} | "
                         f"{number(row['measured'], digits=4)} | {row['measuredAs']} | {number(row['llmperf'], digits=4)} | "
                         f"{row['cite']}{derived} |")
    lines += [f"- {note}" for note in seed["notes"] + seed["missing"]]
    return lines + [""]


STATUS_WORDS = {"running": "RUNNING (or its pod died before finishing: check the Job)", "complete": "complete",
                "incomplete": "INCOMPLETE", "failed": "FAILED"}


def _summary(run: dict[str, Any]) -> list[str]:
    """Each variant compared with a baseline, across the run's test cases: the geometric mean of its
    per-case speedups and their range, and the cases to read with care."""
    compared = [v for v in run["variants"] if v.get("baseline")]
    cases = list(run["testCases"])
    if not compared or not cases:
        return []
    lines = [f"Summary across the {len(cases)} test case(s): the geometric mean of the per-case speedups (p50), their "
             "range, and the cases flagged below their tables.", "",
             "| variant | vs | TPOT speedup | E2E speedup | flagged cases |", "|---|---|---|---|---|"]
    for v in compared:
        cells = []
        for key in ("speedup_tpot", "speedup_e2e"):
            values = [x for t in cases if (x := (run["cases"][t][v["name"]].get("vs_baseline") or {}).get(key))]
            mean = math.exp(statistics.fmean(math.log(x) for x in values)) if values else None
            cells.append(f"{mean:.2f}x ({min(values):.2f}x to {max(values):.2f}x; {len(values)} of {len(cases)} cases)"
                         if values else "n/a")
        flagged = [t for t in cases if any(_flags(n, run["cases"][t][n], generator_title(run)) for n in (v["name"], v["baseline"]))]
        lines.append(f"| {v['name']} | {v['baseline']} | {cells[0]} | {cells[1]} | {', '.join(flagged) or 'none'} |")
    return lines + [""]


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Speculative decoding benchmark", "", sources(report), ""]
    for run_id, run in report["runs"].items():
        shape = run.get("shape") or {}
        status = STATUS_WORDS.get(run.get("status") or "", str(run.get("status")))
        lines += [f"## Run {run_id} ({run.get('stack')}): {status}", ""]
        if run.get("reason"):
            lines += [f"**{run['reason']}**", ""]
        lines += [f"{shape.get('inputTokens')} input / {shape.get('outputTokens')} output tokens, concurrency "
                  f"{shape.get('concurrency')}, {shape.get('requestsPerTestCase')} requests per test case, sampling "
                  f"{json.dumps(shape.get('samplingParams'))}, {generator_and_pin(run)}; "
                  f"started {run.get('startedAt')}, finished {run.get('finishedAt') or 'not yet'}.", ""]
        if run.get("sweep"):
            lines += [_sweep_line(run), ""]
        lines += _summary(run)
        for test_case, prompt in run["testCases"].items():
            lines += [f"### {test_case}", "", f"Prompt: {json.dumps(prompt) if prompt is not None else generator(run.get('loadGenerator')).own_text}", ""]
            lines += _case_tables(run, run["cases"][test_case]) + [""]
        if run.get("seedComparison"):
            lines += _seed_section(run["seedComparison"])
    if not report["runs"]:
        lines.append("No runs found.")
    return "\n".join(lines) + "\n"


SWEEP_CHART = "report-sweep.png"
SWEEP_AXES = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (requests/s)"}
SWEEP_PANELS = (("tpot_s", "TPOT p50 (ms)", 1000), ("ttft_s", "TTFT p50 (ms)", 1000),
                ("overall_output_throughput", "output tokens/s", 1), ("speedup_tpot", "TPOT speedup over baseline", 1))


def _sweep_line(run: dict[str, Any]) -> str:
    sweep = run["sweep"]
    levels = ", ".join(f"{level:g}" for level in sweep["levels"])
    return (f"Load sweep by {generator_title(run)}: {sweep['kind']} {levels}; each test case below is measured at "
            f"every level (`<test case>/<level>`); {SWEEP_CHART} plots TPOT, TTFT and throughput against load, and the speedup.")


def sweep_series(run: dict[str, Any]) -> dict[str, dict[str, dict[str, list[float | None]]]]:
    """What the sweep chart plots, per test case and figure: each variant's values level by level
    (TPOT and TTFT p50, overall output throughput; the speedup for variants that name a baseline)."""
    series: dict[str, dict[str, dict[str, list[float | None]]]] = {}
    for test_case, keys in run["sweep"]["cases"].items():
        by_figure: dict[str, dict[str, list[float | None]]] = {figure: {} for figure, _, _ in SWEEP_PANELS}
        for variant in run["variants"]:
            at = [run["cases"][key][variant["name"]] for key in keys]
            by_figure["tpot_s"][variant["name"]] = [f["tpot_s"]["p50"] for f in at]
            by_figure["ttft_s"][variant["name"]] = [f["ttft_s"]["p50"] for f in at]
            by_figure["overall_output_throughput"][variant["name"]] = [f["overall_output_throughput"] for f in at]
            if variant.get("baseline"):
                by_figure["speedup_tpot"][variant["name"]] = [(f.get("vs_baseline") or {}).get("speedup_tpot") for f in at]
        series[test_case] = by_figure
    return series


def sweep_chart(run_id: str, run: dict[str, Any], path: Path) -> None:
    """One row per test case: TPOT, TTFT, throughput and speedup against load, a line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series, levels = sweep_series(run), run["sweep"]["levels"]
    figure, axes = plt.subplots(len(series), len(SWEEP_PANELS), figsize=(4 * len(SWEEP_PANELS), 3.2 * len(series)),
                                dpi=110, squeeze=False)
    for row, (test_case, by_figure) in zip(axes, series.items()):
        for axis, (figure_name, label, scale) in zip(row, SWEEP_PANELS):
            for variant, values in by_figure[figure_name].items():
                points = [(level, value * scale) for level, value in zip(levels, values) if value is not None]
                axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=variant)
            axis.set_title(f"{test_case}: {label}", fontsize=9)
            axis.set_xlabel(SWEEP_AXES[run["sweep"]["kind"]], fontsize=8)
            axis.set_xticks(levels)
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.suptitle(f"{run.get('stack')} run {run_id} ({run.get('status')}): load sweep by {generator_title(run)}")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def chart(report: dict[str, Any], path: Path) -> None:
    """TPOT p50 per variant and test case (latest run), SD speedup and acceptance annotated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(12, 5.5), dpi=110)
    if not report["runs"]:
        axis.text(0.5, 0.5, "No runs found", ha="center", va="center")
        axis.axis("off")
        figure.savefig(path)
        plt.close(figure)
        return
    run_id, run = list(report["runs"].items())[-1]
    cases, variants = list(run["testCases"]), run["variants"]
    width = 0.8 / max(1, len(variants))
    for index, variant in enumerate(variants):
        values = [(run["cases"][c][variant["name"]]["tpot_s"]["p50"] or 0) * 1000 for c in cases]
        positions = [i + (index - (len(variants) - 1) / 2) * width for i in range(len(cases))]
        bars = axis.bar(positions, values, width, label=f"{variant['name']} ({variant['role']})")
        for bar, case in zip(bars, cases):
            f = run["cases"][case][variant["name"]]
            x = bar.get_x() + bar.get_width() / 2
            if not f["completed"]:
                axis.annotate("no data", (x, 0), ha="center", va="bottom", fontsize=8, rotation=90)
                continue
            vs = f.get("vs_baseline") or {}
            label = f"{vs['speedup_tpot']:.2f}x" if vs.get("speedup_tpot") else ""
            rate = f["acceptance"]["counters"].get("acceptance_rate") or f["acceptance"]["acceptance_rate_implied"]
            if variant["role"] == "sd" and rate is not None:
                label += f"\na={rate:.2f}"
            if f["failed"] or f["short"]:
                label += f"\n{f['failed']} failed" + (" SHORT" if f["short"] else "")
            if label:
                axis.annotate(label.strip(), (x, bar.get_height()), ha="center", va="bottom", fontsize=8, fontweight="bold")
    axis.set_xticks(range(len(cases)), cases, rotation=25, ha="right")
    axis.set_ylabel("time per output token, p50 (ms) - lower is better")
    axis.set_title(f"{run.get('stack')} run {run_id} ({run.get('status')}): decode speed per test case\n"
                   "labels: speedup over the variant's baseline, SD acceptance rate a")
    axis.set_ylim(top=axis.get_ylim()[1] * 1.3)
    axis.legend(loc="upper left", ncol=len(variants))
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def build_report(results_dir: Path) -> dict[str, Any]:
    report = analysis.build(results_dir)
    for run_id, run in report["runs"].items():
        run["seedComparison"] = seedcompare.compare(results_dir, run_id, run)
    return report


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested figure as columns: keys joined by '.', lists by index."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in flat(item, f"{prefix}{i}.").items()}
    return {prefix[:-1]: value}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Every figure of `rows` (flattened), one row each, columns in the order first seen."""
    flattened = [flat(row) for row in rows]
    columns = list(dict.fromkeys(c for row in flattened for c in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(flattened)


def csv_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"run": run_id, "stack": run.get("stack"), "testCase": test_case, "variant": name, **figures}
            for run_id, run in report["runs"].items() for test_case, by_variant in run["cases"].items()
            for name, figures in by_variant.items()]


def write_report(results_dir: Path) -> dict[str, Any]:
    report = build_report(results_dir)
    text = markdown(report)
    (results_dir / "report.md").write_text(text)
    (results_dir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_csv(results_dir / "report.csv", csv_rows(report))
    chart(report, results_dir / "report.png")
    swept = [(run_id, run) for run_id, run in report["runs"].items() if run.get("sweep")]
    if swept:  # the latest sweep, as report.png shows the latest run
        sweep_chart(*swept[-1], results_dir / SWEEP_CHART)
    print(text, end="")
    return report


def report_command(description: str, write: Callable[[Path], Any], argv: list[str] | None) -> int:
    """`python -m reporting.<report> DIR`: write the report of the results downloaded into DIR."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path)
    args = parser.parse_args(argv)
    if not args.results_dir.is_dir():
        print(f"{args.results_dir} is not a directory", file=sys.stderr)
        return 2
    write(args.results_dir)
    return 0


def main(argv: list[str] | None = None) -> int:
    return report_command(__doc__, write_report, argv)


if __name__ == "__main__":
    sys.exit(main())
