"""The typed stack configuration and everything derived from it.

Every number the components need (tensor-parallel degree, device-group sizes, node count,
artifact paths, vLLM arguments) is computed here from the model pairing, never copied by hand
into a stack file or a component.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .catalog import INSTANCE_SHAPES, MODELS, InstanceShape

Role = Literal["baseline", "sd"]
Quantization = Literal["none", "fp8"]
WorkloadIdentity = Literal["irsa", "pod-identity"]
SpeculationMethod = Literal["draft_model", "eagle"]
"""vLLM's speculative_config method: "draft_model" for a plain draft model (vLLM's default when
no method is given), "eagle" for an EAGLE head (FACTS.md, "vLLM on Neuron")."""

# Mountpoint for S3 is mounted at the same path as in the sample (seed 000).
MODEL_STORE_MOUNT_PATH = "/var/mdl"


def slug(text: str) -> str:
    """A lowercase DNS-label-safe form of a model id or stack name ("Qwen/Qwen3-1.7B" -> "qwen3-1-7b")."""
    return re.sub(r"[^a-z0-9]+", "-", text.rsplit("/", 1)[-1].lower()).strip("-")


@dataclass(frozen=True)
class ClusterSettings:
    kubernetes_version: str
    """EKS control-plane version; the Neuron DRA driver needs 1.34 or later."""
    system_node_instance_type: str
    system_node_count: int
    """On-demand nodes for Karpenter, CoreDNS and the benchmark; never managed by Karpenter."""
    vpc_cidr: str
    availability_zone_count: int
    """How many AZs the VPC spans (EKS needs two). Chosen among the AZs that offer the trn2
    instance type, unless `availability_zones` names them."""
    availability_zones: tuple[str, ...]
    """AZ names given in config (e.g. the AZ of a capacity reservation); empty: chosen by offering."""
    workload_identity: WorkloadIdentity
    """How pods get IAM roles: IRSA (OIDC trust) or EKS Pod Identity (associations)."""


@dataclass(frozen=True)
class CapacitySettings:
    instance_type: str
    capacity_type: str
    """"on-demand", or "reserved" to launch only into the listed capacity reservations."""
    reservation_ids: tuple[str, ...]
    """ODCR or Capacity Block ids (cr-...) the NodePool may launch into."""
    ami_alias: str
    """EC2NodeClass AMI alias pinned to a release, e.g. al2023@v20260828 (never @latest)."""
    root_volume_gib: int

    @property
    def shape(self) -> InstanceShape:
        return INSTANCE_SHAPES[self.instance_type]


@dataclass(frozen=True)
class ServingSettings:
    """Serving parameters every variant of a stack shares, so that only the decoding differs."""

    image: str
    target: str
    devices_per_variant: int
    logical_neuron_cores: int
    max_num_seqs: int
    max_model_len: int
    node_cache_path: str
    """Host path on the node's RAID0 instance store where weights are cached once per node."""

    @property
    def tensor_parallel_size(self) -> int:
        # A trn2 device has 8 physical NeuronCores; LNC=2 pairs them into 4 logical cores.
        return self.devices_per_variant * (8 // self.logical_neuron_cores)


@dataclass(frozen=True)
class Variant:
    """One vLLM server: the baseline or a speculative-decoding configuration."""

    name: str
    role: Role
    target: str
    serving: ServingSettings
    baseline: str | None = None
    """For an SD variant: the baseline variant it is compared with."""
    draft: str | None = None
    num_speculative_tokens: int | None = None
    draft_max_model_len: int | None = None
    speculation_method: SpeculationMethod | None = None
    quantization: Quantization = "none"
    weights_path: str | None = None
    """Bucket-relative folder holding prepared weights (e.g. FP8 rescaled for Neuron); None
    downloads the target from the Hugging Face hub."""

    @property
    def is_speculative(self) -> bool:
        return self.role == "sd"

    @property
    def tensor_parallel_size(self) -> int:
        return self.serving.tensor_parallel_size

    @property
    def devices(self) -> int:
        return self.serving.devices_per_variant

    @property
    def served_model_name(self) -> str:
        return self.target

    @property
    def override_neuron_config(self) -> dict:
        config: dict = {"save_sharded_checkpoint": True}
        if self.is_speculative:
            # NxDI builds fused speculation from vLLM's speculative config whatever its method;
            # EAGLE needs its own switch on top (FACTS.md, "vLLM on Neuron").
            config["enable_fused_speculation"] = True
            if self.speculation_method == "eagle":
                config["enable_eagle_speculation"] = True
        if self.quantization == "fp8":
            # Seed 004 spells these with hyphens; NxDI's NeuronConfig fields use underscores.
            config["quantized_mlp_kernel_enabled"] = True
            config["quantization_type"] = "per_channel_symmetric"
        return config

    @property
    def speculative_config(self) -> dict | None:
        if not self.is_speculative:
            return None
        config: dict = {
            "model": self.draft,
            "num_speculative_tokens": self.num_speculative_tokens,
            "max_model_len": self.draft_max_model_len,
        }
        # A plain draft gets no method: vLLM then selects draft_model, as the Neuron fork's own
        # examples/offline_inference/neuron_speculation.py does; "eagle" would wrap the draft's
        # config as an EAGLE head.
        if self.speculation_method == "eagle":
            config["method"] = "eagle"
        return config

    @property
    def compile_settings(self) -> dict:
        """Everything that changes the compiled Neuron graphs or sharded weights."""
        return {
            "image": self.serving.image,
            "target": self.target,
            "weights": self.weights_path,
            "quantization": self.quantization,
            "tensorParallelSize": self.tensor_parallel_size,
            "logicalNeuronCores": self.serving.logical_neuron_cores,
            "maxNumSeqs": self.serving.max_num_seqs,
            "maxModelLen": self.serving.max_model_len,
            "overrideNeuronConfig": self.override_neuron_config,
            "speculativeConfig": self.speculative_config,
        }

    @property
    def compile_fingerprint(self) -> str:
        canonical = json.dumps(self.compile_settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:10]

    @property
    def artifact_path(self) -> str:
        """Bucket-relative folder of the compiled artifacts. Readable, and unique per compile
        settings: changing any of them yields a new path, so stale graphs are never loaded."""
        shape = f"bs{self.serving.max_num_seqs}-len{self.serving.max_model_len}-tp{self.tensor_parallel_size}"
        if self.quantization != "none":
            shape += f"-{self.quantization}"
        if self.is_speculative:
            shape += f"-sd{self.num_speculative_tokens}-{slug(self.draft or '')}"
        return f"compiled/{slug(self.target)}/{shape}-{self.compile_fingerprint}"

    @property
    def gated_models(self) -> tuple[str, ...]:
        models = [self.target] + ([self.draft] if self.draft else [])
        return tuple(m for m in models if MODELS[m].gated)


@dataclass(frozen=True)
class BenchmarkSettings:
    input_tokens: int
    output_tokens: int
    concurrency: int
    requests_per_test_case: int
    request_timeout_s: int
    test_cases: dict[str, str | None]
    image: str
    llmperf_commit: str
    """Full commit of ray-project/llmperf; one with a checked-in manifest (benchmark/llmperf/)."""
    metrics_namespace: str
    sampling_params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0})
    """Sent with every request (LLMPerf's --additional-sampling-params). {} leaves sampling to the
    server's defaults, as seeds 001 and 004 did."""
    seed: str | None = None
    """Which seed's published figures the report prints beside the measured ones (benchmark/seeds.py)."""


@dataclass(frozen=True)
class StackSpec:
    project: str
    stack: str
    region: str
    """aws:region, validated against the regions botocore knows for EKS."""
    cluster: ClusterSettings
    capacity: CapacitySettings
    serving: ServingSettings
    variants: tuple[Variant, ...]
    benchmark: BenchmarkSettings
    retain_model_store: bool
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Prefix for cloud resource names: the stack name made DNS-safe."""
        return slug(self.stack)

    @property
    def cluster_name(self) -> str:
        return f"sd-{self.name}"

    @property
    def device_group_sizes(self) -> tuple[int, ...]:
        return tuple(sorted({v.devices for v in self.variants}))

    @property
    def node_count(self) -> int:
        return len(pack_device_groups([v.devices for v in self.variants], self.capacity.shape.neuron_devices))

    @property
    def requires_hugging_face_token(self) -> bool:
        return any(v.gated_models for v in self.variants)

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


def pack_device_groups(group_sizes: list[int], devices_per_node: int) -> list[list[int]]:
    """First-fit decreasing packing of device groups onto nodes, all variants served at once.

    Group sizes are powers of two dividing the node size, for which first-fit decreasing is
    optimal and matches how the DRA driver hands out contiguous groups.
    """
    nodes: list[list[int]] = []
    for size in sorted(group_sizes, reverse=True):
        for node in nodes:
            if sum(node) + size <= devices_per_node:
                node.append(size)
                break
        else:
            nodes.append([size])
    return nodes
