"""benchmark: what LLMPerf runs against every variant. Defaults, limits on both sides, and the
limits of where the values end up (dashboard widgets, the ConfigMap, CloudWatch namespaces)."""
from __future__ import annotations

import pytest

from benchmark.loadgen import Level
from benchmark.pod import SAMPLE_TEST_CASES as DEFAULT_TEST_CASES
from stackconfig.model import BenchmarkSettings
from stackconfig.versions import BENCHMARK_IMAGE
from stackconfig.versions import LLMPERF_COMMIT as LLMPERF_PIN

from .stackconfig_helpers import SMALL, edits_id, parse, problem_list, with_edits

DEFAULT_BENCHMARK_IMAGE, LLMPERF_COMMIT = BENCHMARK_IMAGE.version, LLMPERF_PIN.version


def test_benchmark_defaults():
    benchmark = parse(SMALL).benchmark
    assert benchmark == BenchmarkSettings(input_tokens=40, output_tokens=64, requests_per_test_case=10,
                                          request_timeout_s=3600, test_cases=DEFAULT_TEST_CASES, image=DEFAULT_BENCHMARK_IMAGE,
                                          llmperf_commit=LLMPERF_COMMIT, metrics_namespace="LLMPerf/test")
    assert benchmark.test_cases is not DEFAULT_TEST_CASES


def test_the_default_metrics_namespace_uses_the_stack_slug():
    assert parse(SMALL, stack="qwen3-1.7b").benchmark.metrics_namespace == "LLMPerf/qwen3-1-7b-c7b98a"


def test_every_benchmark_setting_lands_in_the_spec():
    benchmark = parse(with_edits(SMALL, {"benchmark": {
        "inputTokens": 40, "outputTokens": 2, "concurrency": 4, "requestsPerTestCase": 1000, "requestTimeoutSeconds": 60,
        "testCases": {"sonnets": None, "a-b": "x"}, "image": "example.com/python@sha256:" + "a" * 64,
        "llmperfCommit": LLMPERF_COMMIT, "metricsNamespace": "My/Bench.mark_#:-" + "n" * 238,
        "samplingParams": {"temperature": 0.7, "top_p": 0.9}, "seed": "003"}})).benchmark
    assert benchmark == BenchmarkSettings(
        input_tokens=40, output_tokens=2, loads=(Level("concurrency", 4),), requests_per_test_case=1000, request_timeout_s=60,
        test_cases={"sonnets": None, "a-b": "x"}, image="example.com/python@sha256:" + "a" * 64,
        llmperf_commit=LLMPERF_COMMIT, metrics_namespace="My/Bench.mark_#:-" + "n" * 238,
        sampling_params={"temperature": 0.7, "top_p": 0.9}, seed="003")


@pytest.mark.parametrize("edits", [
    {"benchmark.requestsPerTestCase": 1, "benchmark.samplingParams.temperature": 0},
    {"benchmark.outputTokens": 984},                                   # inputTokens + outputTokens = maxModelLen
    {"benchmark.testCases": {f"case-{i}": "x" for i in range(62)}},      # 1 + 8 x 62 = 497 widgets
    {"benchmark.testCases": {"e": "é" * 262144}},                      # 524288 bytes, 262144 characters
    {"benchmark.metricsNamespace": "aws/lowercase"},
], ids=["lowest", "longest-sequence", "most-test-cases", "largest-prompts", "aws-lowercase"])
def test_benchmark_values_at_the_limits_are_accepted(edits):
    parse(with_edits(SMALL, edits))


NAMESPACE = "is not valid: a CloudWatch namespace: 1 to 255 letters, digits and . _ / # : -, not starting with AWS/"
BENCHMARK_KEYS = ("['concurrency', 'image', 'inputTokens', 'llmperfCommit', 'loadGenerator', 'metricDimensions', 'metricsNamespace', "
                  "'outputTokens', 'rate', 'requestTimeoutSeconds', 'requestsPerTestCase', 'samplingParams', 'seed', 'testCases']")


@pytest.mark.parametrize("edits, problems", [
    ({"benchmark.testCases": {}}, [("benchmark.testCases", "needs at least one test case")]),
    ({"benchmark.testCases": "x"}, [("benchmark.testCases", "must be an object, got 'x'")]),
    ({"benchmark.testCases": {"Not A Label": "x", "ok": "", "ok2": 5, "ok3": None, "ok4": "  ", 7: "x", "a" * 33: "x"}}, [
        ("benchmark.testCases.Not A Label", "test case names must be lowercase DNS labels (they become the TestCase dimension)"),
        ("benchmark.testCases.ok", "prompt must be a non-empty string, or null for the load generator's own text (LLMPerf sonnets, inference-perf's Shakespeare)"),
        ("benchmark.testCases.ok2", "prompt must be a non-empty string, or null for the load generator's own text (LLMPerf sonnets, inference-perf's Shakespeare)"),
        ("benchmark.testCases.ok4", "prompt must be a non-empty string, or null for the load generator's own text (LLMPerf sonnets, inference-perf's Shakespeare)"),
        ("benchmark.testCases.7", "test case names must be lowercase DNS labels (they become the TestCase dimension)"),
        ("benchmark.testCases." + "a" * 33, "test case names must be lowercase DNS labels (they become the TestCase dimension)")]),
    ({"benchmark.testCases": {f"c{i}": "x" for i in range(63)}},
     [("benchmark.testCases", "63 test cases need 505 dashboard widgets; CloudWatch allows 500 (at most 62 test cases)")]),
    ({"benchmark.testCases": {"e": "é" * 262145}},
     [("benchmark.testCases", "prompts total 524290 bytes; the benchmark's ConfigMap (1 MiB at most) leaves 524288 for them")]),
    ({"benchmark.metricDimensions": "sample"}, [("benchmark.metricDimensions", "'sample' is not one of names, eks-sample")]),
    ({"benchmark.metricDimensions": "eks-sample", "variants": [*SMALL["variants"], {**SMALL["variants"][1], "name": "sd2"}],
      "benchmark.testCases": {"a": "x " * 513, "b": "x_", "c": "x "}}, [
        ("benchmark.metricDimensions", "eks-sample publishes Variant SD or Base, so it needs exactly one baseline and one sd "
                                       "variant; this stack has 3 variants"),
        ("benchmark.testCases.a", "with metricDimensions eks-sample the prompt is the TestCase value, at most 1024 characters; it has 1026"),
        ("benchmark.testCases", "b, c publish under the same TestCase 'x_' with metricDimensions eks-sample")]),
    # A sweep publishes each level under "<TestCase value>/<level>": the longest must fit too.
    ({"benchmark.metricDimensions": "eks-sample", "benchmark.loadGenerator": "inference-perf", "benchmark.rate": [0.5, 2],
      "benchmark.testCases": {"a": "x" * 1016, "b": "y" * 1015}},
     [("benchmark.testCases.a", "with metricDimensions eks-sample the prompt is the TestCase value, at most 1024 characters; it has "
                                "1025 with the longest load level it is published under ('/rate-0.5' follows it)")]),
    ({"benchmark.inputTokens": 0}, [("benchmark.inputTokens", "0 is outside >= 1")]),
    ({"benchmark.inputTokens": None}, [("benchmark.inputTokens", "is required (an integer)")]),
    ({"benchmark.outputTokens": 1}, [("benchmark.outputTokens", "1 is outside >= 2")]),
    ({"benchmark.outputTokens": 985}, [("benchmark.outputTokens", "inputTokens + outputTokens = 1025 exceeds serving.maxModelLen 1024")]),
    ({"benchmark.inputTokens": 39},
     [("benchmark.inputTokens", "39 is below 40: LLMPerf's prompt template alone is longer, and it would never start")]),
    ({"benchmark.concurrency": 5}, [("benchmark.concurrency", "5 exceeds serving.maxNumSeqs 4; extra requests would queue and skew latency")]),
    ({"benchmark.concurrency": 0}, [("benchmark.concurrency", "0 is not a positive integer (requests in flight)")]),
    ({"benchmark.requestsPerTestCase": 0}, [("benchmark.requestsPerTestCase", "0 is outside 1..1000")]),
    ({"benchmark.requestsPerTestCase": 1001}, [("benchmark.requestsPerTestCase", "1001 is outside 1..1000")]),
    ({"benchmark.requestTimeoutSeconds": 59}, [("benchmark.requestTimeoutSeconds", "59 is outside >= 60")]),
    ({"benchmark.image": "python:latest"},
     [("benchmark.image", "'python:latest' is not pinned: give a version tag (not latest) or a @sha256 digest")]),
    ({"benchmark.llmperfCommit": "abcdef0"}, [("benchmark.llmperfCommit", f"'abcdef0' is not one of {LLMPERF_COMMIT}")]),
    ({"benchmark.seed": "005"}, [("benchmark.seed", "'005' is not one of 000, 001, 002, 003, 004")]),
    ({"benchmark.samplingParams": {"max_tokens": 5, "stream": False, "temperature": -1}}, [
        ("benchmark.samplingParams.max_tokens", "is set by the benchmark itself; not allowed here (max_tokens, messages, model, stream, stream_options)"),
        ("benchmark.samplingParams.stream", "is set by the benchmark itself; not allowed here (max_tokens, messages, model, stream, stream_options)"),
        ("benchmark.samplingParams.temperature", "must be a number in [0, 2], got -1")]),
    ({"benchmark.samplingParams.temperature": True}, [("benchmark.samplingParams.temperature", "must be a number in [0, 2], got True")]),
    ({"benchmark.samplingParams.temperature": "0"}, [("benchmark.samplingParams.temperature", "must be a number in [0, 2], got '0'")]),
    ({"benchmark.metricsNamespace": "AWS/Mine"}, [("benchmark.metricsNamespace", f"'AWS/Mine' {NAMESPACE}")]),
    ({"benchmark.metricsNamespace": ""}, [("benchmark.metricsNamespace", f"'' {NAMESPACE}")]),
    ({"benchmark.metricsNamespace": "n" * 256}, [("benchmark.metricsNamespace", f"'{'n' * 256}' {NAMESPACE}")]),
    ({"benchmark.metricsNamespace": "a b"}, [("benchmark.metricsNamespace", f"'a b' {NAMESPACE}")]),
    ({"benchmark": "x"}, [("benchmark", f"must be an object with keys {BENCHMARK_KEYS}, got str"),
                          ("benchmark.inputTokens", "is required (an integer)"), ("benchmark.outputTokens", "is required (an integer)")]),
    ({"benchmark.warmup": 1}, [("benchmark.warmup", "unknown key; allowed: concurrency, image, inputTokens, llmperfCommit, "
                                                    "loadGenerator, metricDimensions, metricsNamespace, outputTokens, rate, "
                                                    "requestTimeoutSeconds, requestsPerTestCase, samplingParams, seed, testCases")]),
    # Parsing goes on with what is valid: a refused length counts as 0 in the draft's window.
    ({"benchmark.inputTokens": 200, "benchmark.outputTokens": 1, "variants.1.draftMaxModelLen": 205}, [
        ("benchmark.outputTokens", "1 is outside >= 2"),
        ("variants[1].draftMaxModelLen", "205 is smaller than the longest benchmark sequence plus the speculation window (207)")]),
    ({"benchmark.inputTokens": 0, "benchmark.outputTokens": 600, "variants.1.draftMaxModelLen": 128},
     [("benchmark.inputTokens", "0 is outside >= 1")]),
], ids=edits_id)
def test_benchmark_rules_name_the_key_and_what_is_allowed(edits, problems):
    assert problem_list(with_edits(SMALL, edits)) == problems


def test_the_dashboard_limit_counts_one_header_widget_and_eight_per_test_case(monkeypatch):
    """With room for exactly one header and 63 rows of eight widgets, 63 test cases fit and 64
    do not (the catalog's 500 leaves 499 for rows: 62 of them)."""
    from stackconfig.parse import benchmark as benchmark_rules

    monkeypatch.setattr(benchmark_rules, "DASHBOARD_MAX_WIDGETS", 505)
    parse(with_edits(SMALL, {"benchmark.testCases": {f"c{i}": "x" for i in range(63)}}))
    assert problem_list(with_edits(SMALL, {"benchmark.testCases": {f"c{i}": "x" for i in range(64)}})) == [
        ("benchmark.testCases", "64 test cases need 513 dashboard widgets; CloudWatch allows 505 (at most 63 test cases)")]


def test_a_chosen_llmperf_commit_is_the_one_used(monkeypatch):
    """With a second checked-in manifest, choosing it gives that commit, not the default."""
    from stackconfig.parse import benchmark as benchmark_rules

    other = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(benchmark_rules, "llmperf_commits", lambda: (other, LLMPERF_COMMIT))
    assert parse(with_edits(SMALL, {"benchmark.llmperfCommit": other})).benchmark.llmperf_commit == other


def test_the_most_test_cases_leave_room_for_the_header(monkeypatch):
    """504 widgets: 62 test cases need 497, 63 need 505. The header widget is taken off before
    dividing, so the message says 62."""
    from stackconfig.parse import benchmark as benchmark_rules

    monkeypatch.setattr(benchmark_rules, "DASHBOARD_MAX_WIDGETS", 504)
    assert problem_list(with_edits(SMALL, {"benchmark.testCases": {f"c{i}": "x" for i in range(63)}})) == [
        ("benchmark.testCases", "63 test cases need 505 dashboard widgets; CloudWatch allows 504 (at most 62 test cases)")]


def test_a_study_counts_its_view_in_the_dashboard_limit(monkeypatch):
    """A study adds a header and one widget per test case: with 500 widgets, 55 test cases fit
    (1 + 1 + 55 x 9 = 497) and 56 do not."""
    study = {"variants": [{"name": "base", "role": "baseline"}], "study": {"drafts": ["Qwen/Qwen3-1.7B"], "windows": [5]}}
    parse(with_edits({**SMALL, **study}, {"benchmark.testCases": {f"c{i}": "x" for i in range(55)}}))
    assert problem_list(with_edits({**SMALL, **study}, {"benchmark.testCases": {f"c{i}": "x" for i in range(56)}})) == [
        ("benchmark.testCases", "56 test cases need 506 dashboard widgets with the study's view; CloudWatch allows 500 "
                                "(at most 55 test cases with a study)")]
