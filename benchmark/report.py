"""Compare variants per test case and write report.md, report.png and report.json.

    python -m benchmark.report DIR

Figures are medians (p50) over a run's successful requests. Time per output token (TPOT) is
(end-to-end - TTFT) / (output tokens - 1) per request; LLMPerf's inter-token latency (ITL) is
shown for reference only, as it counts streamed chunks and is biased against speculative
decoding. Speedups are baseline / SD, so above 1 means SD is faster. Failed requests are counted
and shown; a variant with no successful request is reported as such, never averaged away.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .results import case_dir, list_runs, load_requests, load_run, percentile

FIGURES = ("ttft_p50_s", "tpot_p50_s", "e2e_p50_s", "output_tokens_per_s_p50")


def variant_figures(requests: list) -> dict[str, Any]:
    ok = [r for r in requests if r.ok]

    def p50(values):
        return percentile([v for v in values if v is not None], 50)

    return {
        "ttft_p50_s": p50(r.ttft_s for r in ok),
        "tpot_p50_s": p50(r.time_per_output_token_s for r in ok),
        "e2e_p50_s": p50(r.end_to_end_s for r in ok),
        "output_tokens_per_s_p50": p50(r.output_throughput for r in ok),
        "itl_p50_s": p50(r.inter_token_latency_s for r in ok),
        "completed": len(ok),
        "failed": len(requests) - len(ok),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def compare_run(results_dir: Path, run_id: str) -> dict[str, Any]:
    run = load_run(results_dir, run_id)
    cases: dict[str, Any] = {}
    for test_case in run["testCases"]:
        figures = {v["name"]: variant_figures(load_requests(case_dir(results_dir, run_id, v["name"], test_case)))
                   for v in run["variants"]}
        for variant in run["variants"]:
            if variant["role"] != "sd":
                continue
            sd, base = figures[variant["name"]], figures.get(variant["baseline"], {})
            sd["speedup_tpot"] = ratio(base.get("tpot_p50_s"), sd["tpot_p50_s"])
            sd["speedup_e2e"] = ratio(base.get("e2e_p50_s"), sd["e2e_p50_s"])
            sd["throughput_ratio"] = ratio(sd["output_tokens_per_s_p50"], base.get("output_tokens_per_s_p50"))
        cases[test_case] = figures
    return {"stack": run.get("stack"), "startedAt": run.get("startedAt"), "finishedAt": run.get("finishedAt"),
            "shape": run.get("shape"), "variants": run["variants"], "testCases": cases}


def build_report(results_dir: Path) -> dict[str, Any]:
    return {"runs": {run_id: compare_run(results_dir, run_id) for run_id in list_runs(results_dir)}}


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value * scale:.{digits}f}{suffix}"


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Speculative decoding benchmark", "",
             "Medians over successful requests. **TPOT** = (end-to-end - TTFT) / (output tokens - 1), per request: "
             "the fair decode-speed figure. *ITL (chunks)* is LLMPerf's inter-token latency, which counts streamed "
             "chunks and is biased against speculative decoding; it is shown for reference only. "
             "Speedup = baseline / SD (above 1: SD is faster).", ""]
    for run_id, run in report["runs"].items():
        shape = run.get("shape") or {}
        lines += [f"## Run {run_id} ({run.get('stack')})", "",
                  f"{shape.get('inputTokens')} input / {shape.get('outputTokens')} output tokens, "
                  f"concurrency {shape.get('concurrency')}, {shape.get('requestsPerTestCase')} requests per test case, "
                  f"temperature 0.", ""]
        for test_case, figures in run["testCases"].items():
            lines += [f"### {test_case}", "",
                      "| variant | ok / failed | TTFT p50 | TPOT p50 | ITL (chunks) p50 | E2E p50 | out tok/s p50 | speedup TPOT | speedup E2E |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for variant in run["variants"]:
                f = figures[variant["name"]]
                note = "" if f["completed"] else " (no successful request)"
                lines.append(
                    f"| {variant['name']} ({variant['role']}){note} | {f['completed']} / {f['failed']} | "
                    f"{_fmt(f['ttft_p50_s'], 1000, 1, ' ms')} | {_fmt(f['tpot_p50_s'], 1000, 2, ' ms')} | "
                    f"{_fmt(f['itl_p50_s'], 1000, 2, ' ms')} | {_fmt(f['e2e_p50_s'], 1, 2, ' s')} | "
                    f"{_fmt(f['output_tokens_per_s_p50'])} | {_fmt(f.get('speedup_tpot'), 1, 2, 'x') if variant['role'] == 'sd' else ''} | "
                    f"{_fmt(f.get('speedup_e2e'), 1, 2, 'x') if variant['role'] == 'sd' else ''} |")
            lines.append("")
    if not report["runs"]:
        lines.append("No runs found.")
    return "\n".join(lines) + "\n"


def machine_report(report: dict[str, Any]) -> dict[str, Any]:
    """report.json: the figures only, keyed run -> test case -> variant."""
    keys = FIGURES + ("completed", "failed")
    out: dict[str, Any] = {"runs": {}}
    for run_id, run in report["runs"].items():
        cases = {}
        for test_case, figures in run["testCases"].items():
            cases[test_case] = {}
            for variant in run["variants"]:
                f = figures[variant["name"]]
                entry = {k: f[k] for k in keys}
                if variant["role"] == "sd":
                    entry.update(speedup_tpot=f["speedup_tpot"], speedup_e2e=f["speedup_e2e"])
                cases[test_case][variant["name"]] = entry
        out["runs"][run_id] = {"testCases": cases}
    return out


def chart(report: dict[str, Any], path: Path) -> None:
    """TPOT per variant and test case (latest run), with SD's TPOT speedup annotated."""
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
    cases = list(run["testCases"])
    variants = run["variants"]
    width = 0.8 / max(1, len(variants))
    for index, variant in enumerate(variants):
        values = [(run["testCases"][c][variant["name"]]["tpot_p50_s"] or 0) * 1000 for c in cases]
        positions = [i + (index - (len(variants) - 1) / 2) * width for i in range(len(cases))]
        bars = axis.bar(positions, values, width, label=f"{variant['name']} ({variant['role']})")
        for bar, case in zip(bars, cases):
            figures = run["testCases"][case][variant["name"]]
            if not figures["completed"]:
                axis.annotate("no data", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom", fontsize=8, rotation=90)
                continue
            label = f"{figures['speedup_tpot']:.2f}x" if variant["role"] == "sd" and figures.get("speedup_tpot") else ""
            if figures["failed"]:
                label += f"\n{figures['failed']} failed"
            if label:
                axis.annotate(label.strip(), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=8, fontweight="bold")
    axis.set_xticks(range(len(cases)), cases, rotation=25, ha="right")
    axis.set_ylabel("time per output token, p50 (ms) - lower is better")
    axis.set_title(f"{run.get('stack')} run {run_id}: decode speed per test case (labels: SD speedup over baseline)")
    axis.set_ylim(top=axis.get_ylim()[1] * 1.2)
    axis.legend(loc="upper left", ncol=len(variants))
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write_report(results_dir: Path) -> dict[str, Any]:
    report = build_report(results_dir)
    text = markdown(report)
    (results_dir / "report.md").write_text(text)
    (results_dir / "report.json").write_text(json.dumps(machine_report(report), indent=2, sort_keys=True) + "\n")
    chart(report, results_dir / "report.png")
    print(text, end="")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path)
    args = parser.parse_args(argv)
    if not args.results_dir.is_dir():
        print(f"{args.results_dir} is not a directory", file=sys.stderr)
        return 2
    write_report(args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
