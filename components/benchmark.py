"""The LLMPerf benchmark: a Job per configuration (and a suspended CronJob to re-run it), its
IRSA role, and a CloudWatch dashboard comparing the variants per test case."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from stackconfig import StackSpec

from .handle import ClusterHandle
from .iam import policy_document
from .identity import WorkloadRole, WorkloadRoleArgs

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "benchmark"
# What the pod runs; report.py stays on the operator's side (it needs matplotlib).
POD_MODULES = ("__init__.py", "driver.py", "publish.py", "results.py")
SERVICE_ACCOUNT = "llmperf"
CRONJOB_NAME = "llmperf"
RESULTS_ROOT = "results/"


def results_prefix(spec: StackSpec) -> str:
    """Where a pairing's runs go in the (possibly shared) bucket: results/<pairing>/<run-id>/."""
    return f"{RESULTS_ROOT}{spec.name}/"
CODE_MOUNT = "/opt/benchmark"
DASHBOARD_METRICS = ("TimePerOutputToken", "EndToEndLatency", "TTFT", "RequestOutputThroughput")
BOTO3_VERSION = "1.44.5"


def run_config(spec: StackSpec, endpoints: dict[str, str]) -> dict:
    """What the driver needs to know about the stack (mounted as run-config.json)."""
    b = spec.benchmark
    return {
        "stack": spec.stack,
        "shape": {"inputTokens": b.input_tokens, "outputTokens": b.output_tokens, "concurrency": b.concurrency,
                  "requestsPerTestCase": b.requests_per_test_case, "requestTimeoutSeconds": b.request_timeout_s,
                  "temperature": 0},
        "testCases": b.test_cases,
        "variants": [{"name": v.name, "role": v.role, "baseline": v.baseline, "target": v.target, "draft": v.draft,
                      "numSpeculativeTokens": v.num_speculative_tokens, "servedModelName": v.served_model_name,
                      "endpoint": endpoints[v.name]} for v in spec.variants],
    }


def pod_code() -> dict[str, str]:
    return {name: (PACKAGE_DIR / name).read_text() for name in POD_MODULES}


def setup_script(llmperf_commit: str) -> str:
    """Install LLMPerf at a pinned commit (from GitHub's archive: the slim image has no git)."""
    return "\n".join([
        "set -euo pipefail",
        f"python -c \"import io, tarfile, urllib.request; tarfile.open(fileobj=io.BytesIO(urllib.request.urlopen("
        f"'https://github.com/ray-project/llmperf/archive/{llmperf_commit}.tar.gz').read())).extractall('/opt')\"",
        "mv /opt/llmperf-* /opt/llmperf",
        f"pip install --quiet --no-cache-dir -e /opt/llmperf boto3=={BOTO3_VERSION}",
        f"cd {CODE_MOUNT} && exec python -m benchmark.driver --config {CODE_MOUNT}/run-config.json"
        " --results-dir /results --llmperf-dir /opt/llmperf"
        ' --namespace "$METRICS_NAMESPACE" --bucket "$RESULTS_BUCKET" --prefix "$RESULTS_PREFIX"',
    ])


def job_spec(spec: StackSpec, config_map: pulumi.Input[str], bucket: pulumi.Input[str], prefix: str,
             node_selector: dict[str, str]) -> dict:
    """Plain data with Outputs only at the leaves (ConfigMap and bucket names)."""
    items = [{"key": name, "path": f"benchmark/{name}"} for name in POD_MODULES] + [
        {"key": "run-config.json", "path": "run-config.json"}]
    return {
        # A run takes hours; a failure should be looked at, not silently repeated.
        "backoffLimit": 0,
        "activeDeadlineSeconds": 48 * 3600,
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "llmperf"}},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT,
                "restartPolicy": "Never",
                # On the on-demand system nodes: the benchmark must not take trn2 capacity.
                "nodeSelector": node_selector,
                "containers": [{
                    "name": "llmperf",
                    "image": spec.benchmark.image,
                    "command": ["bash", "-c", setup_script(spec.benchmark.llmperf_commit)],
                    "env": [
                        {"name": "METRICS_NAMESPACE", "value": spec.benchmark.metrics_namespace},
                        {"name": "RESULTS_BUCKET", "value": bucket},
                        {"name": "RESULTS_PREFIX", "value": prefix},
                        {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}},
                    ],
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                    "volumeMounts": [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
                                     {"name": "results", "mountPath": "/results"}],
                }],
                "volumes": [{"name": "code", "configMap": {"name": config_map, "items": items}},
                            {"name": "results", "emptyDir": {}}],
            },
        },
    }


def runner_policy(namespace: str, bucket_arn: str, prefix: str) -> dict:
    return policy_document([
        {"Sid": "PublishBenchmarkMetrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         # PutMetricData has no resource ARN; the namespace condition is its scope.
         "Condition": {"StringEquals": {"cloudwatch:namespace": namespace}}},
        {"Sid": "WriteBenchmarkResults", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": f"{bucket_arn}/{prefix}*"},
    ])


def dashboard_body(spec: StackSpec, region: str) -> dict:
    namespace = spec.benchmark.metrics_namespace
    widgets = [{
        "type": "text", "x": 0, "y": 0, "width": 24, "height": 2,
        "properties": {"markdown": (
            f"## {spec.stack}: baseline vs speculative decoding, per test case (p50)\n"
            "TimePerOutputToken = (end-to-end - TTFT) / (output tokens - 1) per request; LLMPerf's "
            "InterTokenLatency counts streamed chunks and is biased against SD.")},
    }]
    for row, test_case in enumerate(spec.benchmark.test_cases):
        for column, metric in enumerate(DASHBOARD_METRICS):
            widgets.append({
                "type": "metric", "x": column * 6, "y": 2 + row * 6, "width": 6, "height": 6,
                "properties": {
                    "title": f"{test_case}: {metric}",
                    "metrics": [[namespace, metric, "Variant", v.name, "TestCase", test_case, {"label": f"{v.name} ({v.role})"}]
                                for v in spec.variants],
                    "view": "bar", "stat": "p50", "period": 3600, "region": region,
                },
            })
    return {"widgets": widgets}


@dataclass(frozen=True)
class BenchmarkArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    """The Workspace's namespace Output: objects wait for it."""
    endpoints: dict[str, str]
    depends_on: list[pulumi.Resource]
    tags: dict[str, str]


class Benchmark(pulumi.ComponentResource):
    dashboard_url: str
    results_prefix: pulumi.Output[str]
    cron_job_name: str
    """The suspended CronJob `make benchmark` creates a new run from."""

    def __init__(self, name: str, args: BenchmarkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:benchmark:Benchmark", name, None, opts)
        spec, cluster = args.spec, args.cluster
        prefix = results_prefix(spec)
        role = WorkloadRole(f"{name}-runner", WorkloadRoleArgs(
            identity=cluster.identity,
            namespace=spec.namespace,
            service_account=SERVICE_ACCOUNT,
            policy=pulumi.Output.from_input(cluster.model_bucket_arn).apply(
                lambda arn: runner_policy(spec.benchmark.metrics_namespace, arn, prefix)),
            tags=args.tags,
        ), opts=pulumi.ResourceOptions(parent=self))
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": SERVICE_ACCOUNT, "namespace": args.namespace, "annotations": role.annotations},
            opts=cluster.k8s_options(self),
        )
        config = run_config(spec, args.endpoints)
        code = pod_code()
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-code",
            metadata={"name": "llmperf-benchmark", "namespace": args.namespace},
            data={**code, "run-config.json": json.dumps(config, indent=2, sort_keys=True)},
            opts=cluster.k8s_options(self),
        )
        body = job_spec(spec, config_map.metadata.name, cluster.model_bucket, prefix, cluster.system_node_selector)
        # A new configuration (or benchmark code) is a new Job, so each run's Job is kept and
        # `pulumi up` re-runs the benchmark only when what it measures changed. The name is
        # derived from plain config, so `pulumi preview` shows it.
        fingerprint = hashlib.sha256(json.dumps([config, code, job_spec(spec, "", "", prefix, cluster.system_node_selector)],
                                                sort_keys=True).encode()).hexdigest()[:8]
        run_opts = cluster.k8s_options(self, depends_on=[account, config_map, role, *args.depends_on])
        k8s.batch.v1.CronJob(
            f"{name}-template",
            metadata={"name": CRONJOB_NAME, "namespace": args.namespace},
            # Never scheduled: the template for `make benchmark` (kubectl create job --from=cronjob/llmperf).
            spec={"schedule": "0 0 1 1 *", "suspend": True, "concurrencyPolicy": "Forbid",
                  "jobTemplate": {"spec": body}},
            opts=run_opts,
        )
        k8s.batch.v1.Job(
            f"{name}-run",
            metadata={"name": f"llmperf-{fingerprint}", "namespace": args.namespace,
                      "annotations": {"pulumi.com/skipAwait": "true"}},
            spec=body,
            opts=run_opts,
        )
        aws.cloudwatch.Dashboard(f"{name}-dashboard", dashboard_name=spec.dashboard_name,
                                 dashboard_body=json.dumps(dashboard_body(spec, spec.region), sort_keys=True),
                                 opts=pulumi.ResourceOptions(parent=self))
        self.dashboard_url = (f"https://{spec.region}.console.aws.amazon.com/cloudwatch/home?region={spec.region}"
                              f"#dashboards/dashboard/{spec.dashboard_name}")
        self.results_prefix = pulumi.Output.concat("s3://", cluster.model_bucket, "/", prefix)
        self.cron_job_name = CRONJOB_NAME
        self.register_outputs({"dashboardUrl": self.dashboard_url, "resultsPrefix": self.results_prefix})
