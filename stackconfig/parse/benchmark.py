"""`benchmark`: the load, the test cases and sampling, the metric dimensions, and what fits
on the CloudWatch dashboard.
"""
from __future__ import annotations

import math
import re
from typing import Any

from benchmark.loadgen import DEFAULT_GENERATOR, GENERATORS, LOAD_KINDS, Level
from benchmark.pod import (
    CLOUDWATCH_DIMENSION_VALUE_MAX,
    DASHBOARD_ROWS,
    DASHBOARD_WIDGETS_PER_TEST_CASE,
    DEFAULT_SAMPLING_PARAMS,
    METRIC_DIMENSION_STYLES,
    RESERVED_SAMPLING_KEYS,
    SAMPLE_TEST_CASES,
    STUDY_DASHBOARD_WIDGETS,
    level_folder,
    metric_dimensions,
    test_case_value,
)
from benchmark.podsetup import llmperf_commits
from reporting.seeds import SEEDS

from ..catalog import DASHBOARD_MAX_WIDGETS, DASHBOARD_METRICS_PER_WIDGET, TEST_CASE_PROMPTS_MAX_BYTES
from ..model import BenchmarkSettings, ServingSettings, StudySettings, Variant
from ..naming import stack_slug
from ..sampling import SAMPLING_PARAMS
from ..versions import LLMPERF_COMMIT
from .reader import _DNS_LABEL, _pinned_image, _Section

LOAD_KEYS = {"loadGenerator", *LOAD_KINDS}
"""Which load generator drives the benchmark (benchmark/loadgen/, by name) and at which load levels;
a level list is a load sweep: every test case is measured at every level (benchmark/driver.py)."""
DEFAULT_LOAD = (Level("concurrency", 1),)
BENCHMARK_KEYS = {"inputTokens", "outputTokens", "requestsPerTestCase", "requestTimeoutSeconds", "testCases",
                  "image", "llmperfCommit", "metricsNamespace", "metricDimensions", "samplingParams", "seed", *LOAD_KEYS}


def _parse_benchmark(s: _Section, stack: str, serving: ServingSettings, study_view: bool = False) -> BenchmarkSettings:
    """`study_view`: the stack has a study, whose dashboard view adds a header and a widget per
    test case (benchmark/pod.py STUDY_DASHBOARD_WIDGETS) to the header and rows every stack has."""
    test_cases = s.mapping("testCases", dict(SAMPLE_TEST_CASES))
    for case_slug, prompt in (test_cases or {}).items():
        if not isinstance(case_slug, str) or not _DNS_LABEL.match(case_slug):
            s.problem(f"testCases.{case_slug}", "test case names must be lowercase DNS labels (they become the TestCase dimension)")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            s.problem(f"testCases.{case_slug}", "prompt must be a non-empty string, or null for the load generator's own text ("
                                                  f"{', '.join(g.own_text for g in GENERATORS.values())})")
    if test_cases == {}:
        s.problem("testCases", "needs at least one test case")
    header, per_case = STUDY_DASHBOARD_WIDGETS if study_view else (0, 0)
    per_test_case = DASHBOARD_WIDGETS_PER_TEST_CASE + per_case
    most = (DASHBOARD_MAX_WIDGETS - 1 - header) // per_test_case
    if test_cases and len(test_cases) > most:
        view = (" with the study's view", " with a study") if study_view else ("", "")
        s.problem("testCases", f"{len(test_cases)} test cases need {1 + header + len(test_cases) * per_test_case} dashboard "
                               f"widgets{view[0]}; CloudWatch allows {DASHBOARD_MAX_WIDGETS} (at most {most} test cases{view[1]})")
    prompt_bytes = sum(len(p.encode()) for p in (test_cases or {}).values() if isinstance(p, str))
    if prompt_bytes > TEST_CASE_PROMPTS_MAX_BYTES:
        s.problem("testCases", f"prompts total {prompt_bytes} bytes; the benchmark's ConfigMap (1 MiB at most) leaves "
                               f"{TEST_CASE_PROMPTS_MAX_BYTES} for them")
    load_generator, loads = _parse_loads(s, serving.max_num_seqs)
    input_tokens = s.integer("inputTokens", low=1)
    chosen = GENERATORS[load_generator]
    if input_tokens and input_tokens < chosen.min_input_tokens:
        s.problem("inputTokens", f"{input_tokens} is below {chosen.min_input_tokens}: {chosen.min_input_tokens_why}")
    output_tokens = s.integer("outputTokens", low=2)
    if input_tokens and output_tokens and serving.max_model_len and input_tokens + output_tokens > serving.max_model_len:
        s.problem("outputTokens", f"inputTokens + outputTokens = {input_tokens + output_tokens} exceeds serving.maxModelLen {serving.max_model_len}")
    if test_cases and len(test_cases) <= most and len(loads) > 1 and per_case:
        # A study's view draws each test case at each level (components/pairing/dashboard.py study_widgets).
        widgets = 1 + header + len(test_cases) * (DASHBOARD_WIDGETS_PER_TEST_CASE + per_case * len(loads))
        if widgets > DASHBOARD_MAX_WIDGETS:
            fit = (DASHBOARD_MAX_WIDGETS - 1 - header - len(test_cases) * DASHBOARD_WIDGETS_PER_TEST_CASE) // (len(test_cases) * per_case)
            s.problem(loads[0].kind, f"{len(loads)} levels beside a study need {widgets} dashboard widgets (the study's view has "
                                     f"one per test case and level); CloudWatch allows {DASHBOARD_MAX_WIDGETS}: give at most "
                                     f"{fit} levels, or fewer test cases")
    namespace = s.string("metricsNamespace", f"LLMPerf/{stack_slug(stack)}", pattern=re.compile(r"^(?!AWS/)[A-Za-z0-9._/#:-]{1,255}$"), hint="a CloudWatch namespace: 1 to 255 letters, digits and . _ / # : -, not starting with AWS/")
    return BenchmarkSettings(
        input_tokens=input_tokens or 0,
        output_tokens=output_tokens or 0,
        load_generator=load_generator,
        loads=loads,
        requests_per_test_case=s.integer("requestsPerTestCase", 10, low=1, high=1000),
        request_timeout_s=s.integer("requestTimeoutSeconds", 3600, low=60),
        test_cases=dict(test_cases or {}),
        image=s.string("image", GENERATORS[load_generator].image, check=_pinned_image),
        llmperf_commit=s.string("llmperfCommit", LLMPERF_COMMIT.version, choices=llmperf_commits()) or LLMPERF_COMMIT.version,
        metrics_namespace=namespace or "",
        sampling_params=_sampling_params(s, output_tokens),
        seed=s.string("seed", None, choices=tuple(SEEDS)),
        metric_dimensions=s.string("metricDimensions", "names", choices=METRIC_DIMENSION_STYLES) or "names",
    )


def _level_problem(kind: str, value: Any) -> str | None:
    if kind == "concurrency":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if ok else f"{value!r} is not a positive integer (requests in flight)"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return None if ok else f"{value!r} is not a positive number (requests per second)"


def _levels(s: _Section, kind: str) -> tuple[Level, ...] | None:
    """One level, or a sorted list of them; None (after saying why, by key) when invalid."""
    value = s.raw[kind]
    values = value if isinstance(value, list) else [value]
    if not values:
        s.problem(kind, "is an empty list: give one level, or several in ascending order (e.g. [1, 2, 4, 8])")
        return None
    problems = [p for v in values if (p := _level_problem(kind, v))]
    if problems:
        s.problem(kind, "; ".join(problems))
        return None
    if values != sorted(set(values)):
        s.problem(kind, f"{values} is not in ascending order without repeats (e.g. [1, 2, 4, 8])")
        return None
    return tuple(Level(kind, v) for v in values)


def _parse_loads(s: _Section, max_num_seqs: int | None) -> tuple[str, tuple[Level, ...]]:
    """The generator's name and the load levels; the defaults where a problem was recorded."""
    name = s.raw.get("loadGenerator")
    if name is None:
        name = DEFAULT_GENERATOR
    elif name not in GENERATORS:
        s.problem("loadGenerator", f"{name!r} is not one of {', '.join(sorted(GENERATORS))}")
        name = DEFAULT_GENERATOR
    given = [kind for kind in LOAD_KINDS if s.raw.get(kind) is not None]
    if len(given) > 1:
        s.problem(given[-1], f"{' and '.join('benchmark.' + k for k in given)} are both given: a run holds a "
                             "concurrency or a request rate, not both")
        return name, DEFAULT_LOAD
    if not given:
        return name, DEFAULT_LOAD
    kind, = given
    levels = _levels(s, kind)
    if levels is None:
        return name, DEFAULT_LOAD
    if kind not in GENERATORS[name].load_kinds:
        able = " or ".join(sorted(n for n, g in GENERATORS.items() if kind in g.load_kinds))
        s.problem(kind, f"{GENERATORS[name].title} cannot hold a {kind}" + (f"; loadGenerator {able} can" if able else ""))
    if kind == "concurrency" and max_num_seqs and levels[-1].value > max_num_seqs:
        s.problem(kind, f"{levels[-1].value} exceeds serving.maxNumSeqs {max_num_seqs}; extra requests would queue and skew latency")
    return name, levels


def _check_metric_dimensions(benchmark: BenchmarkSettings, variants: list[Variant], problems: list[tuple[str, str]]) -> None:
    """The sample's values name a role, not a variant, and a prompt, not a test case: each must
    still name one (variant, test case), within CloudWatch's length (benchmark/pod.py)."""
    if benchmark.metric_dimensions != "eks-sample":
        return
    roles = [v.role for v in variants]
    if sorted(roles) != ["baseline", "sd"]:
        problems.append(("benchmark.metricDimensions", "eks-sample publishes Variant SD or Base, so it needs exactly one baseline "
                                                       f"and one sd variant; this stack has {len(variants)} variants"))
    values = metric_dimensions("eks-sample", [], benchmark.test_cases)["TestCase"]
    # A sweep publishes each level under the test case's value and its level folder: the longest must fit.
    folder = max((level_folder(benchmark.loads, level) or "" for level in benchmark.loads), key=len, default="") or None
    for case, value in values.items():
        published = test_case_value(value, folder)
        if len(published) > CLOUDWATCH_DIMENSION_VALUE_MAX:
            level = f" with the longest load level it is published under ('{published[len(value):]}' follows it)" if folder else ""
            problems.append((f"benchmark.testCases.{case}", f"with metricDimensions eks-sample the prompt is the TestCase value, "
                                                            f"at most {CLOUDWATCH_DIMENSION_VALUE_MAX} characters; it has "
                                                            f"{len(published)}{level}"))
    for value in sorted({v for v in values.values() if list(values.values()).count(v) > 1}):
        cases = [c for c, v in values.items() if v == value]
        problems.append(("benchmark.testCases", f"{', '.join(cases)} publish under the same TestCase {value!r} with metricDimensions eks-sample"))


def _sampling_params(s: _Section, output_tokens: int | None) -> dict[str, Any]:
    """Each key known, of its type and in vLLM's range (stackconfig/sampling.py); min_tokens at
    most the max_tokens the benchmark sends (outputTokens)."""
    params = s.mapping("samplingParams", dict(DEFAULT_SAMPLING_PARAMS)) or {}
    reserved = sorted(set(params) & set(RESERVED_SAMPLING_KEYS), key=str)
    for key in reserved:
        s.problem(f"samplingParams.{key}", f"is set by the benchmark itself; not allowed here ({', '.join(RESERVED_SAMPLING_KEYS)})")
    known = _Section(s.key("samplingParams"), {k: v for k, v in params.items() if k not in reserved}, s.problems,
                     set(SAMPLING_PARAMS))
    for key, value in known.raw.items():
        problem = SAMPLING_PARAMS[key].problem(value) if key in SAMPLING_PARAMS else None
        if problem:
            known.problem(key, problem)
    min_tokens = params.get("min_tokens")
    if output_tokens and type(min_tokens) is int and min_tokens > output_tokens:
        known.problem("min_tokens", f"{min_tokens} exceeds outputTokens {output_tokens}, the max_tokens of every request "
                                    "(vLLM refuses min_tokens above max_tokens)")
    return dict(params)


def _check_dashboard_metrics(benchmark: BenchmarkSettings, variants: list[Variant], study: StudySettings | None,
                             problems: list[tuple[str, str]]) -> None:
    """No dashboard widget may query more than CloudWatch draws: the stack's rows put every
    variant at every load level in each widget, once per metric of the widget; a study's view
    queries each compared configuration and its baseline and divides them."""
    levels = len(benchmark.loads)
    widest = max(len(metrics) for row in DASHBOARD_ROWS for metrics, _ in row) * len(variants) * levels
    compared = [v for v in variants if v.is_speculative and v.baseline]
    study_view = 2 * len(compared) + len({v.baseline for v in compared}) if study is not None else 0
    needed = max(widest, study_view)
    if needed > DASHBOARD_METRICS_PER_WIDGET:
        key = "study" if study is not None else f"benchmark.{benchmark.loads[0].kind}" if levels > 1 else "variants"
        at = f" at {levels} load levels" if levels > 1 else ""
        problems.append((key, f"{len(variants)} variants ({len(compared)} SD configurations){at} need {needed} metrics and "
                              f"expressions in one dashboard widget; CloudWatch allows {DASHBOARD_METRICS_PER_WIDGET}: measure "
                              f"fewer configurations{' or load levels' if levels > 1 else ''} at once"))
