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

ModelKind = Literal["model", "eagle-head"]


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
    speculation, fused by NxDI). "eagle-head": an EAGLE draft head, which only speculates for
    the target it was trained on and needs EAGLE mode (FACTS.md, "vLLM on Neuron")."""


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
LOGICAL_NEURON_CORE_SIZES = (1, 2)
SPECULATIVE_TOKENS_RANGE = (1, 15)
MIN_KUBERNETES_VERSION = (1, 34)


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


@functools.cache
def known_regions() -> tuple[str, ...]:
    """Regions of the standard AWS partition where EKS has an endpoint, from botocore's own
    endpoint data (botocore/data/endpoints.json, pinned through boto3 in requirements.txt)."""
    return tuple(sorted(botocore.session.get_session().get_available_regions("eks")))
CAPACITY_TYPES = ("on-demand", "reserved")

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
