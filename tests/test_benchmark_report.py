"""benchmark.report: percentiles, unbiased time per output token, speedups, failures."""
import json

import pytest

from benchmark import report
from benchmark.results import RequestResult, percentile

from .llmperf_files import request, write_case, write_run


def test_percentile_matches_linear_interpolation():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)


def test_time_per_output_token_is_per_token_not_per_chunk():
    # An SD server streams 8 tokens per chunk: LLMPerf's ITL says 80 ms, the truth is 10 ms/token.
    sd = RequestResult.from_llmperf(request(ttft=0.05, e2e=0.05 + 0.010 * 511, output_tokens=512, itl=0.080))
    assert sd.time_per_output_token_s == pytest.approx(0.010)
    assert sd.inter_token_latency_s == 0.080
    assert RequestResult.from_llmperf(request(ttft=0.05, e2e=0.06, output_tokens=1)).time_per_output_token_s is None


def seed_001_requests(ttft, e2e, tokens, throughput, count=10):
    return [request(ttft=ttft, e2e=e2e, output_tokens=tokens, throughput=throughput) for _ in range(count)]


def test_report_reproduces_seed_001_comparison(tmp_path, capsys):
    """Seed 001 (NxDI tutorial, Qwen3-32B + Qwen3-0.6B): TTFT 48.3 -> 47.4 ms, E2E 6.04 -> 5.64 s,
    output throughput 102.3 -> 137.8 tok/s (+35%), 558 -> 565 output tokens."""
    write_run(tmp_path, "20261120T090000Z", {"sonnets": None})
    write_case(tmp_path, "20261120T090000Z", "base", "sonnets", seed_001_requests(0.0483, 6.04, 558, 102.3))
    write_case(tmp_path, "20261120T090000Z", "sd", "sonnets", seed_001_requests(0.0474, 5.64, 565, 137.8))
    assert report.main([str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    figures = data["runs"]["20261120T090000Z"]["testCases"]["sonnets"]
    base, sd = figures["base"], figures["sd"]
    assert base["ttft_p50_s"] == pytest.approx(0.0483) and sd["ttft_p50_s"] == pytest.approx(0.0474)
    assert sd["speedup_e2e"] == pytest.approx(6.04 / 5.64) and round((sd["speedup_e2e"] - 1) * 100) == 7
    assert sd["output_tokens_per_s_p50"] / base["output_tokens_per_s_p50"] == pytest.approx(1.347, abs=0.001)
    assert sd["speedup_tpot"] == pytest.approx(((6.04 - 0.0483) / 557) / ((5.64 - 0.0474) / 564))
    assert "speedup_tpot" not in base and base["completed"] == 10 and base["failed"] == 0
    assert set(sd) == {"ttft_p50_s", "tpot_p50_s", "e2e_p50_s", "output_tokens_per_s_p50", "completed", "failed",
                       "speedup_tpot", "speedup_e2e"}
    out = capsys.readouterr().out
    assert "| sd (sd) | 10 / 0 |" in out and "1.07x" in out
    assert (tmp_path / "report.md").read_text() == out
    png = (tmp_path / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_failed_requests_are_counted_not_averaged(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "})
    good = [request(ttft=0.1, e2e=2.0, output_tokens=100) for _ in range(3)]
    write_case(tmp_path, "r1", "base", "counting", good + [request(0, 0, 0, error="timeout")] * 2)
    write_case(tmp_path, "r1", "sd", "counting", [request(ttft=0.1, e2e=1.0, output_tokens=100)] * 3)
    figures = report.build_report(tmp_path)["runs"]["r1"]["testCases"]["counting"]
    assert (figures["base"]["completed"], figures["base"]["failed"]) == (3, 2)
    assert figures["base"]["e2e_p50_s"] == pytest.approx(2.0)
    assert figures["sd"]["speedup_e2e"] == pytest.approx(2.0)


def test_missing_variant_is_reported_as_no_data(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "})
    write_case(tmp_path, "r1", "base", "counting", [request(ttft=0.1, e2e=2.0, output_tokens=100)])
    report.write_report(tmp_path)
    sd = json.loads((tmp_path / "report.json").read_text())["runs"]["r1"]["testCases"]["counting"]["sd"]
    assert sd["completed"] == 0 and sd["tpot_p50_s"] is None and sd["speedup_tpot"] is None
    assert "no successful request" in (tmp_path / "report.md").read_text()


def test_empty_results_directory(tmp_path):
    assert report.main([str(tmp_path)]) == 0
    assert json.loads((tmp_path / "report.json").read_text()) == {"runs": {}}
    assert "No runs found" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.png").exists()
