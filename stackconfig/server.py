"""What a variant's server is told on each engine: its `vllm serve` arguments and its environment,
as plain data from the typed Variant (the Deployment around it is components/pairing/vllm_variant.py).

Both engines start through components/pairing/scripts/serve.sh, which restores the variant's
compiled artifacts from the model store into COMPILE_DIR (on the node's NVMe), or compiles there
and publishes them once the server is healthy. The engine decides what COMPILE_DIR is to vLLM:
NxDI's NEURON_COMPILED_ARTIFACTS, or the plugin's VLLM_CACHE_ROOT (its NEFF cache is
$VLLM_CACHE_ROOT/neuron/compile_cache; the plugin's own remote cache tier needs a POSIX file
system, not Mountpoint, and it ignores NEURON_COMPILED_ARTIFACTS: docs/facts.md, "Serving engines
on Trainium2").

The environment is a table per engine, name -> value (None: not set for this variant), so the
names the program sets are known without rendering a variant: RESERVED_ENVIRONMENT, which
validation refuses in `serving.environment`.
"""
from __future__ import annotations

import json

from .catalog import BF16_BYTES, Architecture
from .engines import ENGINES, Server, Setting
from .model import Variant
from .store import MODEL_STORE_MOUNT_PATH, NODE_CACHE_MOUNT, PreparedModel, gib, staging_prefix

VLLM_PORT = 8000
LINUX_CAPABILITIES = frozenset({
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN", "DAC_OVERRIDE",
    "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN",
    "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID",
    "SETPCAP", "SETUID", "SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
    "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM"})
"""The capabilities a server may be given back (serving.addCapabilities), as Kubernetes names them:
Linux's, without the CAP_ prefix (capabilities(7))."""
NEVER_ADDED = {"NET_RAW": "the servers never keep NET_RAW (security/checkov CKV_K8S_28 may never be allowlisted for them: "
                          "offline/scan.py NEVER_ALLOWED)"}
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
"""What Pod Security "baseline" lets a container add (Kubernetes Pod Security Standards, Baseline,
"Capabilities"): a server given any other runs only in a namespace that enforces no level."""
TOKEN_VARIABLE = "HF_TOKEN"
"""The Hugging Face token's variable: never set by the program, and refused in a stack's environment."""
TOKEN_PATH_VARIABLE = "HF_TOKEN_PATH"
TOKEN_FILE = "/var/run/secrets/huggingface/token"
"""Where the pods that download read the token, from the stack's Secret (components/pairing/model_access.py)."""


def local_copy(model: PreparedModel) -> str:
    """Where a prepared model is copied on the node's NVMe, once per node: what vLLM loads. The
    servers never reach the hub (HF_HUB_OFFLINE), so a 405B BF16 compile loads from this path, in
    the checkpoint's dtype, as seed 004 did, not through a float32 from_pretrained of a hub id."""
    return f"{NODE_CACHE_MOUNT}/{model.prefix.rstrip('/')}"


def sharded_heads(arch: Architecture, tensor_parallel_size: int) -> tuple[int, int]:
    """How many attention heads and KV heads each layer's projections have in the sharded checkpoint
    (NxD Inference modules/attention/gqa.py, determine_sharding_strategy, get_shardable_head_counts,
    and the preshard_hook of GroupQueryAttention_QKV and _O). The attention heads are zero-padded to
    a multiple of the TP degree (neuronx_distributed parallel_layers/pad.py
    get_number_of_extra_heads), in q_proj and o_proj. Multi-head attention: the KV heads are padded
    with them. Grouped-query: KV heads that are a multiple of the TP degree stay; else they are
    replicated to the TP degree where it is a multiple of them (REPLICATE_TO_TP_DEGREE), otherwise
    replicated to one per attention head and zero-padded with the attention heads (CONVERT_TO_MHA)."""
    attention = -(-arch.attention_heads // tensor_parallel_size) * tensor_parallel_size
    if arch.attention_heads != arch.kv_heads:
        if arch.kv_heads % tensor_parallel_size == 0:
            return attention, arch.kv_heads
        if tensor_parallel_size % arch.kv_heads == 0:
            return attention, tensor_parallel_size
    return attention, attention


def sharded_checkpoint_bytes(model: PreparedModel, tensor_parallel_size: int) -> int:
    """What save_sharded_checkpoint writes for one model: its weights in the dtypes it is served in
    (FP8 stays FP8), with the heads the sharding adds, replicated or zero-padded, in BF16: per
    attention head a q and an o weight, per KV head a k and a v weight, each hidden x head size (a
    model of unknown architecture: its checkpoint alone)."""
    arch = model.info.architecture
    if arch is None:
        return model.checkpoint_bytes
    attention, kv = sharded_heads(arch, tensor_parallel_size)
    added_heads = attention - arch.attention_heads + kv - arch.kv_heads
    return model.checkpoint_bytes + arch.layers * 2 * arch.hidden_size * arch.head_size * added_heads * BF16_BYTES


def compiled_set_bytes(variant: Variant) -> int:
    """What an engine that saves sharded weights (nxdi-legacy) writes beside its graphs: every model
    it compiles (a fused draft's too). Graphs alone (the plugin's cache) are of a size nobody
    publishes: 0 here."""
    if not ENGINES[variant.engine].saves_sharded_weights:
        return 0
    return sum(sharded_checkpoint_bytes(m, variant.tensor_parallel_size) for m in variant.prepared_models)


def compiled_set_gib(variant: Variant) -> int:
    return gib(compiled_set_bytes(variant)) if compiled_set_bytes(variant) else 0


GRAPHS_AND_CACHES_GIB = 50
"""Room beside weights and the compiled set: the graphs (NEFFs), the hub and compiler caches; no
source publishes their size for these shapes."""


def node_cache_gib(variant: Variant) -> int:
    """The server's cache on the node's NVMe (an emptyDir): its prepared models as the store holds
    them, its compiled set (sharded weights with replicated and padded heads) and room for graphs and
    caches, with a tenth to spare."""
    weights = sum(m.checkpoint_bytes for m in variant.prepared_models)
    total = weights + compiled_set_bytes(variant) + GRAPHS_AND_CACHES_GIB * 2 ** 30
    return gib(total * 11 // 10)


def model_reference(variant: Variant) -> str:
    return local_copy(variant.prepared_target)


def _common_arguments(variant: Variant) -> list[str]:
    return [
        "serve", model_reference(variant),
        "--served-model-name", variant.served_model_name,
        "--tensor-parallel-size", str(variant.tensor_parallel_size),
        "--max-num-seqs", str(variant.serving.max_num_seqs),
        "--max-model-len", str(variant.serving.max_model_len),
        "--port", str(VLLM_PORT),
    ]


def _speculative_arguments(variant: Variant) -> list[str]:
    if not variant.is_speculative or variant.prepared_draft is None:
        return []
    config = {**variant.speculative_config, "model": local_copy(variant.prepared_draft)}
    return ["--speculative-config", json.dumps(config, sort_keys=True)]


# What serve.sh reads, for every engine; each engine adds its own (stackconfig/engines/<engine>.py).
COMMON_ENVIRONMENT: dict[str, Setting] = {
    "COMPILE_DIR": lambda v: f"{NODE_CACHE_MOUNT}/{v.artifact_path}",
    "ARTIFACT_DIR": lambda v: f"{MODEL_STORE_MOUNT_PATH}/{v.artifact_path}",
    "STAGING_DIR": lambda v: f"{MODEL_STORE_MOUNT_PATH}/{staging_prefix(v.artifact_path).rstrip('/')}",
    "HF_HOME": lambda v: f"{NODE_CACHE_MOUNT}/huggingface",
    "VLLM_PORT": lambda v: str(VLLM_PORT),
    # What serve.sh starts (the engine's program: vllm, or python3 for distributed/'s servers).
    "SERVER_PROGRAM": lambda v: ENGINES[v.engine].program,
    # The prepared models: serve.sh waits for each one's marker in the store, then copies it here.
    "WEIGHTS_STORE": lambda v: f"{MODEL_STORE_MOUNT_PATH}/{v.prepared_target.prefix.rstrip('/')}",
    "WEIGHTS_DIR": lambda v: model_reference(v),
    "DRAFT_WEIGHTS_STORE": lambda v: f"{MODEL_STORE_MOUNT_PATH}/{v.prepared_draft.prefix.rstrip('/')}" if v.prepared_draft else None,
    "DRAFT_WEIGHTS_DIR": lambda v: local_copy(v.prepared_draft) if v.prepared_draft else None,
    # Never the hub: every file vLLM and the tokenizer read is in the local copies.
    "HF_HUB_OFFLINE": lambda v: "1",
    "TRANSFORMERS_OFFLINE": lambda v: "1",
}

RESERVED_ENVIRONMENT = frozenset({*COMMON_ENVIRONMENT, *(n for engine in ENGINES.values() for n in engine.environment),
                                  TOKEN_VARIABLE, TOKEN_PATH_VARIABLE})
"""Every variable the program sets or serve.sh reads: a stack may add others only."""


def environment(variant: Variant) -> dict[str, str]:
    """The program's environment for the variant, then the stack's own (serving.environment)."""
    table = {**COMMON_ENVIRONMENT, **ENGINES[variant.engine].environment}
    rendered = {name: value for name, setting in table.items() if (value := setting(variant)) is not None}
    return {**rendered, **variant.serving.environment}


def server_environment(variant: Variant, server: Server) -> dict[str, str]:
    """environment(variant) for one pod of a variant that runs several (stackconfig/engines/ Server):
    its own compiled set (Variant.server_artifact_path), and the one model it loads, the draft for
    the draft's pod, the target for the others."""
    path = variant.server_artifact_path(server)
    (model,) = variant.server_models(server)
    rendered = {name: value for name, value in environment(variant).items() if not name.startswith("DRAFT_WEIGHTS_")}
    return {**rendered,
            "COMPILE_DIR": f"{NODE_CACHE_MOUNT}/{path}",
            "ARTIFACT_DIR": f"{MODEL_STORE_MOUNT_PATH}/{path}",
            "STAGING_DIR": f"{MODEL_STORE_MOUNT_PATH}/{staging_prefix(path).rstrip('/')}",
            "WEIGHTS_STORE": f"{MODEL_STORE_MOUNT_PATH}/{model.prefix.rstrip('/')}",
            "WEIGHTS_DIR": local_copy(model)}


def arguments(variant: Variant) -> list[str]:
    """`vllm serve ...` as serve.sh runs it (the image's entrypoint is bypassed; both DLCs'
    entrypoint only runs its arguments anyway: deep-learning-containers common/vllm_entrypoint.py)."""
    return ENGINES[variant.engine].server_arguments(variant, _common_arguments(variant), _speculative_arguments(variant))
