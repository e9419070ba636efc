"""Write a tuning study's report: tuning.md (opening with the answer: the best configuration per test
case and overall), tuning.json, tuning.csv (every figure, one row per study, test case and
configuration), and per study a heatmap (draft x window, TPOT speedup, per test case and overall,
on one colour scale, each cell's figure printed) and a speedup-vs-window plot with the intervals.
A study at several load levels has these per level, opens with the answer per level (the best
configuration can differ with load), and adds a speedup-vs-load plot, one line per configuration.

    python -m reporting.tuning_report DIR

The figures are reporting/study.py's; this module lays them out. A configuration a source document
chose is marked (reporting/seeds.py PUBLISHED_CHOICES), with its published figures beside it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmark.loadgen import Level

from . import study as study_figures
from .report import number, report_command, write_csv
from .seeds import PUBLISHED_CHOICES, PublishedChoice

HOW_TO_READ = (
    "Speedup = the baseline's TPOT (or end-to-end time), measured next to the configuration in each repeat, / the "
    "configuration's: the geometric mean of these paired ratios of per-repeat medians, with the 95 % t interval of their "
    "logarithms (n/a with one repeat). Acceptance = accepted / "
    "drafted tokens from the server's counters, summed over the repeats; length = mean accepted tokens per target "
    "step (1 + accepted / drafts). Bound = Leviathan's E[tokens per step] / (c k + 1) with both measured: c is "
    "derived from the slope of SD step time over the window across this draft's windows (reporting/study.py), so it "
    "needs two windows of a draft; where the draft was served alone (study.timeDraftsAlone), c is measured instead: "
    "its TPOT / the baseline's, printed as that row's c with its interval. 'reached' = measured speedup / bound. Goodput = requests meeting both targets, "
    "of every request sent (LLMPerf's discarded extras included, on both sides). $/M = the configuration's share of the node's list price per million output tokens. "
    "Failed, short and crashed cases are listed and never averaged in.")


def _interval(figure: dict[str, Any] | None) -> str:
    if not figure or figure["value"] is None:
        return "n/a"
    if figure["low"] is None:
        return f"{figure['value']:.2f}x (1 repeat: no interval)"
    return f"{figure['value']:.2f}x [{figure['low']:.2f}, {figure['high']:.2f}]"


def published(variant: dict, target: str) -> PublishedChoice | None:
    return next((c for c in PUBLISHED_CHOICES if (c.target, c.draft, c.window) == (target, variant.get("draft"),
                                                                                   variant.get("numSpeculativeTokens"))), None)


def scope_table(summary: dict[str, Any], scope: str) -> list[str]:
    variants = {v["name"]: v for v in summary["variants"]}
    lines = ["| configuration | draft | k | repeats | TPOT (ms) | TPOT speedup | end-to-end speedup | acceptance | length | "
             "per position | c | bound | reached | goodput | $/M tokens |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in summary["table"][scope].items():
        v, bound = variants[name], row.get("bound") or {}
        acceptance = row["acceptance"]
        per_position = " / ".join(f"{p:.2f}" for p in acceptance["per_position"]) if acceptance["per_position"] else "n/a"
        mark = published(v, v["target"])
        label = f"{name} (published choice)" if mark else name
        if name in (summary["study"].get("draftsAlone") or {}):
            label += " (draft alone: c)"
        status = summary["configurations"][name]
        if status["status"] == "failed":
            label += " **FAILED**"
        goodput = row["goodput"]
        # A draft served alone is not a configuration to run: its row gives c, not a speedup.
        alone = name in (summary["study"].get("draftsAlone") or {})
        speedups = ("-", "-") if alone else (_interval(row.get("speedup_tpot")), _interval(row.get("speedup_e2e")))
        lines.append(
            f"| {label} | {v.get('draft') or '-'} | {window(v)} | {row['repeats']} | "
            f"{number(row['tpot_s'], 1000, 2)} | {speedups[0]} | {speedups[1]} | "
            f"{number(acceptance['rate'], 100, 1, '%')} | {number(acceptance['length'], digits=2)} | {per_position} | "
            f"{_c(row, name, summary)} | {number(bound.get('speedup_bound'), digits=2, suffix='x')} | {number(bound.get('reached'), 100, 0, '%')} | "
            f"{goodput['good']}/{goodput['requests']} | {number(row['usd_per_million'], digits=2)} |")
    return lines


DISTRIBUTED = "distributed"
"""The engine whose configurations' window is gamma, the draft pod's tokens per step
(stackconfig/engines/distributed.py NAME; its target compiled once for the study's speculation length)."""


def window(variant: dict[str, Any]) -> str:
    """The k column: the speculative window, or a distributed configuration's gamma."""
    k = variant.get("numSpeculativeTokens")
    if not k:
        return "-"
    return f"gamma {k}" if variant.get("engine") == DISTRIBUTED else str(k)


def window_axis(variants: list[dict[str, Any]]) -> str:
    """What the plots' window axis is: gamma where every configuration is distributed."""
    if variants and all(v.get("engine") == DISTRIBUTED for v in variants):
        return "gamma (draft tokens per step; the target scores gamma + 1)"
    return "speculative window (num_speculative_tokens)"


def _c(row: dict[str, Any], name: str, summary: dict[str, Any]) -> str:
    """The draft's cost ratio: measured (served alone: its row gives it, with the interval),
    derived (fitted), or n/a."""
    bound = row.get("bound") or {}
    if name in (summary["study"].get("draftsAlone") or {}):
        speedup = row.get("speedup_tpot") or {}
        if speedup.get("value") is None:
            return "n/a"
        inverse = {"value": 1 / speedup["value"], "low": 1 / speedup["high"] if speedup["high"] else None,
                   "high": 1 / speedup["low"] if speedup["low"] else None}
        return _interval(inverse).replace("x", "", 1) + " measured"
    if bound.get("c") is None:
        return "n/a"
    if bound.get("source", "").startswith("measured"):
        derived = f"; derived {bound['derived_c']:.3f}" if bound.get("derived_c") is not None else ""
        return f"{bound['c']:.3f} measured{derived}"
    if bound.get("c_low") is not None:
        return f"{bound['c']:.3f} [{bound['c_low']:.3f}, {bound['c_high']:.3f}] derived"
    return f"{bound['c']:.3f} derived"


def unstable_lines(summary: dict[str, Any], scope: str) -> list[str]:
    """One line per draft whose derived c is unstable here (a slope not positive in some repeat, or
    an interval reaching 0), recommending it be measured instead."""
    variants = {v["name"]: v for v in summary["variants"]}
    drafts = sorted({variants[n]["draft"] for n, r in summary["table"][scope].items()
                     if (r.get("bound") or {}).get("unstable") or (r.get("bound") or {}).get("derived_unstable")})
    return [f"- c of {d} is unstable in this fit: serve the plain draft alone to measure it (study.timeDraftsAlone: "
            "true; an EAGLE3 head cannot run alone)" for d in drafts]


def answer(summary: dict[str, Any]) -> list[str]:
    """The best configuration per test case and overall, its interval, and the runners-up a paired
    comparison cannot tell apart from it with these repeats."""
    lines = ["| test case | best configuration | TPOT speedup (95 % interval) | not told apart from it |", "|---|---|---|---|"]
    for scope in ["overall", *summary["testCases"]]:
        choice = summary["best"][scope]
        if choice is None:
            lines.append(f"| {scope} | none measured | n/a | |")
            continue
        close = ", ".join(f"{n} ({_interval(summary['table'][scope][n]['speedup_tpot'])})" for n in choice["indistinguishable"])
        lines.append(f"| {'**overall**' if scope == 'overall' else scope} | **{choice['variant']}** | "
                     f"{_interval(summary['table'][scope][choice['variant']]['speedup_tpot'])} | {close or 'none'} |")
    return lines


def load_label(summary: dict[str, Any]) -> str:
    """" at concurrency 8" for one level of a study of several; "" otherwise."""
    level = Level.from_dict(summary["load"]) if summary.get("load") else None
    return f" at {level.label}" if level else ""


def levels_of(report: dict[str, Any], summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Every level's summary of `summary`'s study, in the order of its levels (one for a study of one level)."""
    return [s for s in report.values() if s.get("studyId") == summary.get("studyId")]


def load_answer(levels: list[dict[str, Any]]) -> list[str]:
    """The answer per load level, ahead of each level's own: the best configuration overall at each
    level, its interval and the runners-up, and whether the best differs with load."""
    study_id = levels[0]["studyId"]
    lines = [f"## Study {study_id}: the answer per load level", "",
             "Load is this study's third axis: every configuration was measured at every level, each paired with the "
             "baseline measured beside it at that same level, so each level's answer stands on its own. "
             f"`{study_id}-load.png`: each configuration's overall TPOT speedup over the load, with its interval.", "",
             "| load | best configuration | TPOT speedup (95 % interval) | not told apart from it |", "|---|---|---|---|"]
    chosen, candidates = [], []
    for summary in levels:
        label, choice = load_label(summary).removeprefix(" at "), summary["best"]["overall"]
        if choice is None:
            lines.append(f"| {label} | none measured | n/a | |")
            continue
        chosen.append(f"{choice['variant']} at {label}")
        candidates.append({choice["variant"], *choice["indistinguishable"]})
        rows = summary["table"]["overall"]
        close = ", ".join(f"{n} ({_interval(rows[n]['speedup_tpot'])})" for n in choice["indistinguishable"])
        lines.append(f"| {label} | **{choice['variant']}** | {_interval(rows[choice['variant']]['speedup_tpot'])} | {close or 'none'} |")
    names = {c.split(" at ")[0] for c in chosen}
    if len(names) > 1:
        lines += ["", f"The best configuration differs with load: {', '.join(chosen)}. Run the one chosen for the load you "
                      "serve; the last column lists those these repeats cannot tell apart from it at that level."]
        # A configuration best, or not told apart from the best, at every level serves every load.
        everywhere = sorted(set.intersection(*candidates)) if len(candidates) == len(levels) else []
        if everywhere:
            lines.append(f"Not told apart from the best at any level: {', '.join(everywhere)}: one configuration for every load measured.")
    elif names:
        lines += ["", f"The same configuration is best at every level measured: {names.pop()}."]
    return lines + [""]


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Tuning study report", ""]
    for study_id, summary in report.items():
        study = summary["study"]
        levels = levels_of(report, summary)
        if len(levels) > 1 and summary is levels[0]:
            lines += load_answer(levels)
        targets = [f"TTFT <= {study['ttftTargetMs']} ms" if study.get("ttftTargetMs") else "",
                   f"TPOT <= {study['tpotTargetMs']} ms" if study.get("tpotTargetMs") else ""]
        lines += [f"## Study {summary.get('studyId', study_id)}{load_label(summary)}", "",
                  f"Mode {study['mode']}, {study['repeats']} repeats; status **{summary['status']}**"
                  + (f": {summary['reason']}" if summary["reason"] else "") + "; goodput targets: "
                  + (" and ".join(t for t in targets if t) or "none") + ".", ""]
        lines += answer(summary) + ["", HOW_TO_READ, ""]
        failed = {n: c for n, c in summary["configurations"].items() if c["status"] != "done"}
        if failed:
            lines += ["Configurations not measured in full:", ""]
            lines += [f"- {n}: {c['status']}{': ' + c['reason'] if c['reason'] else ''}" for n, c in failed.items()]
            lines.append("")
        if summary["excluded"]:
            lines += ["Cases left out (short or crashed):", ""] + [f"- {e}" for e in summary["excluded"]] + [""]
        for scope in summary["testCases"] + ["overall"]:
            title = "Overall (geometric mean over the test cases, per repeat)" if scope == "overall" else f"Test case `{scope}`"
            lines += [f"### {title}", ""] + scope_table(summary, scope) + [""]
            unbounded = [f"- no bound for {n}: {r['bound']['why']}" for n, r in summary["table"][scope].items()
                         if r.get("bound") and r["bound"].get("c") is None and summary["configurations"][n]["status"] == "done"]
            lines += unbounded + unstable_lines(summary, scope)
            lines += [""] if lines[-1] else []
        variants = {v["name"]: v for v in summary["variants"]}
        for name, v in variants.items():
            mark = published(v, v["target"])
            if mark:
                lines += [f"Published: {mark.document} - {mark.says}. Marked on {name}."]
                if mark.figures:
                    row = summary["table"]["overall"][name]
                    base = summary["table"]["overall"].get(v["baseline"], {}).get("tpot_s")
                    lines.append(f"Beside this run: TPOT {number(base, 1000, 2)} -> {number(row['tpot_s'], 1000, 2)} ms "
                                 f"(published {mark.figures['tpot_base_ms']} -> {mark.figures['tpot_sd_ms']} ms), acceptance "
                                 f"{number(row['acceptance']['rate'], 100, 1, '%')} (published {mark.figures['acceptance_rate'] * 100:.1f}%), "
                                 f"mean accepted length {number(row['acceptance']['length'], digits=2)} (published {mark.figures['mean_accepted_length']}).")
                lines.append("")
    return "\n".join(lines) + "\n"


HEATMAP_COLUMNS = 4
"""At most this many panels side by side: the grid stays readable at 100 % zoom."""


def heatmap(study_id: str, summary: dict[str, Any]) -> Any:
    """The TPOT speedup of every configuration (draft x window), per test case and overall: a grid
    of at most HEATMAP_COLUMNS panels, overall first, all on one colour scale (one colour bar), the
    figure printed in every cell."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    variants = {v["name"]: v for v in summary["variants"] if v["role"] == "sd"}
    drafts = sorted({v["draft"] for v in variants.values()})
    windows = sorted({v["numSpeculativeTokens"] for v in variants.values()})
    scopes = ["overall", *summary["testCases"]]
    grids = {}
    for scope in scopes:
        grid = [[float("nan")] * len(windows) for _ in drafts]
        for name, v in variants.items():
            value = (summary["table"][scope][name].get("speedup_tpot") or {}).get("value")
            if value is not None:
                grid[drafts.index(v["draft"])][windows.index(v["numSpeculativeTokens"])] = value
        grids[scope] = grid
    measured = [x for grid in grids.values() for row in grid for x in row if x == x]
    norm = Normalize(vmin=min(measured, default=0.0), vmax=max(measured, default=1.0))
    columns = min(HEATMAP_COLUMNS, len(scopes))
    rows = -(-len(scopes) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(0.75 * len(windows) * columns + 2.5, (0.45 * len(drafts) + 1.1) * rows + 1),
                                squeeze=False, layout="constrained")
    image = None
    for index, axis in enumerate(axes.flat):
        if index >= len(scopes):
            axis.axis("off")
            continue
        scope = scopes[index]
        image = axis.imshow(grids[scope], cmap="viridis", norm=norm, aspect="auto")
        for row, draft in enumerate(drafts):
            for column, _ in enumerate(windows):
                value = grids[scope][row][column]
                axis.text(column, row, "n/a" if value != value else f"{value:.2f}", ha="center", va="center", fontsize=8,
                          color="white" if value != value or norm(value) < 0.6 else "black")
        axis.set_xticks(range(len(windows)), [str(w) for w in windows])
        axis.set_yticks(range(len(drafts)), [d.rsplit("/", 1)[-1] for d in drafts] if index % columns == 0 else [])
        axis.set_title(scope, fontsize=9, fontweight="bold" if scope == "overall" else "normal")
        if index // columns == rows - 1 or index + columns >= len(scopes):
            axis.set_xlabel(window_axis(list(variants.values())), fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.8, label="TPOT speedup over the baseline")
    figure.suptitle(f"{study_id}: TPOT speedup over the baseline (one colour scale)")
    return figure


def charts(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Per study: the heatmap, and the overall speedup over the window per draft with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for study_id, summary in report.items():
        figure = heatmap(study_id, summary)
        path = out_dir / f"{study_id}-heatmap.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
        variants = {v["name"]: v for v in summary["variants"] if v["role"] == "sd"}
        drafts = sorted({v["draft"] for v in variants.values()})
        figure, axis = plt.subplots(figsize=(6, 4))
        for draft in drafts:
            points = sorted((v["numSpeculativeTokens"], summary["table"]["overall"][n]["speedup_tpot"])
                            for n, v in variants.items() if v["draft"] == draft
                            and summary["table"]["overall"][n]["speedup_tpot"]["value"] is not None)
            if not points:
                continue
            axis.errorbar([p[0] for p in points], *_bars([p[1] for p in points]), marker="o", capsize=3,
                          label=draft.rsplit("/", 1)[-1])
        axis.axhline(1.0, color="grey", linewidth=0.8)
        axis.set_xlabel(window_axis(list(variants.values())))
        axis.set_ylabel("TPOT speedup (95 % interval)")
        axis.legend()
        figure.tight_layout()
        path = out_dir / f"{study_id}-windows.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
        levels = levels_of(report, summary)
        if len(levels) > 1 and summary is levels[-1]:
            figure = load_plot(levels)
            path = out_dir / f"{summary['studyId']}-load.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
            written.append(path)
    return written


def _bars(figures: list[dict[str, Any]]) -> tuple[list[float], list[list[float]]]:
    """Speedups and their intervals as matplotlib's errorbar takes them (none with one repeat)."""
    ys = [f["value"] for f in figures]
    return ys, [[y - (f["low"] if f["low"] is not None else y) for y, f in zip(ys, figures)],
                [(f["high"] if f["high"] is not None else y) - y for y, f in zip(ys, figures)]]


def load_plot(levels: list[dict[str, Any]]) -> Any:
    """A study of several load levels: each SD configuration's overall TPOT speedup (95 % interval)
    at each level, one line per configuration, the levels evenly spaced in their order."""
    import matplotlib.pyplot as plt

    labels = [load_label(s).removeprefix(" at ") for s in levels]
    names = [v["name"] for v in levels[0]["variants"] if v["role"] == "sd"]
    figure, axis = plt.subplots(figsize=(max(6.0, 1.2 * len(levels) + 3), 4.5))
    for name in names:
        points = [(i, s["table"]["overall"][name]["speedup_tpot"]) for i, s in enumerate(levels)
                  if s["table"]["overall"][name]["speedup_tpot"]["value"] is not None]
        if not points:
            continue
        axis.errorbar([i for i, _ in points], *_bars([f for _, f in points]), marker="o", capsize=3, label=name)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xticks(range(len(levels)), labels)
    axis.set_xlabel("load (each level paired with the baseline at that level)")
    axis.set_ylabel("overall TPOT speedup (95 % interval)")
    axis.legend(fontsize=7, ncol=2)
    figure.suptitle(f"{levels[0]['studyId']}: TPOT speedup over the load")
    figure.tight_layout()
    return figure


def csv_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"study": summary.get("studyId", study_id), "load": Level.from_dict(summary["load"]).slug if summary.get("load") else None,
             "testCase": scope, "configuration": name, **row}
            for study_id, summary in report.items() for scope, rows in summary["table"].items() for name, row in rows.items()]


def write_report(results_dir: Path) -> dict[str, Any]:
    report = study_figures.build(results_dir)
    text = markdown(report)
    (results_dir / "tuning.md").write_text(text)
    (results_dir / "tuning.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_csv(results_dir / "tuning.csv", csv_rows(report))
    charts(report, results_dir)
    print(text, end="")
    return report


def main(argv: list[str] | None = None) -> int:
    return report_command(__doc__, write_report, argv)


if __name__ == "__main__":
    sys.exit(main())
