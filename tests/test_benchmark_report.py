"""reporting.analysis / report / seedcompare: statistics, sources, failures, acceptance, the
lossless check, cost, telemetry, and the seeds' published figures beside the measured ones."""
import json
import sys

import pytest

from benchmark import acceptance
from benchmark.loadgen import llmperf
from benchmark.results import RequestResult, percentile
from reporting import analysis, report
from reporting.seeds import SEEDS

from .results_files import SHAPE, VARIANTS, record, write_case, write_run

T0 = 1_795_000_000.0
LLMPERF_SOURCES = report.SOURCES.format(generators="LLMPerf", own_sources=llmperf.GENERATOR.own_source)
"""The sources of a report of LLMPerf runs (and of no run)."""


def test_percentile_and_statistics_follow_llmperfs_summary():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)
    assert analysis.statistic([1.0, 2.0, 4.0], "stddev") == pytest.approx(1.5275252316)  # sample (ddof=1), as pandas
    assert analysis.statistic([2.0], "stddev") is None and analysis.statistic([], "p50") is None
    assert [analysis.statistic([3.0, 1.0, 2.0], s) for s in ("mean", "min", "max", "p25")] == [2.0, 1.0, 3.0, 1.5]


def test_time_per_output_token_is_per_token_not_per_chunk():
    # An SD server streams 8 tokens per chunk: 512 tokens in 64 chunks.
    sd = RequestResult.from_record(record(ttft=0.05, e2e=0.05 + 0.010 * 511, tokens=512, chunks=64))
    assert sd.time_per_output_token_s == pytest.approx(0.010)
    assert sd.output_throughput == pytest.approx(512 / (0.05 + 5.11))
    assert acceptance.tokens_per_step([512], [64]) == pytest.approx(511 / 63)
    assert RequestResult.from_record(record(ttft=0.05, e2e=0.06, tokens=1)).time_per_output_token_s is None
    failed = RequestResult.from_record(record(0, 0.2, 0, error="HTTP 500: boom"))
    assert not failed.ok and failed.time_per_output_token_s is None and failed.output_throughput is None
    # Answered, but with no content (an immediate end of sequence): completed, with no TTFT or TPOT.
    empty = RequestResult.from_record(record(ttft=None, e2e=0.2, tokens=0))
    assert empty.ok and empty.ttft_s is None and empty.time_per_output_token_s is None and empty.output_throughput == 0


def seed_001_case(ttft: float, e2e: float, tokens: int, count: int = 10) -> list[dict]:
    """Ten sequential requests whose figures spread, so p99, p50 and the mean all differ."""
    return [record(ttft=ttft + i / 10_000, e2e=e2e + i / 100, tokens=tokens, start=T0 + i * 10, prompt=f"p{i}")
            for i in range(count)]


def llmperf_summary(itl_p99: float, tokens_p99: float) -> dict:
    return {"results_inter_token_latency_s_quantiles_p99": itl_p99, "results_inter_token_latency_s_quantiles_p50": itl_p99 / 2,
            "results_number_output_tokens_quantiles_p99": tokens_p99, "results_number_output_tokens_quantiles_p50": tokens_p99,
            "results_ttft_s_quantiles_p99": 0.06, "results_num_completed_requests": 10}


def test_seed_001_is_printed_beside_the_run_at_its_p99(tmp_path, capsys):
    seed = SEEDS["001"]
    write_run(tmp_path, "r1", {"sonnets": None}, seed="001", shape={**SHAPE, "samplingParams": {}})
    base = seed_001_case(0.0483, 6.0, 512)
    write_case(tmp_path, "r1", "base", "sonnets", base, summary=llmperf_summary(0.0118, 558))
    write_case(tmp_path, "r1", "sd", "sonnets", seed_001_case(0.0474, 5.6, 512), summary=llmperf_summary(0.0316, 565))
    assert report.main([str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())["runs"]["r1"]
    comparison = data["seedComparison"]
    assert comparison["seed"] == "001" and comparison["statistic"] == "p99"
    assert not [row for row in comparison["shape"] if row["differs"]]
    rows = {(r["role"], r["metric"]): r for r in comparison["figures"]}
    assert len(rows) == len(comparison["figures"]) == len(seed.figures) == 10
    ttft = rows[("baseline", "ttft_s")]
    assert ttft["published"] == 0.04828366368776187 and ttft["statistic"] == "p99"
    assert ttft["measured"] == pytest.approx(percentile([r["ttft_s"] for r in base], 99)) and ttft["llmperf"] == 0.06
    tokens = rows[("sd", "number_output_tokens")]
    assert (tokens["published"], tokens["measured"], tokens["llmperf"]) == (565.37, 512, 565)
    assert tokens["cite"] == "Step 4, the speculative configuration's LLMPerf summary"
    throughput = rows[("baseline", "request_output_throughput_token_per_s")]
    assert throughput["measured"] == pytest.approx(percentile([512 / r["e2e_s"] for r in base], 99))
    out = capsys.readouterr().out
    assert "### Seed 001: NxDI tutorial" in out and "same as the seed where it says" in out
    assert (tmp_path / "report.md").read_text() == out
    png = (tmp_path / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_a_different_shape_is_flagged(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "}, seed="001", shape={**SHAPE, "concurrency": 4})
    for variant in ("base", "sd"):
        write_case(tmp_path, "r1", variant, "counting", seed_001_case(0.05, 6.0, 512))
    built = report.build_report(tmp_path)
    comparison = built["runs"]["r1"]["seedComparison"]
    assert {r["field"] for r in comparison["shape"] if r["differs"]} == {"concurrency", "sampling params", "test-case prompts"}
    assert len(comparison["missing"]) == 10 and not comparison["figures"]  # the seed measured sonnets only
    text = report.markdown(built)
    assert "**differs**: concurrency seed 1, run 4; sampling params seed {}, run {'temperature': 0}" in text


def test_seed_004_full_quantiles_are_compared_statistic_by_statistic(tmp_path):
    write_run(tmp_path, "r1", {"sonnets": None}, seed="004",
              shape={**SHAPE, "inputTokens": 10000, "outputTokens": 1500, "requestsPerTestCase": 50, "samplingParams": {}})
    base = [record(ttft=2.4 + i / 1000, e2e=70 + i / 10, tokens=1500, start=T0 + i * 80, prompt=f"p{i}") for i in range(50)]
    write_case(tmp_path, "r1", "base", "sonnets", base)
    write_case(tmp_path, "r1", "sd", "sonnets", [record(ttft=2.2, e2e=15 + i / 10, tokens=1500, start=T0 + i * 20, prompt=f"p{i}")
                                                 for i in range(50)])
    built = report.build_report(tmp_path)
    comparison = built["runs"]["r1"]["seedComparison"]
    # Per variant six metrics at ten statistics and two run-level figures; for the baseline, two
    # more restated per model token.
    assert len(comparison["figures"]) == 2 * (6 * 10 + 2) + 2
    rows = {(r["role"], r["metric"], r["statistic"]): r for r in comparison["figures"] if not r["derived"]}
    derived = {r["metric"]: r for r in comparison["figures"] if r["derived"]}
    # Seed 004's BF16 figures count Llama-2 tokens (1785 for 1500 asked); per model token its
    # inter-token latency is (70.096 - 2.442) / 1499 s and its throughput 1500 / 70.096 tok/s.
    assert rows[("baseline", "inter_token_latency_s", "p50")]["published"] == pytest.approx(0.0379291546)
    assert derived["inter_token_latency_s"]["published"] == pytest.approx((70.09642704750877 - 2.441959390998818) / 1499)
    assert derived["inter_token_latency_s"]["measured"] == rows[("baseline", "inter_token_latency_s", "p50")]["measured"]
    assert derived["request_output_throughput_token_per_s"]["published"] == pytest.approx(1500 / 70.09642704750877)
    assert derived["inter_token_latency_s"]["llmperf"] is None
    text = report.markdown(built)
    assert "| sonnets | base | inter_token_latency_s | p50 | 0.0451331 |" in text
    assert "**derived**: (p50 end-to-end 70.10 s - p50 TTFT 2.44 s) / (1500 - 1) model tokens" in text
    assert "look like LLMPerf's Llama-2 re-tokenisation" in text and "about 19% slower than the seed" in text
    e2es = [r["e2e_s"] for r in base]
    assert rows[("baseline", "end_to_end_latency_s", "p25")]["measured"] == pytest.approx(percentile(e2es, 25))
    assert rows[("baseline", "end_to_end_latency_s", "stddev")]["measured"] == pytest.approx(analysis.statistic(e2es, "stddev"))
    assert rows[("baseline", "end_to_end_latency_s", "p50")]["published"] == 70.09642704750877
    itl = rows[("sd", "inter_token_latency_s", "p50")]
    assert itl["measuredAs"].startswith("TPOT") and itl["measured"] == pytest.approx((15 + 2.45 - 2.2) / 1499, rel=0.01)
    overall = rows[("baseline", "mean_output_throughput_token_per_s", "value")]
    assert overall["measured"] == pytest.approx(50 * 1500 / (49 * 80 + 74.9))


def test_failures_are_counted_flagged_and_never_averaged(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "}, status="incomplete")
    good = [record(ttft=0.1, e2e=2.0 + i / 10, tokens=100, start=T0 + i * 3, prompt=f"p{i}") for i in range(3)]
    write_case(tmp_path, "r1", "base", "counting", good + [record(0, 0.05, 0, error="HTTP 500: boom", start=T0 + 9)],
               asked=10, thread_deaths=1, llmperf_error="ZeroDivisionError: division by zero",
               summary={"results_num_completed_requests": 3})
    write_case(tmp_path, "r1", "sd", "counting", [record(0, 0.05, 0, error="HTTP 500: boom")], asked=10, exit_code=1,
               llmperf_error="KeyError: 'error_code'")
    built = report.build_report(tmp_path)
    figures = built["runs"]["r1"]["cases"]["counting"]
    base, sd = figures["base"], figures["sd"]
    assert (base["completed"], base["failed"], base["asked"], base["short"]) == (3, 1, 10, True)
    assert base["e2e_s"]["p50"] == pytest.approx(2.1)
    assert (sd["completed"], sd["failed"], sd["short"], sd["tpot_s"]["p50"]) == (0, 1, True, None)
    assert sd["vs_baseline"]["speedup_tpot"] is None
    text = report.markdown(built)
    assert "## Run r1 (qwen3-32b-qwen3-0.6b): INCOMPLETE" in text
    assert "| base (baseline) | 3 / 1 of 10 **SHORT** |" in text and "| sd (sd) | 0 / 1 of 10 **SHORT** |" in text
    assert "**sd: LLMPerf failed** (exit 1): `KeyError: 'error_code'`" in text
    assert "**base: LLMPerf lost 1 worker thread(s)** (`ZeroDivisionError: division by zero`); it recorded 3" in text


def test_acceptance_from_counters_and_the_leviathan_bound(tmp_path):
    write_run(tmp_path, "r1", {"counting": "c"})
    write_case(tmp_path, "r1", "base", "counting", [record(0.05, 2.0, 100, chunks=100)])
    before = {"drafts": 10.0, "draft_tokens": 70.0, "accepted": 30.0, "per_position": {"0": 8.0, "1": 6.0}}
    after = {"drafts": 40.0, "draft_tokens": 280.0, "accepted": 150.0, "per_position": {"0": 35.0, "1": 26.0}}
    write_case(tmp_path, "r1", "sd", "counting", [record(0.05, 0.8, 100, chunks=23)],
               specdecode={"before": before, "after": after})
    sd = report.build_report(tmp_path)["runs"]["r1"]["cases"]["counting"]["sd"]
    counters = sd["acceptance"]["counters"]
    assert counters["acceptance_rate"] == pytest.approx(120 / 210)
    assert counters["mean_acceptance_length"] == pytest.approx(1 + 120 / 30)
    assert counters["per_position"] == pytest.approx([27 / 30, 20 / 30])
    assert sd["acceptance"]["tokens_per_step_implied"] == pytest.approx(99 / 22)
    bound = sd["vs_baseline"]["leviathan"]
    c = 0.6 / 32.8
    assert bound["acceptance_source"] == "/metrics mean acceptance length" and bound["cost_ratio"] == pytest.approx(c)
    # Leviathan: speedup = E[tokens per step] / (k c + 1), here the measured 5 tokens per step.
    a = bound["acceptance_rate"]
    assert (1 - a ** 8) / (1 - a) == pytest.approx(5.0)
    assert bound["speedup_bound"] == pytest.approx(5.0 / (7 * c + 1))
    assert bound["cost_ratio_source"] == "assumed: draft / target parameters (0.6B / 32.8B)"


def test_acceptance_math():
    assert acceptance.expected_tokens_per_step(0.0, 7) == 1 and acceptance.expected_tokens_per_step(1.0, 7) == 8
    for a in (0.1, 0.55, 0.9):
        assert acceptance.implied_acceptance(acceptance.expected_tokens_per_step(a, 7), 7) == pytest.approx(a, abs=1e-9)
    assert acceptance.implied_acceptance(0.9, 7) == 0 and acceptance.implied_acceptance(9, 7) == 1
    page = "\n".join([
        "# TYPE vllm:spec_decode_num_drafts counter",
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 3.0',
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 4.0',
        'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09',
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 49.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 20.0',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 6.0',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 1.0',
        "vllm:num_requests_running 2.0"])
    assert acceptance.parse_counters(page) == {"drafts": 7.0, "draft_tokens": 49.0, "accepted": 20.0, "per_position": {"0": 7.0}}
    # The legacy engine exposes token counters without a drafts counter: rate yes, length no.
    legacy = acceptance.from_counters(acceptance.counter_deltas({"draft_tokens": 0, "accepted": 0}, {"draft_tokens": 70, "accepted": 35}))
    assert legacy["acceptance_rate"] == 0.5 and legacy["mean_acceptance_length"] is None
    assert acceptance.from_counters({})["note"] == "not exposed by this server"
    assert acceptance.from_counters({"draft_tokens": 0, "accepted": 0})["note"].startswith("the server counted no draft tokens")
    assert acceptance.metrics_url("http://vllm-sd.inference.svc.cluster.local:8000/v1") == \
        "http://vllm-sd.inference.svc.cluster.local:8000/metrics"


def test_lossless_check_shows_mismatches_and_needs_greedy_sampling(tmp_path):
    write_run(tmp_path, "r1", {"counting": "c"})
    write_case(tmp_path, "r1", "base", "counting", [record(0.05, 2.0, 100, prompt=f"p{i}") for i in range(3)])
    write_case(tmp_path, "r1", "sd", "counting", [record(0.05, 1.0, 100, prompt="p0"), record(0.05, 1.0, 100, prompt="p1", answer="other"),
                                                 record(0.05, 1.0, 100, prompt="p9")])
    built = report.build_report(tmp_path)
    lossless = built["runs"]["r1"]["cases"]["counting"]["sd"]["vs_baseline"]["lossless"]
    assert (lossless["compared"], lossless["matching"], len(lossless["mismatched_requests"])) == (2, 1, 1)
    assert "1 of 2 match the baseline; **differ: " in report.markdown(built)
    write_run(tmp_path, "r1", {"counting": "c"}, shape={**SHAPE, "samplingParams": {}})
    lossless = report.build_report(tmp_path)["runs"]["r1"]["cases"]["counting"]["sd"]["vs_baseline"]["lossless"]
    assert lossless == {"checked": False, "reason": "sampling is not greedy (server defaults)"}


def test_throughput_cost_and_telemetry(tmp_path):
    write_run(tmp_path, "r1", {"counting": "c"})
    # Four sequential 500-token requests of 10 s: 2000 tokens in 40 s = 50 tokens/s overall.
    write_case(tmp_path, "r1", "base", "counting", [record(0.1, 10.0, 500, start=T0 + 10 * i, prompt=f"p{i}") for i in range(4)],
               telemetry={"status": "ok", "node": "ip-10-64-1-1", "neuronDevices": ["0", "1"], "cores": 8,
                          "utilizationPercent": [[T0, 40.0], [T0 + 60, 60.0]], "memoryUsedBytes": [[T0, 2 * 2**30], [T0 + 60, 3 * 2**30]]})
    write_case(tmp_path, "r1", "sd", "counting", [])
    built = report.build_report(tmp_path)
    base = built["runs"]["r1"]["cases"]["counting"]["base"]
    assert base["overall_output_throughput"] == pytest.approx(50.0) and base["completed_per_min"] == pytest.approx(6.0)
    assert base["usd_per_million_output_tokens"] == pytest.approx(44.7 / (50 * 3600) * 1e6)
    telemetry = base["telemetry"]
    assert (telemetry["utilization_mean_pct"], telemetry["utilization_max_pct"], telemetry["memory_max_bytes"]) == (50.0, 60.0, 3 * 2**30)
    text = report.markdown(built)
    assert "| base (baseline) | ip-10-64-1-1 ['0', '1'] (ok) | 50.0% / 60.0% | 2.5 GiB / 3.0 GiB |" in text
    assert "| sd (sd) | not collected (not collected) |" in text
    assert built["runs"]["r1"]["cases"]["counting"]["sd"]["completed"] == 0


def test_a_running_or_empty_results_directory(tmp_path):
    assert report.main([str(tmp_path)]) == 0
    assert json.loads((tmp_path / "report.json").read_text()) == {"runs": {}}
    assert "No runs found" in (tmp_path / "report.md").read_text() and (tmp_path / "report.png").exists()
    write_run(tmp_path, "r1", {"counting": "c"}, status="running")
    write_case(tmp_path, "r1", "base", "counting", [record(0.05, 2.0, 100)])
    text = report.markdown(report.build_report(tmp_path))
    assert "## Run r1 (qwen3-32b-qwen3-0.6b): RUNNING (or its pod died before finishing: check the Job)" in text
    assert "finished not yet" in text


def test_every_variant_is_compared_with_the_baseline_it_names(tmp_path):
    """Seed 004's chain: a BF16 baseline, an FP8 baseline that names it, an SD variant on FP8.
    The FP8 target is compared with BF16 (speedups only), SD with FP8 (and acceptance, lossless)."""
    chain = [{**VARIANTS[0], "name": "base-bf16"},
             {**VARIANTS[0], "name": "fp8", "baseline": "base-bf16", "quantization": "fp8"},
             {**VARIANTS[1], "name": "sd-fp8", "baseline": "fp8", "quantization": "fp8"}]
    write_run(tmp_path, "r1", {"counting": "c"}, variants=chain)
    for name, e2e in (("base-bf16", 6.0), ("fp8", 4.0), ("sd-fp8", 2.0)):
        write_case(tmp_path, "r1", name, "counting", [record(0.05, e2e, 100, chunks=100 if name != "sd-fp8" else 30)])
    built = report.build_report(tmp_path)
    figures = built["runs"]["r1"]["cases"]["counting"]
    assert "vs_baseline" not in figures["base-bf16"]
    fp8, sd = figures["fp8"]["vs_baseline"], figures["sd-fp8"]["vs_baseline"]
    assert fp8["baseline"] == "base-bf16" and fp8["speedup_e2e"] == pytest.approx(6.0 / 4.0)
    assert fp8["speedup_tpot"] == pytest.approx((6.0 - 0.05) / (4.0 - 0.05))
    assert "leviathan" not in fp8 and "lossless" not in fp8
    assert sd["baseline"] == "fp8" and sd["speedup_e2e"] == pytest.approx(4.0 / 2.0) and "leviathan" in sd
    text = report.markdown(built)
    assert f"| {fp8['speedup_tpot']:.2f}x vs base-bf16 | 1.50x vs base-bf16 |" in text
    assert "| 2.00x vs fp8 |" in text


def figures(ttft: tuple, tpot: tuple, e2e: tuple, tps: tuple, **changes) -> dict:
    """One variant's figures as reporting/analysis.py's case_figures returns them; every number distinct."""
    quantiles = ("p50", "p90", "p99")
    result = {"asked": 10, "sent": 10, "completed": 10, "failed": 0, "short": False, "token_source": "server usage",
              "ttft_s": dict(zip(quantiles, ttft)), "tpot_s": dict(zip(quantiles, tpot)),
              "e2e_s": dict(zip(quantiles, e2e)), "tokens_per_s": dict(zip(quantiles, tps)),
              "output_tokens_mean": 511.25, "input_tokens_mean": 139.75, "output_tokens_total": 5112,
              "overall_output_throughput": 84.56, "completed_per_min": 9.875, "usd_per_million_output_tokens": 146.8349,
              "acceptance": {"tokens_per_step_implied": 1.0, "acceptance_rate_implied": None,
                             "counters": {"acceptance_rate": None, "note": "not scraped"}},
              "llmperf": {"exit_code": 0, "error": None, "thread_deaths": 0, "completed": 10, "itl_p50_s": 0.0123456,
                          "output_tokens_p50": 560.0, "overall_output_throughput": 80.1},
              "telemetry": {"status": "ok", "reason": None, "node": "ip-10-64-1-1", "neuron_devices": ["0", "1"],
                            "utilization_mean_pct": 41.25, "utilization_max_pct": 77.5,
                            "memory_mean_bytes": 2.5 * 2**30, "memory_max_bytes": 3.25 * 2**30}}
    result.update(changes)
    return result


BOUND = {"tokens_per_step": 4.5678, "acceptance_source": "/metrics mean acceptance length", "acceptance_rate": 0.8123,
         "k": 7, "cost_ratio": 0.018293, "cost_ratio_source": "assumed: draft / target parameters (0.6B / 32.8B)",
         "speedup_bound": 3.9876}


def a_report() -> dict:
    """Two runs: r1 with two test cases and every kind of flag, r2 with nothing but a reason and an unknown status."""
    counting = {
        "base": figures((0.0456, 0.0567, 0.0789), (0.02345, 0.03456, 0.04567), (12.345, 13.456, 14.567), (41.23, 42.34, 43.45),
                        asked=9, completed=7, failed=2, short=True,
                        llmperf={"exit_code": 0, "error": "ZeroDivisionError: x", "thread_deaths": 2, "completed": None,
                                 "itl_p50_s": None, "output_tokens_p50": None, "overall_output_throughput": None}),
        "sd": figures((0.0444, 0.0555, 0.0666), (0.00678, 0.00789, 0.00891), (3.456, 4.567, 5.678), (150.12, 160.23, 170.34),
                      token_source="none: the server sent no usage", output_tokens_mean=None, input_tokens_mean=None,
                      overall_output_throughput=None, completed_per_min=None, usd_per_million_output_tokens=None,
                      acceptance={"tokens_per_step_implied": 4.5678, "acceptance_rate_implied": 0.8123,
                                  "counters": {"acceptance_rate": 0.0, "note": "ignored", "mean_acceptance_length": 5.4321,
                                               "per_position": [0.91234, 0.805, 0.7]}},
                      llmperf={"exit_code": 1, "error": "KeyError: 'error_code'", "thread_deaths": 3, "completed": 0,
                               "itl_p50_s": 0.0345678, "output_tokens_p50": 565.0, "overall_output_throughput": None},
                      telemetry={"status": "not located", "reason": "no pod on a Neuron node", "node": None, "neuron_devices": None,
                                 "utilization_mean_pct": None, "utilization_max_pct": None, "memory_mean_bytes": None,
                                 "memory_max_bytes": None},
                      vs_baseline={"baseline": "base", "speedup_tpot": 3.4587, "speedup_e2e": 3.5721, "leviathan": BOUND,
                                   "lossless": {"checked": True, "compared": 7, "matching": 5,
                                                "mismatched_requests": ["aaaabbbbcccc", "ddddeeeeffff"]}})}
    sonnets = {
        "base": figures((0.0411, 0.0522, 0.0633), (0.02111, 0.02222, 0.02333), (11.111, 11.222, 11.333), (45.1, 45.2, 45.3),
                        token_source=None,
                        llmperf={"exit_code": None, "error": None, "thread_deaths": 0, "completed": 10, "itl_p50_s": 0.0111,
                                 "output_tokens_p50": 559.0, "overall_output_throughput": 80.0},
                        telemetry={"status": "not collected", "reason": None, "node": None, "neuron_devices": None,
                                   "utilization_mean_pct": None, "utilization_max_pct": None, "memory_mean_bytes": None,
                                   "memory_max_bytes": None}),
        "sd": figures((0.0412, 0.0523, 0.0634), (0.00711, 0.00722, 0.00733), (4.111, 4.222, 4.333), (120.1, 120.2, 120.3),
                      asked=None, token_source="server usage for 3 of 10 requests",
                      acceptance={"tokens_per_step_implied": None, "acceptance_rate_implied": None,
                                  "counters": {"acceptance_rate": 0.61234, "mean_acceptance_length": None}},
                      vs_baseline={"baseline": "base", "speedup_tpot": None, "speedup_e2e": 2.7027, "leviathan": None,
                                   "lossless": {"checked": True, "compared": 10, "matching": 10, "mismatched_requests": []}})}
    seed = {"seed": "001", "title": "NxDI tutorial", "document": "the NxDI tutorial", "statistic": "p99", "notes": ["a note"],
            "missing": ["ttft_s (sd) for prompt 'q': no such test case in this run"], "shapeCite": "Step 4, its command",
            "shape": [{"field": "concurrency", "seed": 1, "run": 4, "differs": True},
                      {"field": "input tokens", "seed": 128, "run": 128, "differs": False},
                      {"field": "sampling params", "seed": {}, "run": {"temperature": 0}, "differs": True}],
            "figures": [{"testCase": "sonnets", "variant": "base", "role": "baseline", "metric": "ttft_s", "statistic": "p99",
                         "published": 0.04828366368776187, "measured": 0.0633, "measuredAs": "TTFT at the proxy",
                         "llmperf": None, "cite": "Step 4, baseline"},
                        {"testCase": "sonnets", "variant": "sd", "role": "sd", "metric": "number_output_tokens",
                         "statistic": "p99", "published": 565.37, "measured": None, "measuredAs": "server usage",
                         "llmperf": 565.123456, "cite": "Step 4, SD"}]}
    r1 = {"stack": "qwen3-32b-qwen3-0.6b", "status": "complete", "reason": None, "startedAt": "2026-11-20T09:00:00Z",
          "finishedAt": "2026-11-20T10:00:00Z", "shape": SHAPE, "seed": "001",
          "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f", "variants": VARIANTS,
          "testCases": {"counting": "counting numbers from 1 ", "sonnets": None},
          "cases": {"counting": counting, "sonnets": sonnets}, "seedComparison": seed}
    r2 = {"stack": "other", "status": "cancelled", "reason": "the benchmark Job was deleted", "startedAt": None, "finishedAt": None,
          "shape": None, "llmperfCommit": None, "variants": VARIANTS, "testCases": {}, "cases": {}, "seedComparison": None}
    return {"runs": {"r1": r1, "r2": r2}}


EXPECTED_MARKDOWN = "\n".join([
    '# Speculative decoding benchmark',
    '',
    '{SOURCES}',
    '',
    '## Run r1 (qwen3-32b-qwen3-0.6b): complete',
    '',
    '128 input / 512 output tokens, concurrency 1, 10 requests per test case, sampling {"temperature": 0}, LLMPerf f1d6bed47e45; started 2026-11-20T09:00:00Z, finished 2026-11-20T10:00:00Z.',
    '',
    'Summary across the 2 test case(s): the geometric mean of the per-case speedups (p50), their range, and the cases flagged below their tables.',
    '',
    '| variant | vs | TPOT speedup | E2E speedup | flagged cases |',
    '|---|---|---|---|---|',
    '| sd | base | 3.46x (3.46x to 3.46x; 1 of 2 cases) | 3.11x (2.70x to 3.57x; 2 of 2 cases) | counting, sonnets |',
    '',
    '### counting',
    '',
    'Prompt: "counting numbers from 1 "',
    '',
    '| variant | completed / failed of asked | out tokens (server, mean) | in tokens (server, mean) | overall out tok/s | completed/min | $ per 1M out tokens (approximate) | LLMPerf: completed, ITL p50 (per chunk), out tokens p50 |',
    '|---|---|---|---|---|---|---|---|',
    '| base (baseline) | 7 / 2 of 9 **SHORT** | 511.2 | 139.8 | 84.6 | 9.9 | 146.83 USD | none, n/a, n/a |',
    '| sd (sd) | 10 / 0 of 10 | n/a | n/a | n/a | n/a | n/a | 0, 34.57 ms, 565.0 |',
    '',
    'p50 / p90 / p99 (proxy timings, server tokens):',
    '',
    '| variant | TTFT (ms) | TPOT (ms) | E2E (s) | out tok/s per request | speedup TPOT | speedup E2E |',
    '|---|---|---|---|---|---|---|',
    '| base (baseline) | 45.6 / 56.7 / 78.9 | 23.45 / 34.56 / 45.67 | 12.35 / 13.46 / 14.57 | 41.2 / 42.3 / 43.5 |  |  |',
    '| sd (sd) | 44.4 / 55.5 / 66.6 | 6.78 / 7.89 / 8.91 | 3.46 / 4.57 / 5.68 | 150.1 / 160.2 / 170.3 | 3.46x vs base | 3.57x vs base |',
    '',
    '| variant | tokens per step (implied) | acceptance (implied) | acceptance (/metrics) | mean acceptance length (/metrics) | per position (/metrics) | Leviathan bound | lossless (greedy) |',
    '|---|---|---|---|---|---|---|---|',
    '| base (baseline) | 1.00 | n/a | not scraped | n/a | n/a |  |  |',
    '| sd (sd) | 4.57 | 81.2% | 0.0% | 5.43 | 0.91, 0.81, 0.70 | 3.99x for 4.57 tokens/step (/metrics mean acceptance length; a=0.81), k=7, c=0.018 (assumed: draft / target parameters (0.6B / 32.8B)); measured 3.46x | 5 of 7 match the baseline; **differ: aaaabbbbcccc, ddddeeeeffff** |',
    '',
    '| variant | Neuron devices (Container Insights) | NeuronCore utilization mean / max | device memory used mean / max |',
    '|---|---|---|---|',
    "| base (baseline) | ip-10-64-1-1 ['0', '1'] (ok) | 41.2% / 77.5% | 2.5 GiB / 3.2 GiB |",
    '| sd (sd) | no pod on a Neuron node (not located) | n/a / n/a | n/a / n/a |',
    '',
    '- **base: LLMPerf lost 2 worker thread(s)** (`ZeroDivisionError: x`); it recorded None request(s), the proxy 7 completed and 2 failed',
    '- **base: short case**: 7 completed + 2 failed of 9 requests asked',
    "- **sd: LLMPerf failed** (exit 1): `KeyError: 'error_code'`",
    '- sd: output tokens from none: the server sent no usage',
    '',
    '### sonnets',
    '',
    'Prompt: LLMPerf sonnets',
    '',
    '| variant | completed / failed of asked | out tokens (server, mean) | in tokens (server, mean) | overall out tok/s | completed/min | $ per 1M out tokens (approximate) | LLMPerf: completed, ITL p50 (per chunk), out tokens p50 |',
    '|---|---|---|---|---|---|---|---|',
    '| base (baseline) | 10 / 0 of 10 | 511.2 | 139.8 | 84.6 | 9.9 | 146.83 USD | 10, 11.10 ms, 559.0 |',
    '| sd (sd) | 10 / 0 of ? | 511.2 | 139.8 | 84.6 | 9.9 | 146.83 USD | 10, 12.35 ms, 560.0 |',
    '',
    'p50 / p90 / p99 (proxy timings, server tokens):',
    '',
    '| variant | TTFT (ms) | TPOT (ms) | E2E (s) | out tok/s per request | speedup TPOT | speedup E2E |',
    '|---|---|---|---|---|---|---|',
    '| base (baseline) | 41.1 / 52.2 / 63.3 | 21.11 / 22.22 / 23.33 | 11.11 / 11.22 / 11.33 | 45.1 / 45.2 / 45.3 |  |  |',
    '| sd (sd) | 41.2 / 52.3 / 63.4 | 7.11 / 7.22 / 7.33 | 4.11 / 4.22 / 4.33 | 120.1 / 120.2 / 120.3 | n/a vs base | 2.70x vs base |',
    '',
    '| variant | tokens per step (implied) | acceptance (implied) | acceptance (/metrics) | mean acceptance length (/metrics) | per position (/metrics) | Leviathan bound | lossless (greedy) |',
    '|---|---|---|---|---|---|---|---|',
    '| base (baseline) | 1.00 | n/a | not scraped | n/a | n/a |  |  |',
    '| sd (sd) | n/a | n/a | 61.2% | n/a | n/a |  | 10 of 10 match the baseline |',
    '',
    '| variant | Neuron devices (Container Insights) | NeuronCore utilization mean / max | device memory used mean / max |',
    '|---|---|---|---|',
    '| base (baseline) | not collected (not collected) | n/a / n/a | n/a / n/a |',
    "| sd (sd) | ip-10-64-1-1 ['0', '1'] (ok) | 41.2% / 77.5% | 2.5 GiB / 3.2 GiB |",
    '',
    '- sd: output tokens from server usage for 3 of 10 requests',
    '',
    '### Seed 001: NxDI tutorial',
    '',
    "Published in the NxDI tutorial; its statistic: p99. 'LLMPerf' is this run's LLMPerf summary at the seed's statistic, defined as the seed's figure was.",
    '',
    "Shape (Step 4, its command): **differs**: concurrency seed 1, run 4; sampling params seed {}, run {'temperature': 0}",
    '',
    '| test case | variant | metric | statistic | seed | measured | measured as | LLMPerf | where in the document |',
    '|---|---|---|---|---|---|---|---|---|',
    '| sonnets | base | ttft_s | p99 | 0.0482837 | 0.0633 | TTFT at the proxy | n/a | Step 4, baseline |',
    '| sonnets | sd | number_output_tokens | p99 | 565.37 | n/a | server usage | 565.1235 | Step 4, SD |',
    '- a note',
    "- ttft_s (sd) for prompt 'q': no such test case in this run",
    '',
    '## Run r2 (other): cancelled',  # a status the report has no words for is printed as it is
    '',
    '**the benchmark Job was deleted**',
    '',
    'None input / None output tokens, concurrency None, None requests per test case, sampling null, LLMPerf (not recorded); started None, finished not yet.',
    '',
    ""]).replace("{SOURCES}", LLMPERF_SOURCES)


def test_the_report_lays_out_every_figure_source_and_flag_exactly():
    assert report.markdown(a_report()) == EXPECTED_MARKDOWN


def test_an_empty_report_says_so():
    assert report.markdown({"runs": {}}) == f"# Speculative decoding benchmark\n\n{LLMPERF_SOURCES}\n\nNo runs found.\n"


def test_a_variant_without_node_lossless_check_or_counters():
    sd = figures((0.05, 0.06, 0.07), (0.01, 0.02, 0.03), (1.0, 2.0, 3.0), (10.0, 20.0, 30.0),
                 acceptance={"tokens_per_step_implied": 2.0, "acceptance_rate_implied": 0.25, "counters": {"acceptance_rate": None}},
                 telemetry={"status": "error", "reason": None, "node": None, "neuron_devices": None, "utilization_mean_pct": 5.0,
                            "utilization_max_pct": None, "memory_mean_bytes": None, "memory_max_bytes": 2**30},
                 vs_baseline={"baseline": "base", "speedup_tpot": 1.5, "speedup_e2e": None,
                              "lossless": {"checked": False, "reason": "sampling is not greedy (server defaults)"}})
    lines = report._case_tables({"variants": VARIANTS[1:]}, {"sd": sd})
    assert lines[-5:] == [
        "| sd (sd) | 2.00 | 25.0% | n/a | n/a | n/a |  | not checked: sampling is not greedy (server defaults) |",
        "",
        "| variant | Neuron devices (Container Insights) | NeuronCore utilization mean / max | device memory used mean / max |",
        "|---|---|---|---|",
        "| sd (sd) | error (error) | 5.0% / n/a | n/a / 1.0 GiB |"]
    assert "| sd (sd) | 50.0 / 60.0 / 70.0 | 10.00 / 20.00 / 30.00 | 1.00 / 2.00 / 3.00 | 10.0 / 20.0 / 30.0 | 1.50x vs base | n/a vs base |" in lines


def test_a_seed_section_with_the_same_shape_and_no_figures():
    seed = {"seed": "000", "title": "EKS sample", "document": "the EKS sample's README", "statistic": "none", "notes": ["n1", "n2"], "missing": [],
            "shapeCite": "Performance Results", "shape": [{"field": "input tokens", "seed": 64, "run": 64, "differs": False}],
            "figures": []}
    assert report._seed_section(seed) == [
        "### Seed 000: EKS sample", "",
        "Published in the EKS sample's README; its statistic: none. 'LLMPerf' is this run's LLMPerf summary at the seed's "
        "statistic, defined as the seed's figure was.", "",
        "Shape (Performance Results): same as the seed where it says.", "", "- n1", "- n2", ""]


class FakeMatplotlib:
    """matplotlib and pyplot as chart() uses them, recording every call. Bars are placed as
    matplotlib places them (centred on their position); the y axis auto-scales to 0..40. The
    backend is recorded as spelled (matplotlib.get_backend() returns it so); axis() lower-cases its
    argument, as matplotlib's Axes.axis does."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.pyplot = self

    def _record(self, *call):
        self.calls.append(tuple(round(v, 9) if isinstance(v, float) else v for v in call))

    def use(self, backend):
        self._record("use", backend)

    def subplots(self, **kwargs):
        self._record("subplots", kwargs)
        return FakeFigure(self), FakeAxis(self)

    def close(self, figure):
        self._record("close", type(figure).__name__)


class FakeFigure:
    def __init__(self, mpl):
        self.mpl = mpl

    def savefig(self, path):
        self.mpl._record("savefig", path)

    def tight_layout(self):
        self.mpl._record("tight_layout")


class FakeBar:
    def __init__(self, position, height, width):
        self.position, self.height, self.width = position, height, width

    def get_x(self):
        return self.position - self.width / 2

    def get_width(self):
        return self.width

    def get_height(self):
        return self.height


class FakeAxis:
    def __init__(self, mpl):
        self.mpl = mpl

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.mpl._record(name, *args, kwargs)

    def bar(self, positions, values, width, **kwargs):
        self.mpl._record("bar", [round(p, 9) for p in positions], [round(v, 9) for v in values], width, kwargs)
        return [FakeBar(p, v, width) for p, v in zip(positions, values)]

    def axis(self, arg):
        self.mpl._record("axis", arg.lower())

    def annotate(self, text, xy, **kwargs):
        self.mpl._record("annotate", text, tuple(round(v, 9) for v in xy), kwargs)

    def get_ylim(self):
        return (0.0, 40.0)


@pytest.fixture
def fake_matplotlib(monkeypatch):
    fake = FakeMatplotlib()
    monkeypatch.setitem(sys.modules, "matplotlib", fake)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", fake)
    return fake


def chart_case(tpot_p50, completed, failed=0, short=False, speedup=None, counted=None, implied=None):
    f = figures((0.05, 0.06, 0.07), (tpot_p50, 0.5, 0.6), (1.0, 2.0, 3.0), (10.0, 20.0, 30.0), completed=completed,
                failed=failed, short=short,
                acceptance={"tokens_per_step_implied": None, "acceptance_rate_implied": implied,
                            "counters": {"acceptance_rate": counted} if counted is not None else {}})
    if speedup is not None:
        f["vs_baseline"] = {"baseline": "base", "speedup_tpot": speedup, "speedup_e2e": None}
    return f


def test_the_chart_plots_tpot_p50_of_the_latest_run_with_speedup_acceptance_and_failures(tmp_path, fake_matplotlib):
    older = {**a_report()["runs"]["r1"], "stack": "older"}
    cases = {
        "plain": {"base": chart_case(0.0234, 10), "sd": chart_case(0.00678, 10, speedup=3.4587, counted=0.61234, implied=0.9)},
        "short": {"base": chart_case(0.0251, 7, failed=2, short=True), "sd": chart_case(None, 0, failed=3, speedup=None)},
        "implied": {"base": chart_case(0.0222, 5, short=True),
                    "sd": chart_case(0.0111, 9, failed=1, speedup=0.0, implied=0.5)},
        "uncounted": {"base": chart_case(0.03, 3), "sd": chart_case(0.025, 3, speedup=1.2)}}
    latest = {"stack": "qwen3-32b-qwen3-0.6b", "status": "incomplete", "variants": VARIANTS,
              "testCases": {name: "p" for name in cases}, "cases": cases}
    report.chart({"runs": {"r0": older, "r1": latest}}, tmp_path / "report.png")
    bold = {"ha": "center", "va": "bottom", "fontsize": 8, "fontweight": "bold"}
    assert fake_matplotlib.calls == [
        ("use", "Agg"),
        ("subplots", {"figsize": (12, 5.5), "dpi": 110}),
        ("bar", [-0.2, 0.8, 1.8, 2.8], [23.4, 25.1, 22.2, 30.0], 0.4, {"label": "base (baseline)"}),
        ("annotate", "2 failed SHORT", (0.8, 25.1), bold),
        ("annotate", "0 failed SHORT", (1.8, 22.2), bold),
        ("bar", [0.2, 1.2, 2.2, 3.2], [6.78, 0.0, 11.1, 25.0], 0.4, {"label": "sd (sd)"}),
        ("annotate", "3.46x\na=0.61", (0.2, 6.78), bold),
        ("annotate", "no data", (1.2, 0), {"ha": "center", "va": "bottom", "fontsize": 8, "rotation": 90}),
        ("annotate", "a=0.50\n1 failed", (2.2, 11.1), bold),
        ("annotate", "1.20x", (3.2, 25.0), bold),
        ("set_xticks", range(4), ["plain", "short", "implied", "uncounted"], {"rotation": 25, "ha": "right"}),
        ("set_ylabel", "time per output token, p50 (ms) - lower is better", {}),
        ("set_title", "qwen3-32b-qwen3-0.6b run r1 (incomplete): decode speed per test case\n"
                      "labels: speedup over the variant's baseline, SD acceptance rate a", {}),
        ("set_ylim", {"top": 52.0}),
        ("legend", {"loc": "upper left", "ncol": 2}),
        ("grid", {"axis": "y", "alpha": 0.3}),
        ("tight_layout",),
        ("savefig", tmp_path / "report.png"),
        ("close", "FakeFigure")]


def test_the_chart_of_one_variant_and_of_no_runs(tmp_path, fake_matplotlib):
    run = {"stack": "s", "status": "complete", "variants": VARIANTS[:1], "testCases": {"a": None},
           "cases": {"a": {"base": chart_case(0.02, 4)}}}
    report.chart({"runs": {"r9": run}}, tmp_path / "one.png")
    assert fake_matplotlib.calls[2] == ("bar", [0.0], [20.0], 0.8, {"label": "base (baseline)"})
    assert fake_matplotlib.calls[3][0] == "set_xticks" and ("legend", {"loc": "upper left", "ncol": 1}) in fake_matplotlib.calls
    fake_matplotlib.calls.clear()
    report.chart({"runs": {}}, tmp_path / "none.png")
    assert fake_matplotlib.calls == [
        ("use", "Agg"),
        ("subplots", {"figsize": (12, 5.5), "dpi": 110}),
        ("text", 0.5, 0.5, "No runs found", {"ha": "center", "va": "center"}),
        ("axis", "off"),
        ("savefig", tmp_path / "none.png"),
        ("close", "FakeFigure")]


def test_main_writes_markdown_json_and_chart_and_prints_the_markdown(tmp_path, capsys, fake_matplotlib):
    write_run(tmp_path, "r1", {"counting": "c"})
    write_case(tmp_path, "r1", "base", "counting", [record(0.05, 2.0, 100)])
    write_case(tmp_path, "r1", "sd", "counting", [record(0.05, 1.0, 100, chunks=30)])
    assert report.main([str(tmp_path)]) == 0
    built = report.build_report(tmp_path)
    text = report.markdown(built)
    assert capsys.readouterr().out == text
    assert (tmp_path / "report.md").read_text() == text
    assert (tmp_path / "report.json").read_text() == json.dumps(built, indent=2, sort_keys=True) + "\n"
    assert fake_matplotlib.calls[-2:] == [("savefig", tmp_path / "report.png"), ("close", "FakeFigure")]
    # Every figure beside the markdown, one row per (run, test case, variant), for a notebook.
    import csv
    rows = list(csv.DictReader((tmp_path / "report.csv").open()))
    assert [(r["run"], r["testCase"], r["variant"]) for r in rows] == [("r1", "counting", "base"), ("r1", "counting", "sd")]
    sd = built["runs"]["r1"]["cases"]["counting"]["sd"]
    assert float(rows[1]["tpot_s.p50"]) == pytest.approx(sd["tpot_s"]["p50"], rel=1e-12)
    assert float(rows[1]["vs_baseline.speedup_tpot"]) == pytest.approx(sd["vs_baseline"]["speedup_tpot"], rel=1e-12)


def test_main_rejects_a_path_that_is_not_a_directory(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert report.main([str(missing)]) == 2
    assert capsys.readouterr() == ("", f"{missing} is not a directory\n")
    assert list(tmp_path.iterdir()) == []


def test_help_shows_the_usage_from_the_docstring_as_written(capsys):
    with pytest.raises(SystemExit) as exited:
        report.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "Compare variants per test case and write report.md, report.png, report.json and report.csv.\n\n" \
           "    python -m reporting.report DIR\n" in out
    assert "results_dir" in out


@pytest.mark.parametrize("decodings, flagged", [
    (("sampled", "greedy"), True),  # seed 001's shape: `{}` to a legacy baseline, fused speculation greedy
    (("greedy", "greedy"), False),
    ((None, None), False),  # a run recorded before variants said how they decode
])
def test_a_speedup_between_unlike_decoding_is_flagged_beside_it(tmp_path, decodings, flagged):
    variants = [{**v, **({"decoding": d} if d else {})} for v, d in zip(VARIANTS, decodings)]
    write_run(tmp_path, "r1", {"counting": "c"}, variants, shape={**SHAPE, "samplingParams": {}})
    for name, e2e in (("base", 2.0), ("sd", 1.0)):
        write_case(tmp_path, "r1", name, "counting", [record(0.05, e2e, 100, prompt=f"p{i}") for i in range(3)])
    built = report.build_report(tmp_path)
    unlike = built["runs"]["r1"]["cases"]["counting"]["sd"]["vs_baseline"].get("unlike_decoding")
    text = report.markdown(built)
    assert (unlike == {"variant": "greedy", "baseline": "sampled"}) is flagged
    assert ("- **sd decodes greedily, its baseline base by sampling** for requests with sampling {}" in text) is flagged
