"""reporting/analysis.py and benchmark/acceptance.py acceptance_figures, unit by unit: exact values, so that
a change in their arithmetic or text fails."""
from __future__ import annotations

import pytest

from benchmark import acceptance
from benchmark.acceptance import acceptance_figures
from benchmark.results import CaseResult, RequestResult
from reporting.analysis import (
    build,
    case_figures,
    compare_run,
    generator_figures,
    greedy,
    leviathan,
    lossless,
    ratio,
    statistic,
    telemetry_figures,
    token_source,
    values,
    wall_time_s,
)
from tests.results_files import VARIANTS, digest, record, write_case, write_run

BASE, SD = VARIANTS


def result(start: float = 100.0, ttft: float | None = 0.5, e2e: float | None = 2.5, tokens: int | None = 5,
           chunks: int = 5, prompt_tokens: int | None = 140, error: str | None = None, prompt: str = "p0",
           answer: str = "a0") -> RequestResult:
    return RequestResult(start=start, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, input_tokens=prompt_tokens,
                         content_chunks=chunks, error=error, request_sha256=digest(prompt), response_sha256=digest(answer))


def case(requests: list[RequestResult], *, case_json: dict | None = None, summary: dict | None = None,
         specdecode: dict | None = None, telemetry: dict | None = None) -> CaseResult:
    return CaseResult(variant="sd", test_case="chat", requests=requests, case=case_json or {}, llmperf_summary=summary,
                      llmperf_responses=[], specdecode=specdecode, telemetry=telemetry)


# --- statistic ---------------------------------------------------------------------------------

def test_statistic_names_each_summary_figure():
    data = [4.0, 1.0, 3.0, 2.0, 10.0]
    assert statistic(data, "p50") == 3.0
    assert statistic(data, "p90") == pytest.approx(7.6)
    assert statistic(data, "p99") == pytest.approx(9.76)
    assert statistic(data, "p5") == pytest.approx(1.2)
    assert statistic(data, "mean") == 4.0
    assert statistic(data, "min") == 1.0
    assert statistic(data, "max") == 10.0
    # sample standard deviation (n - 1), as pandas: sqrt(50 / 4)
    assert statistic(data, "stddev") == pytest.approx(3.5355339059327378)
    assert statistic([1.0, 3.0], "stddev") == pytest.approx(1.4142135623730951)


def test_statistic_of_nothing_and_stddev_of_one_value_are_none():
    for name in ("p50", "mean", "min", "max", "stddev"):
        assert statistic([], name) is None
    assert statistic([2.0], "stddev") is None
    assert statistic([2.0], "mean") == 2.0


# --- values / wall time / token source -------------------------------------------------------

def test_values_skips_requests_without_the_figure():
    requests = [result(ttft=0.5, tokens=5), result(ttft=None, tokens=None), result(ttft=0.25, e2e=1.25, tokens=2)]
    assert values(requests, "ttft_s") == [0.5, 0.25]
    assert values(requests, "tpot_s") == [0.5, 1.0]
    assert values(requests, "e2e_s") == [2.5, 2.5, 1.25]
    assert values(requests, "tokens_per_s") == [2.0, 1.6]
    assert values(requests, "output_tokens") == [5, 2]
    assert values(requests, "input_tokens") == [140, 140, 140]


def test_wall_time_runs_from_the_first_start_to_the_last_end():
    requests = [result(start=100.0, e2e=None), result(start=101.0, e2e=4.0), result(start=103.0, e2e=1.5)]
    # the first request started at 100 (no end), the last ended at 105
    assert wall_time_s(requests) == 5.0
    assert wall_time_s([result(start=100.0, e2e=None)]) is None
    assert wall_time_s([]) is None


def test_token_source_says_how_many_requests_the_server_counted():
    assert token_source([result(), result()]) == "server usage"
    assert token_source([result(tokens=None), result(tokens=None)]) == "none: the server sent no usage"
    assert token_source([result(), result(tokens=None), result()]) == "server usage for 2 of 3 requests"


# --- acceptance_figures ----------------------------------------------------------------------

SPECDECODE = {
    "before": {"drafts": 10.0, "draft_tokens": 70.0, "accepted": 20.0, "per_position": {"0": 5.0, "1": 3.0}},
    "after": {"drafts": 30.0, "draft_tokens": 210.0, "accepted": 70.0, "per_position": {"0": 20.0, "1": 13.0}},
}


def test_acceptance_figures_of_an_sd_case_with_counters():
    ok = [result(tokens=9, chunks=3), result(tokens=None, chunks=4), result(tokens=5, chunks=4)]
    figures = acceptance_figures(case(ok, specdecode=SPECDECODE), 7, ok)
    # (8 + 4) tokens after the first over (2 + 3) steps; the uncounted request is left out
    assert figures == {
        "tokens_per_step_implied": 2.4,
        "acceptance_rate_implied": acceptance.implied_acceptance(2.4, 7),
        "counters": {"acceptance_rate": 50 / 140, "mean_acceptance_length": 1 + 50 / 20, "per_position": [0.75, 0.5],
                     "drafts": 20.0, "draft_tokens": 140.0, "accepted_tokens": 50.0, "note": None},
    }
    assert 0.58 < figures["acceptance_rate_implied"] < 0.59


def test_acceptance_figures_of_a_baseline_have_no_implied_rate():
    ok = [result(tokens=9, chunks=9)]
    assert acceptance_figures(case(ok), None, ok) == {
        "tokens_per_step_implied": 1.0, "acceptance_rate_implied": None,
        "counters": {"acceptance_rate": None, "note": "not scraped"}}
    assert acceptance_figures(case(ok), 0, ok)["acceptance_rate_implied"] is None


def test_acceptance_figures_without_steps_or_with_half_the_counters():
    ok = [result(tokens=1, chunks=1)]
    only_before = {"before": SPECDECODE["before"], "error": "scrape after failed: timed out"}
    assert acceptance_figures(case(ok, specdecode=only_before), 7, ok) == {
        "tokens_per_step_implied": None, "acceptance_rate_implied": None,
        "counters": {"acceptance_rate": None, "note": "scrape after failed: timed out"}}
    only_after = {"after": SPECDECODE["after"]}
    assert acceptance_figures(case(ok, specdecode=only_after), 7, ok)["counters"] == {
        "acceptance_rate": None, "note": "not scraped"}


# --- generator_figures / telemetry_figures -----------------------------------------------------

def test_generator_figures_are_its_summary_and_exit():
    summary = {"results_num_completed_requests": 9, "results_inter_token_latency_s_quantiles_p50": 0.031,
               "results_number_output_tokens_quantiles_p50": 513, "results_mean_output_throughput_token_per_s": 28.5}
    got = generator_figures(case([], case_json={"exitCode": 1, "llmperfError": "KeyError: 'error_code'", "threadDeaths": 2},
                                 summary=summary))
    assert got == {"exit_code": 1, "error": "KeyError: 'error_code'", "thread_deaths": 2, "completed": 9,
                   "itl_p50_s": 0.031, "output_tokens_p50": 513, "overall_output_throughput": 28.5}


def test_generator_figures_when_it_wrote_nothing():
    assert generator_figures(case([])) == {"exit_code": None, "error": None, "thread_deaths": 0, "completed": None,
                                           "itl_p50_s": None, "output_tokens_p50": None, "overall_output_throughput": None}


def test_telemetry_figures_summarise_the_devices_series():
    telemetry = {"status": "collected", "reason": None, "node": "ip-10-0-1-5", "neuronDevices": [0, 1],
                 "utilizationPercent": [[0, 20.0], [60, 80.0], [120, 50.0]],
                 "memoryUsedBytes": [[0, 1000.0], [60, 3000.0]]}
    assert telemetry_figures(case([], telemetry=telemetry)) == {
        "status": "collected", "reason": None, "node": "ip-10-0-1-5", "neuron_devices": [0, 1],
        "utilization_mean_pct": 50.0, "utilization_max_pct": 80.0, "memory_mean_bytes": 2000.0, "memory_max_bytes": 3000.0}


def test_telemetry_figures_when_not_collected_or_unavailable():
    empty = {"status": "not collected", "reason": None, "node": None, "neuron_devices": None,
             "utilization_mean_pct": None, "utilization_max_pct": None, "memory_mean_bytes": None, "memory_max_bytes": None}
    assert telemetry_figures(case([])) == empty
    unavailable = {"status": "unavailable", "reason": "no Container Insights", "node": "n1"}
    assert telemetry_figures(case([], telemetry=unavailable)) == {
        **empty, "status": "unavailable", "reason": "no Container Insights", "node": "n1"}


# --- case_figures ------------------------------------------------------------------------------

def requests_of_a_case() -> list[RequestResult]:
    """Three answered requests and one failure that started first: TTFT, TPOT, e2e and tokens/s all differ."""
    return [
        result(start=999.0, ttft=None, e2e=0.5, tokens=None, chunks=0, prompt_tokens=None, error="HTTP 500", prompt="p9"),
        result(start=1000.0, ttft=0.4, e2e=2.5, tokens=5, chunks=5, prompt_tokens=100, prompt="p1"),
        result(start=1001.0, ttft=0.25, e2e=6.25, tokens=9, chunks=5, prompt_tokens=120, prompt="p2"),
        result(start=1002.0, ttft=0.75, e2e=1.25, tokens=3, chunks=2, prompt_tokens=111, prompt="p3"),
    ]


def test_case_figures_of_an_sd_case():
    summary = {"results_num_completed_requests": 3, "results_inter_token_latency_s_quantiles_p50": 0.3}
    telemetry = {"status": "collected", "utilizationPercent": [[0, 10.0]], "memoryUsedBytes": [[0, 4.0]]}
    loaded = case(requests_of_a_case(), case_json={"asked": 5, "exitCode": 0, "llmperfError": None}, summary=summary,
                  specdecode=SPECDECODE, telemetry=telemetry)
    figures = case_figures(loaded, SD)
    # wall time: the failure started at 999, the second request ended at 1007.25
    wall = 8.25
    throughput = 17 / wall
    ok = loaded.ok
    assert figures == {
        "asked": 5, "sent": 4, "completed": 3, "failed": 1, "short": True, "token_source": "server usage",
        "ttft_s": {"p50": 0.4, "p90": pytest.approx(0.68), "p99": pytest.approx(0.743)},
        "tpot_s": {"p50": 0.525, "p90": pytest.approx(0.705), "p99": pytest.approx(0.7455)},
        "e2e_s": {"p50": 2.5, "p90": pytest.approx(5.5), "p99": pytest.approx(6.175)},
        "tokens_per_s": {"p50": 2.0, "p90": pytest.approx(2.32), "p99": pytest.approx(2.392)},
        "output_tokens_mean": pytest.approx(17 / 3), "input_tokens_mean": pytest.approx(331 / 3),
        "output_tokens_total": 17,
        "overall_output_throughput": pytest.approx(throughput),
        "completed_per_min": pytest.approx(3 / wall * 60),
        "acceptance": acceptance_figures(loaded, 7, ok),
        "llmperf": generator_figures(loaded), "telemetry": telemetry_figures(loaded),
        "usd_per_million_output_tokens": pytest.approx(44.7 / (throughput * 3600) * 1e6),
    }
    # (4 + 8 + 2) tokens after the first over (4 + 4 + 1) steps
    assert figures["acceptance"]["tokens_per_step_implied"] == pytest.approx(14 / 9)
    assert figures["acceptance"]["acceptance_rate_implied"] == pytest.approx(acceptance.implied_acceptance(14 / 9, 7))
    assert figures["llmperf"]["itl_p50_s"] == 0.3 and figures["telemetry"]["utilization_max_pct"] == 10.0
    assert figures["usd_per_million_output_tokens"] == pytest.approx(6025.7353, abs=1e-4)


def test_case_figures_of_a_baseline_without_a_price():
    loaded = case(requests_of_a_case()[1:], case_json={"asked": 3})
    figures = case_figures(loaded, {**BASE, "costPerHourUsd": None})
    assert (figures["short"], figures["failed"], figures["usd_per_million_output_tokens"]) == (False, 0, None)
    # without the failure, the wall time runs from 1000 to 1007.25
    assert figures["overall_output_throughput"] == pytest.approx(17 / 7.25)
    assert figures["acceptance"]["acceptance_rate_implied"] is None


def test_case_figures_when_the_server_sent_no_usage():
    requests = [result(start=10.0, e2e=2.0, tokens=None, prompt_tokens=None),
                result(start=11.0, e2e=3.0, tokens=None, prompt_tokens=None)]
    figures = case_figures(case(requests, case_json={"asked": 2}), SD)
    assert figures["token_source"] == "none: the server sent no usage"
    assert (figures["output_tokens_mean"], figures["input_tokens_mean"], figures["output_tokens_total"]) == (None, None, 0)
    assert figures["tpot_s"] == {"p50": None, "p90": None, "p99": None}
    assert (figures["overall_output_throughput"], figures["usd_per_million_output_tokens"]) == (None, None)
    assert figures["completed_per_min"] == pytest.approx(2 / 4.0 * 60)


def test_case_figures_of_a_case_that_never_started():
    figures = case_figures(case([]), SD)
    assert {k: figures[k] for k in ("asked", "sent", "completed", "failed", "short", "token_source", "output_tokens_total",
                                    "overall_output_throughput", "completed_per_min", "usd_per_million_output_tokens")} == {
        "asked": None, "sent": 0, "completed": 0, "failed": 0, "short": False, "token_source": None,
        "output_tokens_total": 0, "overall_output_throughput": None, "completed_per_min": None,
        "usd_per_million_output_tokens": None}
    assert figures["e2e_s"] == {"p50": None, "p90": None, "p99": None}


def test_case_figures_when_every_request_failed():
    requests = [result(start=5.0, e2e=0.5, tokens=None, error="HTTP 500")]
    figures = case_figures(case(requests, case_json={"asked": 1}), SD)
    assert (figures["completed"], figures["failed"], figures["short"], figures["token_source"]) == (0, 1, True, None)
    assert (figures["completed_per_min"], figures["overall_output_throughput"]) == (0.0, None)


# --- ratio / greedy / lossless -----------------------------------------------------------------

def test_ratio_is_none_without_both_figures():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(0.0, 2.0) == 0.0
    assert ratio(None, 2.0) is None
    assert ratio(3.0, None) is None
    assert ratio(3.0, 0.0) is None


def test_greedy_means_temperature_zero():
    assert greedy({"temperature": 0}) is True
    assert greedy({"temperature": 0.0, "top_p": 1}) is True
    assert greedy({"temperature": 0.7}) is False
    assert greedy({}) is False


def test_lossless_is_not_checked_for_sampled_decoding():
    assert lossless(case([]), case([]), {}) == {"checked": False, "reason": "sampling is not greedy (server defaults)"}
    assert lossless(case([]), case([]), {"temperature": 0.7}) == {
        "checked": False, "reason": "sampling is not greedy ({'temperature': 0.7})"}


def test_lossless_compares_each_sd_answer_with_the_baselines_answers_to_the_same_request():
    base = case([result(prompt="p1", answer="a1"), result(prompt="p1", answer="a1-other"), result(prompt="p2", answer="a2"),
                 result(prompt="p3", answer="a3"), result(prompt="p4", answer="a4", error="HTTP 500")])
    sd = case([result(prompt="p1", answer="a1-other"),     # matches the baseline's second answer
               result(prompt="p2", answer="changed"),      # mismatch
               result(prompt="p3", answer="a3"),           # match
               result(prompt="p4", answer="a4"),           # the baseline failed it: not compared
               result(prompt="p5", answer="a5"),           # the baseline never sent it: not compared
               result(prompt="p3", answer="x", error="HTTP 500")])  # failed: not compared
    assert lossless(sd, base, {"temperature": 0}) == {
        "checked": True, "compared": 3, "matching": 2, "mismatched_requests": [digest("p2")[:12]]}


def test_lossless_lists_each_mismatched_request_once_in_order():
    base = case([result(prompt="p1", answer="a1"), result(prompt="p2", answer="a2")])
    sd = case([result(prompt="p2", answer="x"), result(prompt="p1", answer="y"), result(prompt="p2", answer="z")])
    got = lossless(sd, base, {"temperature": 0})
    assert got == {"checked": True, "compared": 3, "matching": 0,
                   "mismatched_requests": sorted({digest("p1")[:12], digest("p2")[:12]})}
    assert len(got["mismatched_requests"][0]) == 12


# --- leviathan ---------------------------------------------------------------------------------

def sd_figures(mean_length: float | None, implied: float | None) -> dict:
    return {"acceptance": {"tokens_per_step_implied": implied, "counters": {"mean_acceptance_length": mean_length}}}


def test_leviathan_uses_the_counters_mean_acceptance_length_first():
    got = leviathan(sd_figures(3.5, 2.0), SD)
    a = acceptance.implied_acceptance(3.5, 7)
    assert got == {"tokens_per_step": 3.5, "acceptance_source": "/metrics mean acceptance length", "acceptance_rate": a,
                   "k": 7, "cost_ratio": 0.6 / 32.8,
                   "cost_ratio_source": "assumed: draft / target parameters (0.6B / 32.8B)",
                   "speedup_bound": acceptance.leviathan_speedup(a, 7, 0.6 / 32.8)}
    assert 0.73 < a < 0.75 and got["speedup_bound"] == pytest.approx(3.5 / (7 * 0.6 / 32.8 + 1))


def test_leviathan_falls_back_to_the_implied_tokens_per_step():
    got = leviathan(sd_figures(None, 2.0), {**SD, "draftParamsBillion": 1.7, "targetParamsBillion": 32.0})
    assert (got["tokens_per_step"], got["acceptance_source"]) == (2.0, "implied tokens per step")
    assert got["acceptance_rate"] == acceptance.implied_acceptance(2.0, 7)
    assert got["cost_ratio_source"] == "assumed: draft / target parameters (1.7B / 32B)"
    assert got["speedup_bound"] == pytest.approx(2.0 / (7 * 1.7 / 32.0 + 1))
    # a counter without a mean length (no drafts counter) is not a measured length
    counters_without_length = {"acceptance": {"tokens_per_step_implied": 2.0, "counters": {"acceptance_rate": None}}}
    assert leviathan(counters_without_length, SD)["acceptance_source"] == "implied tokens per step"


@pytest.mark.parametrize("variant", [
    {**SD, "numSpeculativeTokens": None}, {**SD, "numSpeculativeTokens": 0},
    {**SD, "draftParamsBillion": None}, {**SD, "targetParamsBillion": None}, {**SD, "draftParamsBillion": 0},
])
def test_leviathan_needs_k_and_both_parameter_counts(variant):
    assert leviathan(sd_figures(3.5, 2.0), variant) is None


def test_leviathan_needs_an_acceptance_length():
    assert leviathan(sd_figures(None, None), SD) is None


# --- compare_run / build -----------------------------------------------------------------------

FP8 = {**BASE, "name": "fp8", "baseline": "base", "quantization": "fp8", "costPerHourUsd": 30.0}
# An SD variant whose baseline is not in the run, listed before fp8: it is skipped, fp8 still compared.
ORPHAN = {**SD, "name": "orphan", "baseline": "gone"}


def write_compare_run(tmp_path, run_id: str = "20261120T0900Z-qwen", shape: dict | None = None) -> None:
    write_run(tmp_path, run_id, {"chat": {}, "code": {}}, [BASE, SD, ORPHAN, FP8], seed="001", shape=shape)
    for test_case in ("chat", "code"):
        # baseline: 3 s, 0.02 s/token; sd: 2 s, 0.01 s/token, one answer differs; fp8: 2.5 s
        write_case(tmp_path, run_id, "base", test_case, [
            record(0.02, 3.0, 101, start=1000.0, prompt="q1", answer="r1"),
            record(0.02, 3.0, 101, start=1010.0, prompt="q2", answer="r2")])
        write_case(tmp_path, run_id, "sd", test_case, [
            record(0.02, 1.02, 101, chunks=26, start=1000.0, prompt="q1", answer="r1"),
            record(0.02, 1.02, 101, chunks=26, start=1010.0, prompt="q2", answer="other")],
            specdecode=SPECDECODE)
        write_case(tmp_path, run_id, "fp8", test_case, [
            record(0.02, 2.02, 101, start=1000.0, prompt="q1", answer="r1"),
            record(0.02, 2.02, 101, start=1010.0, prompt="q2", answer="r2")])
        write_case(tmp_path, run_id, "orphan", test_case, [record(0.02, 1.02, 101, start=1000.0)])


def test_compare_run_compares_each_variant_with_its_baseline(tmp_path):
    write_compare_run(tmp_path)
    run = compare_run(tmp_path, "20261120T0900Z-qwen")
    assert {k: run[k] for k in ("stack", "status", "reason", "startedAt", "finishedAt", "seed", "llmperfCommit")} == {
        "stack": "qwen3-32b-qwen3-0.6b", "status": "complete", "reason": None, "startedAt": "2026-11-20T09:00:00Z",
        "finishedAt": "2026-11-20T10:00:00Z", "seed": "001", "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f"}
    assert run["shape"]["samplingParams"] == {"temperature": 0}
    assert [v["name"] for v in run["variants"]] == ["base", "sd", "orphan", "fp8"]
    assert run["testCases"] == {"chat": {}, "code": {}}
    assert list(run["cases"]) == ["chat", "code"]
    for test_case in ("chat", "code"):
        figures = run["cases"][test_case]
        assert list(figures) == ["base", "sd", "orphan", "fp8"]
        assert "vs_baseline" not in figures["base"] and "vs_baseline" not in figures["orphan"]
        sd = figures["sd"]
        assert sd["e2e_s"]["p50"] == 1.02 and sd["tpot_s"]["p50"] == pytest.approx(0.01)
        assert sd["acceptance"]["tokens_per_step_implied"] == 4.0
        assert sd["vs_baseline"] == {
            "baseline": "base",
            "speedup_tpot": pytest.approx(2.98), "speedup_e2e": pytest.approx(3.0 / 1.02),
            "throughput_ratio": pytest.approx(3.0 / 1.02),
            "leviathan": leviathan(sd, SD),
            "lossless": {"checked": True, "compared": 2, "matching": 1, "mismatched_requests": [digest("q2")[:12]]},
        }
        # the counters' mean acceptance length (1 + 50 / 20) wins over the implied 4 tokens per step
        assert sd["vs_baseline"]["leviathan"]["tokens_per_step"] == 3.5
        # a baseline compared with a baseline: speed only
        assert figures["fp8"]["vs_baseline"] == {
            "baseline": "base", "speedup_tpot": pytest.approx(1.49), "speedup_e2e": pytest.approx(3.0 / 2.02),
            "throughput_ratio": pytest.approx(3.0 / 2.02)}
        assert figures["base"]["tpot_s"]["p50"] == pytest.approx(0.0298) and figures["fp8"]["tpot_s"]["p50"] == pytest.approx(0.02)


def test_compare_run_with_sampled_decoding_does_not_check_losslessness(tmp_path):
    write_compare_run(tmp_path, shape={"samplingParams": {"temperature": 1.0}})
    lossless_figure = compare_run(tmp_path, "20261120T0900Z-qwen")["cases"]["chat"]["sd"]["vs_baseline"]["lossless"]
    assert lossless_figure == {"checked": False, "reason": "sampling is not greedy ({'temperature': 1.0})"}


def test_compare_run_without_sampling_params_uses_server_defaults(tmp_path):
    write_compare_run(tmp_path, shape={"inputTokens": 128})
    lossless_figure = compare_run(tmp_path, "20261120T0900Z-qwen")["cases"]["code"]["sd"]["vs_baseline"]["lossless"]
    assert lossless_figure == {"checked": False, "reason": "sampling is not greedy (server defaults)"}


def test_build_compares_every_run_oldest_first(tmp_path):
    write_compare_run(tmp_path, "20261121T0900Z-b")
    write_compare_run(tmp_path, "20261120T0900Z-a")
    built = build(tmp_path)
    assert list(built) == ["runs"]
    assert list(built["runs"]) == ["20261120T0900Z-a", "20261121T0900Z-b"]
    assert built["runs"]["20261121T0900Z-b"] == compare_run(tmp_path, "20261121T0900Z-b")
    assert build(tmp_path / "empty") == {"runs": {}}
