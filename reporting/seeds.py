"""What each seed document published, as data, so a report can print it beside what was measured.

Seeds are the user's reference documents (docs/facts.md, "The source documents"), named here by
what they are. Every figure carries the place in its document it was read from. Metric names are LLMPerf's summary
metrics (docs/facts.md "LLMPerf"), because that is what seeds 001 and 004 printed; the report maps each
onto the figure it measures itself and says how their definitions differ.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmark.pod import SAMPLE_TEST_CASES

SONNETS = None
"""A test case whose prompt is None uses LLMPerf's own sonnet.txt (benchmark/pod.py SAMPLE_TEST_CASES)."""
LLMPERF_STATISTICS = ("p25", "p50", "p75", "p90", "p95", "p99", "mean", "min", "max", "stddev")


@dataclass(frozen=True)
class Published:
    """One published figure series: a metric of one variant role, at one or more statistics."""

    metric: str
    """An LLMPerf summary metric (ttft_s, end_to_end_latency_s, inter_token_latency_s,
    request_output_throughput_token_per_s, number_input_tokens, number_output_tokens,
    mean_output_throughput_token_per_s, num_completed_requests_per_min), or acceptance_rate /
    tpot_speedup for figures LLMPerf does not produce."""
    role: str
    """"baseline" or "sd"."""
    values: dict[str, float]
    """statistic -> value; statistics are LLMPerf's (p25..p99, mean, min, max, stddev), "value"
    for a single figure, or "approx" for a figure the seed rounds in prose."""
    cite: str
    prompt: str | None = SONNETS
    """The test case's prompt the figure was measured with (matched against the run's test cases)."""
    derived: str | None = None
    """How the figure follows from the document's own, when the document does not print it."""
    engine: str | None = None
    """The engine of the variant it describes (the run's variants[].engine, stackconfig/engines/):
    seed 002 published a fused and a distributed figure of one role; None: the first variant of its role."""


@dataclass(frozen=True)
class SeedShape:
    """The benchmark shape a seed states; None where it does not say."""

    cite: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None
    requests: int | None = None
    sampling_params: dict[str, Any] | None = None
    prompts: tuple[str | None, ...] | None = None
    target: str | None = None
    draft: str | None = None
    speculative_tokens: int | None = None


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    document: str
    """The document, by what it is and where it is published."""
    statistic: str
    """The statistic the seed reports, in its own words."""
    shape: SeedShape
    figures: tuple[Published, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def _quantiles(values: tuple[float, ...]) -> dict[str, float]:
    return dict(zip(LLMPERF_STATISTICS, values))


_D000 = ("the EKS sample's README, 'Speculative Decoding on AWS Trainium2 with vLLM' "
         "(github.com/aws-neuron/aws-neuron-eks-samples, folder speculative_decoding_trn2_vllm)")
_D001 = ("the Neuron NxD Inference tutorial 'Using Speculative Decoding (SD) to improve inference performance on "
         "Trn2 instances' (Qwen3-32B with Qwen3-0.6B)")
_D002 = "the choral-spec README, 'Distributed and Fused Speculative Decoding on AWS Trainium' (github.com/yfzzzyyls/choral-spec)"
_D003 = "the AWS Machine Learning blog post on the EKS sample (Qwen3 on Trainium2 with vLLM, 'up to 3x')"
_D004 = ("the Neuron tutorial 'Using Speculative Decoding and Quantization to improve Llama-3.1-405B inference "
         "performance on Trn2 instances'")
_001_BASE = "Step 4, the baseline's LLMPerf summary"
_001_SD = "Step 4, the speculative configuration's LLMPerf summary"
_004_BASE = "Part 1, Step 3 'Measure performance using LLMPerf', the BF16 summary"
_004_SD = "Part 2, Step 4 'Measure performance using LLMPerf', the FP8 + speculative summary"
_SAMPLE_PROMPTS = tuple(SAMPLE_TEST_CASES.values())
# Seed 004's BF16 medians, which its per-model-token figures are derived from (see its notes).
_004_BASE_E2E_P50, _004_BASE_TTFT_P50, _004_MAX_TOKENS = 70.09642704750877, 2.441959390998818, 1500
_004_PER_MODEL_TOKEN = (f"(p50 end-to-end {_004_BASE_E2E_P50:.2f} s - p50 TTFT {_004_BASE_TTFT_P50:.2f} s) / "
                        f"({_004_MAX_TOKENS} - 1) model tokens, as this report's TPOT")
BLOG_STRUCTURED = "Repeat the next line exactly 50 times"
BLOG_OPEN_ENDED = "I believe the meaning of life is"

SEEDS: dict[str, Seed] = {
    "000": Seed(
        id="000", title="EKS sample (aws-neuron-eks-samples speculative_decoding_trn2_vllm)", document=_D000,
        statistic="none: results are a chart only",
        shape=SeedShape(cite="'Performance Results' and its LLMPerf job; docs/facts.md, 'LLMPerf'", input_tokens=64, output_tokens=600,
                        sampling_params={"temperature": 0}, prompts=_SAMPLE_PROMPTS,
                        target="Qwen/Qwen3-32B", draft="Qwen/Qwen3-1.7B", speculative_tokens=7),
        notes=("OutputTokens is 'the primary metric' ('View Results in CloudWatch'); no figure is published in text.",),
    ),
    "001": Seed(
        id="001", title="NxDI tutorial: Qwen3-32B + Qwen3-0.6B", document=_D001, statistic="p99",
        shape=SeedShape(cite="Step 4, its token_benchmark_ray.py command", input_tokens=128, output_tokens=512, concurrency=1, requests=10,
                        sampling_params={}, prompts=(SONNETS,), target="Qwen/Qwen3-32B", draft="Qwen/Qwen3-0.6B",
                        speculative_tokens=7),
        figures=(
            Published("ttft_s", "baseline", {"p99": 0.04828366368776187}, _001_BASE),
            Published("end_to_end_latency_s", "baseline", {"p99": 6.044886132028841}, _001_BASE),
            Published("request_output_throughput_token_per_s", "baseline", {"p99": 102.27375153804246}, _001_BASE),
            Published("number_input_tokens", "baseline", {"p99": 128.0}, _001_BASE),
            Published("number_output_tokens", "baseline", {"p99": 558.0}, _001_BASE),
            Published("ttft_s", "sd", {"p99": 0.04737630250383518}, _001_SD),
            Published("end_to_end_latency_s", "sd", {"p99": 5.6368158639998}, _001_SD),
            Published("request_output_throughput_token_per_s", "sd", {"p99": 137.84216889131872}, _001_SD),
            Published("number_input_tokens", "sd", {"p99": 128.0}, _001_SD),
            Published("number_output_tokens", "sd", {"p99": 565.37}, _001_SD),
        ),
        notes=("'35% higher throughput' and '7% lower end-to-end latency' ('Performance Comparison'); output token "
               "counts are LLMPerf's Llama-2 re-tokenisation + 1, not the served model's tokens "
               "(docs/facts.md 'LLMPerf, measured').",
               "It sent {} (the server's defaults) to the legacy engine, where the baseline samples with the model's "
               "generation defaults while fused speculation is compiled greedy: its +35% compares unlike decoding. The "
               "stack keeps {} to reproduce it; the report flags the pair beside the speedup (docs/engines.md)."),
    ),
    "002": Seed(
        id="002", title="choral-spec: Llama-3.1-8B + Llama-3.2-1B, fused and distributed speculation (not vLLM, not LLMPerf)",
        document=_D002, statistic="one example run",
        shape=SeedShape(cite="'Start the Fused Speculative Server' and the client command", output_tokens=128, sampling_params={"temperature": 0.9, "top_p": 1.0},
                        target="meta-llama/Llama-3.1-8B", draft="meta-llama/Llama-3.2-1B", speculative_tokens=5),
        figures=(
            Published("request_output_throughput_token_per_s", "sd", {"value": 19.36}, "'Fused Architecture' example output: Tokens per second"),
            Published("acceptance_rate", "sd", {"value": 0.7107}, "'Fused Architecture' example output: acceptance rate"),
            # Its distributed client, one thread: 48 tokens in 1.41 s. Beside a distributed variant
            # (stack llama3.1-8b-distributed, docs/distributed.md).
            Published("request_output_throughput_token_per_s", "sd", {"value": 34.15},
                      "'Distributed Architecture' example output, one thread: 48 tokens in 1.41 s", engine="distributed"),
        ),
        notes=("Measured on trn1.2xlarge with TP 2 and a 128-token sequence length (its dependencies list, 'Start the Fused "
               "Speculative Server'), with the "
               "project's own client, not LLMPerf; no baseline figure is published.",
               "Its distributed figure is one example run of its draft client calling the target server over gRPC, "
               "one thread, 48 tokens; stack llama3.1-8b-distributed serves that architecture (engine distributed).",),
    ),
    "003": Seed(
        id="003", title="AWS blog on the EKS sample: Qwen3-32B + Qwen3-1.7B", document=_D003,
        statistic="approximate, read from dashboards (statistic not stated)",
        shape=SeedShape(cite="its benchmarking methodology and results (two vLLM services, LLMPerf at temperature 0, two prompt kinds)", sampling_params={"temperature": 0},
                        prompts=(BLOG_STRUCTURED, BLOG_OPEN_ENDED), target="Qwen/Qwen3-32B", draft="Qwen/Qwen3-1.7B",
                        speculative_tokens=7),
        figures=(
            Published("inter_token_latency_s", "sd", {"approx": 0.015}, "results, structured prompts", prompt=BLOG_STRUCTURED),
            Published("inter_token_latency_s", "baseline", {"approx": 0.045}, "results, open-ended prompts", prompt=BLOG_OPEN_ENDED),
            Published("inter_token_latency_s", "sd", {"approx": 0.045}, "results, open-ended prompts", prompt=BLOG_OPEN_ENDED),
            Published("tpot_speedup", "sd", {"approx": 3.0}, "its opening: 'up to 3x'", prompt=BLOG_STRUCTURED),
        ),
        notes=("TTFT 'stays effectively unchanged' (its results); the 0.6B draft's acceptance was 'roughly 60% "
               "lower' than 1.7B's (its draft model comparison).",),
    ),
    "004": Seed(
        id="004", title="Llama-3.1-405B: BF16 baseline vs FP8 + fused speculation (Llama-3.2-1B draft)", document=_D004,
        statistic="full quantiles (p25..p99, mean, min, max, stddev); the summary quotes p50",
        shape=SeedShape(cite="Part 1, Step 3, its token_benchmark_ray.py command", input_tokens=10000, output_tokens=1500, concurrency=1, requests=50,
                        sampling_params={}, prompts=(SONNETS,), target="meta-llama/Llama-3.1-405B-Instruct",
                        draft="meta-llama/Llama-3.2-1B-Instruct", speculative_tokens=7),
        figures=(
            Published("inter_token_latency_s", "baseline", _quantiles((
                0.03783673520494379, 0.037929154633788834, 0.03799374728198055, 0.03806084386428147,
                0.03818095359194858, 0.03862880035825585, 0.03790912092492011, 0.03711292916794487,
                0.03867580939426865, 0.0002364662521116205)), _004_BASE),
            Published("ttft_s", "baseline", _quantiles((
                2.437347081664484, 2.441959390998818, 2.4439403364085592, 2.444729209714569, 2.445114637189545,
                79.22927707570342, 5.451600373298861, 2.427013176959008, 153.00210832804441,
                21.29264628138615)), _004_BASE),
            Published("end_to_end_latency_s", "baseline", _quantiles((
                70.06310007086722, 70.09642704750877, 70.1557097924524, 70.28295350184199, 70.56055794338462,
                148.28325726192182, 73.19207735829521, 70.00512732309289, 222.50397142698057,
                21.54750467688136)), _004_BASE),
            Published("request_output_throughput_token_per_s", "baseline", _quantiles((
                25.417755028050912, 25.463487985775544, 25.522234144656743, 25.6487981126861, 25.729858763245502,
                25.90146713883131, 25.13808905954906, 8.080754642125802, 26.021214285642255,
                2.465472136291901)), _004_BASE),
            Published("number_input_tokens", "baseline", _quantiles((
                10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000, 10000, 0.0)), _004_BASE),
            Published("number_output_tokens", "baseline", _quantiles((
                1783.0, 1785.0, 1789.75, 1798.1, 1803.55, 1816.67, 1787.92, 1779, 1825, 8.54720386310933)),
                _004_BASE),
            Published("inter_token_latency_s", "baseline",
                      {"p50": (_004_BASE_E2E_P50 - _004_BASE_TTFT_P50) / (_004_MAX_TOKENS - 1)}, _004_BASE,
                      derived=_004_PER_MODEL_TOKEN),
            Published("request_output_throughput_token_per_s", "baseline", {"p50": _004_MAX_TOKENS / _004_BASE_E2E_P50}, _004_BASE,
                      derived=f"{_004_MAX_TOKENS} model tokens / p50 end-to-end {_004_BASE_E2E_P50:.2f} s"),
            Published("mean_output_throughput_token_per_s", "baseline", {"value": 24.421011092151268}, _004_BASE),
            Published("num_completed_requests_per_min", "baseline", {"value": 0.8195336846889548}, _004_BASE),
            Published("inter_token_latency_s", "sd", _quantiles((
                0.008220573497974934, 0.008265312568750231, 0.008438719224417583, 0.00848199803312309,
                0.008495625438929224, 0.011143428944987235, 0.008419798457414533, 0.008173695931987216,
                0.01364151847269386, 0.0007612118573477839)), _004_SD),
            Published("ttft_s", "sd", _quantiles((
                2.2543624382815324, 2.254961202503182, 2.2576071268413216, 2.2596270388457924, 2.260639927221928,
                2.2628143909573555, 2.256157155628316, 2.2534945809748024, 2.2629711360204965,
                0.0023667267664955545)), _004_SD),
            Published("end_to_end_latency_s", "sd", _quantiles((
                14.586015026085079, 14.65608573507052, 14.91364526405232, 14.977840351965279, 15.000083449739032,
                18.969864878777866, 14.886235136194154, 14.520539953839034, 22.716861865017563,
                1.1415236552464672)), _004_SD),
            Published("request_output_throughput_token_per_s", "sd", _quantiles((
                100.64608830743339, 102.4148205461138, 102.90679421801005, 103.02201242683091, 103.26614794565539,
                103.36118277211666, 101.22055373532301, 66.0742671641385, 103.37081160698546,
                5.19249551094185)), _004_SD),
            Published("number_input_tokens", "sd", _quantiles((
                10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000.0, 10000, 10000, 0.0)), _004_SD),
            Published("number_output_tokens", "sd", _quantiles((
                1501.0, 1501.0, 1501.0, 1501.0, 1501.0, 1501.0, 1501.0, 1501, 1501, 0.0)), _004_SD),
            Published("mean_output_throughput_token_per_s", "sd", {"value": 100.69986490153724}, _004_SD),
            Published("num_completed_requests_per_min", "sd", {"value": 4.025311055357918}, _004_SD),
        ),
        notes=("Seed 004 applied Neuron's LLMPerf patch (both 'Measure performance using LLMPerf' steps), whose inter-token latency is "
               "per output token and excludes TTFT (aws-neuron/aws-neuron-sdk@81ce03a:"
               "src/benchmark/helper_scripts/neuron_perf.patch), close to this report's TPOT.",
               "The SD variant also switches to FP8 weights (the tutorial's introduction), so its text is not expected to match the "
               "BF16 baseline's.",
               "Its two summaries count output tokens differently (an inference from its own quantiles): the BF16 run's 1779-1825 "
               "for max_tokens 1500 look like LLMPerf's Llama-2 re-tokenisation, the SD run's exactly 1501 like the model's own "
               "tokens. Its BF16 inter-token latency (37.9 ms) and throughput (25.5 tok/s) are therefore per Llama-2 token; the "
               "rows marked derived restate them per model token (about 45.1 ms and 21.4 tok/s) from its own medians. This "
               "run's measured TPOT counts model tokens: compare it with the derived rows, or a correct run looks about 19% "
               "slower than the seed (and the seed's own 4.6x inter-token gain is about 5.5x per model token)."),
    ),
}


@dataclass(frozen=True)
class PublishedChoice:
    """A configuration a source document chose or measured, which a tuning report marks."""

    target: str
    draft: str
    window: int
    document: str
    says: str
    figures: dict[str, float] = field(default_factory=dict)
    """Published figures of that configuration: tpot_base_ms, tpot_sd_ms, acceptance_rate, mean_accepted_length."""


PUBLISHED_CHOICES = (
    PublishedChoice("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", 7, _D003,
                    "its draft comparison chose Qwen3-1.7B with 7 speculative tokens as the best balance (Qwen3-0.6B "
                    "accepted roughly 60 % less; 15 tokens were rejected too often)"),
    PublishedChoice("meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", 3,
                    "Neuron's EAGLE3 tutorial on the vLLM Neuron plugin (Llama 3.1, Neuron SDK 2.32; vllm bench serve, "
                    "not LLMPerf)",
                    "its configuration, k = 3, with median TPOT 10.52 -> 6.41 ms, acceptance 74.1 %, mean accepted length 3.22",
                    {"tpot_base_ms": 10.52, "tpot_sd_ms": 6.41, "acceptance_rate": 0.741, "mean_accepted_length": 3.22}),
)
