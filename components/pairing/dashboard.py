"""A pairing's CloudWatch dashboard: its variants side by side, per test case, from the metrics the
benchmark publishes (benchmark/publish.py), laid out as benchmark/pod.py DASHBOARD_ROWS says."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from benchmark.pod import DASHBOARD_ROWS
from stackconfig import StackSpec

from .benchmark_access import benchmark_parent

HEADER = (
    "Per test case, first row (p50): TimePerOutputToken = (end-to-end - TTFT) / (output tokens - 1) per request, "
    "end-to-end, TTFT and per-request output tokens/s, timed by the measuring proxy with the server's token "
    "counts. Second row: OutputTokens (p50), draft-token acceptance (AcceptanceRate from the server's "
    "/metrics where exposed, ImpliedAcceptanceRate from streamed chunks), NeuronCore utilization and device "
    "memory of each variant's devices (Container Insights, node-level). LLMPerf's InterTokenLatency is "
    "published too; it counts streamed chunks and is biased against SD.")


def dashboard_body(spec: StackSpec, region: str) -> dict:
    namespace, dimensions = spec.benchmark.metrics_namespace, spec.metric_dimensions
    widgets = [{
        "type": "text", "x": 0, "y": 0, "width": 24, "height": 3,
        "properties": {"markdown": f"## {spec.stack}: baseline vs speculative decoding, per test case\n{HEADER}"},
    }]
    for case_index, test_case in enumerate(spec.benchmark.test_cases):
        for row_index, row in enumerate(DASHBOARD_ROWS):
            for column, (metrics, stat) in enumerate(row):
                widgets.append({
                    "type": "metric", "x": column * 6, "y": 3 + (case_index * len(DASHBOARD_ROWS) + row_index) * 6,
                    "width": 6, "height": 6,
                    "properties": {
                        "title": f"{test_case}: {' / '.join(metrics)} ({stat})",
                        "metrics": [[namespace, metric, "Variant", dimensions["Variant"][v.name],
                                     "TestCase", dimensions["TestCase"][test_case],
                                     {"label": f"{v.name} ({v.role}){' ' + metric if len(metrics) > 1 else ''}"}]
                                    for metric in metrics for v in spec.variants],
                        "view": "bar", "stat": stat, "period": 3600, "region": region,
                    },
                })
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
