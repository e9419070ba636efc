"""benchmark/results.py, unit by unit: exact values, so that a change in its arithmetic or text fails."""
from __future__ import annotations

import math

import pytest

from benchmark.results import (
    CaseResult,
    RequestResult,
    case_dir,
    list_runs,
    load_case,
    load_run,
    percentile,
    read_json,
)
from tests.results_files import digest, record, write_case, write_run


def request(start: float = 100.0, ttft: float | None = 0.5, e2e: float | None = 2.5, tokens: int | None = 5,
            error: str | None = None) -> RequestResult:
    return RequestResult(start=start, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, input_tokens=140,
                         content_chunks=3, error=error, request_sha256="a" * 64, response_sha256="b" * 64)


# --- RequestResult.ok -------------------------------------------------------------------------

def test_a_request_is_ok_when_answered_without_error_even_without_content():
    assert request().ok is True
    assert request(ttft=None).ok is True
    assert request(error="HTTP 500").ok is False
    assert request(e2e=None).ok is False


# --- RequestResult.time_per_output_token_s --------------------------------------------------

def test_tpot_is_the_time_after_the_first_token_per_further_token():
    # (2.5 - 0.5) / (5 - 1)
    assert request(ttft=0.5, e2e=2.5, tokens=5).time_per_output_token_s == 0.5
    # two tokens: one gap after the first
    assert request(ttft=0.25, e2e=1.0, tokens=2).time_per_output_token_s == 0.75


@pytest.mark.parametrize("changes", [
    {"tokens": 1}, {"tokens": 0}, {"tokens": None}, {"ttft": None}, {"e2e": None}, {"error": "boom"},
])
def test_tpot_is_none_without_two_tokens_a_ttft_or_a_full_answer(changes):
    assert request(**changes).time_per_output_token_s is None


# --- RequestResult.output_throughput -----------------------------------------------------------

def test_output_throughput_is_tokens_over_end_to_end_time():
    assert request(e2e=2.5, tokens=5).output_throughput == 2.0
    assert request(e2e=2.0, tokens=0).output_throughput == 0.0
    assert request(ttft=None, e2e=4.0, tokens=1).output_throughput == 0.25


@pytest.mark.parametrize("changes", [{"tokens": None}, {"e2e": 0.0}, {"e2e": None}, {"error": "boom"}])
def test_output_throughput_is_none_without_tokens_time_or_a_full_answer(changes):
    assert request(**changes).output_throughput is None


# --- RequestResult.from_record ---------------------------------------------------------------

def test_from_record_maps_every_field_of_a_proxy_record():
    line = record(0.125, 3.5, 64, chunks=20, start=1_795_000_001.5, prompt_tokens=131, prompt="hello", answer="world")
    assert RequestResult.from_record(line) == RequestResult(
        start=1_795_000_001.5, ttft_s=0.125, e2e_s=3.5, output_tokens=64, input_tokens=131, content_chunks=20,
        error=None, request_sha256=digest("hello"), response_sha256=digest("world"))


def test_from_record_keeps_the_proxy_error_and_drops_the_ttft():
    line = {**record(0.2, 1.0, 3), "status": 500, "error": "upstream reset"}
    result = RequestResult.from_record(line)
    assert (result.error, result.ttft_s, result.e2e_s, result.output_tokens) == ("upstream reset", None, 1.0, 3)


def test_from_record_turns_a_non_200_status_into_an_http_error():
    result = RequestResult.from_record({**record(0.2, 1.0, 3), "status": 503})
    assert (result.error, result.ttft_s) == ("HTTP 503", None)
    assert RequestResult.from_record({"start": 5.0, "e2e_s": 1.0}).error == "HTTP None"


def test_from_record_defaults_what_an_old_record_lacks():
    assert RequestResult.from_record({"start": 7.0, "status": 200}) == RequestResult(
        start=7.0, ttft_s=None, e2e_s=None, output_tokens=None, input_tokens=None, content_chunks=0, error=None,
        request_sha256=None, response_sha256=None)


# --- CaseResult --------------------------------------------------------------------------------

def case(requests: list[RequestResult], asked: int | None) -> CaseResult:
    return CaseResult(variant="sd", test_case="chat", requests=requests, case={} if asked is None else {"asked": asked},
                      llmperf_summary=None, llmperf_responses=[], specdecode=None, telemetry=None)


def test_case_counts_completed_and_failed_requests():
    good, bad, unfinished = request(start=1.0), request(start=2.0, error="HTTP 500"), request(start=3.0, e2e=None)
    result = case([good, bad, unfinished, request(start=4.0)], asked=4)
    assert result.ok == [good, request(start=4.0)]
    assert (result.asked, result.failed, result.short) == (4, 2, True)


def test_case_is_short_only_when_fewer_completed_than_asked():
    assert case([request(), request()], asked=2).short is False
    assert case([request(), request()], asked=3).short is True
    assert case([request(), request()], asked=1).short is False
    never_started = case([], asked=None)
    assert (never_started.asked, never_started.failed, never_started.short) == (None, 0, False)


# --- percentile --------------------------------------------------------------------------------

def test_percentile_interpolates_linearly_as_numpy():
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([10.0, 20.0, 40.0], 75) == 30.0
    assert percentile([10.0, 20.0, 40.0], 25) == 15.0
    assert percentile([7.0], 90) == 7.0
    assert percentile([], 50) is None


# --- files -------------------------------------------------------------------------------------

def test_read_json_reads_llmperf_nan_and_is_none_for_an_absent_file(tmp_path):
    (tmp_path / "summary.json").write_text('{"results_ttft_s_stddev": NaN, "n": 1}')
    loaded = read_json(tmp_path / "summary.json")
    assert loaded["n"] == 1 and math.isnan(loaded["results_ttft_s_stddev"])
    assert read_json(tmp_path / "absent.json") is None


def test_case_dir_is_run_variant_test_case(tmp_path):
    assert case_dir(tmp_path, "20261120T0900Z-x", "sd", "chat") == tmp_path / "20261120T0900Z-x" / "sd" / "chat"


def test_load_case_reads_every_file_of_the_case(tmp_path):
    records = [record(0.1, 1.0, 8, start=10.0, prompt="a"), record(0.0, 0.5, 0, start=11.0, error="HTTP 500", prompt="b")]
    summary = {"results_num_completed_requests": 1, "results_inter_token_latency_s_quantiles_p50": 0.09}
    specdecode = {"before": {"drafts": 1.0}, "after": {"drafts": 5.0}}
    telemetry = {"status": "collected", "utilizationPercent": [[0, 50.0]]}
    write_case(tmp_path, "run1", "sd", "chat", records, asked=3, exit_code=1, summary=summary,
               specdecode=specdecode, telemetry=telemetry)
    # A second summary sorts after the first: the first (by name) is the one read.
    (tmp_path / "run1" / "sd" / "chat" / "zz_summary.json").write_text('{"other": true}')
    (tmp_path / "run1" / "sd" / "chat" / "zz_individual_responses.json").write_text('[{"other": true}]')
    loaded = load_case(tmp_path, "run1", "sd", "chat")
    assert (loaded.variant, loaded.test_case) == ("sd", "chat")
    assert loaded.requests == [RequestResult.from_record(r) for r in records]
    assert loaded.case["asked"] == 3 and loaded.case["exitCode"] == 1
    assert loaded.llmperf_summary == summary
    assert loaded.llmperf_responses == [{"error_code": None, "error_msg": "", "inter_token_latency_s": 0.09}]
    assert loaded.specdecode == specdecode
    assert loaded.telemetry == telemetry


def test_load_case_of_a_case_that_never_started(tmp_path):
    assert load_case(tmp_path, "run1", "sd", "chat") == CaseResult(
        variant="sd", test_case="chat", requests=[], case={}, llmperf_summary=None, llmperf_responses=[],
        specdecode=None, telemetry=None)


def test_list_runs_is_oldest_first_and_only_folders_with_a_run_file(tmp_path):
    write_run(tmp_path, "20261121T0900Z-b", {})
    write_run(tmp_path, "20261120T0900Z-a", {})
    (tmp_path / "20261122T0900Z-no-run-file").mkdir()
    assert list_runs(tmp_path) == ["20261120T0900Z-a", "20261121T0900Z-b"]
    assert list_runs(tmp_path / "20261120T0900Z-a") == []


def test_load_run_reads_run_json(tmp_path):
    write_run(tmp_path, "20261120T0900Z-a", {"chat": {}}, seed="001")
    run = load_run(tmp_path, "20261120T0900Z-a")
    assert (run["runId"], run["seed"], run["testCases"]) == ("20261120T0900Z-a", "001", {"chat": {}})
