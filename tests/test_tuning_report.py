"""The tuning report from synthetic study results written as the tuner writes them: a failed
configuration, a short case, a run resumed by a second pod; every interval, goodput share and
bound checked against the formulas computed here on their own."""
import json
import math
import statistics

import pytest

from reporting import study, tuning_report
from reporting.intervals import t_quantile

STUDY_ID = "study-0123456789"
BASE_TPOT = (0.040, 0.050, 0.045)
"""The baseline's per-repeat median TPOT (s); every request of a case has its case's TPOT."""
SPEEDUP = {"d1-k2": 2.0, "d1-k4": 2.5, "d2-k7": 1.5}
NOISE = (1.0, 1.04, 0.97)
"""Per repeat, the SD configurations' TPOT is baseline / speedup x this: the paired ratios vary."""
COUNTERS = {"d1-k2": (100, 200, 150, (80, 70)), "d1-k4": (100, 400, 250, (90, 70, 50, 40)),
            "d2-k7": (100, 700, 300, (60, 50, 50, 40, 40, 30, 30))}
"""Per case of repeat 1: drafts, draft tokens, accepted, accepted per position; repeat r counts r
times as much, plus 10 (r - 1) more accepted tokens, so a mean of per-repeat rates and the rate
of the summed counters differ."""


def counters(name, repeat):
    drafts, tokens, accepted, per_position = COUNTERS[name]
    return drafts * repeat, tokens * repeat, accepted * repeat + 10 * (repeat - 1), tuple(v * repeat for v in per_position)


def pooled(name):
    """(acceptance rate, mean accepted length, per position) of the counters summed over repeats 1-3."""
    drafts, tokens, accepted = (sum(counters(name, r)[i] for r in (1, 2, 3)) for i in range(3))
    per_position = [sum(counters(name, r)[3][i] for r in (1, 2, 3)) / drafts for i in range(len(COUNTERS[name][3]))]
    return accepted / tokens, 1 + accepted / drafts, per_position


TTFT_S, TOKENS, REQUESTS = 0.1, 11, 2
DRAFTS = {"d1": "Qwen/Qwen3-0.6B", "d2": "Qwen/Qwen3-1.7B"}


ALONE = (0.10, 0.12, 0.11)
"""d1 served alone (study.timeDraftsAlone): its TPOT / the baseline's, per repeat."""


def variant(name, k=None):
    sd = k is not None
    alone = name.endswith("-alone")
    return {"name": name, "role": "sd" if sd else "baseline", "baseline": "base" if sd or alone else None,
            "target": DRAFTS[name[:2]] if alone else "Qwen/Qwen3-32B", "draft": DRAFTS[name[:2]] if sd else None,
            "numSpeculativeTokens": k, "costPerHourUsd": 17.88, "targetParamsBillion": 32, "draftParamsBillion": 1}


VARIANTS = [variant("base"), variant("d1-k2", 2), variant("d1-k4", 4), variant("d2-k4", 4), variant("d2-k7", 7),
            variant("d1-alone")]
SHORT = ("d1-k4", "b", 3)


def write_case(root, name, test_case, repeat, tpot, counters=None, completed=REQUESTS, study_id=STUDY_ID):
    folder = root / study_id / f"repeat-{repeat}" / name / test_case
    folder.mkdir(parents=True)
    records = [{"start": 1000.0 + i, "ttft_s": TTFT_S, "e2e_s": TTFT_S + tpot * (TOKENS - 1), "status": 200, "error": None,
                "completion_tokens": TOKENS, "prompt_tokens": 64, "content_chunks": TOKENS, "request_sha256": f"q{i}",
                "response_sha256": f"r{i}"} for i in range(completed)]
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "case.json").write_text(json.dumps({"asked": REQUESTS, "exitCode": 0, "variant": name, "testCase": test_case}))
    if counters:
        drafts, tokens, accepted, per_position = counters
        after = {"drafts": drafts, "draft_tokens": tokens, "accepted": accepted,
                 "per_position": {str(i): v for i, v in enumerate(per_position)}}
        zero = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_position": {str(i): 0 for i in range(len(per_position))}}
        (folder / "specdecode.json").write_text(json.dumps({"before": zero, "after": after}))


@pytest.fixture
def results(tmp_path):
    return write_study(tmp_path)


def write_study(tmp_path, study_id=STUDY_ID, started="2026-11-25T10:00:00Z"):
    """The first pod measured repeats 1 and 2, the second (resumed) repeat 3; d2-k4 never served."""
    for repeat, base in enumerate(BASE_TPOT, start=1):
        for test_case in ("a", "b"):
            write_case(tmp_path, "base", test_case, repeat, base)
            write_case(tmp_path, "d1-alone", test_case, repeat, base * ALONE[repeat - 1])
            for name, speedup in SPEEDUP.items():
                short = (name, test_case, repeat) == SHORT
                write_case(tmp_path, name, test_case, repeat, base / speedup * NOISE[repeat - 1], counters(name, repeat),
                           completed=1 if short else REQUESTS)
            if repeat == 1:  # d2-k4 served repeat 1, then stopped serving: recorded failed
                write_case(tmp_path, "d2-k4", test_case, repeat, base / 3.0, counters("d2-k7", repeat))
    record = {"status": "incomplete", "reason": "failed configurations: d2-k4", "variants": VARIANTS,
              "testCases": {"a": "x", "b": "y"},
              "study": {"id": STUDY_ID, "mode": "sequential", "repeats": 3, "ttftTargetMs": 200, "tpotTargetMs": 21,
                        "draftsAlone": {"d1-alone": "Qwen/Qwen3-0.6B"}},
              "configurations": {**{v["name"]: {"status": "done", "reason": None} for v in VARIANTS},
                                 "d2-k4": {"status": "failed", "reason": "stopped serving at repeat 2, a: container vllm exited 1 "
                                                                         "(Error) 2 times"}},
              "cases": [], "resumedBy": "second pod", "startedAt": started}
    (tmp_path / study_id / "study.json").write_text(json.dumps(record))
    return tmp_path


def geomean(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


def test_speedup_intervals_are_paired_on_the_log_scale(results):
    """Each repeat's speedup is the baseline's TPOT over the configuration's in the same repeat; the
    interval is Student's t on their logarithms (n - 1 = 2 degrees of freedom), so the baseline's
    own spread from repeat to repeat (BASE_TPOT), which moves both sides, does not widen it."""
    table = study.build(results)[STUDY_ID]["table"]
    figure = table["a"]["d1-k2"]["speedup_tpot"]
    logs = [math.log(2.0 / n) for n in NOISE]
    half = 4.302652729749464 * statistics.stdev(logs) / math.sqrt(3)  # t(0.975, 2), from the t table
    centre = statistics.fmean(logs)
    assert figure["value"] == pytest.approx(math.exp(centre), rel=1e-12) and figure["df"] == 2
    assert (figure["low"], figure["high"]) == (pytest.approx(math.exp(centre - half), rel=1e-9),
                                               pytest.approx(math.exp(centre + half), rel=1e-9))
    assert figure["per_repeat"] == {r: pytest.approx(2.0 / n, rel=1e-12) for r, n in zip((1, 2, 3), NOISE)}
    # The end-to-end time includes TTFT, so its speedup is smaller than TPOT's.
    e2e = [(TTFT_S + b * (TOKENS - 1)) / (TTFT_S + b / 2 * n * (TOKENS - 1)) for b, n in zip(BASE_TPOT, NOISE)]
    assert table["a"]["d1-k2"]["speedup_e2e"]["value"] == pytest.approx(geomean(e2e), rel=1e-12)


def test_short_and_failed_are_never_averaged_in(results):
    summary = study.build(results)[STUDY_ID]
    failed = "the configuration failed (stopped serving at repeat 2, a: container vllm exited 1 (Error) 2 times); not used"
    assert summary["excluded"] == [f"d2-k4 / a / repeat 1: {failed}", f"d2-k4 / b / repeat 1: {failed}",
                                   "d1-k4 / b / repeat 3: 1 of 2 completed, LLMPerf exit 0"]
    # The short repeat leaves two pairs: t with one degree of freedom.
    short = summary["table"]["b"]["d1-k4"]["speedup_tpot"]
    assert short["repeats"] == 2 and short["df"] == 1
    logs = [math.log(2.5 / n) for n in NOISE[:2]]
    half = t_quantile(0.975, 1) * statistics.stdev(logs) / math.sqrt(2)
    assert short["low"] == pytest.approx(math.exp(statistics.fmean(logs) - half), rel=1e-9)
    # Overall: repeat 3 lacks a usable case b, so only repeats 1 and 2 count for d1-k4.
    assert summary["table"]["overall"]["d1-k4"]["repeats"] == 2
    assert summary["table"]["overall"]["d1-k2"]["repeats"] == 3
    failed = summary["table"]["overall"]["d2-k4"]
    assert failed["repeats"] == 0 and failed["speedup_tpot"]["value"] is None


def test_acceptance_goodput_and_the_measured_bound(results):
    table = study.build(results)[STUDY_ID]["table"]["a"]
    k2, k4 = table["d1-k2"], table["d1-k4"]
    (rate2, length2, positions2), (rate4, length4, _) = pooled("d1-k2"), pooled("d1-k4")
    assert (rate2, length2) == (pytest.approx(0.775, rel=1e-12), pytest.approx(2.55, rel=1e-12))  # 930 / 1200, 1 + 930 / 600
    assert (k2["acceptance"]["rate"], k2["acceptance"]["length"]) == (pytest.approx(rate2, rel=1e-12), pytest.approx(length2, rel=1e-12))
    assert k2["acceptance"]["per_position"] == [pytest.approx(p, rel=1e-12) for p in positions2]
    assert (k4["acceptance"]["rate"], k4["acceptance"]["length"]) == (pytest.approx(rate4, rel=1e-12), pytest.approx(length4, rel=1e-12))
    # Goodput: TTFT 100 ms <= 200 and TPOT <= 21 ms: k2's TPOT is 20, 26, 21.8 ms: one repeat of three.
    assert (k2["goodput"]["good"], k2["goodput"]["requests"]) == (2, 6) and k2["goodput"]["share"] == pytest.approx(1 / 3)
    assert table["base"]["goodput"]["good"] == 0 and k4["goodput"]["good"] == 6
    # c measured: d1 served alone, its TPOT over the baseline's (ratio of geometric means).
    # Paired too: per repeat its TPOT over the baseline's in that repeat.
    c = geomean(ALONE)
    assert k2["bound"]["c"] == pytest.approx(c, rel=1e-12) and k2["bound"]["source"].startswith("measured")
    half = t_quantile(0.975, 2) * statistics.stdev([math.log(a) for a in ALONE]) / math.sqrt(3)
    assert (k2["bound"]["c_low"], k2["bound"]["c_high"]) == (pytest.approx(c * math.exp(-half), rel=1e-9),
                                                             pytest.approx(c * math.exp(half), rel=1e-9))
    assert k2["bound"]["speedup_bound"] == pytest.approx(length2 / (c * 2 + 1), rel=1e-12)
    speedup4 = geomean([2.5 / n for n in NOISE])
    assert k4["bound"]["reached"] == pytest.approx(speedup4 / (length4 / (c * 4 + 1)), rel=1e-12)
    # c derived beside it, repeat by repeat: s(k) = TPOT(k) x length(k) (that repeat's counters) over
    # the baseline's TPOT in that repeat, a line through k = 2 and 4; c the geometric mean of the slopes.
    lengths = {r: [1 + counters(n, r)[2] / counters(n, r)[0] for n in ("d1-k2", "d1-k4")] for r in (1, 2, 3)}
    slopes = [(lengths[r][1] / 2.5 - lengths[r][0] / 2) * n / 2 for r, n in zip((1, 2, 3), NOISE)]
    assert k2["bound"]["derived_c"] == pytest.approx(geomean(slopes), rel=1e-12)
    assert k2["bound"]["derived_verify_ratio"] == pytest.approx(
        statistics.fmean(lengths[r][0] / 2 * n - 2 * c for r, n, c in zip((1, 2, 3), NOISE, slopes)), rel=1e-12)
    # One window of d2: no slope to measure c from, and it says why.
    assert table["d2-k7"]["bound"]["c"] is None and "two windows" in table["d2-k7"]["bound"]["why"]


def test_the_report_names_the_best_the_failure_and_the_published_choice(results):
    report = tuning_report.write_report(results)
    assert report[STUDY_ID]["best"]["overall"]["variant"] == "d1-k4"
    text = (results / "tuning.md").read_text()
    assert "- d2-k4: failed: stopped serving at repeat 2, a: container vllm exited 1 (Error) 2 times" in text
    assert "| d2-k4 **FAILED** | Qwen/Qwen3-1.7B | 4 | 0 |" in text  # its repeat-1 cases are not averaged in
    assert "- d1-k4 / b / repeat 3: 1 of 2 completed, LLMPerf exit 0" in text
    assert "| **overall** | **d1-k4** | " in text and text.index("| **overall** | **d1-k4**") < text.index("### Test case `a`")
    # Seed 003's choice (Qwen3-1.7B at 7) is marked on its row.
    assert "| d2-k7 (published choice) |" in text and "Marked on d2-k7." in text
    assert (results / f"{STUDY_ID}-heatmap.png").stat().st_size > 0 and (results / f"{STUDY_ID}-windows.png").stat().st_size > 0


@pytest.mark.parametrize("df, quantile", [(1, 12.706204736174707), (2, 4.302652729749464), (4, 2.7764451051977934),
                                          (10, 2.2281388519862744), (30, 2.0422724563012373)])
def test_t_quantiles_match_the_published_table(df, quantile):
    assert t_quantile(0.975, df) == pytest.approx(quantile, rel=1e-12)


def test_a_distributed_studys_configurations_are_shown_with_their_gamma(results):
    """A study of a distributed pairing sweeps gamma (docs/study.md, "A distributed pairing"): the
    report's k column and the plots' axis say so."""
    path = results / STUDY_ID / "study.json"
    record = json.loads(path.read_text())
    record["variants"] = [{**v, "engine": "distributed"} if v["role"] == "sd" else v for v in record["variants"]]
    path.write_text(json.dumps(record))
    tuning_report.write_report(results)
    text = (results / "tuning.md").read_text()
    assert "| d1-k2 | Qwen/Qwen3-0.6B | gamma 2 | 3 |" in text and "| d1-k4 | Qwen/Qwen3-0.6B | gamma 4 |" in text
    assert tuning_report.window_axis([v for v in record["variants"] if v["role"] == "sd"]).startswith("gamma")
    assert tuning_report.window({"numSpeculativeTokens": 7, "engine": "nxdi-legacy"}) == "7"
