"""What the benchmark pod may do: its IAM role (CloudWatch metrics, its results prefix, the
tokenizer cache), its service account, and a namespaced Role to find each variant's pod and devices."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from benchmark.lease import NAME as LEASE
from modelstore.layout import COMMIT_FILE
from stackconfig import StackSpec

from ..handle import ClusterHandle
from ..iam import policy_document
from .vllm_variant import workload_name
from .workload_account import workload_account

SERVICE_ACCOUNT = "llmperf"
PLACEMENT_ROLE = "llmperf-placement"
TUNER_ROLE = "llmperf-tuner"


def benchmark_parent() -> str:
    """The URN of the one benchmark component whose parts are now components of their own: their
    resources answer to their URNs under it through aliases (tests/test_urn_stability.py)."""
    return pulumi.create_urn("benchmark", "sdtrn2:benchmark:Benchmark")


def runner_policy(namespace: str, bucket_arn: str, prefix: str, tokenizer_cache: str, commit_keys: list[str],
                  resumes: bool = False) -> dict:
    """`resumes`: a study's tuner reads back what it recorded, to resume where a killed run stopped
    (benchmark/tuner.py); a plain benchmark run never reads its results."""
    resume = [f"{prefix}*"] if resumes else []
    return policy_document([
        {"Sid": "PublishBenchmarkMetrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         # PutMetricData has no resource ARN; the namespace condition is its scope.
         "Condition": {"StringEquals": {"cloudwatch:namespace": namespace}}},
        # Container Insights' Neuron metrics of the variants' devices (benchmark/telemetry.py).
        # Neither action supports resource-level permissions, hence "*"; both only read.
        {"Sid": "ReadNeuronTelemetry", "Effect": "Allow", "Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
         "Resource": "*"},
        {"Sid": "WriteBenchmarkResults", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:AbortMultipartUpload", *(["s3:GetObject"] if resumes else [])],
         "Resource": f"{bucket_arn}/{prefix}*"},
        # LLMPerf's tokenizer, downloaded once and restored from here (benchmark/podsetup.py).
        {"Sid": "TokenizerCache", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"{bucket_arn}/{tokenizer_cache}*"},
        # The tokenizer cache, and whether each variant's compiled set is committed (benchmark/driver.py listed).
        {"Sid": "ListTokenizerCacheAndCommits", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{tokenizer_cache}*", *commit_keys, *resume]}}},
    ])


def placement_rules() -> list[dict]:
    """What the driver reads to find a variant's node and Neuron devices (benchmark/telemetry.py)."""
    return [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}]


def tuner_rules(deployments: list[str]) -> list[dict]:
    """All a study's tuner may do besides the benchmark's reads: hold the study's lease (create
    it, which RBAC cannot restrict by name, then read and renew only that one, by name: one tuner
    at a time, benchmark/lease.py); read and set the replica count of its own servers, through
    the scale subresource, by name (sequential mode; none in parallel mode, where an empty
    resourceNames would allow every name); and read their pods to see them start or fail
    (benchmark/tuner.py). No delete of any object."""
    scale = [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": deployments, "verbs": ["get", "patch"]}]
    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE], "verbs": ["get", "update"]},
            *(scale if deployments else []),
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]


@dataclass(frozen=True)
class BenchmarkAccessArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    """The Workspace's namespace Output: objects wait for it."""
    tags: dict[str, str]


class BenchmarkAccess(pulumi.ComponentResource):
    """The benchmark pod's identity: everything it may do, and nothing else."""

    service_account: k8s.core.v1.ServiceAccount
    grants: list[pulumi.Resource]
    """The role, service account and RBAC: the benchmark's Job and CronJob wait for them."""

    def __init__(self, name: str, args: BenchmarkAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:benchmark:BenchmarkAccess", name, None, opts)
        spec, cluster = args.spec, args.cluster
        moved = pulumi.Alias(parent=benchmark_parent())
        commits = sorted({f"{v.artifact_path}/{COMMIT_FILE}" for v in spec.variants})
        role, self.service_account = workload_account(
            self, cluster, role_name="benchmark-runner", account_name="benchmark-sa", namespace=args.namespace,
            namespace_name=spec.namespace, service_account=SERVICE_ACCOUNT,
            policy=pulumi.Output.from_input(cluster.model_bucket_arn).apply(
                lambda arn: runner_policy(spec.benchmark.metrics_namespace, arn, spec.results_prefix,
                                          spec.tokenizer_cache_prefix, commits, resumes=spec.study is not None)),
            tags=args.tags, uses_kubernetes_api=True,  # it finds its variants' pods (benchmark/telemetry.py)
            role_aliases=[moved, pulumi.Alias(parent=benchmark_parent(), type_="sdtrn2:iam:IrsaRole")],
            account_aliases=[moved])
        self.grants = [role, self.service_account,
                       *self._grant(args, "benchmark-placement", PLACEMENT_ROLE, placement_rules(), aliases=[moved])]
        if spec.study:
            servers = [workload_name(v, s) for v in spec.tuned_servers for s in v.servers]
            self.grants += self._grant(args, TUNER_ROLE, TUNER_ROLE, tuner_rules(servers))
        self.register_outputs({"serviceAccount": SERVICE_ACCOUNT, "roleArn": role.arn})

    def _grant(self, args: BenchmarkAccessArgs, resource_name: str, role_name: str, rules: list[dict],
               aliases: list[pulumi.Alias] | None = None) -> list[pulumi.Resource]:
        """A namespaced Role and its binding to the benchmark's service account."""
        role = k8s.rbac.v1.Role(resource_name, metadata={"name": role_name, "namespace": args.namespace}, rules=rules,
                                opts=args.cluster.k8s_options(self, aliases=aliases))
        binding = k8s.rbac.v1.RoleBinding(
            resource_name, metadata={"name": role_name, "namespace": args.namespace},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            subjects=[{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": args.spec.namespace}],
            opts=args.cluster.k8s_options(self, aliases=aliases))
        return [role, binding]
