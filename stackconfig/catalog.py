"""Facts the config is checked against: the models this project knows and the trn2 shapes.

Model facts come from the Hugging Face model cards; instance facts from docs/facts.md
("Trainium2 arithmetic") and the EC2 trn2 instance page.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ModelKind = Literal["model", "eagle-head", "eagle3-head", "dflash-head"]
MODEL_KINDS = ("model", "eagle-head", "eagle3-head", "dflash-head")
KIND_NAMES = {"model": "a full model", "eagle-head": "an EAGLE head", "eagle3-head": "an EAGLE3 head",
              "dflash-head": "a DFlash head"}


BF16_BYTES, FP8_BYTES, F32_BYTES = 2, 1, 4


@dataclass(frozen=True)
class Architecture:
    """The config.json fields a Llama-style decoder's (Llama 3.x, Qwen3) tensors follow from:
    per layer q/k/v/o projections, a gated MLP (gate, up, down) and two RMSNorms (Qwen3 adds a
    q and a k norm of head_dim), then the embedding, the final norm and the LM head."""

    hidden_size: int
    layers: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    vocab_size: int
    head_dim: int = 0
    """0: hidden_size / attention_heads (Llama); Qwen3 sets it."""
    stores_lm_head: bool = True
    """False when the embedding is tied and the checkpoint holds it once (Llama 3.2 1B); Qwen3's
    small models tie it but store lm_head.weight as well (Qwen3-0.6B: 751,632,384 BF16 parameters
    on the hub against 596,049,920 in the model)."""
    qk_norm: bool = False

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def kv_parameters(self) -> int:
        """One layer's k and v projections."""
        return 2 * self.hidden_size * self.kv_heads * self.head_size

    @property
    def attention_parameters(self) -> int:
        return 2 * self.hidden_size * self.attention_heads * self.head_size + self.kv_parameters

    @property
    def mlp_parameters(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def norm_parameters(self) -> int:
        return 2 * self.hidden_size + (2 * self.head_size if self.qk_norm else 0)

    @property
    def parameters(self) -> int:
        """As the checkpoint stores them (a tied head stored once counts once)."""
        per_layer = self.attention_parameters + self.mlp_parameters + self.norm_parameters
        embeddings = self.vocab_size * self.hidden_size * (2 if self.stores_lm_head else 1)
        return self.layers * per_layer + embeddings + self.hidden_size

    def checkpoint_bytes(self, fp8_mlp_layers: int = 0) -> int:
        """BF16 throughout, but `fp8_mlp_layers` MLPs in Meta's FP8 layout (fbgemm: F8_E4M3 weights,
        one F32 scale per output row; modelstore/fp8.py reads exactly these)."""
        fp8_weights = fp8_mlp_layers * self.mlp_parameters
        fp8_scales = fp8_mlp_layers * (2 * self.intermediate_size + self.hidden_size)
        return (self.parameters - fp8_weights) * BF16_BYTES + fp8_weights * FP8_BYTES + fp8_scales * F32_BYTES


@dataclass(frozen=True)
class Checkpoint:
    """A model's safetensors as the hub serves them at the revision the project prepares."""

    bytes: int
    """The tensors' bytes: the `metadata.total_size` of the repository's model.safetensors.index.json
    (a single-file checkpoint: its tensors' bytes). What the preparation downloads and uploads and
    a server copies; the files' JSON headers and the tokenizer add a few MiB."""
    source: str
    """Where the figure comes from: read from a source, or "computed" from the model's config.json
    and the dtypes its checkpoint keeps (Architecture.checkpoint_bytes)."""


def computed(architecture: Architecture, config: str, fp8_mlp_layers: int = 0, agrees_with: str = "") -> Checkpoint:
    """A checkpoint size computed from the model's config, labelled so, with any published figure it matches."""
    source = f"computed from {config}" + (f"; equals {agrees_with}" if agrees_with else "")
    return Checkpoint(architecture.checkpoint_bytes(fp8_mlp_layers), source)


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
    the targets they were trained on (docs/facts.md, "vLLM on Neuron", "Serving engines")."""
    draft_for: tuple[str, ...] = ()
    """A head's targets (verifiers); empty for full models."""
    layers: int = 0
    """Decoder layers (num_hidden_layers in the model's config.json), where a module list is
    derived from them: a BF16 draft of an FP8 target (0: not recorded)."""
    bf16_modules: tuple[str, ...] = ()
    """An FP8 checkpoint's modules kept in BF16, which NxD Inference must not convert (its
    modules_to_not_convert; stackconfig/engines/nxdi_legacy.py)."""
    checkpoint: Checkpoint | None = None
    """The checkpoint's size: every disk, transfer-time and cost figure of the model derives from it.
    None only for a model declared without one, which validation refuses (models.<id>.checkpointBytes)."""
    architecture: Architecture | None = None
    """Where known: the sharded checkpoint's replicated and padded heads follow from it (stackconfig/server.py)."""


def all_modules(layers: int) -> tuple[str, ...]:
    """Every module NxD Inference may convert in a Llama-style model, as its modules_to_not_convert
    names them: the LM head, each layer's MLP (an entry containing "layers.N.mlp" keeps that MLP
    unquantized) and each layer's attention (an entry equal to "layers.N.self_attn" keeps its
    fused QKV without scales): NxDI v0.6.10598 models/llama/modeling_llama.py L124-128, L190-194."""
    return ("lm_head", *(f"layers.{i}.mlp" for i in range(layers)), *(f"layers.{i}.self_attn" for i in range(layers)))


def meta_fp8_bf16_modules(layers: int) -> tuple[str, ...]:
    """What Meta's FP8 Llama 3.1 checkpoints keep in BF16: the LM head, the first and the last
    layer's MLP and every layer's attention (whose weights carry no FP8 scales). The Neuron 405B
    tutorial's modules_to_not_convert.json lists exactly these for the 126-layer 405B (target list,
    129 entries; aws-neuron/aws-neuron-sdk libraries/nxd-inference/tutorials/, unchanged since
    Neuron 2.22)."""
    return ("lm_head", "layers.0.mlp", f"layers.{layers - 1}.mlp", *(f"layers.{i}.self_attn" for i in range(layers)))


# config.json of each repository (hidden_size, num_hidden_layers, intermediate_size,
# num_attention_heads, num_key_value_heads, vocab_size, head_dim, tie_word_embeddings), as the
# model cards state them; the 405B tutorial's module lists confirm 126 and 16 layers.
LLAMA_3_1_405B = Architecture(16384, 126, 53248, 128, 8, 128256)
LLAMA_3_1_8B = Architecture(4096, 32, 14336, 32, 8, 128256)
LLAMA_3_2_1B = Architecture(2048, 16, 8192, 32, 8, 128256, head_dim=64, stores_lm_head=False)
QWEN3_32B = Architecture(5120, 64, 25600, 64, 8, 151936, head_dim=128, qk_norm=True)
QWEN3_1_7B = Architecture(2048, 28, 6144, 16, 8, 151936, head_dim=128, qk_norm=True)
QWEN3_0_6B = Architecture(1024, 28, 3072, 16, 8, 151936, head_dim=128, qk_norm=True)
META_FP8_405B_BF16_MODULES = meta_fp8_bf16_modules(LLAMA_3_1_405B.layers)


MODELS: dict[str, ModelInfo] = {
    "Qwen/Qwen3-32B": ModelInfo("qwen3", gated=False, params_billion=32.8, architecture=QWEN3_32B, checkpoint=computed(
        QWEN3_32B, "Qwen/Qwen3-32B config.json, BF16", agrees_with="the index's total_size 65,524,246,528 as public notes quote it")),
    "Qwen/Qwen3-1.7B": ModelInfo("qwen3", gated=False, params_billion=1.7, architecture=QWEN3_1_7B,
                                 checkpoint=computed(QWEN3_1_7B, "Qwen/Qwen3-1.7B config.json, BF16, lm_head stored",
                                                     agrees_with="the index's total_size 4,063,479,808 at revision 70d244c")),
    "Qwen/Qwen3-0.6B": ModelInfo("qwen3", gated=False, params_billion=0.6, architecture=QWEN3_0_6B, checkpoint=computed(
        QWEN3_0_6B, "Qwen/Qwen3-0.6B config.json, BF16, lm_head stored",
        agrees_with="the hub API's 751,632,384 BF16 parameters (model.safetensors 1,503,300,328 B with its header)")),
    # Llama 3.1 and 3.2 share the 128k-token Llama 3 tokenizer.
    "meta-llama/Llama-3.1-405B-Instruct": ModelInfo("llama3", gated=True, params_billion=405, architecture=LLAMA_3_1_405B,
                                                    checkpoint=computed(LLAMA_3_1_405B, "its config.json, BF16")),
    # Meta's FP8 checkpoint quantizes the MLPs of layers 1-124 only; attention, embeddings, the head and
    # the first and last MLP stay BF16 (its 129 modules_to_not_convert): ~454 GiB, not 1 byte per parameter.
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ModelInfo(
        "llama3", gated=True, params_billion=405, checkpoint_dtype="fp8", layers=LLAMA_3_1_405B.layers,
        bf16_modules=META_FP8_405B_BF16_MODULES, architecture=LLAMA_3_1_405B,
        checkpoint=computed(LLAMA_3_1_405B, "the 405B config.json and the FP8 checkpoint's dtypes (fbgemm FP8 MLPs in "
                            "layers 1-124, all else BF16)", fp8_mlp_layers=LLAMA_3_1_405B.layers - 2)),
    "meta-llama/Llama-3.2-1B-Instruct": ModelInfo("llama3", gated=True, params_billion=1.2, layers=16, architecture=LLAMA_3_2_1B,
                                                  checkpoint=computed(LLAMA_3_2_1B, "its config.json, BF16, tied embedding stored once")),
    "meta-llama/Llama-3.1-8B": ModelInfo("llama3", gated=True, params_billion=8.0, layers=32, architecture=LLAMA_3_1_8B, checkpoint=computed(
        LLAMA_3_1_8B, "its config.json, BF16", agrees_with="the Llama 3 8B index's total_size 16,060,522,496 the hub docs show")),
    "meta-llama/Llama-3.2-1B": ModelInfo("llama3", gated=True, params_billion=1.2, layers=16, architecture=LLAMA_3_2_1B,
                                         checkpoint=computed(LLAMA_3_2_1B, "its config.json, BF16, tied embedding stored once")),
    "meta-llama/Llama-3.1-8B-Instruct": ModelInfo("llama3", gated=True, params_billion=8.0, layers=32, architecture=LLAMA_3_1_8B,
                                                  checkpoint=computed(LLAMA_3_1_8B, "its config.json, BF16")),
    # EAGLE3 heads trained by Red Hat for these verifiers (vllm-project/speculators README,
    # "Supported Models", commit c05b95b). Their size and gating are not published where this
    # project could read them: params are estimates (one decoder layer, the fusion layer and a
    # reduced-vocabulary LM head at the verifier's width), used only for the startup budget, the
    # "assumed" draft/target cost ratio and their (small) share of disk; gated=False, the target's
    # token is sent anyway.
    # The Qwen3 head's tensor list was read (public notes at its revision dc84fe7): 3,121,273,216 B,
    # its own embed_tokens (151936 x 5120) included, in a 3,121,274,856 B model.safetensors. The
    # Llama head's was not: its size is estimated with the same layout (embed_tokens 128256 x 4096,
    # one decoder layer, the fusion layer, the reduced-vocabulary head), which is what disk needs;
    # params_billion stays the compute estimate (the embedding is a lookup).
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3": ModelInfo(
        "llama3", gated=False, params_billion=0.4, kind="eagle3-head", draft_for=("meta-llama/Llama-3.1-8B-Instruct",),
        checkpoint=Checkpoint(1_900_436_736, "estimated: the Qwen3-32B head's layout at Llama-3.1-8B's width and "
                              "vocabulary (embed_tokens included), in BF16")),
    "RedHatAI/Qwen3-32B-speculator.eagle3": ModelInfo(
        "qwen3", gated=False, params_billion=1.56, kind="eagle3-head", draft_for=("Qwen/Qwen3-32B",),
        checkpoint=Checkpoint(3_121_273_216, "read: the tensor list of RedHatAI/Qwen3-32B-speculator.eagle3 at dc84fe7 "
                              "(model.safetensors 3,121,274,856 B with its header)")),
}


@dataclass(frozen=True)
class InstanceShape:
    """A Trainium2 instance type as EC2 describes it (DescribeInstanceTypes, as in moto 5.2.5's
    snapshot of that API, moto/ec2/resources/instance_types.json.gz; tests/test_catalog.py reads
    each figure back from it) and as Karpenter and the scheduler see it."""

    neuron_devices: int
    vcpus: int
    memory_mib: int
    """MemoryInfo.SizeInMiB."""
    primary_network_gbps: int
    """Baseline bandwidth of network card 0, which carries the VPC CNI's pod traffic (S3 reads
    included): NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps (trn2.48xlarge: 16 cards of
    200 Gbps, "16x 200 Gigabit"; trn2.3xlarge: 50 Gbps)."""
    default_card_enis: int
    """NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces: the ENIs pods can use."""
    ipv4_per_eni: int
    """NetworkInfo.Ipv4AddressesPerInterface."""
    instance_store_gb: int
    """InstanceStorageInfo.TotalSizeInGB: the NVMe that kubelet's ephemeral storage sits on."""
    approx_hourly_usd: float | None = None
    """Approximate on-demand list price, for the plan summary and when `make preflight` cannot get
    the region's price from the Pricing API; check the EC2 pricing page for your region."""

    @property
    def max_pods(self) -> int:
        """Pods per node as Karpenter computes them for AL2023 (ENI-limited pod density):
        usable ENIs x (IPv4 addresses per ENI - 1) + 2 (aws/karpenter-provider-aws v1.14.1
        pkg/providers/instancetype/types.go ENILimitedPods L485-505, unchanged on main at
        1d927085; AL2023 takes DefaultFamily's SupportsENILimitedPodDensity, amifamily/resolver.go
        L127-134)."""
        return self.default_card_enis * (self.ipv4_per_eni - 1) + 2

    @property
    def allocatable_memory_mib(self) -> int:
        """Memory Karpenter expects the node to offer pods before any such node has joined, with
        its defaults (types.go at the same commits): capacity = SizeInMiB minus the VM overhead
        ceil(SizeInMiB x 0.075) (memory() L356-366; --vm-memory-overhead-percent default 0.075,
        pkg/operator/options/options.go L58), minus kube-reserved 11 x max pods + 255 MiB
        (kubeReservedResources L522-552, with the ENI-limited pod count on AL2023) and the
        eviction threshold memory.available 100Mi (evictionThreshold L554-574); no system-reserved."""
        capacity = self.memory_mib - math.ceil(self.memory_mib * KARPENTER_VM_MEMORY_OVERHEAD)
        return capacity - (11 * self.max_pods + 255) - 100

    @property
    def allocatable_ephemeral_gib(self) -> int:
        """Ephemeral storage Karpenter expects the node to offer pods with instanceStorePolicy RAID0
        (types.go at v1.14.1): capacity is the instance store's TotalSizeInGB, in decimal GB
        (ephemeralStorage L368-374), less kube-reserved 1Gi (L525) and the eviction threshold,
        10 % of capacity rounded up (L557). emptyDir volumes live there (Karpenter docs,
        concepts/nodeclasses.md "spec.instanceStorePolicy": the RAID0 array is the filesystem of
        the kubelet and containerd)."""
        return karpenter_allocatable_ephemeral_gib(self.instance_store_gb)

    @property
    def allocatable_cpu_millicores(self) -> int:
        """vCPUs minus Karpenter's kube-reserved CPU: 6 % of the first core, 1 % of the second,
        0.5 % of the third and fourth, 0.25 % of the rest (kubeReservedResources, as above)."""
        steps = ((1, 60), (1, 10), (2, 5), (self.vcpus - 4, 2.5))
        reserved = sum(cores * per_core for cores, per_core in steps)
        return self.vcpus * 1000 - math.ceil(reserved)


def karpenter_allocatable_ephemeral_gib(instance_store_gb: float) -> int:
    """InstanceShape.allocatable_ephemeral_gib's arithmetic for an instance store of this many GB."""
    capacity = instance_store_gb * 10 ** 9
    return math.floor((capacity - 2 ** 30 - math.ceil(capacity / 10)) / 2 ** 30)


KARPENTER_VM_MEMORY_OVERHEAD = 0.075
"""Karpenter's settings.vmMemoryOverheadPercent default (charts/karpenter/values.yaml at v1.14.1 and
at 1.15.0). Once a node of a type has joined, Karpenter uses its real capacity instead
(pkg/providers/instancetype/instancetype.go L228-230), which is at least this estimate's."""

INSTANCE_SHAPES: dict[str, InstanceShape] = {
    # ~$35.76/h: the one figure found, from a third-party source for us-east-1 in 2026-02 (docs/facts.md,
    # "Regions and capacity"); no AWS page was found, and Karpenter's us-east-1 table has no trn2.
    "trn2.48xlarge": InstanceShape(neuron_devices=16, vcpus=192, memory_mib=2097152, primary_network_gbps=200,
                                   default_card_enis=2, ipv4_per_eni=50, instance_store_gb=7600, approx_hourly_usd=35.76),
    "trn2.3xlarge": InstanceShape(neuron_devices=1, vcpus=12, memory_mib=131072, primary_network_gbps=50,
                                  default_card_enis=2, ipv4_per_eni=15, instance_store_gb=470),
}

# The Neuron DRA driver exposes connected device groups of these sizes only
# (resource.aws.com/devicegroup{1,4,8,16}_id; docs/facts.md "Neuron DRA driver").
DEVICE_GROUP_SIZES = (1, 4, 8, 16)
DEVICES_PER_VARIANT = (1, 2, 4, 8, 16)
"""A variant's devices: a whole group, or 2 devices claimed inside one 4-device group (TP 8 at
LNC 2, the EAGLE3 tutorial's shape; components/pairing/claim_templates.py claim_template_spec)."""


def device_group_for(devices: int) -> int:
    """The connected group a claim of `devices` is constrained to: the smallest that holds it."""
    return min(size for size in DEVICE_GROUP_SIZES if size >= devices)


LOGICAL_NEURON_CORE_SIZES = (1, 2)
SPECULATIVE_TOKENS_RANGE = (1, 15)
MIN_KUBERNETES_VERSION = (1, 34)
NEWEST_EKS_VERSION = (1, 37)
"""The newest Kubernetes minor EKS offers as far as this program knows (awslabs/amazon-eks-ami's
release notes of 2026-10-23 add 1.37 AMIs; Karpenter 1.15's compatibility table lists 1.37). A
higher value is a typo; 1.37 is refused until its add-on builds are pinned. The AMI release the
program pins is stackconfig/versions.py AMI_RELEASE."""

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
    endpoint data (botocore/data/endpoints.json, pinned through boto3 in requirements.txt), read as
    botocore's Session.get_available_regions("eks") reads it (the "aws" partition's endpoints of
    the service that are regions: botocore/regions.py EndpointResolver.get_available_endpoints),
    without importing botocore's session and client machinery, a twentieth of every plan's CPU time.
    tests/test_catalog.py checks that botocore answers the same."""
    (package,) = importlib.util.find_spec("botocore").submodule_search_locations
    partition = next(p for p in json.loads((Path(package) / "data" / "endpoints.json").read_text())["partitions"]
                     if p["partition"] == "aws")
    return tuple(sorted(name for name in partition["services"]["eks"]["endpoints"] if name in partition["regions"]))


CAPACITY_TYPES = ("on-demand", "reserved")

# Limits of where config values end up (each checked by validation, naming the key to change):
DASHBOARD_METRICS_PER_WIDGET = 100
"""Metrics and expressions in one metric widget's array: 1-100 (CloudWatch API reference,
"GetMetricWidgetImage: Metric Widget Structure and Syntax", metrics). A study's view queries each
compared configuration and its baseline and divides them: 2 x configurations + baselines."""
DASHBOARD_MAX_WIDGETS = 500
"""CloudWatch's limit on widgets per dashboard, as the project's issue states it (CloudWatch
service quotas; an older awsx docstring says 100)."""
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
tests/data/karpenter-crds-v1.14.1/karpenter.k8s.aws_ec2nodeclasses.yaml); the stack's tags go there."""

# Cited list prices: the plan's cost line, and `make preflight` when the Pricing API gives none.
# All approximate; regions differ.
APPROXIMATE_HOURLY_USD: dict[str, tuple[float, str]] = {
    # Karpenter's generated on-demand table, from the Pricing API for us-east-1 on 2026-07-06
    # (aws/karpenter-provider-aws@v1.14.1 pkg/providers/pricing/zz_generated.pricing_aws.go).
    "m7i.xlarge": (0.2016, "Karpenter v1.14.1 price table, us-east-1"),
    # AWS VPC pricing, us-east-1/us-east-2, as third-party summaries quote it (2026).
    "nat-gateway": (0.045, "VPC pricing as quoted by third parties, us-east-1"),
    # "$0.10 per cluster per hour" standard, "$0.60 per cluster per hour" in extended support
    # (AWS containers blog, "Amazon EKS extended support for Kubernetes versions pricing").
    "eks-standard": (0.10, "EKS pricing, AWS containers blog"),
    "eks-extended": (0.60, "EKS extended support pricing, AWS containers blog"),
}
