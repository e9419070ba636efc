"""The study's figures against servers whose latency, position-dependent acceptance and step cost are
known exactly (tests/synthetic_study.py): goodput over one population, the cost ratio c and
Leviathan's bound per test case and overall, within 2 % of the truth."""
import math

import pytest

from reporting import study

from .synthetic_study import Truth, write, write_levels

TEST_CASES = {f"case-{i}": 0.030 + 0.004 * i for i in range(10)}
"""Ten test cases, each with its own baseline TPOT (30 to 66 ms)..."""
P0 = {(d, t): p for d, base in (("qwen3-0-6b", 0.70), ("qwen3-1-7b", 0.80)) for i, t in enumerate(TEST_CASES)
      for p in [base + 0.04 * (i - 5)]}
"""... its own acceptance, falling along the window (the longest cases accept the most, as a
structured reply does)..."""
DRAFTS_COUNTED = {t: 200 * (1 + i) ** 2 for i, t in enumerate(TEST_CASES)}
"""... and its own number of SD steps."""
TRUTH = Truth(base_tpot_s=TEST_CASES, p0=P0, c={"qwen3-0-6b": 0.060, "qwen3-1-7b": 0.110}, windows=(5, 7, 10, 15),
              drafts_counted=DRAFTS_COUNTED, noise=0.002, tpot_target_ms=40)


def close(measured, truth, within=0.02):
    return measured is not None and abs(measured - truth) <= within * abs(truth)


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    written = write(root, TRUTH, seed=1)
    return written, study.build(root)[written.study_id]


def test_goodput_counts_the_requests_it_divides_by(summary):
    """LLMPerf sends up to concurrency - 1 requests beyond those it counts and discards them; the
    proxy records them like any other. Goodput counts good requests and divides by the same ones."""
    written, figures = summary
    assert TRUTH.sent > TRUTH.asked  # the discarded extras are there to be miscounted
    for scope in TRUTH.test_cases:
        for name in ["base", *TRUTH.sd]:
            goodput = figures["table"][scope][name]["goodput"]
            truth = written.good[(name, scope)] / written.sent[(name, scope)]
            assert goodput["share"] == pytest.approx(truth, abs=1e-12) and goodput["share"] <= 1, (scope, name)
            assert goodput["requests"] == written.sent[(name, scope)]
    # Some configurations meet the target only in part: the share is not trivially 0 or 1.
    shares = {figures["table"][t][n]["goodput"]["share"] for t in TRUTH.test_cases for n in TRUTH.sd}
    assert any(0 < s < 1 for s in shares)


def test_cost_ratio_bound_and_reached_per_test_case(summary):
    _, figures = summary
    covered = []
    for name in TRUTH.sd:
        draft = name.rsplit("-k", 1)[0]
        for test_case in TRUTH.test_cases:
            bound = figures["table"][test_case][name]["bound"]
            assert close(bound["c"], TRUTH.c[draft]), (name, test_case, bound)
            assert close(bound["speedup_bound"], TRUTH.bound(name, test_case)), (name, test_case)
            assert close(bound["reached"], 1.0), (name, test_case)
            # c with its interval, from the repeats: ~95 % of them cover the truth.
            covered.append(bound.get("c_low", 1) < TRUTH.c[draft] < bound.get("c_high", 0))
    assert sum(covered) / len(covered) >= 0.85, covered


def test_overall_cost_ratio_and_bound_aggregate_the_test_cases(summary):
    """Not a TPOT averaged over the test cases times a length pooled over all their steps (which
    is no step time: c came out 0.072 for a true 0.060)."""
    _, figures = summary
    for name in TRUTH.sd:
        draft = name.rsplit("-k", 1)[0]
        overall = figures["table"]["overall"][name]
        # The overall bound: the geometric mean of the per-case bounds, as the overall speedup is.
        true_bound = math.exp(sum(math.log(TRUTH.bound(name, t)) for t in TRUTH.test_cases) / len(TRUTH.test_cases))
        assert close(overall["speedup_tpot"]["value"], TRUTH.overall_speedup(name))
        assert close(overall["bound"]["c"], TRUTH.c[draft]), (name, overall["bound"])
        assert close(overall["bound"]["speedup_bound"], true_bound), (name, overall["bound"])
        assert close(overall["bound"]["reached"], 1.0), (name, overall["bound"])


def test_a_draft_too_cheap_to_resolve_is_unstable_and_the_report_says_to_time_it_alone(tmp_path):
    """A draft whose cost is lost in the repeats' noise: its fitted slope is not positive in some
    repeat, or its interval reaches 0; the report prints no derived c for it and recommends
    timing it alone; the well-resolved draft keeps its c."""
    from reporting import tuning_report

    cases = dict(list(TEST_CASES.items())[:2])
    truth = Truth(base_tpot_s=cases, p0=P0, c={"qwen3-0-6b": 0.0005, "qwen3-1-7b": 0.110}, windows=(5, 7),
                  drafts_counted=DRAFTS_COUNTED, noise=0.02)
    written = write(tmp_path, truth, seed=3)
    report = tuning_report.write_report(tmp_path)
    table = report[written.study_id]["table"]
    for scope in [*cases, "overall"]:
        assert table[scope]["qwen3-0-6b-k5"]["bound"]["unstable"], scope
        assert not table[scope]["qwen3-1-7b-k5"]["bound"]["unstable"], scope
    text = (tmp_path / "tuning.md").read_text()
    assert text.count("- c of qwen3-0-6b is unstable in this fit: serve the plain draft alone to measure it "
                      "(study.timeDraftsAlone: true") == len(cases) + 1
    assert "c of qwen3-1-7b is unstable" not in text


def coverage(tmp_path, design: str, studies: int) -> float:
    """The share of 95 % intervals (each configuration, each study) that cover the true speedup,
    over seeded synthetic studies with drift between blocks (3 % slower per block: a node warming,
    neighbours' load through the day) and 1 % noise per measurement."""
    truth = Truth(base_tpot_s={"case": 0.040}, p0={("d", "case"): 0.7}, c={"d": 0.05}, windows=(3, 5), drafts_counted={"case": 1000},
                  noise=0.01)
    covered = []
    for seed in range(studies):
        written = write(tmp_path / design / str(seed), truth, seed=seed, design=design, drift=1.03)
        table = study.build(tmp_path / design / str(seed))[written.study_id]["table"]["case"]
        covered += [table[n]["speedup_tpot"]["low"] <= truth.speedup(n, "case") <= table[n]["speedup_tpot"]["high"]
                    for n in truth.sd]
    return sum(covered) / len(covered)


def test_the_paired_design_covers_where_back_to_back_does_not(tmp_path):
    """The same analysis (paired ratios, t on their logarithms) over the two orders of measuring:
    measured back to back, a configuration's repeats are hours from the baseline's and the drift
    between them is read as speedup; paired in one block, it cancels and ~95 % of the intervals
    cover the truth."""
    paired, back_to_back = coverage(tmp_path, "paired", 60), coverage(tmp_path, "back-to-back", 60)
    assert 0.88 <= paired <= 0.99, paired  # 120 intervals: 95 % within the binomial's spread
    assert back_to_back < 0.6, back_to_back


def test_the_report_opens_with_the_answer_and_its_heatmap_is_a_readable_grid(summary, tmp_path):
    """A 2 x 4 study with 10 test cases: the heatmap is 11 panels (overall first) in a grid of at most
    4 columns, on one colour scale, each cell carrying its figure; tuning.md starts with the best
    per test case and overall; tuning.csv holds every figure."""
    import csv
    import shutil

    from reporting import tuning_report

    written, figures = summary
    root = tmp_path / "report"
    shutil.copytree(written.root, root)
    report = tuning_report.write_report(root)
    figure = tuning_report.heatmap(written.study_id, figures)
    panels = [a for a in figure.axes if a.images]
    assert [a.get_title() for a in panels] == ["overall", *TRUTH.test_cases]
    assert {a.get_subplotspec().get_geometry()[:2] for a in panels} == {(3, 4)}  # 11 panels: 3 rows of at most 4
    norms = {(a.images[0].norm.vmin, a.images[0].norm.vmax) for a in panels}
    speedups = [figures["table"][s][n]["speedup_tpot"]["value"] for s in ["overall", *TRUTH.test_cases] for n in TRUTH.sd]
    assert norms == {(min(speedups), max(speedups))}  # one scale for every panel
    assert len([a for a in figure.axes if not a.images and a.get_label() == "<colorbar>"]) == 1
    drafts, windows = TRUTH.drafts, list(TRUTH.windows)
    for axis in panels:
        cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in axis.texts}
        assert len(cells) == len(drafts) * len(windows)
        for name in TRUTH.sd:
            draft, k = name.rsplit("-k", 1)
            value = figures["table"][axis.get_title()][name]["speedup_tpot"]["value"]
            assert cells[(drafts.index(draft), windows.index(int(k)))] == f"{value:.2f}"
    width, height = (figure.get_size_inches() * 110).round()
    assert width <= 1600 and height <= 1200, (width, height)  # readable at 100 % zoom
    # tuning.md opens with the answer, before any per-case table.
    text = (root / "tuning.md").read_text()
    best = report[written.study_id]["best"]
    assert text.index("| test case | best configuration |") < text.index("### Test case")
    assert f"| **overall** | **{best['overall']['variant']}** |" in text
    for test_case in TRUTH.test_cases:
        assert f"| {test_case} | **{best[test_case]['variant']}** |" in text
    rows = list(csv.DictReader((root / "tuning.csv").open()))
    assert len(rows) == (1 + len(TRUTH.test_cases)) * (1 + len(TRUTH.sd))
    overall = next(r for r in rows if (r["testCase"], r["configuration"]) == ("overall", TRUTH.sd[0]))
    assert float(overall["speedup_tpot.value"]) == pytest.approx(figures["table"]["overall"][TRUTH.sd[0]]["speedup_tpot"]["value"])
    assert float(overall["bound.c"]) == pytest.approx(figures["table"]["overall"][TRUTH.sd[0]]["bound"]["c"])


def test_load_as_an_axis_answers_per_level_paired_at_each_level(tmp_path):
    """A study at concurrency 1 and 8 where the best window differs with load: at 1 the draft is
    cheap beside a target step (c 0.02) and the large window wins; at 8 drafting costs more of a
    step (c 0.3) and the small one wins. Each level's speedups are the truth at that level (the
    baseline paired at the same level: at 8 it runs 1.6x slower, so a baseline from the other
    level would be off by that), and tuning.md answers per level, saying the best differs."""
    import csv
    import dataclasses

    from reporting import tuning_report

    at_1 = Truth(base_tpot_s={"chat": 0.040, "code": 0.050}, p0={("d", "chat"): 0.80, ("d", "code"): 0.75}, c={"d": 0.02},
                 windows=(2, 8), drafts_counted={"chat": 200, "code": 300}, concurrency=1, noise=0.002)
    at_8 = dataclasses.replace(at_1, base_tpot_s={"chat": 0.064, "code": 0.080}, c={"d": 0.30}, concurrency=8)
    written = write_levels(tmp_path, {1: at_1, 8: at_8}, seed=2)
    report = tuning_report.write_report(tmp_path)
    levels = {f"{written.study_id}-concurrency-1": at_1, f"{written.study_id}-concurrency-8": at_8}
    assert list(report) == list(levels)
    for key, truth in levels.items():
        summary = report[key]
        assert summary["studyId"] == written.study_id and summary["load"] == {"concurrency": truth.concurrency}
        for test_case in truth.test_cases:
            for name in truth.sd:
                assert close(summary["table"][test_case][name]["speedup_tpot"]["value"], truth.speedup(name, test_case))
    assert (report[f"{written.study_id}-concurrency-1"]["best"]["overall"]["variant"],
            report[f"{written.study_id}-concurrency-8"]["best"]["overall"]["variant"]) == ("d-k8", "d-k2")
    text = (tmp_path / "tuning.md").read_text()
    answer = text.index("| load | best configuration |")
    assert answer < text.index("| test case | best configuration |") < text.index("### Test case")
    assert text.index("| concurrency 1 | **d-k8** |") < text.index("| concurrency 8 | **d-k2** |") < text.index("### Test case")
    assert "The best configuration differs with load: d-k8 at concurrency 1, d-k2 at concurrency 8." in text
    assert "at any level" not in text  # each level's best is told apart from the other's there
    assert f"## Study {written.study_id} at concurrency 8" in text
    for key in levels:
        assert (tmp_path / f"{key}-heatmap.png").exists()
    assert (tmp_path / f"{written.study_id}-load.png").exists()
    rows = list(csv.DictReader((tmp_path / "tuning.csv").open()))
    assert {(r["study"], r["load"]) for r in rows} == {(written.study_id, "concurrency-1"), (written.study_id, "concurrency-8")}
