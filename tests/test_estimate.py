"""The plan's time and cost estimate from the stack's own figures (stackconfig/timeline.py): each
variant's time per output token (a previous run's, else published for its configuration, else
its baseline's or assumed, labelled so), the starts (copy, load from checkpoint bytes, compile's
upper bound), the load generator's start per case and the paired design's baseline, each a term
the plan states with its source."""
import dataclasses
import json

import pytest

from offline import plan
from offline.stacks import load_stack
from stackconfig.catalog import MODELS
from stackconfig.timeline import (
    FALLBACK_TOKEN,
    LOAD_GENERATOR_START,
    NEURON_LOAD,
    SERVER_START,
    STORE_TO_NVME,
    approx,
    benchmark_minutes,
    measured_seconds_per_token,
    seconds_per_token,
    study_modes,
    terms,
)

KINDS = ("measured", "published", "derived", "assumed", "upper bound")


def mode(spec, name, measured=None):
    return next(e for e in study_modes(spec, measured) if e.mode == name)


def test_each_variant_takes_the_figure_published_for_its_configuration_else_its_baselines():
    qwen = seconds_per_token(load_stack("qwen3-32b-study").spec())
    # Seed 003 (the AWS blog, the stack's seed): ~45 ms for the baseline, ~15 and ~45 ms for 1.7B at
    # k = 7; the larger is taken. Configurations it did not measure take their baseline's, labelled assumed.
    assert (qwen["base"].value, qwen["base"].kind) == (0.045, "published") and "seed 003" in qwen["base"].source
    assert (qwen["qwen3-1-7b-k7"].value, qwen["qwen3-1-7b-k7"].kind) == (0.045, "published")
    assert "largest of its 2 figures" in qwen["qwen3-1-7b-k7"].source
    assert (qwen["qwen3-0-6b-k5"].value, qwen["qwen3-0-6b-k5"].kind) == (0.045, "assumed")
    assert "as its baseline base" in qwen["qwen3-0-6b-k5"].source
    # Neuron's EAGLE3 tutorial: 10.52 -> 6.41 ms at k = 3 (not the stack's seed: its published choice).
    eagle = seconds_per_token(load_stack("llama3.1-8b-eagle3-study").spec())
    assert (eagle["base"].value, eagle["eagle3-k3"].value, eagle["eagle3-k5"].value) == (0.01052, 0.00641, 0.01052)
    assert eagle["eagle3-k3"].kind == "published" and eagle["eagle3-k5"].kind == "assumed"
    # Seed 004: the BF16 baseline per model token (its derived row, above the per-Llama-2-token 37.9 ms),
    # the FP8 + SD median; the FP8 baseline, which it did not measure alone, takes the BF16 one's.
    big = seconds_per_token(load_stack("llama3.1-405b-llama3.2-1b").spec())
    assert big["base-bf16"].value == pytest.approx((70.09642704750877 - 2.441959390998818) / 1499)
    assert big["sd-fp8"].value == pytest.approx(0.008265312568750231) and big["fp8"].kind == "assumed"
    # Seed 001 publishes no per-token latency: 50 ms, assumed.
    small = seconds_per_token(load_stack("qwen3-32b-qwen3-0.6b").spec())
    assert small["base"] == FALLBACK_TOKEN and small["sd"].value == 0.050 and small["sd"].kind == "assumed"


def test_the_studys_hours_add_up_its_measuring_load_generator_and_starts():
    """The EAGLE3 study in parallel mode, by hand: 7 configurations and the baseline beside each,
    1 test case, 3 repeats, 50 requests x 128 tokens, 2 at a time; the eight servers start at once."""
    spec = load_stack("llama3.1-8b-eagle3-study").spec()
    estimate = mode(spec, "parallel")
    tokens_seconds = (6 * 0.01052 + 0.00641 + 7 * 0.01052) * 50 * 128 / 2  # one repeat: 14 servers measured
    measuring_h = 3 * tokens_seconds / 3600
    generator_h = 3 * 14 * 30 / 3600
    head = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
    target = MODELS["meta-llama/Llama-3.1-8B-Instruct"].checkpoint.bytes + MODELS[head].checkpoint.bytes
    copy_s = 17 * 2 ** 30 / (10e9 / 8)  # the models' 17 GiB through Mountpoint at 10 Gbit/s
    start_h = (copy_s + target / NEURON_LOAD.bytes_per_second + 120) / 3600
    assert estimate.repeat_hours == pytest.approx(measuring_h + generator_h + start_h)
    assert estimate.load_generator_hours == pytest.approx(generator_h)
    # The old estimate (50 ms for every server, no starts, no load generator) said 1.9 h here.
    assert approx(estimate.repeat_hours) == "0.77"


def test_the_baseline_measured_beside_every_configuration_is_a_term_of_its_own():
    spec = load_stack("qwen3-32b-study").spec()
    sequential = mode(spec, "sequential")
    # 3 repeats x 10 test cases x 8 configurations, the baseline's 20 requests x 600 tokens at 45 ms, 4 at a time.
    assert sequential.baseline_beside_hours == pytest.approx(3 * 10 * 8 * (20 * 600 * 0.045 / 4) / 3600)
    assert "(the baseline beside each: 9.0 h)" in sequential.terms and "480 cases" in sequential.terms
    # ~20-25 h once compiled: 18 h measuring, 4 h of load generator starts, 25 starts one after another.
    assert 20 < sequential.repeat_hours < 25
    # Where a pair does not fit (the 405B stack in sequential mode), the baselines are measured once per repeat, alone.
    big = load_stack("llama3.1-405b-llama3.2-1b", {"sd-trn2:study": {"mode": "sequential"}}).spec()
    alone = mode(big, "sequential")
    assert alone.baseline_beside_hours == 0 and "3 servers measured: 2 compared, 1 baseline(s) alone" in alone.terms
    assert mode(big, "parallel").baseline_beside_hours > 0


def test_load_levels_multiply_the_measured_cases_and_nothing_else():
    spec = load_stack("qwen3-32b-study").spec()
    one = mode(spec, "sequential")
    level = spec.benchmark.loads[0]
    two_levels = dataclasses.replace(spec, benchmark=dataclasses.replace(spec.benchmark, loads=(level, level)))
    two = mode(two_levels, "sequential")
    measured_one = one.repeat_hours - (two.repeat_hours - one.repeat_hours)  # the starts, which do not double
    assert two.load_generator_hours == pytest.approx(2 * one.load_generator_hours)
    assert two.baseline_beside_hours == pytest.approx(2 * one.baseline_beside_hours)
    assert 0 < measured_one < one.repeat_hours - one.load_generator_hours
    assert "x 2 load level(s)" in two.terms and "960 cases" in two.terms


def study_at(loads, study_mode="sequential"):
    """The Qwen3 study stack at `loads` (benchmark.concurrency), parsed as a stack file gives it."""
    raw = load_stack("qwen3-32b-study").config
    return mode(load_stack("qwen3-32b-study", {"sd-trn2:benchmark": {**raw["sd-trn2:benchmark"], "concurrency": loads}}).spec(),
                study_mode)


def test_a_study_with_a_load_list_counts_every_configuration_at_every_level():
    """Parsed, not patched: the Qwen3 study at concurrency [1, 4] measures every configuration, and
    the baseline beside it, at both levels, each at its own pace (one at a time takes 4 x as long
    as four at a time)."""
    one, two = study_at(4), study_at([1, 4])
    assert "480 cases" in one.terms and "960 cases" in two.terms and "x 2 load level(s)" in two.terms
    assert two.load_generator_hours == pytest.approx(2 * one.load_generator_hours)
    assert two.baseline_beside_hours == pytest.approx((4 / 1 + 4 / 4) * one.baseline_beside_hours)


def test_the_load_axis_cost_in_the_docs_is_the_plans_estimate():
    """docs/study.md "Load as a third axis": its figures are stackconfig/timeline.py's, as the plan prints them."""
    from .test_readme import section

    text = section("docs/study.md", "Load as a third axis")
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| `[")]
    assert len(rows) == 2
    for loads, study_mode, nodes, first, compiled in rows:
        estimate = study_at(json.loads(loads.strip("`")), study_mode)
        assert (nodes, first, compiled) == (str(estimate.nodes), estimate.cost(estimate.first_hours),
                                            estimate.cost(estimate.repeat_hours))


def report_json(tpots: dict[str, list[float]]) -> dict:
    """A `make results` report.json of one run: per test case, each variant's TPOT quantiles."""
    cases = {f"case-{i}": {name: {"tpot_s": {"p50": values[i], "p90": 9.0}} for name, values in tpots.items()}
             for i in range(2)}
    return {"runs": {"20261127T120000Z-llmperf-1": {"stack": "qwen3-32b-qwen3-1.7b", "cases": cases}}}


def test_a_previous_runs_measured_tpot_replaces_the_published_one():
    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    measured = measured_seconds_per_token(report_json({"base": [0.040, 0.044], "sd": [0.012, 0.020]}), "report.json")
    assert measured["base"].value == pytest.approx(0.042) and measured["sd"].value == pytest.approx(0.016)
    assert measured["sd"].kind == "measured" and "report.json" in measured["sd"].source
    # 10 test cases x 20 requests x 600 tokens, 4 at a time, per variant; and each case's start.
    expected = 10 * (20 * 600 * (0.042 + 0.016) / 4 + 2 * 30) / 60
    assert benchmark_minutes(spec, measured) == pytest.approx(expected)
    assert benchmark_minutes(spec) == pytest.approx(10 * (20 * 600 * (0.045 + 0.045) / 4 + 2 * 30) / 60)
    # tuning.json (a study): per test case, the geometric mean over repeats; "overall" is not a test case.
    study = {"study-abc": {"table": {"counting": {"base": {"tpot_s": 0.04}, "qwen3-1-7b-k7": {"tpot_s": None}},
                                     "sonnets": {"base": {"tpot_s": 0.05}}, "overall": {"base": {"tpot_s": 1.0}}}}}
    tuned = measured_seconds_per_token(study, "tuning.json")
    assert set(tuned) == {"base"} and tuned["base"].value == pytest.approx(0.045)
    study_spec = load_stack("qwen3-32b-study").spec()
    mixed = seconds_per_token(study_spec, tuned)
    assert mixed["base"].kind == "measured" and mixed["qwen3-1-7b-k7"].kind == "published"
    assert mixed["qwen3-0-6b-k5"].source.startswith("assumed: as its baseline base (measured)")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not a JSON report"),
    (json.dumps({"study-abc": {"rows": []}}), "not a report.json or tuning.json"),
    (json.dumps({"runs": {}}), "no variant's time per output token"),
    (json.dumps(report_json({"other": [0.1, 0.1]})), "none of the stack's variants (base, sd)"),
])
def test_a_previous_run_that_cannot_be_used_exits_2_naming_the_file(tmp_path, capsys, content, message):
    previous = tmp_path / "report.json"
    previous.write_text(content)
    assert plan.main(["--stack", "qwen3-32b-qwen3-1.7b", "--out", str(tmp_path / "plan"), "--previous", str(previous)]) == 2
    error = capsys.readouterr().err
    assert message in error and str(previous) in error


def test_the_plan_states_each_term_with_its_value_and_source():
    spec = load_stack("qwen3-32b-study").spec()
    rows = {t.name: t for t in terms(spec)}
    assert {f"time per output token, {v.name}" for v in spec.variants} < set(rows)
    assert all(t.source.startswith(KINDS) for t in rows.values()), [t.source for t in rows.values()]
    assert rows["load generator start, per case"].value == "30 s" and rows["load generator start, per case"].source == LOAD_GENERATOR_START.source
    assert rows["server start, per start"].source == SERVER_START.source and rows["copy to the node, per start"].source == STORE_TO_NVME.source
    # Loading derives from the catalog's checkpoint bytes: Qwen3-32B and its draft at ~4.3 GB/s.
    qwen = MODELS["Qwen/Qwen3-32B"].checkpoint.bytes
    assert rows["model load, per start"].value == (f"{approx((qwen + MODELS['Qwen/Qwen3-0.6B'].checkpoint.bytes) / NEURON_LOAD.bytes_per_second)} "
                                                   f"to {approx((qwen + MODELS['Qwen/Qwen3-1.7B'].checkpoint.bytes) / NEURON_LOAD.bytes_per_second)} s")
    assert rows["compile, a first start"].source.startswith("upper bound")
    lines = plan.terms_lines(spec)
    assert lines[2].split() == ["term", "value", "source"]
    assert any(line.split()[:5] == ["time", "per", "output", "token,", "base"] and "published: seed 003" in line for line in lines)


@pytest.mark.parametrize("value, shown", [(23.6, "24"), (0.7712, "0.77"), (2384.0, "2,400"), (9.96, "10"), (45.0, "45"),
                                          (6.41, "6.4")])
def test_figures_are_shown_to_two_significant_figures(value, shown):
    assert approx(value) == shown
