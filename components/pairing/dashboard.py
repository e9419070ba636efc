"""A pairing's CloudWatch dashboard: its variants side by side, per test case, from the metrics the
benchmark publishes (benchmark/publish.py), laid out as benchmark/pod.py DASHBOARD_ROWS says."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from benchmark.pod import DASHBOARD_ROWS, level_folder, test_case_value
from benchmark.publish import NEURON_METRICS, SERVER_DIMENSION
from stackconfig import StackSpec
from stackconfig.model import Variant

from .benchmark_access import benchmark_parent

HEADER = (
    "Per test case, first row (p50): TimePerOutputToken = (end-to-end - TTFT) / (output tokens - 1) per request, "
    "end-to-end, TTFT and per-request output tokens/s, timed by the measuring proxy with the server's token "
    "counts. Second row: OutputTokens (p50), draft-token acceptance (AcceptanceRate from the server's "
    "/metrics where exposed, ImpliedAcceptanceRate from streamed chunks), NeuronCore utilization and device "
    "memory of each variant's devices (Container Insights, node-level; a distributed variant's target and draft pods "
    "each). LLMPerf's InterTokenLatency is "
    "published too; it counts streamed chunks and is biased against SD.")


STUDY_HEADER = (
    "TPOT speedup of each configuration over its baseline, per test case: the baseline's p50 TimePerOutputToken / the "
    "configuration's, each over the dashboard's time range (CloudWatch metric math). The repeats, intervals, acceptance, "
    "bound and best configuration are in the tuning report (`make results`).")


def level_labels(spec: StackSpec) -> list[tuple[str | None, str]]:
    """Per load level, its TestCase folder and its label (" at concurrency 4"; none for one level)."""
    loads = spec.benchmark.loads
    return [(level_folder(loads, level), f" at {level.label}" if len(loads) > 1 else "") for level in loads]


def study_widgets(spec: StackSpec, region: str, top: int) -> list[dict]:
    """The study's view: a header, then per test case (and load level) one bar per compared configuration."""
    namespace, dimensions = spec.benchmark.metrics_namespace, spec.metric_dimensions
    widgets = [{"type": "text", "x": 0, "y": top, "width": 24, "height": 2,
                "properties": {"markdown": f"## Tuning study ({spec.study.mode})\n{STUDY_HEADER}"}}]
    ids = {v.name: f"v{index}" for index, v in enumerate(spec.variants)}
    compared = [v for v in spec.variants if v.baseline and v.is_speculative]
    # A study at several load levels: a widget per test case and level, each level published
    # under its own TestCase value (benchmark/publish.py dimension_values), never pooled.
    levels = level_labels(spec)
    for index, (test_case, (folder, at)) in enumerate((t, level) for t in spec.benchmark.test_cases for level in levels):
        queried = {v.name: v for v in compared} | {v.baseline: spec.variant(v.baseline) for v in compared}
        metrics: list[list] = [[namespace, "TimePerOutputToken", "Variant", dimensions["Variant"][name],
                                "TestCase", test_case_value(dimensions["TestCase"][test_case], folder),
                                {"id": ids[name], "visible": False}]
                               for name in queried]
        metrics += [[{"expression": f"{ids[v.baseline]} / {ids[v.name]}", "id": f"speedup_{ids[v.name]}", "label": v.name}]
                    for v in compared]
        widgets.append({
            "type": "metric", "x": (index % 2) * 12, "y": top + 2 + (index // 2) * 6, "width": 12, "height": 6,
            "properties": {"title": f"{test_case}{at}: TPOT speedup over the baseline (p50)", "metrics": metrics, "view": "bar",
                           "stat": "p50", "period": 3600, "setPeriodToTimeRange": True, "region": region},
        })
    return widgets


def published_parts(variant: Variant, metric: str) -> list[str]:
    """The pods a variant's `metric` is published for: a Neuron metric of a variant of several pods
    (a distributed variant's target and draft) per pod, under SERVER_DIMENSION (benchmark/publish.py
    telemetry_metric_data); everything else once, for the variant ("")."""
    if metric in NEURON_METRICS and len(variant.servers) > 1:
        return [server.part for server in variant.servers]
    return [""]


def dashboard_body(spec: StackSpec, region: str) -> dict:
    namespace, dimensions = spec.benchmark.metrics_namespace, spec.metric_dimensions
    widgets = [{
        "type": "text", "x": 0, "y": 0, "width": 24, "height": 3,
        "properties": {"markdown": f"## {spec.stack}: baseline vs speculative decoding, per test case\n{HEADER}"},
    }]
    # A sweep publishes each level under its own TestCase value (benchmark/publish.py
    # dimension_values): a widget draws every variant at every level.
    levels = level_labels(spec)
    for case_index, test_case in enumerate(spec.benchmark.test_cases):
        for row_index, row in enumerate(DASHBOARD_ROWS):
            for column, (metrics, stat) in enumerate(row):
                widgets.append({
                    "type": "metric", "x": column * 6, "y": 3 + (case_index * len(DASHBOARD_ROWS) + row_index) * 6,
                    "width": 6, "height": 6,
                    "properties": {
                        "title": f"{test_case}: {' / '.join(metrics)} ({stat})",
                        "metrics": [[namespace, metric, "Variant", dimensions["Variant"][v.name],
                                     "TestCase", test_case_value(dimensions["TestCase"][test_case], folder),
                                     *([SERVER_DIMENSION, part] if part else []),
                                     {"label": f"{v.name} ({v.role}){' ' + part if part else ''}"
                                               f"{' ' + metric if len(metrics) > 1 else ''}{at}"}]
                                    for metric in metrics for v in spec.variants for part in published_parts(v, metric)
                                    for folder, at in levels],
                        "view": "bar", "stat": stat, "period": 3600, "region": region,
                    },
                })
    if spec.study:
        widgets += study_widgets(spec, region, 3 + len(spec.benchmark.test_cases) * len(DASHBOARD_ROWS) * 6)
    return {"widgets": widgets}


@dataclass(frozen=True)
class DashboardArgs:
    spec: StackSpec


class Dashboard(pulumi.ComponentResource):
    url: str

    def __init__(self, name: str, args: DashboardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:benchmark:Dashboard", name, None, opts)
        spec = args.spec
        aws.cloudwatch.Dashboard("benchmark-dashboard", dashboard_name=spec.dashboard_name,
                                 dashboard_body=json.dumps(dashboard_body(spec, spec.region), sort_keys=True),
                                 opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(parent=benchmark_parent())]))
        self.url = (f"https://{spec.region}.console.aws.amazon.com/cloudwatch/home?region={spec.region}"
                    f"#dashboards/dashboard/{spec.dashboard_name}")
        self.register_outputs({"dashboardUrl": self.url})
