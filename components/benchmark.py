"""The LLMPerf benchmark: a Job per configuration (and a suspended CronJob to re-run it), its
IAM role, a namespaced Role to find each variant's pod and devices, and a CloudWatch dashboard
comparing the variants per test case."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from stackconfig import StackSpec
from stackconfig.catalog import MODELS

from .handle import ClusterHandle
from .iam import policy_document
from .identity import WorkloadRole, WorkloadRoleArgs
from .model_access import token_env
from .vllm_variant import labels

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "benchmark"
# What the pod runs (standard library + the lock's boto3); report.py, seedcompare.py and seeds.py
# stay on the operator's side (report.png needs matplotlib).
POD_MODULES = ("__init__.py", "acceptance.py", "analysis.py", "driver.py", "podsetup.py", "proxy.py", "publish.py",
               "results.py", "telemetry.py")
POD_LOCK = "requirements-pod.lock"
SERVICE_ACCOUNT = "llmperf"
CRONJOB_NAME = "llmperf"
RESULTS_ROOT = "results/"


def results_prefix(spec: StackSpec) -> str:
    """Where a pairing's runs go in the (possibly shared) bucket: results/<pairing>/<run-id>/."""
    return f"{RESULTS_ROOT}{spec.name}/"
TOKENIZER_CACHE_PREFIX = "cache/tokenizers/"
CODE_MOUNT = "/opt/benchmark"
LLMPERF_DIR = "/opt/llmperf"
HF_HOME = "/opt/hf"
# One row of widgets per test case for latency, one beneath it for tokens, acceptance and the
# Neuron devices: (metric names, statistic). Published by benchmark/publish.py.
DASHBOARD_ROWS = (
    ((("TimePerOutputToken",), "p50"), (("EndToEndLatency",), "p50"), (("TTFT",), "p50"), (("RequestOutputThroughput",), "p50")),
    ((("OutputTokens",), "p50"), (("AcceptanceRate", "ImpliedAcceptanceRate"), "Average"),
     (("NeuronCoreUtilization",), "Average"), (("NeuronMemoryUsed",), "Maximum")),
)


def variant_config(spec: StackSpec, name: str, endpoint: str) -> dict:
    v = spec.variant(name)
    shape = spec.capacity.shape
    # The variant's share of the node's price, by devices (a node runs variants side by side).
    hourly = shape.approx_hourly_usd * v.devices / shape.neuron_devices if shape.approx_hourly_usd else None
    return {"name": v.name, "role": v.role, "baseline": v.baseline, "target": v.target, "draft": v.draft,
            "numSpeculativeTokens": v.num_speculative_tokens, "servedModelName": v.served_model_name,
            "quantization": v.quantization, "devices": v.devices, "endpoint": endpoint, "podSelector": labels(v),
            "costPerHourUsd": hourly, "targetParamsBillion": MODELS[v.target].params_billion,
            "draftParamsBillion": MODELS[v.draft].params_billion if v.draft else None}


def run_config(spec: StackSpec, endpoints: dict[str, str]) -> dict:
    """What the driver needs to know about the stack (mounted as run-config.json)."""
    b = spec.benchmark
    return {
        "stack": spec.stack,
        "clusterName": spec.cluster_name,
        "seed": b.seed,
        "llmperfCommit": b.llmperf_commit,
        "shape": {"inputTokens": b.input_tokens, "outputTokens": b.output_tokens, "concurrency": b.concurrency,
                  "requestsPerTestCase": b.requests_per_test_case, "requestTimeoutSeconds": b.request_timeout_s,
                  "samplingParams": b.sampling_params},
        "testCases": b.test_cases,
        "variants": [variant_config(spec, v.name, endpoints[v.name]) for v in spec.variants],
    }


def manifest_key(commit: str) -> str:
    """ConfigMap keys allow no "/": the manifest's key, mounted at benchmark/llmperf/<commit>.manifest."""
    return f"llmperf-{commit}.manifest"


def pod_code(llmperf_commit: str) -> dict[str, str]:
    code = {name: (PACKAGE_DIR / name).read_text() for name in POD_MODULES + (POD_LOCK,)}
    code[manifest_key(llmperf_commit)] = (PACKAGE_DIR / "llmperf" / f"{llmperf_commit}.manifest").read_text()
    return code


def setup_script(llmperf_commit: str) -> str:
    """Install the hash-locked dependencies, fetch and verify LLMPerf and its tokenizer
    (benchmark/podsetup.py), then run the driver offline from the hub. Any failed step ends the
    pod with a FATAL line and a non-zero exit, so the Job fails."""
    return "\n".join([
        "set -euo pipefail",
        f"cd {CODE_MOUNT}",
        'echo "installing the benchmark\'s Python dependencies (benchmark/requirements-pod.lock, hash-checked)"',
        f"pip install --quiet --no-cache-dir --disable-pip-version-check --require-hashes --no-deps -r benchmark/{POD_LOCK}"
        f" || {{ echo 'FATAL: benchmark setup failed: pip could not install benchmark/{POD_LOCK}' >&2; exit 2; }}",
        f"python -m benchmark.podsetup --commit {llmperf_commit} --dest {LLMPERF_DIR} --hf-home {HF_HOME}"
        f' --bucket "$RESULTS_BUCKET" --cache-prefix {TOKENIZER_CACHE_PREFIX}',
        f"export HF_HOME={HF_HOME} HF_HUB_OFFLINE=1",
        f"exec python -m benchmark.driver --config {CODE_MOUNT}/run-config.json --results-dir /results"
        f' --llmperf-dir {LLMPERF_DIR} --namespace "$METRICS_NAMESPACE" --bucket "$RESULTS_BUCKET" --prefix "$RESULTS_PREFIX"',
    ])


def job_spec(spec: StackSpec, config_map: pulumi.Input[str], bucket: pulumi.Input[str], prefix: str,
             node_selector: dict[str, str], token_secret: str | None) -> dict:
    """Plain data with Outputs only at the leaves (ConfigMap and bucket names)."""
    commit = spec.benchmark.llmperf_commit
    items = [{"key": name, "path": f"benchmark/{name}"} for name in POD_MODULES + (POD_LOCK,)] + [
        {"key": manifest_key(commit), "path": f"benchmark/llmperf/{commit}.manifest"},
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
                # On SIGTERM (the deadline) the driver marks run.json failed and uploads it.
                "terminationGracePeriodSeconds": 60,
                # On the on-demand system nodes: the benchmark must not take trn2 capacity.
                "nodeSelector": node_selector,
                "containers": [{
                    "name": "llmperf",
                    "image": spec.benchmark.image,
                    "command": ["bash", "-c", setup_script(commit)],
                    "env": [
                        {"name": "METRICS_NAMESPACE", "value": spec.benchmark.metrics_namespace},
                        {"name": "RESULTS_BUCKET", "value": bucket},
                        {"name": "RESULTS_PREFIX", "value": prefix},
                        {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}},
                        {"name": "PYTHONUNBUFFERED", "value": "1"},
                    ] + token_env(token_secret),  # the tokenizer download uses the stack's token when it has one
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
        # Container Insights' Neuron metrics of the variants' devices (benchmark/telemetry.py).
        # Neither action supports resource-level permissions, hence "*"; both only read.
        {"Sid": "ReadNeuronTelemetry", "Effect": "Allow", "Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
         "Resource": "*"},
        {"Sid": "WriteBenchmarkResults", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": f"{bucket_arn}/{prefix}*"},
        # LLMPerf's tokenizer, downloaded once and restored from here (benchmark/podsetup.py).
        {"Sid": "TokenizerCache", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"{bucket_arn}/{TOKENIZER_CACHE_PREFIX}*"},
        {"Sid": "ListTokenizerCache", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{TOKENIZER_CACHE_PREFIX}*"]}}},
    ])


def placement_rules() -> list[dict]:
    """What the driver reads to find a variant's node and Neuron devices (benchmark/telemetry.py)."""
    return [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}]


def dashboard_body(spec: StackSpec, region: str) -> dict:
    namespace = spec.benchmark.metrics_namespace
    widgets = [{
        "type": "text", "x": 0, "y": 0, "width": 24, "height": 3,
        "properties": {"markdown": (
            f"## {spec.stack}: baseline vs speculative decoding, per test case\n"
            "Per test case, first row (p50): TimePerOutputToken = (end-to-end - TTFT) / (output tokens - 1) per request, "
            "end-to-end, TTFT and per-request output tokens/s, timed by the measuring proxy with the server's token "
            "counts. Second row: OutputTokens (p50), draft-token acceptance (AcceptanceRate from the server's "
            "/metrics where exposed, ImpliedAcceptanceRate from streamed chunks), NeuronCore utilization and device "
            "memory of each variant's devices (Container Insights, node-level). LLMPerf's InterTokenLatency is "
            "published too; it counts streamed chunks and is biased against SD.")},
    }]
    for case_index, test_case in enumerate(spec.benchmark.test_cases):
        for row_index, row in enumerate(DASHBOARD_ROWS):
            for column, (metrics, stat) in enumerate(row):
                widgets.append({
                    "type": "metric", "x": column * 6, "y": 3 + (case_index * len(DASHBOARD_ROWS) + row_index) * 6,
                    "width": 6, "height": 6,
                    "properties": {
                        "title": f"{test_case}: {' / '.join(metrics)} ({stat})",
                        "metrics": [[namespace, metric, "Variant", v.name, "TestCase", test_case,
                                     {"label": f"{v.name} ({v.role}){' ' + metric if len(metrics) > 1 else ''}"}]
                                    for metric in metrics for v in spec.variants],
                        "view": "bar", "stat": stat, "period": 3600, "region": region,
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
    token_secret: str | None = None
    """The Hugging Face token's Secret, if the stack has one (ModelAccess)."""


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
        rbac = [
            k8s.rbac.v1.Role(f"{name}-placement", metadata={"name": "llmperf-placement", "namespace": args.namespace},
                             rules=placement_rules(), opts=cluster.k8s_options(self)),
            k8s.rbac.v1.RoleBinding(
                f"{name}-placement", metadata={"name": "llmperf-placement", "namespace": args.namespace},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "llmperf-placement"},
                subjects=[{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": spec.namespace}],
                opts=cluster.k8s_options(self)),
        ]
        config = run_config(spec, args.endpoints)
        code = pod_code(spec.benchmark.llmperf_commit)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-code",
            metadata={"name": "llmperf-benchmark", "namespace": args.namespace},
            data={**code, "run-config.json": json.dumps(config, indent=2, sort_keys=True)},
            opts=cluster.k8s_options(self),
        )
        body = job_spec(spec, config_map.metadata.name, cluster.model_bucket, prefix, cluster.system_node_selector,
                        args.token_secret)
        # A new configuration (or benchmark code) is a new Job, so each run's Job is kept and
        # `pulumi up` re-runs the benchmark only when what it measures changed. The name is
        # derived from plain config, so `pulumi preview` shows it.
        plain_body = job_spec(spec, "", "", prefix, cluster.system_node_selector, args.token_secret)
        fingerprint = hashlib.sha256(json.dumps([config, code, plain_body], sort_keys=True).encode()).hexdigest()[:8]
        run_opts = cluster.k8s_options(self, depends_on=[account, config_map, role, *rbac, *args.depends_on])
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
