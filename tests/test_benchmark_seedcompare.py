"""reporting/seedcompare.py, unit by unit: exact values, so that a change in its arithmetic or text fails."""
import pytest

from benchmark.results import CaseResult, RequestResult
from reporting import seedcompare, seeds
from reporting.seeds import BLOG_OPEN_ENDED, BLOG_STRUCTURED, SEEDS, Published

from .results_files import SHAPE, VARIANTS, record, write_case

T0 = 1_795_000_000.0


def case_of(records: list[dict], summary: dict | None = None) -> CaseResult:
    return CaseResult(variant="sd", test_case="t", requests=[RequestResult.from_record(r) for r in records], case={},
                      llmperf_summary=summary, llmperf_responses=[], specdecode=None, telemetry=None)


# Three completed requests and a failed one. Every per-request figure differs between them, and each
# figure's p50, p90, mean and max differ, so a wrong key or statistic gives a different number.
RECORDS = [record(ttft=0.1, e2e=1.1, tokens=101, prompt_tokens=130, start=T0),
           record(ttft=0.3, e2e=6.3, tokens=201, prompt_tokens=150, start=T0 + 5),
           record(ttft=0.2, e2e=8.2, tokens=401, prompt_tokens=140, start=T0 + 10),
           record(0, 0.5, 0, error="HTTP 500: boom", start=T0 + 20)]
FIGURES = {"overall_output_throughput": 33.5, "completed_per_min": 7.25,
           "acceptance": {"counters": {"acceptance_rate": 0.625}, "acceptance_rate_implied": 0.5},
           "vs_baseline": {"speedup_tpot": 2.75}}


def measured(metric: str, stat: str, figures: dict = FIGURES) -> float | None:
    return seedcompare._measured(Published(metric, "sd", {stat: 1.0}, "x:1"), stat, case_of(RECORDS), figures)


def test_each_llmperf_metric_is_measured_as_the_projects_own_figure():
    # ttft 0.1 / 0.3 / 0.2; e2e 1.1 / 6.3 / 8.2; tokens 101 / 201 / 401; input 130 / 150 / 140.
    assert measured("ttft_s", "p50") == pytest.approx(0.2)
    assert measured("ttft_s", "max") == pytest.approx(0.3)
    assert measured("end_to_end_latency_s", "p50") == pytest.approx(6.3)
    assert measured("end_to_end_latency_s", "min") == pytest.approx(1.1)
    assert measured("end_to_end_latency_s", "mean") == pytest.approx((1.1 + 6.3 + 8.2) / 3)
    assert measured("number_output_tokens", "p90") == pytest.approx(201 + 200 * 0.8)
    assert measured("number_input_tokens", "p50") == 140
    assert measured("number_input_tokens", "max") == 150
    # TPOT = (e2e - TTFT) / (tokens - 1): 1.0 / 100, 6.0 / 200, 8.0 / 400.
    assert measured("inter_token_latency_s", "p50") == pytest.approx(0.02)
    assert measured("inter_token_latency_s", "max") == pytest.approx(0.03)
    assert measured("request_output_throughput_token_per_s", "p50") == pytest.approx(401 / 8.2)
    assert measured("request_output_throughput_token_per_s", "min") == pytest.approx(201 / 6.3)
    # A single or rounded figure is compared with the median.
    assert measured("ttft_s", "value") == pytest.approx(0.2)
    assert measured("end_to_end_latency_s", "approx") == pytest.approx(6.3)
    assert measured("end_to_end_latency_s", "stddev") == pytest.approx(3.6755952)


def test_run_level_figures_are_taken_as_they_are():
    assert measured("mean_output_throughput_token_per_s", "value") == 33.5
    assert measured("num_completed_requests_per_min", "value") == 7.25
    assert measured("tpot_speedup", "approx") == 2.75
    assert measured("tpot_speedup", "approx", {**FIGURES, "vs_baseline": None}) is None
    assert measured("tpot_speedup", "approx", {k: v for k, v in FIGURES.items() if k != "vs_baseline"}) is None


def test_acceptance_is_the_counted_rate_else_the_implied_one():
    assert measured("acceptance_rate", "value") == 0.625
    # A counted rate of zero is a measurement, not a missing one.
    assert measured("acceptance_rate", "value", {**FIGURES, "acceptance": {"counters": {"acceptance_rate": 0.0},
                                                                            "acceptance_rate_implied": 0.5}}) == 0.0
    assert measured("acceptance_rate", "value", {**FIGURES, "acceptance": {"counters": {"acceptance_rate": None},
                                                                            "acceptance_rate_implied": 0.5}}) == 0.5
    assert measured("acceptance_rate", "value", {**FIGURES, "acceptance": {"counters": {},
                                                                            "acceptance_rate_implied": 0.4}}) == 0.4


SUMMARY = {"results_ttft_s_quantiles_p99": 0.061, "results_ttft_s_quantiles_p50": 0.052, "results_ttft_s_mean": 0.055,
           "results_ttft_s_min": 0.041, "results_ttft_s_max": 0.071, "results_ttft_s_stddev": "0.004",
           "results_ttft_s_quantiles_p25": 7, "results_mean_output_throughput_token_per_s": 24.5,
           "results_num_completed_requests_per_min": 0.82, "results_number_output_tokens_quantiles_p50": "",
           "results_number_input_tokens_quantiles_p50": float("nan"), "results_end_to_end_latency_s_quantiles_p50": "nan",
           "results_inter_token_latency_s_quantiles_p50": [0.01], "results_inter_token_latency_s_mean": None,
           "results_mean_output_throughput_token_per_s_quantiles_p50": 99.0, "results_mean_output_throughput_token_per_s_mean": 98.0,
           "results_num_completed_requests_per_min_quantiles_p50": 97.0}


def llmperf(metric: str, stat: str, summary: dict | None = SUMMARY) -> float | None:
    return seedcompare._llmperf(Published(metric, "sd", {stat: 1.0}, "x:1"), stat, case_of([], summary))


def test_llmperfs_own_value_is_read_from_its_summary_by_statistic():
    assert [llmperf("ttft_s", s) for s in ("p99", "p50", "mean", "min", "max", "p25")] == [0.061, 0.052, 0.055, 0.041, 0.071, 7.0]
    assert isinstance(llmperf("ttft_s", "p25"), float)
    assert llmperf("ttft_s", "stddev") == 0.004  # LLMPerf's summary may hold numbers as text
    # A single or rounded figure is compared with LLMPerf's median.
    assert llmperf("ttft_s", "value") == 0.052 and llmperf("ttft_s", "approx") == 0.052
    # Run-level metrics have one value, whatever the statistic.
    assert llmperf("mean_output_throughput_token_per_s", "p50") == 24.5
    assert llmperf("mean_output_throughput_token_per_s", "mean") == 24.5
    assert llmperf("num_completed_requests_per_min", "value") == 0.82
    assert llmperf("num_completed_requests_per_min", "p50") == 0.82


def test_llmperfs_missing_or_unusable_values_are_none():
    assert llmperf("number_output_tokens", "p50") is None  # ""
    assert llmperf("number_input_tokens", "p50") is None  # NaN
    assert llmperf("end_to_end_latency_s", "p50") is None  # "nan"
    assert llmperf("inter_token_latency_s", "p50") is None  # not a number
    assert llmperf("inter_token_latency_s", "mean") is None  # null
    assert llmperf("inter_token_latency_s", "p99") is None  # absent
    assert llmperf("ttft_s", "p50", None) is None  # no summary file


def test_quantiles_name_llmperfs_statistics_in_order():
    assert seeds._quantiles(tuple(float(i) for i in range(10))) == {
        "p25": 0.0, "p50": 1.0, "p75": 2.0, "p90": 3.0, "p95": 4.0, "p99": 5.0, "mean": 6.0, "min": 7.0, "max": 8.0,
        "stddev": 9.0}
    assert seeds._quantiles((0.5, 0.25)) == {"p25": 0.5, "p50": 0.25}
    assert SEEDS["004"].figures[0].values["stddev"] == 0.0002364662521116205


def run_of(test_cases: dict, variants: list[dict] = VARIANTS, shape: dict | None = SHAPE, seed: str | None = "002") -> dict:
    return {"seed": seed, "shape": shape, "testCases": test_cases, "variants": variants, "cases": {}}


def test_shape_rows_say_what_the_seed_states_and_what_the_run_did():
    run = run_of({"sonnets": None, "counting": "counting numbers from 1 "})
    assert seedcompare._shape(SEEDS["002"], run) == [
        {"field": "input tokens", "seed": None, "run": 128, "differs": False},
        {"field": "output tokens", "seed": 128, "run": 512, "differs": True},
        {"field": "concurrency", "seed": None, "run": 1, "differs": False},
        {"field": "requests per test case", "seed": None, "run": 10, "differs": False},
        {"field": "sampling params", "seed": {"temperature": 0.9, "top_p": 1.0}, "run": {"temperature": 0}, "differs": True},
        {"field": "target", "seed": "meta-llama/Llama-3.1-8B", "run": "Qwen/Qwen3-32B", "differs": True},
        {"field": "draft", "seed": "meta-llama/Llama-3.2-1B", "run": "Qwen/Qwen3-0.6B", "differs": True},
        {"field": "speculative tokens", "seed": 5, "run": 7, "differs": True},
    ]
    # Seed 001's shape is the shared SHAPE's but for its sampling, and it measured sonnets (a None prompt).
    rows = seedcompare._shape(SEEDS["001"], run)
    assert [r["field"] for r in rows if r["differs"]] == ["sampling params"]
    assert rows[-1] == {"field": "test-case prompts", "seed": ["None"], "run": ["None", "counting numbers from 1 "],
                        "differs": False}


def test_test_case_prompts_differ_only_when_a_seed_prompt_is_missing():
    blog = {"structured": BLOG_STRUCTURED, "open": BLOG_OPEN_ENDED}
    prompts = seedcompare._shape(SEEDS["003"], run_of({**blog, "extra": "a"}))[-1]
    assert prompts == {"field": "test-case prompts", "seed": sorted([BLOG_STRUCTURED, BLOG_OPEN_ENDED]),
                       "run": sorted([BLOG_STRUCTURED, BLOG_OPEN_ENDED, "a"]), "differs": False}
    assert seedcompare._shape(SEEDS["003"], run_of(blog))[-1]["differs"] is False
    assert seedcompare._shape(SEEDS["003"], run_of({"open": BLOG_OPEN_ENDED}))[-1]["differs"] is True
    # A seed that names no prompts gets no prompt row.
    assert [r["field"] for r in seedcompare._shape(SEEDS["002"], run_of(blog))][-1] == "speculative tokens"


def test_a_run_without_shape_or_sd_variant_is_compared_as_unknown():
    rows = seedcompare._shape(SEEDS["002"], run_of({"t": "a"}, variants=VARIANTS[:1], shape=None))
    assert {r["field"]: (r["run"], r["differs"]) for r in rows} == {
        "input tokens": (None, False), "output tokens": (None, True), "concurrency": (None, False),
        "requests per test case": (None, False), "sampling params": (None, True), "target": ("Qwen/Qwen3-32B", True),
        "draft": (None, True), "speculative tokens": (None, True)}
    rows = seedcompare._shape(SEEDS["002"], run_of({"t": "a"}, variants=VARIANTS[1:]))
    assert {r["field"]: r["run"] for r in rows}["target"] is None


def test_compare_puts_each_published_figure_beside_the_measured_and_llmperfs(tmp_path):
    summary = {"results_request_output_throughput_token_per_s_quantiles_p50": 21.5}
    write_case(tmp_path, "r1", "sd", "sonnets", RECORDS, summary=summary)
    figures = {"sd": FIGURES, "base": {}}
    run = {**run_of({"sonnets": None, "counting": "c"}), "cases": {"sonnets": figures, "counting": figures}}
    result = seedcompare.compare(tmp_path, "r1", run)
    seed = SEEDS["002"]
    assert result == {
        "seed": "002", "title": seed.title, "document": "the choral-spec README, 'Distributed and Fused Speculative Decoding on AWS Trainium' (github.com/yfzzzyyls/choral-spec)", "statistic": "one example run",
        "notes": list(seed.notes), "shape": seedcompare._shape(seed, run), "shapeCite": "'Start the Fused Speculative Server' and the client command",
        # Its distributed figure describes a variant of engine distributed, which this run has not.
        "missing": ["request_output_throughput_token_per_s (sd, distributed): no distributed variant in this run"],
        "figures": [
            {"testCase": "sonnets", "variant": "sd", "role": "sd", "metric": "request_output_throughput_token_per_s",
             "statistic": "value", "published": 19.36, "measured": pytest.approx(401 / 8.2),
             "measuredAs": "server tokens / end-to-end", "llmperf": 21.5, "cite": "'Fused Architecture' example output: Tokens per second",
             "derived": None},
            {"testCase": "sonnets", "variant": "sd", "role": "sd", "metric": "acceptance_rate", "statistic": "value",
             "published": 0.7107, "measured": 0.625, "measuredAs": "accepted / draft tokens (/metrics, else implied)",
             "llmperf": None, "cite": "'Fused Architecture' example output: acceptance rate", "derived": None}]}


def test_a_figure_naming_an_engine_goes_beside_the_first_variant_of_that_engine(tmp_path):
    """Seed 002 published a fused and a distributed figure, both of role sd: the distributed one goes
    beside the run's distributed variant, the fused ones beside the first sd variant."""
    fused, distributed = {**VARIANTS[1], "engine": "nxdi-legacy"}, {**VARIANTS[1], "name": "dist", "engine": "distributed"}
    figures = {"sd": FIGURES, "dist": FIGURES, "base": {}}
    for variant in ("sd", "dist"):
        write_case(tmp_path, "r1", variant, "sonnets", RECORDS)
    run = {**run_of({"sonnets": None}, variants=[VARIANTS[0], fused, distributed]), "cases": {"sonnets": figures}}
    result = seedcompare.compare(tmp_path, "r1", run)
    assert result["missing"] == []
    assert [(r["variant"], r["metric"], r["published"]) for r in result["figures"]] == [
        ("sd", "request_output_throughput_token_per_s", 19.36), ("sd", "acceptance_rate", 0.7107),
        ("dist", "request_output_throughput_token_per_s", 34.15)]


def test_compare_names_the_figures_the_run_has_no_test_case_or_variant_for(tmp_path):
    write_case(tmp_path, "r1", "base", "open", RECORDS)
    write_case(tmp_path, "r1", "base", "structured", RECORDS)
    # No SD variant: the SD figures are missing even where the prompt is there; the baseline's is compared.
    run = {**run_of({"open": BLOG_OPEN_ENDED, "other": "a"}, variants=VARIANTS[:1], seed="003"),
           "cases": {"open": {"base": FIGURES}}}
    result = seedcompare.compare(tmp_path, "r1", run)
    assert result["missing"] == [
        "inter_token_latency_s (sd) for prompt 'Repeat the next line exactly 50 times': no such test case in this run",
        "inter_token_latency_s (sd) for prompt 'I believe the meaning of life is': no such test case in this run",
        "tpot_speedup (sd) for prompt 'Repeat the next line exactly 50 times': no such test case in this run"]
    assert [(r["variant"], r["metric"], r["statistic"], r["published"], r["measured"]) for r in result["figures"]] == [
        ("base", "inter_token_latency_s", "approx", 0.045, pytest.approx(0.02))]
    # With an SD variant, only the prompt the run lacks is missing.
    run = {**run_of({"open": BLOG_OPEN_ENDED}, seed="003"), "cases": {"open": {"base": FIGURES, "sd": FIGURES}}}
    write_case(tmp_path, "r1", "sd", "open", RECORDS)
    result = seedcompare.compare(tmp_path, "r1", run)
    assert len(result["missing"]) == 2 and [r["role"] for r in result["figures"]] == ["baseline", "sd"]


def test_a_run_naming_no_known_seed_is_not_compared(tmp_path):
    assert seedcompare.compare(tmp_path, "r1", run_of({"t": "a"}, seed=None)) is None
    assert seedcompare.compare(tmp_path, "r1", run_of({"t": "a"}, seed="999")) is None
    assert seedcompare.compare(tmp_path, "r1", {k: v for k, v in run_of({"t": "a"}).items() if k != "seed"}) is None


def test_seed_000_publishes_no_figures_but_its_shape_is_compared(tmp_path):
    result = seedcompare.compare(tmp_path, "r1", run_of({"sonnets": None}, seed="000"))
    assert result["figures"] == [] and result["missing"] == [] and result["statistic"] == "none: results are a chart only"
    assert len(result["shape"]) == 9
