"""vllm-neuron: the vLLM Neuron plugin (vllm-project/vllm-neuron, Beta), the supported path; it
speculates with EAGLE3 heads (and DFlash), not with plain draft models (Neuron SDK 2.32.0
vllm-neuron/docs/getting-started/migration-nxdi-to-vllm-neuron.md: "Vanilla draft-model
speculative decoding is not supported; migrate to an EAGLE3 draft")."""
from __future__ import annotations

import json
from typing import Any

from ..store import NODE_CACHE_MOUNT
from ..versions import ENGINE_IMAGES
from .base import EngineInfo, Setting, Variant, powers_of_two_up_to, sdk_text
from .failure import FIRST_START, EngineFailure, Source

NAME = "vllm-neuron"


def neuron_config(variant: Variant) -> dict[str, Any]:
    """--additional-config's neuron_config: the plugin's buckets, ending at the limits."""
    return {
        "num_seqs_buckets": powers_of_two_up_to(variant.serving.max_num_seqs),
        "num_batched_tokens_buckets": powers_of_two_up_to(variant.max_num_batched_tokens, start=128),
        # Sampling on the device, greedy: speculation needs on-device sampling (Neuron 2.32
        # vllm-neuron features-guide.md L596-603), and an empty mapping has no documented
        # meaning (plugin_failures below). Every variant, so baseline
        # and SD decode alike; validation keeps the benchmark's requests greedy to match.
        "on_device_sampling_config": {"all_greedy": True},
        **variant.serving.neuron_config,
        **variant.neuron_config_extra,
    }


def speculative_config(variant: Variant, config: dict[str, Any]) -> dict[str, Any]:
    # The plugin's keys: method, model, num_speculative_tokens (Neuron 2.32
    # vllm-neuron/docs/design/speculation/speculative_decoding_design.md).
    return {"method": variant.speculation_method, **config}


def server_arguments(variant: Variant, common: list[str], speculative: list[str]) -> list[str]:
    """Settings under --additional-config's neuron_config, no --device (Neuron 2.32
    migration-nxdi-to-vllm-neuron.md)."""
    args = common + [
        "--max-num-batched-tokens", str(variant.max_num_batched_tokens),
        # As the EAGLE3 tutorial serves: repeated benchmark prompts must not hit a prefix cache.
        "--no-enable-prefix-caching",
        "--additional-config", json.dumps({"neuron_config": variant.neuron_config}, sort_keys=True),
    ] + speculative
    if variant.speculation_method == "dflash":
        # DFlash: no async scheduling, no chunked prefill (vllm-neuron features-guide; docs/facts.md, "Serving engines on Trainium2").
        args += ["--no-async-scheduling", "--no-enable-chunked-prefill"]
    return args


def compilation_timeout_seconds(variant: Variant) -> int:
    """The plugin's compile and execute budgets: the Neuron tutorials set 1200 s (the default
    600 s is too short for large models, Neuron 2.32 quickstart-online-serving.md); scaled up
    here with model size, an assumption of this project."""
    return max(1200, int(120 * variant.target_info.params_billion))


# The vLLM Neuron plugin (vLLM V1): no VLLM_NEURON_FRAMEWORK, no VLLM_USE_V1 (Neuron 2.32
# migration-nxdi-to-vllm-neuron.md).
ENVIRONMENT: dict[str, Setting] = {
    # The NEFF cache lives under it ($VLLM_CACHE_ROOT/neuron/compile_cache).
    "VLLM_CACHE_ROOT": lambda v: f"{NODE_CACHE_MOUNT}/{v.artifact_path}",
    # LNC for the plugin's runtime (Neuron logical-neuroncore-config: NEURON_LOGICAL_NC_CONFIG).
    "NEURON_LOGICAL_NC_CONFIG": lambda v: str(v.serving.logical_neuron_cores),
    "VLLM_NEURON_COMPILATION_TIMEOUT": lambda v: str(compilation_timeout_seconds(v)),
    "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": lambda v: str(compilation_timeout_seconds(v)),
}


def _plugin_docs(path: str, lines: str) -> Source:
    return Source("aws-neuron/aws-neuron-sdk", "v2.32.0", "a3247f5b8c305f9b70a19993acb306122e736eec",
                  f"vllm-neuron/docs/{path}", lines)


def plugin_failures(variant: Variant, args: list[str]) -> list[EngineFailure]:
    """The plugin builds its configuration from the arguments on every start; what a second start
    reuses is compiled graphs in its cache ($VLLM_CACHE_ROOT/neuron/compile_cache: docs/facts.md,
    "Serving engines on Trainium2"), not a saved configuration, so one start stands for both."""
    neuron = json.loads(args[args.index("--additional-config") + 1])["neuron_config"]
    sampling = neuron.get("on_device_sampling_config")
    failures = []
    if sampling == {}:
        # The documentation gives no meaning to an empty mapping and disagrees on the default.
        failures.append(EngineFailure(FIRST_START, "on_device_sampling_config",
                                      "an empty mapping: the reference gives null, CPU sampling, as the default while the features "
                                      "guide says on-device sampling is on by default; name its keys (all_greedy)",
                                      _plugin_docs("guides/reference-configuration.md", "79")))
    if variant.is_speculative and not sampling:
        failures.append(EngineFailure(FIRST_START, "on_device_sampling_config",
                                      "speculative decoding rejects draft tokens on the device, which requires on_device_sampling_config",
                                      _plugin_docs("guides/features-guide.md", "596-603")))
    return failures


def serves_greedily(variant: Variant, request: dict[str, Any]) -> bool:
    """Whatever the request asks: the program renders on_device_sampling_config {"all_greedy": true}
    (neuron_config)."""
    return True


PLUGIN_FAMILIES_WITHOUT_RECIPE: dict[str, tuple[int, int]] = {"qwen3": (2, 32)}
"""Model families the plugin's documentation gives no text-generation recipe for, up to and
including this SDK. Neuron 2.32.0 (vllm-neuron/docs/model-recipes/index.md at aws-neuron-sdk
v2.32.0) has recipes for Llama 3, GPT-OSS, Qwen3-VL and Qwen3-Embedding only. The plugin's own
Qwen3 text recipe (vllm-project/vllm-neuron docs/model-recipes/qwen3.md, dated 2026-07-23: dense
Qwen3 up to 32B, BF16, EAGLE3) is in no release whose image this program could confirm."""


def unserved_family(target: Any, sdk: tuple[int, int]) -> str | None:
    last_without = PLUGIN_FAMILIES_WITHOUT_RECIPE.get(target.tokenizer_family)
    if last_without and sdk <= last_without:
        return (f"the vLLM Neuron plugin of Neuron {sdk_text(sdk)} documents no text-generation recipe for "
                f"{target.tokenizer_family} models (its model recipes: Llama 3, GPT-OSS, Qwen3-VL, Qwen3-Embedding); "
                "serve it on nxdi-legacy, or pin a newer plugin image that has the recipe (serving.image)")
    return None


ENGINE = EngineInfo(
    name=NAME,
    image=ENGINE_IMAGES[NAME].version,
    methods=("eagle3", "dflash"),
    neuron_config_fields="vllm-neuron-0.24-neuron-config-fields.json",
    support="Beta; the supported serving path on Trn2/Trn3",
    # The release whose documentation the checks restate (docs/engines.md); a newer image is
    # the user's to pin (serving.image).
    sdks=((2, 32), None),
    program_keys=frozenset({"num_seqs_buckets", "num_batched_tokens_buckets", "on_device_sampling_config"}),
    neuron_config=neuron_config,
    speculative_config=speculative_config,
    server_arguments=server_arguments,
    environment=ENVIRONMENT,
    failures=plugin_failures,
    serves_greedily=serves_greedily,
    prefill_budget=True,
    draft_max_model_len_refused="vllm-neuron drafts share the target's length; the plugin has no draft max_model_len",
    unserved_family=unserved_family,
    greedy_only="on_device_sampling_config all_greedy, stackconfig/engines/vllm_neuron.py; the plugin's on-device sampler is "
                "documented for temperature 0 only: Neuron 2.32 vllm-neuron/docs/design/vllm/additional-config.md L282-284",
)
