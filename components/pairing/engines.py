"""What a variant's server runs on each engine: image, arguments and environment.

One function per engine; both start through components/scripts/serve.sh, which restores the
variant's compiled artifacts from the model store into COMPILE_DIR (on the node's NVMe), or
compiles there and publishes them once the server is healthy. The engine decides what COMPILE_DIR
is to vLLM: NxDI's NEURON_COMPILED_ARTIFACTS, or the plugin's VLLM_CACHE_ROOT (its NEFF cache
is $VLLM_CACHE_ROOT/neuron/compile_cache; the plugin's own remote cache tier needs a POSIX file
system, not Mountpoint, and it ignores NEURON_COMPILED_ARTIFACTS: FACTS.md "Serving engines").
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from stackconfig.model import MODEL_STORE_MOUNT_PATH, Variant

from .model_access import token_env

VLLM_PORT = 8000
NODE_CACHE_MOUNT = "/node-cache"


@dataclass(frozen=True)
class Server:
    image: str
    args: list[str]
    """`vllm serve ...` as serve.sh runs it (the image's entrypoint is bypassed; both DLCs'
    entrypoint only runs its arguments anyway: deep-learning-containers common/vllm_entrypoint.py)."""
    env: list[dict]


def model_reference(variant: Variant) -> str:
    """What vLLM loads: the hub id, or the node-cache copy of prepared weights."""
    if variant.weights_path:
        return f"{NODE_CACHE_MOUNT}/{variant.weights_path}"
    return variant.target


def _common_arguments(variant: Variant) -> list[str]:
    return [
        "serve", model_reference(variant),
        "--served-model-name", variant.served_model_name,
        "--tensor-parallel-size", str(variant.tensor_parallel_size),
        "--max-num-seqs", str(variant.serving.max_num_seqs),
        "--max-model-len", str(variant.serving.max_model_len),
        "--port", str(VLLM_PORT),
    ]


def _common_environment(variant: Variant) -> dict[str, str]:
    env = {
        "COMPILE_DIR": f"{NODE_CACHE_MOUNT}/{variant.artifact_path}",
        "ARTIFACT_DIR": f"{MODEL_STORE_MOUNT_PATH}/{variant.artifact_path}",
        "HF_HOME": f"{NODE_CACHE_MOUNT}/huggingface",
        "VLLM_PORT": str(VLLM_PORT),
    }
    if variant.weights_path:
        env["WEIGHTS_STORE"] = f"{MODEL_STORE_MOUNT_PATH}/{variant.weights_path}"
        env["WEIGHTS_DIR"] = model_reference(variant)
    return env


def _speculative_arguments(variant: Variant) -> list[str]:
    if not variant.is_speculative:
        return []
    return ["--speculative-config", json.dumps(variant.speculative_config, sort_keys=True)]


def nxdi_legacy(variant: Variant) -> tuple[list[str], dict[str, str]]:
    """vLLM 0.9.1 (Neuron fork, V0) + NxD Inference, as the seeds ran it."""
    args = _common_arguments(variant) + [
        "--override-neuron-config", json.dumps(variant.neuron_config, sort_keys=True),
    ] + _speculative_arguments(variant)
    env = {
        **_common_environment(variant),
        "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference",
        # Draft-model (fused) speculation exists only on vLLM's V0 Neuron path (FACTS.md).
        "VLLM_USE_V1": "0",
        "VLLM_RPC_TIMEOUT": "100000",
        "NEURON_RT_VIRTUAL_CORE_SIZE": str(variant.serving.logical_neuron_cores),
        # NxDI loads from, or compiles into, this path (the fork's neuronx_distributed loader).
        "NEURON_COMPILED_ARTIFACTS": f"{NODE_CACHE_MOUNT}/{variant.artifact_path}",
    }
    if variant.quantization == "fp8":
        # Let the Neuron compiler read the rescaled FP8 (e4m3fn) weights as FP8_EXP4 (seed 004).
        env["XLA_HANDLE_SPECIAL_SCALAR"] = "1"
        env["UNSAFE_FP8FNCAST"] = "1"
    return args, env


def compilation_timeout_seconds(variant: Variant) -> int:
    """The plugin's compile and execute budgets: the Neuron tutorials set 1200 s (the default
    600 s is too short for large models, Neuron 2.32 quickstart-online-serving.md); scaled up
    here with model size, an assumption of this project."""
    return max(1200, int(120 * variant.target_info.params_billion))


def vllm_neuron(variant: Variant) -> tuple[list[str], dict[str, str]]:
    """The vLLM Neuron plugin (vLLM V1): settings under --additional-config's neuron_config, no
    --device, no VLLM_NEURON_FRAMEWORK, no VLLM_USE_V1 (Neuron 2.32 migration-nxdi-to-vllm-neuron.md)."""
    args = _common_arguments(variant) + [
        "--max-num-batched-tokens", str(variant.max_num_batched_tokens),
        # As the EAGLE3 tutorial serves: repeated benchmark prompts must not hit a prefix cache.
        "--no-enable-prefix-caching",
        "--additional-config", json.dumps({"neuron_config": variant.neuron_config}, sort_keys=True),
    ] + _speculative_arguments(variant)
    if variant.speculation_method == "dflash":
        # DFlash: no async scheduling, no chunked prefill (vllm-neuron features-guide, FACTS.md).
        args += ["--no-async-scheduling", "--no-enable-chunked-prefill"]
    timeout = str(compilation_timeout_seconds(variant))
    env = {
        **_common_environment(variant),
        # The NEFF cache lives under it ($VLLM_CACHE_ROOT/neuron/compile_cache).
        "VLLM_CACHE_ROOT": f"{NODE_CACHE_MOUNT}/{variant.artifact_path}",
        # LNC for the plugin's runtime (Neuron logical-neuroncore-config: NEURON_LOGICAL_NC_CONFIG).
        "NEURON_LOGICAL_NC_CONFIG": str(variant.serving.logical_neuron_cores),
        "VLLM_NEURON_COMPILATION_TIMEOUT": timeout,
        "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": timeout,
    }
    return args, env


ENGINE_RENDERERS = {"nxdi-legacy": nxdi_legacy, "vllm-neuron": vllm_neuron}


def server(variant: Variant, token_secret: str | None) -> Server:
    args, env = ENGINE_RENDERERS[variant.engine](variant)
    env.update(variant.serving.environment)
    return Server(image=variant.image, args=args,
                  env=[{"name": k, "value": v} for k, v in env.items()] + token_env(token_secret))
