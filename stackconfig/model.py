"""The typed stack configuration and everything derived from it.

Every number the components need (tensor-parallel degree, device-group sizes, node count,
artifact paths, vLLM arguments) is computed here from the model pairing, never copied by hand
into a stack file or a component.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmark.loadgen import DEFAULT_GENERATOR, Level
from benchmark.pod import metric_dimensions

from .catalog import APPROXIMATE_HOURLY_USD, INSTANCE_SHAPES, InstanceShape, ModelInfo
from .engines import (
    ENGINES,
    KV_SEGMENT_SIZES,
    SINGLE_SHOT_PREFILL_MAX,
    Server,
)
from .naming import prefixed, slug, stack_slug
from .store import COMPILED_ROOT, UNPINNED_REVISION, PreparedModel, StoreMount, staging_prefix

Role = Literal["baseline", "sd"]
Quantization = Literal["none", "fp8"]
WorkloadIdentity = Literal["irsa", "pod-identity"]
SupportType = Literal["STANDARD", "EXTENDED"]
SpeculationMethod = Literal["draft_model", "eagle", "eagle3", "dflash"]
StudyMode = Literal["sequential", "parallel"]
"""vLLM's speculative_config method: "draft_model" for a plain draft model (vLLM's default when
no method is given) and "eagle" for an EAGLE head on nxdi-legacy; "eagle3" and "dflash" heads on
vllm-neuron (docs/facts.md, "vLLM on Neuron", "Serving engines")."""

# Mountpoint for S3 is mounted at the same path as in the sample (seed 000).
RESULTS_ROOT = "results/"
CACHE_ROOT = "cache/"
CONTAINER_INSIGHTS_LOG_KINDS = ("application", "dataplane", "host", "performance")


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
    support_type: SupportType = "STANDARD"
    """EKS upgrade policy: STANDARD (the control plane is upgraded by EKS when standard support of
    its version ends) or EXTENDED (it stays, billed at the extended-support rate)."""
    public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    """Who may reach the public Kubernetes API endpoint (EKS publicAccessCidrs); nodes reach the
    private endpoint."""
    log_retention_days: int = 14
    """Retention of the log groups the program creates for the cluster (control plane, Container
    Insights), so `pulumi destroy` deletes them and none grows forever."""


@dataclass(frozen=True)
class CapacitySettings:
    instance_type: str
    capacity_type: str
    """"on-demand", or "reserved" to launch only into the listed capacity reservations."""
    reservation_ids: tuple[str, ...]
    """ODCR or Capacity Block ids (cr-...) the NodePool may launch into."""
    ami_alias: str
    """EC2NodeClass AMI alias pinned to a release (never @latest): by default the program's
    (stackconfig/versions.py AMI_RELEASE.alias)."""
    root_volume_gib: int
    replacement_headroom_nodes: int = 0
    """Nodes the static NodePool may launch above its replicas (limits.nodes - replicas), only ever
    to replace a drifted node before removing it (Karpenter's static drift reserves node count under
    the limit: kubernetes-sigs/karpenter pkg/controllers/disruption/staticdrift.go). 0: drifted trn2
    nodes (a new AMI, a Kubernetes upgrade) keep running until replaced by hand; 1: Karpenter
    replaces them one at a time, paying for a second node while each replacement starts."""

    @property
    def shape(self) -> InstanceShape:
        return INSTANCE_SHAPES[self.instance_type]


@dataclass(frozen=True)
class ServingSettings:
    """Serving parameters every variant of a stack shares, so that only the decoding differs."""

    engine: str
    """The default engine of the stack's variants (stackconfig/engines/)."""
    image: str | None
    """serving.image: replaces the default image of `engine`; None keeps each engine's default."""
    target: str
    devices_per_variant: int
    logical_neuron_cores: int
    max_num_seqs: int
    max_model_len: int
    neuron_config: dict[str, Any] = field(default_factory=dict)
    """Engine settings every variant compiles with (NxDI NeuronConfig fields for nxdi-legacy,
    plugin neuron_config fields for vllm-neuron), e.g. seed 004's kernels and buckets."""
    environment: dict[str, str] = field(default_factory=dict)
    """Extra environment for the servers (e.g. NEURON_RT_EXEC_TIMEOUT); program-managed names refused."""
    max_num_batched_tokens: int | None = None
    """vllm-neuron only: the prefill token budget (default derived from max_model_len)."""
    seccomp_runtime_default: bool = True
    """serving.seccompProfile: RuntimeDefault (True), or "unset" to run the servers under the node's
    default, as the source documents did, should the Neuron runtime need a call RuntimeDefault denies."""
    run_as: tuple[int, int] | None = None
    """serving.runAs (user, group): the servers run as that user and group, their volumes owned by the
    group (fsGroup); None runs them as root, as the images do. Opt-in and unverified on Neuron: the
    DRA driver's device files' owners are not documented (components/pairing/vllm_variant.py)."""
    add_capabilities: tuple[str, ...] = ()
    """serving.addCapabilities: capabilities given back to the vLLM container after dropping all,
    should a Neuron release need one (stackconfig/server.py LINUX_CAPABILITIES)."""

    @property
    def tensor_parallel_size(self) -> int:
        # A trn2 device has 8 physical NeuronCores; LNC=2 pairs them into 4 logical cores.
        return self.devices_per_variant * (8 // self.logical_neuron_cores)


@dataclass(frozen=True)
class Variant:
    """One vLLM server: a baseline or a speculative-decoding configuration, on one engine."""

    name: str
    role: Role
    target: str
    serving: ServingSettings
    engine: str
    """A registered engine's name (stackconfig/engines/ ENGINES)."""
    image: str
    target_info: ModelInfo
    baseline: str | None = None
    """The variant this one is compared with: required for SD; optional for a baseline that is
    itself compared with another (FP8 vs BF16)."""
    draft: str | None = None
    draft_info: ModelInfo | None = None
    num_speculative_tokens: int | None = None
    draft_max_model_len: int | None = None
    speculation_method: SpeculationMethod | None = None
    quantization: Quantization = "none"
    target_revision: str = UNPINNED_REVISION
    """The target's hub commit (modelRevisions), or UNPINNED_REVISION."""
    draft_revision: str = UNPINNED_REVISION
    neuron_config_extra: dict[str, Any] = field(default_factory=dict)
    """variants[].neuronConfig: on top of serving.neuronConfig, for this variant only."""
    placement: str = "same-node"
    """variants[].placement (engines that split a variant over pods: stackconfig/engines/distributed.py):
    its pods on one trn2 node, or its draft on another."""
    speculation_length: int | None = None
    """variants[].speculationLength: positions the target scores per forward (None: gamma + 1)."""

    @property
    def servers(self) -> tuple[Server, ...]:
        """The pods the variant runs, as its engine lays them out (one for a vLLM server)."""
        return ENGINES[self.engine].servers(self)

    @property
    def endpoint_server(self) -> Server:
        return next(s for s in self.servers if s.endpoint)

    def server_artifact_path(self, server: Server) -> str:
        """A pod's own compiled set: the variant's path, or a folder of it per part (target, draft),
        so two pods of one variant never publish into one set."""
        return f"{self.artifact_path}/{server.part}" if server.part else self.artifact_path

    @property
    def node_groups(self) -> tuple[int, ...]:
        """Devices the variant needs on each node it spans (its servers, by node)."""
        nodes: dict[int, int] = {}
        for server in self.servers:
            nodes[server.node] = nodes.get(server.node, 0) + server.devices
        return tuple(nodes.values())

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
    def max_num_batched_tokens(self) -> int:
        """vllm-neuron's prefill budget: the whole context in one shot up to 16384 tokens, else
        the largest KV segment size (segmented prefill; stackconfig/engines/base.py)."""
        if self.serving.max_num_batched_tokens:
            return self.serving.max_num_batched_tokens
        length = self.serving.max_model_len
        return length if length <= SINGLE_SHOT_PREFILL_MAX else max(KV_SEGMENT_SIZES)

    @property
    def neuron_config(self) -> dict[str, Any]:
        """What the engine compiles with (stackconfig/engines/<engine>.py neuron_config)."""
        return ENGINES[self.engine].neuron_config(self)

    @property
    def prepared_target(self) -> PreparedModel:
        """The target as the store holds it: the hub's files, or FP8 rescaled for Neuron."""
        if self.quantization == "fp8":
            return PreparedModel(self.target, self.target_revision, "neuron-fp8", self.target_info,
                                 bf16_modules=self.target_info.bf16_modules)
        return PreparedModel(self.target, self.target_revision, "hub", self.target_info)

    @property
    def prepared_draft(self) -> PreparedModel | None:
        if not (self.draft and self.draft_info):
            return None
        return PreparedModel(self.draft, self.draft_revision, "hub", self.draft_info)

    @property
    def prepared_models(self) -> tuple[PreparedModel, ...]:
        return (self.prepared_target,) + ((self.prepared_draft,) if self.prepared_draft else ())

    @property
    def store_mounts(self) -> tuple[StoreMount, ...]:
        """The prefixes its servers read, once each (server_store_mounts)."""
        return tuple(dict.fromkeys(m for server in self.servers for m in self.server_store_mounts(server)))

    def server_models(self, server: Server) -> tuple[PreparedModel, ...]:
        """The models one server loads: a vLLM server all of the variant's; a pod of a variant that
        runs several one, the draft's (part "draft") or the target's."""
        if not server.part:
            return self.prepared_models
        return (self.prepared_draft if server.part == "draft" and self.prepared_draft else self.prepared_target,)

    def server_store_mounts(self, server: Server) -> tuple[StoreMount, ...]:
        """The prefixes one server reads: the models it loads, its committed set, its staging sets."""
        path = self.server_artifact_path(server)
        return tuple(StoreMount(p) for p in (*(m.prefix for m in self.server_models(server)), f"{path}/", staging_prefix(path)))

    @property
    def speculative_config(self) -> dict | None:
        if not self.is_speculative:
            return None
        return ENGINES[self.engine].speculative_config(self, {"model": self.draft, "num_speculative_tokens": self.num_speculative_tokens})

    @property
    def compile_settings(self) -> dict:
        """Everything that changes the compiled Neuron graphs or sharded weights."""
        return {
            "engine": self.engine,
            "image": self.image,
            "target": self.target,
            "weights": [m.prefix for m in self.prepared_models],
            "quantization": self.quantization,
            "tensorParallelSize": self.tensor_parallel_size,
            "logicalNeuronCores": self.serving.logical_neuron_cores,
            "maxNumSeqs": self.serving.max_num_seqs,
            "maxModelLen": self.serving.max_model_len,
            "maxNumBatchedTokens": self.max_num_batched_tokens if ENGINES[self.engine].prefill_budget else None,
            "neuronConfig": self.neuron_config,
            "speculativeConfig": self.speculative_config,
            # The stack's own variables (serving.environment), all of them: what a compile reads
            # cannot be listed, since the compiler (NEURON_CC_FLAGS, which frameworks forward to
            # neuronx-cc: Neuron docs, "What is the Neuron Graph Compiler", "PyTorch NeuronX
            # Environment Variables"), torch-neuronx, NxD Inference and vLLM each read their own; a
            # variable that changes nothing compiled costs one compile. Absent when empty, so
            # stacks without any keep their paths.
            **({"environment": self.serving.environment} if self.serving.environment else {}),
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
        return f"{COMPILED_ROOT}{slug(self.target)}/{shape}-{self.compile_fingerprint}"

    @property
    def startup_budget_seconds(self) -> int:
        """How long a first start may take (download, compile, load) before the startup probe gives
        up: it grows with the larger model, 3 to 12 hours; the EKS sample allows ~4.75 h for 32B."""
        params = max(self.target_info.params_billion, self.draft_info.params_billion if self.draft_info else 0)
        return int(min(12 * 3600, max(3 * 3600, 3600 + 450 * params)))

    @property
    def gated_models(self) -> tuple[str, ...]:
        models = [(self.target, self.target_info)] + ([(self.draft, self.draft_info)] if self.draft_info else [])
        return tuple(name for name, info in models if info.gated)


@dataclass(frozen=True)
class BenchmarkSettings:
    input_tokens: int
    output_tokens: int
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
    """Which seed's published figures the report prints beside the measured ones (reporting/seeds.py)."""
    metric_dimensions: str = "names"
    """The CloudWatch dimension values: "names" or the EKS sample's ("eks-sample"; benchmark/pod.py)."""
    load_generator: str = DEFAULT_GENERATOR
    """benchmark.loadGenerator: the registered load generator that drives the run (benchmark/loadgen/)."""
    loads: tuple[Level, ...] = (Level("concurrency", 1),)
    """The load levels, ascending (benchmark.concurrency or benchmark.rate; several: a load sweep)."""

    @property
    def concurrency(self) -> int | None:
        """The concurrency of a run of one concurrency level; None for a sweep or a request rate."""
        if len(self.loads) == 1 and self.loads[0].kind == "concurrency":
            return int(self.loads[0].value)
        return None

    def seconds(self, requests: int, seconds_per_output_token: float) -> float:
        """How long `requests` take at every level, one level after another: a concurrency level
        decodes that many at a time; a rate level sends for requests / rate seconds, and the last
        request then decodes."""
        decode = self.output_tokens * seconds_per_output_token
        return sum(requests * decode / level.value if level.kind == "concurrency" else requests / level.value + decode
                   for level in self.loads)

    def describe_loads(self) -> str:
        """"1 at a time", "at concurrency 1, 2, 4, 8", "at 0.5, 1 requests/s"."""
        kind, values = self.loads[0].kind, ", ".join(f"{level.value:g}" for level in self.loads)
        if kind == "rate":
            return f"at {values} requests/s"
        return f"{values} at a time" if len(self.loads) == 1 else f"at concurrency {values}"

    @property
    def load_levels(self) -> int:
        """Load levels each test case is measured at (`loads`): the one place the study's estimate
        (stackconfig/timeline.py) counts them, so a load list multiplies the cases there."""
        return len(self.loads)


@dataclass(frozen=True)
class GridPoint:
    """One configuration a study's grid adds: a draft at a speculative window, served as an SD
    variant of its own (its own compiled set, validated like a hand-written variant)."""

    variant: str
    draft: str
    window: int


@dataclass(frozen=True)
class StudySettings:
    """`study`: every SD configuration of the stack (hand-written, plus the grid of drafts x
    windows) measured against its baseline by the tuner, repeated, with a tuning report."""

    mode: StudyMode
    """sequential: the tuner scales one SD configuration up at a time beside its baseline (the
    cost of a two-variant stack); parallel: every server up at once, nodes from packing."""
    repeats: int
    """Times each configuration runs every test case; the report's intervals come from them."""
    grid: tuple[GridPoint, ...] = ()
    drafts_alone: dict[str, str] = field(default_factory=dict)
    """study.timeDraftsAlone: variant name -> the plain draft it serves alone, at the stack's
    shape, compared with the baseline like a variant: its TPOT over the baseline's is the
    draft's cost ratio c, measured (an EAGLE3 head cannot run alone: it needs the target)."""
    ttft_target_ms: int | None = None
    tpot_target_ms: int | None = None
    """Goodput counts the requests meeting both targets (each None: not a condition)."""


@dataclass(frozen=True)
class PlatformSpec:
    """What a cluster is built from: network, EKS, identity, the model store. A standalone stack
    builds its own; a shared pairing reads its platform stack's."""

    project: str
    stack: str
    region: str
    """aws:region, validated against the regions botocore knows for EKS."""
    cluster: ClusterSettings
    instance_type: str
    """The accelerator instance type the network's zones are chosen for."""
    retain_model_store: bool
    """False: `pulumi destroy` empties and deletes the bucket. True: it outlives the stack."""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def cluster_name(self) -> str:
        return prefixed(self.stack)

    @property
    def approximate_usd_per_hour(self) -> float:
        """The platform's own hourly cost at the catalog's cited list prices: system nodes, one NAT
        gateway, the control plane at the standard-support rate (supportType STANDARD never pays
        more; `make preflight` asks the Pricing API for the region's prices)."""
        nodes = APPROXIMATE_HOURLY_USD.get(self.cluster.system_node_instance_type, (0.0, ""))[0]
        return (self.cluster.system_node_count * nodes + APPROXIMATE_HOURLY_USD["nat-gateway"][0]
                + APPROXIMATE_HOURLY_USD["eks-standard"][0])

    @property
    def control_plane_log_group(self) -> str:
        """Where EKS sends the control plane's logs: one group per cluster, which EKS creates
        itself when none exists (EKS user guide, "Send control plane logs to CloudWatch Logs")."""
        return f"/aws/eks/{self.cluster_name}/cluster"

    @property
    def container_insights_log_groups(self) -> tuple[str, ...]:
        """The groups Container Insights writes to (CloudWatch user guide, "Container Insights
        ... log groups": application, dataplane, host from Fluent Bit; performance from the
        agent's embedded-metric logs), created by them with no retention when absent."""
        return tuple(f"/aws/containerinsights/{self.cluster_name}/{kind}" for kind in CONTAINER_INSIGHTS_LOG_KINDS)

    @property
    def flow_log_group(self) -> str:
        """Where the VPC's flow logs go (components/platform/flow_logs.py)."""
        return f"/aws/vpc/{self.cluster_name}/flow-logs"

    @property
    def log_groups(self) -> tuple[str, ...]:
        """Every log group the cluster writes to; the program creates each, and `make sweep`
        lists any that a destroy left."""
        return (self.control_plane_log_group, *self.container_insights_log_groups, self.flow_log_group)


@dataclass(frozen=True)
class StackSpec:
    """A model pairing: its capacity, servers and benchmark, on a platform of its own
    (standalone) or on a shared platform stack (`platform: org/project/stack`)."""

    project: str
    stack: str
    region: str
    platform: PlatformSpec
    platform_reference: str | None
    """"org/project/stack" of the shared platform; None when the stack is its own platform."""
    capacity: CapacitySettings
    serving: ServingSettings
    variants: tuple[Variant, ...]
    benchmark: BenchmarkSettings
    tags: dict[str, str] = field(default_factory=dict)
    study: StudySettings | None = None

    @property
    def shared(self) -> bool:
        return self.platform_reference is not None

    @property
    def cluster(self) -> ClusterSettings:
        return self.platform.cluster

    @property
    def cluster_name(self) -> str:
        return self.platform.cluster_name

    @property
    def retain_model_store(self) -> bool:
        return self.platform.retain_model_store

    @property
    def name(self) -> str:
        """The pairing's slug: injective over stack names (stackconfig/naming.py)."""
        return stack_slug(self.stack)

    @property
    def namespace(self) -> str:
        """The pairing's own namespace: servers, claims, volume claim, secret, benchmark."""
        return prefixed(self.stack)

    @property
    def node_pool_name(self) -> str:
        """Name of the pairing's EC2NodeClass and NodePool (cluster-scoped)."""
        return prefixed(self.stack)

    def volume_name(self, mount: StoreMount) -> str:
        """Name of the pairing's PersistentVolume onto one store prefix (cluster-scoped, so
        derived from the stack; a claim binds only its own)."""
        return f"{prefixed(self.stack)}-{mount.key}"

    @property
    def tokenizer_cache_prefix(self) -> str:
        """LLMPerf's tokenizer, downloaded once and restored from here: per pairing, so no pairing's
        benchmark can replace the tokenizer another one counts tokens with."""
        return f"{CACHE_ROOT}{self.name}/tokenizers/"

    @property
    def results_prefix(self) -> str:
        """Where the pairing's benchmark runs go in the (possibly shared) bucket: results/<pairing>/<run-id>/."""
        return f"{RESULTS_ROOT}{self.name}/"

    @property
    def prepared_models(self) -> tuple[PreparedModel, ...]:
        """Every model the variants load, once each, in the variants' order."""
        return tuple(dict.fromkeys(m for v in self.variants for m in v.prepared_models))

    @property
    def store_mounts(self) -> tuple[StoreMount, ...]:
        """Every store prefix a server of the pairing reads, once each: one volume per prefix."""
        return tuple(dict.fromkeys(m for v in self.variants for m in v.store_mounts))

    @property
    def metric_dimensions(self) -> dict[str, dict[str, str]]:
        """Variant and TestCase values the benchmark publishes under and the dashboard queries."""
        return metric_dimensions(self.benchmark.metric_dimensions, [(v.name, v.role) for v in self.variants],
                                 self.benchmark.test_cases)

    @property
    def dashboard_name(self) -> str:
        return f"{prefixed(self.stack)}-llmperf"

    @property
    def device_group_sizes(self) -> tuple[int, ...]:
        """One claim template per size: every server's own device group."""
        return tuple(sorted({s.devices for v in self.variants for s in v.servers}))

    @property
    def sequential(self) -> bool:
        return self.study is not None and self.study.mode == "sequential"

    @property
    def tuned_servers(self) -> tuple[Variant, ...]:
        """The servers the tuner scales (sequential mode: all of them, created at zero replicas);
        in parallel mode, or without a study, none: each runs from `pulumi up` on."""
        return self.variants if self.sequential else ()

    @property
    def parallel_node_count(self) -> int:
        """Nodes for every server at once (first-fit decreasing)."""
        return len(pack_variants(self.variants, self.capacity.shape.neuron_devices))

    @property
    def sequential_node_count(self) -> int:
        """Nodes for the largest single server: in sequential mode the tuner never runs more."""
        node = self.capacity.shape.neuron_devices
        return max(len(pack_variants([v], node)) for v in self.variants)

    @property
    def pairs_fit_together(self) -> bool:
        """Whether every compared pair (a variant and its baseline) fits on the sequential nodes at
        once; if not, the tuner serves one server at a time (the 405B stack: 16 devices each)."""
        node = self.capacity.shape.neuron_devices
        return all(len(pack_variants([v, self.variant(v.baseline)], node)) <= self.sequential_node_count
                   for v in self.variants if v.baseline)

    @property
    def node_count(self) -> int:
        return self.sequential_node_count if self.sequential else self.parallel_node_count

    @property
    def requires_hugging_face_token(self) -> bool:
        return any(v.gated_models for v in self.variants)

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)


def pack_device_groups(group_sizes: list[int], devices_per_node: int,
                       apart: list[str | None] | None = None) -> list[list[int]]:
    """First-fit decreasing packing of device groups onto nodes, all variants served at once.

    Group sizes are powers of two dividing the node size, for which first-fit decreasing is
    optimal and matches how the DRA driver hands out contiguous groups. `apart`, one per group:
    groups with the same key (not None) go on different nodes (a variant whose draft runs on
    another node than its target).
    """
    keys = apart or [None] * len(group_sizes)
    nodes: list[list[int]] = []
    held: list[set[str | None]] = []
    for size, key in sorted(zip(group_sizes, keys), key=lambda item: item[0], reverse=True):
        for node, keys_on_node in zip(nodes, held):
            if sum(node) + size <= devices_per_node and (key is None or key not in keys_on_node):
                node.append(size)
                keys_on_node.add(key)
                break
        else:
            nodes.append([size])
            held.append({key})
    return nodes


def pack_variants(variants: list[Variant] | tuple[Variant, ...], devices_per_node: int) -> list[list[int]]:
    """The nodes the variants' servers need at once: each variant's node groups, those of a variant
    spanning nodes kept apart."""
    sizes = [size for v in variants for size in v.node_groups]
    apart = [v.name if len(v.node_groups) > 1 else None for v in variants for _ in v.node_groups]
    return pack_device_groups(sizes, devices_per_node, apart)
