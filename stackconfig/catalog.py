"""Facts the config is checked against: the models this project knows and the trn2 shapes.

Model facts come from the Hugging Face model cards; instance facts from ../shared/FACTS.md
("Trainium2 arithmetic") and the EC2 trn2 instance page.
"""
from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from typing import Literal

import botocore.session

ModelKind = Literal["model", "eagle-head", "eagle3-head", "dflash-head"]
MODEL_KINDS = ("model", "eagle-head", "eagle3-head", "dflash-head")
KIND_NAMES = {"model": "a full model", "eagle-head": "an EAGLE head", "eagle3-head": "an EAGLE3 head",
              "dflash-head": "a DFlash head"}


@dataclass(frozen=True)
class ModelInfo:
    """What validation needs to know about a Hugging Face model."""

    tokenizer_family: str
    """Draft and target must share a tokenizer: speculative decoding verifies token ids."""
    gated: bool
    """Gated repositories need a Hugging Face token to download."""
    params_billion: float
    checkpoint_dtype: str = "bf16"
    kind: ModelKind = "model"
    """"model": a full causal LM, usable as a target or as a plain draft (vLLM's draft_model
    speculation, fused by NxDI; legacy engine only). "eagle-head" (legacy engine, EAGLE mode),
    "eagle3-head" and "dflash-head" (vLLM Neuron plugin): draft heads that only speculate for
    the targets they were trained on (FACTS.md, "vLLM on Neuron", "Serving engines")."""
    draft_for: tuple[str, ...] = ()
    """A head's targets (verifiers); empty for full models."""


MODELS: dict[str, ModelInfo] = {
    "Qwen/Qwen3-32B": ModelInfo("qwen3", gated=False, params_billion=32.8),
    "Qwen/Qwen3-1.7B": ModelInfo("qwen3", gated=False, params_billion=1.7),
    "Qwen/Qwen3-0.6B": ModelInfo("qwen3", gated=False, params_billion=0.6),
    # Llama 3.1 and 3.2 share the 128k-token Llama 3 tokenizer.
    "meta-llama/Llama-3.1-405B-Instruct": ModelInfo("llama3", gated=True, params_billion=405),
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ModelInfo(
        "llama3", gated=True, params_billion=405, checkpoint_dtype="fp8"
    ),
    "meta-llama/Llama-3.2-1B-Instruct": ModelInfo("llama3", gated=True, params_billion=1.2),
    "meta-llama/Llama-3.1-8B": ModelInfo("llama3", gated=True, params_billion=8.0),
    "meta-llama/Llama-3.2-1B": ModelInfo("llama3", gated=True, params_billion=1.2),
    "meta-llama/Llama-3.1-8B-Instruct": ModelInfo("llama3", gated=True, params_billion=8.0),
    # EAGLE3 heads trained by Red Hat for these verifiers (vllm-project/speculators README,
    # "Supported Models", commit c05b95b). Their size and gating are not published where this
    # project could read them: params are estimates (one decoder layer, the fusion layer and a
    # reduced-vocabulary LM head at the verifier's width), used only for the startup budget and
    # the "assumed" draft/target cost ratio; gated=False, the target's token is sent anyway.
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3": ModelInfo(
        "llama3", gated=False, params_billion=0.4, kind="eagle3-head", draft_for=("meta-llama/Llama-3.1-8B-Instruct",)),
    "RedHatAI/Qwen3-32B-speculator.eagle3": ModelInfo(
        "qwen3", gated=False, params_billion=0.8, kind="eagle3-head", draft_for=("Qwen/Qwen3-32B",)),
}


@dataclass(frozen=True)
class InstanceShape:
    """A Trainium2 instance type as the scheduler sees it."""

    neuron_devices: int
    vcpus: int
    memory_gib: int
    primary_network_gbps: int
    """Baseline bandwidth of network card 0, which carries the VPC CNI's pod traffic (S3 reads
    included): EC2 DescribeInstanceTypes NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps
    (trn2.48xlarge: 16 cards of 200 Gbps, "16x 200 Gigabit"; trn2.3xlarge: 50 Gbps), as in moto
    5.2.5's snapshot of that API (moto/ec2/resources/instance_types.json.gz)."""
    physical_cores_per_device: int = 8
    approx_hourly_usd: float | None = None
    """Approximate on-demand list price, for the plan summary and when `make preflight` cannot get
    the region's price from the Pricing API; check the EC2 pricing page for your region."""


INSTANCE_SHAPES: dict[str, InstanceShape] = {
    # ~$35.76/h: the one figure found, from a third-party source for us-east-1 in 2026-02 (FACTS.md,
    # "Regions and capacity"); no AWS page was found, and Karpenter's us-east-1 table has no trn2.
    "trn2.48xlarge": InstanceShape(neuron_devices=16, vcpus=192, memory_gib=2048, primary_network_gbps=200,
                                   approx_hourly_usd=35.76),
    "trn2.3xlarge": InstanceShape(neuron_devices=1, vcpus=12, memory_gib=128, primary_network_gbps=50),
}

# The Neuron DRA driver exposes connected device groups of these sizes only
# (resource.aws.com/devicegroup{1,4,8,16}_id; FACTS.md "Neuron DRA driver").
DEVICE_GROUP_SIZES = (1, 4, 8, 16)
DEVICES_PER_VARIANT = (1, 2, 4, 8, 16)
"""A variant's devices: a whole group, or 2 devices claimed inside one 4-device group (TP 8 at
LNC 2, the EAGLE3 tutorial's shape; components/neuron_dra.py claim_template_spec)."""


def device_group_for(devices: int) -> int:
    """The connected group a claim of `devices` is constrained to: the smallest that holds it."""
    return min(size for size in DEVICE_GROUP_SIZES if size >= devices)
LOGICAL_NEURON_CORE_SIZES = (1, 2)
SPECULATIVE_TOKENS_RANGE = (1, 15)
MIN_KUBERNETES_VERSION = (1, 34)
NEWEST_EKS_VERSION = (1, 36)
"""The newest Kubernetes minor EKS offers as far as this program knows (EKS user guide version
tables list 1.36 add-on builds; no evidence of 1.37 on EKS). A higher value is a typo."""

# EKS add-on builds, per Kubernetes minor: a version is usable only once its builds are pinned
# here. `make preflight` checks each against DescribeAddonVersions in the stack's region before
# anything is created. Sources for 1.34 (EKS user guide version tables, read from stored copies;
# the pages carry no dates):
# - vpc-cni: "Amazon VPC CNI" table, 1.34 row (docs.amazonaws.cn/eks/latest/userguide/pod-networking.html)
# - coredns: "Manage CoreDNS" table, 1.34 row (docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md)
# - kube-proxy: "Manage kube-proxy" table, 1.34 row (docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md)
# - eks-pod-identity-agent: no AWS table exists; a public Terraform pin for 1.34 (unverified)
# - aws-mountpoint-s3-csi-driver: v2.3.0-eksbuild.1 is quoted with its configuration schema in
#   aws/containers-roadmap#2785 (2026-03); its 1.34 compatibility is not documented
# - amazon-cloudwatch-observability: no AWS table; a public Terraform pin commented for 1.34
#   (unverified). Its chart, aws-observability/helm-charts tag amazon-cloudwatch-observability-4.10.2
#   (2026-03-19), runs neuron-monitor on trn2.48xlarge with enhanced Container Insights on.
EKS_ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.34": {
        "vpc-cni": "v1.20.4-eksbuild.1",
        "coredns": "v1.13.2-eksbuild.11",
        "kube-proxy": "v1.34.6-eksbuild.13",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "aws-mountpoint-s3-csi-driver": "v2.3.0-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.10.2-eksbuild.1",
    },
}


@dataclass(frozen=True)
class EksSupport:
    """When EKS stops standard support for a Kubernetes version (it then bills extended support
    per cluster-hour) and when extended support ends (EKS then supports the version no more)."""

    standard_until: datetime.date
    extended_until: datetime.date
    source: str


# `make preflight` warns as a stack's version nears standard_until and fails past extended_until.
EKS_SUPPORT: dict[str, EksSupport] = {
    "1.34": EksSupport(datetime.date(2026, 12, 2), datetime.date(2027, 12, 2),
                       "awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc @0138560"),
    "1.35": EksSupport(datetime.date(2027, 3, 27), datetime.date(2028, 3, 27),
                       "standard: endoflife.date/amazon-eks (third party); extended: 12 months later, the extended "
                       "support window (AWS containers blog, 'Amazon EKS extended support for Kubernetes versions pricing')"),
}

WORKLOAD_IDENTITIES = ("irsa", "pod-identity")
SUPPORT_TYPES = ("STANDARD", "EXTENDED")
"""EKS cluster upgrade policy (CreateCluster upgradePolicy.supportType). pulumi-eks 4.4.0 defaults it
to EXTENDED (pulumi_eks.Cluster upgrade_policy docstring), so the program always sets it."""
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288,
                      3653)
"""What CloudWatch Logs accepts as a retention (botocore 1.44.5 logs service model, shape Days);
"never expire" is left out on purpose."""


@functools.cache
def known_regions() -> tuple[str, ...]:
    """Regions of the standard AWS partition where EKS has an endpoint, from botocore's own
    endpoint data (botocore/data/endpoints.json, pinned through boto3 in requirements.txt)."""
    return tuple(sorted(botocore.session.get_session().get_available_regions("eks")))
CAPACITY_TYPES = ("on-demand", "reserved")

# Limits of where config values end up (each checked by validation, naming the key to change):
DASHBOARD_MAX_WIDGETS = 500
"""CloudWatch's limit on widgets per dashboard, as the project's issue states it (CloudWatch
service quotas; an older awsx docstring says 100)."""
DASHBOARD_WIDGETS_PER_TEST_CASE = 8
"""components/benchmark.py dashboard_body: two rows of four metric widgets per test case (a test
keeps the two in step), plus one header widget."""
CONFIG_MAP_MAX_BYTES = 1024 * 1024
"""Kubernetes: the data in a ConfigMap cannot exceed 1 MiB (kubernetes.io, "ConfigMaps")."""
TEST_CASE_PROMPTS_MAX_BYTES = 512 * 1024
"""The benchmark ConfigMap carries the pod's code (~tens of KiB) and the run config, whose bulk
is the test-case prompts; half the ConfigMap limit for the prompts leaves ample room."""
TAG_KEY_MAX, TAG_VALUE_MAX = 128, 256
"""AWS tag limits (IAM/EC2 "Tag naming limits"); keys starting with `aws:` are reserved."""
KARPENTER_RESERVED_TAGS = ("eks:eks-cluster-name", "kubernetes.io/cluster/", "karpenter.sh/nodepool",
                           "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass")
"""Tags the EC2NodeClass refuses (its CEL rule "tag contains a restricted tag matching ...",
shared/schemas/karpenter-v1.14.1/karpenter.k8s.aws_ec2nodeclasses.yaml); the stack's tags go there."""

# The sample's eight LLMPerf test cases (FACTS.md, "LLMPerf"); slugs become the CloudWatch
# TestCase dimension. None keeps LLMPerf's own sonnet.txt (the "original sonnets" case).
DEFAULT_TEST_CASES: dict[str, str | None] = {
    "counting": "counting numbers from 1 ",
    "sonnets": None,
    "single-letter": "a",
    "hello-world": "hello world ",
    "cat-on-mat": "the cat sat on the mat. ",
    "json-fixed-keys": "Output valid JSON with fixed keys",
    "python-skeleton": "Write a simple Python function skeleton",
    "one-to-twenty": "List numbers from one to twenty",
}
