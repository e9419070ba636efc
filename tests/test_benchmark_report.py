"""benchmark.analysis / report / seedcompare: statistics, sources, failures, acceptance, the
lossless check, cost, telemetry, and the seeds' published figures beside the measured ones."""
import json

import pytest

from benchmark import acceptance, analysis, report
from benchmark.results import RequestResult, percentile
from benchmark.seeds import SEEDS

from .results_files import SHAPE, VARIANTS, record, write_case, write_run

T0 = 1_795_000_000.0


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
    assert tokens["cite"] == "001_5c1246b9521b1412.txt:204"
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
    comparison = report.build_report(tmp_path)["runs"]["r1"]["seedComparison"]
    assert len(comparison["figures"]) == 2 * (6 * 10 + 2)
    rows = {(r["role"], r["metric"], r["statistic"]): r for r in comparison["figures"]}
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
