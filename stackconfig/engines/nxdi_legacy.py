"""nxdi-legacy: vLLM 0.9.1 (the Neuron fork, V0) with NxD Inference, the seeds' engine and the only
one that runs plain draft-model (fused) speculation. NxD Inference is in maintenance since Neuron
2.30 and its support on Trn2/Trn3 ends with Neuron 2.34 (Neuron announcement
`announce-eos-nxdi-nxd-core-inference`, 2026-10-16)."""
from __future__ import annotations

import json
from typing import Any

from ..catalog import all_modules
from ..store import NODE_CACHE_MOUNT
from ..versions import ENGINE_IMAGES
from .base import EngineInfo, Setting, Variant

NAME = "nxdi-legacy"


def neuron_config(variant: Variant) -> dict[str, Any]:
    """--override-neuron-config: NxDI NeuronConfig fields on top of the fork's defaults."""
    config: dict[str, Any] = {"save_sharded_checkpoint": True, **variant.serving.neuron_config, **variant.neuron_config_extra}
    if variant.is_speculative:
        # NxDI builds fused speculation from vLLM's speculative config whatever its method;
        # EAGLE needs its own switch on top (docs/facts.md, "vLLM on Neuron").
        config["enable_fused_speculation"] = True
        if variant.speculation_method == "eagle":
            config["enable_eagle_speculation"] = True
    if variant.quantization == "fp8":
        # Seed 004's FP8 kernels, as NeuronConfig names them (its vLLM command hyphenated
        # them, which NxDI ignores with a warning).
        config["quantized_mlp_kernel_enabled"] = True
        config["quantization_type"] = "per_channel_symmetric"
        config["rmsnorm_quantize_kernel_enabled"] = True
        # What stays BF16 (NxDI asserts the list exists with the QKV kernel on a quantized
        # model: stackconfig/semantics.py). The draft is a deep copy of the target's config,
        # so it carries the FP8 flags and would inherit the target's list: the 405B tutorial
        # gives a BF16 draft model its own, every module it has (an EAGLE head keeps the
        # inherited one).
        config["modules_to_not_convert"] = list(variant.target_info.bf16_modules)
        if variant.is_speculative and variant.draft_info and variant.draft_info.kind == "model":
            config["draft_model_modules_to_not_convert"] = list(all_modules(variant.draft_info.layers))
    return config


def speculative_config(variant: Variant, config: dict[str, Any]) -> dict[str, Any]:
    config = {**config, "max_model_len": variant.draft_max_model_len}
    # A plain draft gets no method: vLLM then selects draft_model, as the Neuron fork's own
    # examples/offline_inference/neuron_speculation.py does; "eagle" would wrap the draft's
    # config as an EAGLE head.
    if variant.speculation_method == "eagle":
        config["method"] = "eagle"
    return config


def server_arguments(variant: Variant, common: list[str], speculative: list[str]) -> list[str]:
    return common + ["--override-neuron-config", json.dumps(variant.neuron_config, sort_keys=True)] + speculative


# vLLM 0.9.1 (Neuron fork, V0) + NxD Inference, as the source documents ran it.
ENVIRONMENT: dict[str, Setting] = {
    "VLLM_NEURON_FRAMEWORK": lambda v: "neuronx-distributed-inference",
    # Draft-model (fused) speculation exists only on vLLM's V0 Neuron path (docs/facts.md, "vLLM on Neuron").
    "VLLM_USE_V1": lambda v: "0",
    "VLLM_RPC_TIMEOUT": lambda v: "100000",
    "NEURON_RT_VIRTUAL_CORE_SIZE": lambda v: str(v.serving.logical_neuron_cores),
    # NxDI loads from, or compiles into, this path (the fork's neuronx_distributed loader).
    "NEURON_COMPILED_ARTIFACTS": lambda v: f"{NODE_CACHE_MOUNT}/{v.artifact_path}",
    # Let the Neuron compiler read rescaled FP8 (e4m3fn) weights as FP8_EXP4 (the 405B tutorial).
    "XLA_HANDLE_SPECIAL_SCALAR": lambda v: "1" if v.quantization == "fp8" else None,
    "UNSAFE_FP8FNCAST": lambda v: "1" if v.quantization == "fp8" else None,
}


ENGINE = EngineInfo(
    name=NAME,
    image=ENGINE_IMAGES[NAME].version,
    methods=("draft_model", "eagle"),
    neuron_config_fields="nxdi-0.6.10598-neuron-config-fields.json",
    support="maintenance since Neuron 2.30; end of support on Trn2/Trn3 with Neuron 2.34",
    # From the image whose engine was read (docs/engines.md) to the last release that supports
    # NxD Inference on Trn2: "Starting with Neuron Release 2.34, Neuron will end support for the
    # NxD Inference library ... on Trn2 and Trn3 instances" (Neuron announcement
    # announce-eos-nxdi-nxd-core-inference, 2026-10-16). Frozen on purpose: migrate to vllm-neuron.
    sdks=((2, 26), (2, 33)),
    program_keys=frozenset({"tp_degree", "batch_size", "seq_len", "max_length", "speculation_length", "enable_fused_speculation",
                            "enable_eagle_speculation", "save_sharded_checkpoint", "logical_nc_config", "logical_neuron_cores",
                            "quantized_mlp_kernel_enabled", "quantization_type", "rmsnorm_quantize_kernel_enabled",
                            "modules_to_not_convert", "draft_model_modules_to_not_convert"}),
    neuron_config=neuron_config,
    speculative_config=speculative_config,
    server_arguments=server_arguments,
    environment=ENVIRONMENT,
    # save_sharded_checkpoint (neuron_config): the compiled set holds every compiled model's shards.
    saves_sharded_weights=True,
)
