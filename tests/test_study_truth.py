"""The study's figures against servers whose latency, position-dependent acceptance and step cost are
known exactly (tests/synthetic_study.py): goodput over one population, the cost ratio c and
Leviathan's bound per test case and overall, within 2 % of the truth."""
import math

import pytest

from benchmark import study

from .synthetic_study import Truth, write

TEST_CASES = {f"case-{i}": 0.030 + 0.004 * i for i in range(10)}
"""Ten test cases, each with its own baseline TPOT (30 to 66 ms)..."""
P0 = {(d, t): p for d, base in (("qwen3-0-6b", 0.70), ("qwen3-1-7b", 0.82)) for i, t in enumerate(TEST_CASES)
      for p in [base + 0.015 * (i - 5)]}
"""... and its own acceptance, falling along the window."""
TRUTH = Truth(base_tpot_s=TEST_CASES, p0=P0, c={"qwen3-0-6b": 0.060, "qwen3-1-7b": 0.110}, windows=(5, 7, 10, 15),
              noise=0.002, tpot_target_ms=40)


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
            assert goodput["requests"] == written.sent[(name, scope)] == TRUTH.sent * TRUTH.repeats
    # Some configurations meet the target only in part: the share is not trivially 0 or 1.
    shares = {figures["table"][t][n]["goodput"]["share"] for t in TRUTH.test_cases for n in TRUTH.sd}
    assert any(0 < s < 1 for s in shares)


def test_cost_ratio_bound_and_reached_per_test_case(summary):
    _, figures = summary
    for name in TRUTH.sd:
        draft = name.rsplit("-k", 1)[0]
        for test_case in TRUTH.test_cases:
            bound = figures["table"][test_case][name]["bound"]
            assert close(bound["c"], TRUTH.c[draft]), (name, test_case, bound)
            assert close(bound["speedup_bound"], TRUTH.bound(name, test_case)), (name, test_case)
            assert close(bound["reached"], 1.0), (name, test_case)
            # c with its interval, from the repeats.
            assert bound.get("c_low", 1) < TRUTH.c[draft] < bound.get("c_high", 0), (name, test_case, bound)


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
