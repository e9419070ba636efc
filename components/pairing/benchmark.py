"""The LLMPerf benchmark run: the pod's code and run config (a ConfigMap), a Job per configuration,
and a suspended CronJob to run it again. What the pod may do is BenchmarkAccess
(benchmark_access.py); what it publishes is shown by the Dashboard (dashboard.py)."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from benchmark.pod import (
    CODE_MOUNT,
    RUN_AS,
    RUN_CONFIG,
    WRITABLE_VOLUMES,
    code_items,
    pod_code,
    pod_environment,
    security_context,
    setup_script,
)
from benchmark.telemetry import SERVICE_ACCOUNT_DIR
from modelstore.layout import COMMIT_FILE
from stackconfig import StackSpec
from stackconfig.semantics import serves_greedily
from stackconfig.timeline import study_modes

from ..handle import ClusterHandle
from .benchmark_access import SERVICE_ACCOUNT
from .model_access import TokenFile
from .vllm_variant import labels, workload_name

CRONJOB_NAME = "llmperf"
STUDY_RETRIES = 3
"""A study's Job starts a new pod this many times after one is killed (a node drained, an eviction);
each resumes from what the last recorded in S3 (benchmark/tuner.py)."""


def variant_config(spec: StackSpec, name: str, endpoint: str) -> dict:
    """One variant as the driver sees it. Model facts come from the variant itself, which holds
    those of catalog and declared models alike (a model declared under `models:` is in no catalog)."""
    v = spec.variant(name)
    shape = spec.capacity.shape
    # The variant's share of the node's price, by the devices of its servers (a node runs variants side by side).
    hourly = shape.approx_hourly_usd * sum(s.devices for s in v.servers) / shape.neuron_devices if shape.approx_hourly_usd else None
    return {"name": v.name, "role": v.role, "engine": v.engine, "baseline": v.baseline, "target": v.target, "draft": v.draft,
            "numSpeculativeTokens": v.num_speculative_tokens, "servedModelName": v.served_model_name,
            "quantization": v.quantization, "devices": v.devices, "endpoint": endpoint,
            "costPerHourUsd": hourly, "targetParamsBillion": v.target_info.params_billion,
            "draftParamsBillion": v.draft_info.params_billion if v.draft_info else None,
            # How the server decodes the benchmark's requests, so the report can flag a speedup
            # between unlike decoding (stackconfig/semantics.py).
            "decoding": "greedy" if serves_greedily(v, spec.benchmark.sampling_params) else "sampled",
            # Measured only once its compiled set is committed (benchmark/driver.py not_ready).
            # The endpoint's server's set: a distributed variant's draft, whose /health answers
            # only while its target does.
            "commitKey": f"{v.server_artifact_path(v.endpoint_server)}/{COMMIT_FILE}",
            # How long a first start may take before it counts as failed.
            "startupBudgetSeconds": v.startup_budget_seconds,
            # Every pod of the variant (a distributed variant's target and draft, each on its own
            # devices): what the tuner scales together, waits for until each serves from its
            # published compiled set, and where the driver reads the devices' telemetry.
            "servers": [{"part": s.part, "deployment": workload_name(v, s), "podSelector": labels(v, s),
                         "commitKey": f"{v.server_artifact_path(s)}/{COMMIT_FILE}"} for s in v.servers]}


def study_config(spec: StackSpec) -> dict | None:
    """What the tuner needs to know about the study (benchmark/tuner.py); None without one."""
    study = spec.study
    if study is None:
        return None
    return {"mode": study.mode, "repeats": study.repeats, "scales": bool(spec.tuned_servers),
            "pairsFitTogether": spec.pairs_fit_together, "ttftTargetMs": study.ttft_target_ms,
            "tpotTargetMs": study.tpot_target_ms,
            "grid": [{"variant": p.variant, "draft": p.draft, "window": p.window} for p in study.grid],
            "draftsAlone": study.drafts_alone}


def run_config(spec: StackSpec, endpoints: dict[str, str]) -> dict:
    """What the driver needs to know about the stack (mounted as run-config.json)."""
    b = spec.benchmark
    config = {
        "stack": spec.stack,
        "clusterName": spec.cluster_name,
        "seed": b.seed,
        "llmperfCommit": b.llmperf_commit,
        "loadGenerator": b.load_generator,
        "loads": [level.as_dict() for level in b.loads],
        "shape": {"inputTokens": b.input_tokens, "outputTokens": b.output_tokens, "concurrency": b.concurrency,
                  "requestsPerTestCase": b.requests_per_test_case, "requestTimeoutSeconds": b.request_timeout_s,
                  "samplingParams": b.sampling_params},
        "testCases": b.test_cases,
        "dimensions": spec.metric_dimensions,
        "variants": [variant_config(spec, v.name, endpoints[v.name]) for v in spec.variants],
    }
    if spec.study:
        # The study's id is what it measures, the study's own settings included; the tuner adds
        # the Job's name, so a Job's retried pods resume one study (benchmark/tuner.py study_folder).
        study = study_config(spec)
        fingerprint = hashlib.sha256(json.dumps([config, study], sort_keys=True).encode()).hexdigest()[:10]
        config["study"] = {**study, "id": f"study-{fingerprint}"}
    return config


def run_config_json(config: dict) -> str:
    """run-config.json as strict JSON: json.dumps writes NaN and Infinity by default, which are no
    JSON (RFC 8259, section 6); a value that slipped past validation fails here instead."""
    return json.dumps(config, indent=2, sort_keys=True, allow_nan=False)


KUBERNETES_API_VOLUME = {
    # What the ServiceAccount admission plugin would inject (a bound token that kubelet refreshes,
    # the cluster's CA, the namespace), written out so that only this container gets it.
    # Kubernetes docs, "Managing Service Accounts", bound service account token volume.
    "name": "kubernetes-api",
    "projected": {"defaultMode": 0o444, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]},
}


def job_spec(spec: StackSpec, config_map: pulumi.Input[str], bucket: pulumi.Input[str], prefix: str,
             node_selector: dict[str, str], token_secret: str | None) -> dict:
    """Plain data with Outputs only at the leaves (ConfigMap and bucket names)."""
    commit = spec.benchmark.llmperf_commit
    token = TokenFile(token_secret)  # the tokenizer download uses the stack's token when it has one
    return {
        # A run takes hours; a failure should be looked at, not silently repeated. A study's
        # tuner resumes instead of repeating, so a killed pod is worth starting again.
        "backoffLimit": STUDY_RETRIES if spec.study else 0,
        "activeDeadlineSeconds": deadline_seconds(spec),
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "llmperf"}},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT,
                # The Kubernetes API token is mounted explicitly, for the one container that lists
                # its variants' pods (benchmark/telemetry.py), instead of into every container.
                "automountServiceAccountToken": False,
                "restartPolicy": "Never",
                # On SIGTERM (the deadline) the driver marks run.json failed and uploads it.
                "terminationGracePeriodSeconds": 60,
                # On the on-demand system nodes: the benchmark must not take trn2 capacity.
                "nodeSelector": node_selector,
                # The "restricted" Pod Security Standard: a user with no account, a read-only root,
                # and an emptyDir for every path it writes (benchmark/pod.py WRITABLE_VOLUMES).
                "securityContext": {"runAsNonRoot": True, "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "llmperf",
                    "image": spec.benchmark.image,
                    "command": ["bash", "-c", setup_script(commit, "tuner" if spec.study else "driver", spec.benchmark.load_generator)],
                    "env": [
                        {"name": "METRICS_NAMESPACE", "value": spec.benchmark.metrics_namespace},
                        {"name": "RESULTS_BUCKET", "value": bucket},
                        {"name": "RESULTS_PREFIX", "value": prefix},
                        {"name": "TOKENIZER_CACHE_PREFIX", "value": spec.tokenizer_cache_prefix},
                        {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}},
                    ] + [{"name": k, "value": v} for k, v in pod_environment().items()]
                    + token.env,
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                    "securityContext": security_context(),
                    "volumeMounts": [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
                                     {"name": "dshm", "mountPath": "/dev/shm"},
                                     {"name": KUBERNETES_API_VOLUME["name"], "mountPath": str(SERVICE_ACCOUNT_DIR), "readOnly": True}]
                                    + [{"name": writable_volume(path), "mountPath": path} for path in WRITABLE_VOLUMES]
                                    + token.mounts,
                }],
                "volumes": [{"name": "code", "configMap": {"name": config_map, "items": code_items(commit, spec.benchmark.load_generator)}},
                            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}, KUBERNETES_API_VOLUME]
                           + [{"name": writable_volume(path), "emptyDir": {"sizeLimit": size}} for path, size in WRITABLE_VOLUMES.items()]
                           + token.volumes,
            },
        },
    }


def deadline_seconds(spec: StackSpec) -> int:
    """48 hours, or a study's first run in its mode (every configuration compiling for its whole
    startup budget: stackconfig/timeline.py) with 12 hours to spare, if longer."""
    if spec.study is None:
        return 48 * 3600
    estimate = next(e for e in study_modes(spec) if e.mode == spec.study.mode)
    return max(48 * 3600, math.ceil(estimate.first_hours + 12) * 3600)


def writable_volume(path: str) -> str:
    return "results" if path == "/results" else path.strip("/").replace("/", "-")


@dataclass(frozen=True)
class BenchmarkArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    """The Workspace's namespace Output: objects wait for it."""
    endpoints: dict[str, str]
    depends_on: list[pulumi.Resource]
    """The servers and the pod's grants (BenchmarkAccess): a run starts after them, and goes before them on destroy."""
    token_secret: str | None = None
    """The Hugging Face token's Secret, if the stack has one (ModelAccess)."""


class Benchmark(pulumi.ComponentResource):
    results_prefix: pulumi.Output[str]
    cron_job_name: str
    """The suspended CronJob `make benchmark` creates a new run from."""

    def __init__(self, name: str, args: BenchmarkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:benchmark:Benchmark", name, None, opts)
        spec, cluster = args.spec, args.cluster
        prefix = spec.results_prefix
        config = run_config(spec, args.endpoints)
        code = pod_code(spec.benchmark.llmperf_commit, spec.benchmark.load_generator)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-code",
            metadata={"name": "llmperf-benchmark", "namespace": args.namespace},
            data={**code, RUN_CONFIG: run_config_json(config)},
            opts=cluster.k8s_options(self),
        )
        body = job_spec(spec, config_map.metadata.name, cluster.model_bucket, prefix, cluster.system_node_selector,
                        args.token_secret)
        # A new configuration (or benchmark code) is a new Job, so each run's Job is kept and
        # `pulumi up` re-runs the benchmark only when what it measures changed. The name is
        # derived from plain config, so `pulumi preview` shows it.
        plain_body = job_spec(spec, "", "", prefix, cluster.system_node_selector, args.token_secret)
        fingerprint = hashlib.sha256(json.dumps([config, code, plain_body], sort_keys=True).encode()).hexdigest()[:8]
        run_opts = cluster.k8s_options(self, depends_on=[config_map, *args.depends_on])
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
            # A changed study is a new Job: the old one goes first (its tuner scales its servers down
            # on SIGTERM), so two tuners never share the nodes (Pulumi's default creates the new first).
            opts=pulumi.ResourceOptions.merge(run_opts, pulumi.ResourceOptions(delete_before_replace=True)) if spec.study else run_opts,
        )
        self.results_prefix = pulumi.Output.concat("s3://", cluster.model_bucket, "/", prefix)
        self.cron_job_name = CRONJOB_NAME
        self.register_outputs({"resultsPrefix": self.results_prefix})
