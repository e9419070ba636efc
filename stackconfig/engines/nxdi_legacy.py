"""nxdi-legacy: vLLM 0.9.1 (the Neuron fork, V0) with NxD Inference, the seeds' engine and the only
one that runs plain draft-model (fused) speculation. NxD Inference is in maintenance since Neuron
2.30 and its support on Trn2/Trn3 ends with Neuron 2.34 (Neuron announcement
`announce-eos-nxdi-nxd-core-inference`, 2026-10-16)."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field, fields
from typing import Any

from ..catalog import all_modules
from ..store import NODE_CACHE_MOUNT
from ..versions import ENGINE_IMAGES
from .base import EngineInfo, Setting, Variant
from .failure import FIRST_START, RESTART, EngineFailure, Source

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
        # model: nxdi_neuron_config below). The draft is a deep copy of the target's config,
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


def _nxdi(path: str, lines: str) -> Source:
    return Source("aws-neuron/neuronx-distributed-inference", "v0.6.10598", "e07f0567ad8b77969b0f6eec650234ecb7359419",
                  f"src/neuronx_distributed_inference/{path}", lines)


FORK_RELEASE = ("neuron-2.24-vllm-v0.7.2", "490ab20f123913937456e9ff8047a88f0b18a623")
"""The vLLM Neuron fork (aws-neuron/upstreaming-to-vllm) as read for its Neuron loader and runners:
its newest readable release branch (2025-06-20), standing in for branch 2.26.1, which the image
clones and which is not public. Where this branch and the fork's main differ on Neuron behaviour,
the 2.26.1 image behaved as this branch does: it served the seeds' Qwen3-1.7B draft (16 attention
heads) at TP 32, which main refuses (docs/engines.md, "Release branch and main of the fork")."""


def _fork(path: str, lines: str) -> Source:
    branch, commit = FORK_RELEASE
    return Source("aws-neuron/upstreaming-to-vllm", f"{branch}, standing in for branch 2.26.1", commit, f"vllm/{path}", lines)


RUNNER_SAMPLING_READ = _fork("worker/neuronx_distributed_model_runner.py", "93-96")
"""Where the fork's runner reads the sampling config by attribute (.global_topk)."""


TUTORIAL_405B = Source("aws-neuron/aws-neuron-sdk", "master of 2026-08-21", "81ce03ae",
                       "libraries/nxd-inference/tutorials/trn2-llama3.1-405b-speculative-tutorial.rst", "98-104, 324-330")
"""The known issue it notes since Neuron 2.22 (commit 2ae3525e), when it dropped the 1024 bucket."""


# ---------------------------------------------------------------------------------------------
# NxD Inference v0.6.10598


@dataclass
class OnDeviceSampling:
    """NxDI's OnDeviceSamplingConfig object, with its defaults (models/config.py L808-818). The
    engine reads it by attribute; a plain dict in its place fails where it is read."""

    do_sample: bool = False
    top_k: int = 1
    top_p: float = 1.0
    temperature: float = 1.0
    dynamic: bool = False
    deterministic: bool = False
    global_topk: int = 256

    @classmethod
    def from_mapping(cls, given: dict[str, Any]) -> OnDeviceSampling:
        # The constructor pops the keys it knows and ignores the rest.
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name in given})


KERNEL_FLAGS = ("qkv_kernel_enabled", "attn_kernel_enabled", "mlp_kernel_enabled", "quantized_mlp_kernel_enabled")
SMALLEST_SAFE_KERNEL_BUCKET = 1025
"""The 405B tutorial's known issue: kernels with a bucket of 1024 tokens or less "may lead to
Numerical Error" at inference (RuntimeError ... status=1003); it dropped its 1024 bucket for it."""


def nxdi_neuron_config(kwargs: dict[str, Any], start: str, failures: list[EngineFailure]) -> dict[str, Any]:
    """`NeuronConfig(**kwargs)`: the defaults and checks of its constructor that the keys this
    program renders reach (models/config.py). Returns the constructed config as a dict."""
    config = copy.deepcopy(kwargs)
    seq_len = config.get("seq_len")
    config.setdefault("max_context_length", seq_len)  # L143
    config.setdefault("max_length", seq_len)  # L146
    if config["max_context_length"] > config["max_length"]:
        failures.append(EngineFailure(start, "max_context_length", "AssertionError: max_context_length cannot be more than max_length",
                                      _nxdi("models/config.py", "148")))
    sampling = config.get("on_device_sampling_config")
    if type(sampling) is dict:  # only a dict given to the constructor becomes the object
        config["on_device_sampling_config"] = OnDeviceSampling.from_mapping(sampling)  # L182-186
    for name, limit, lines in (("context_encoding_buckets", "max_context_length", "198-202"),
                               ("token_generation_buckets", "max_length", "203-207")):
        buckets = config.get(name)
        if buckets and max(buckets) > config[limit]:
            failures.append(EngineFailure(start, name, f"AssertionError: bucket {max(buckets)} should be <= {config[limit]}",
                                          _nxdi("models/config.py", lines)))
    if config.get("quantized") and not config.get("quantized_checkpoints_path"):
        failures.append(EngineFailure(start, "quantized", "AssertionError: quantized_checkpoints_path is required",
                                      _nxdi("models/config.py", "210-215")))
    if config.get("rmsnorm_quantize_kernel_enabled") and not config.get("quantized_mlp_kernel_enabled"):
        failures.append(EngineFailure(start, "rmsnorm_quantize_kernel_enabled",
                                      "AssertionError: quantized_mlp_kernel must be enabled to use rmsnorm_quantize_kernel!",
                                      _nxdi("models/config.py", "419-422")))
    # is_mlp_quantized() is quantized_mlp_kernel_enabled or activation_quantization_type (L561-562).
    quantized = config.get("quantized") or config.get("quantized_mlp_kernel_enabled") or config.get("activation_quantization_type")
    if quantized and config.get("qkv_kernel_enabled") and not config.get("modules_to_not_convert"):
        failures.append(EngineFailure(start, "modules_to_not_convert",
                                      "AssertionError: Could not find modules_to_not_convert for quantized model.",
                                      _nxdi("models/config.py", "425-429")))
    return config


def context_buckets(config: dict[str, Any]) -> list[int]:
    """The prefill buckets NxDI compiles (modules/autobucketing.py L149-200, no prefix caching):
    one of max_context_length without bucketing, else the list given, else powers of two from
    128 (generate_buckets, L8-19)."""
    length = config["max_context_length"]
    if not config.get("enable_bucketing"):
        return [length]
    return list(config.get("context_encoding_buckets") or _powers_of_two_buckets(length))


def token_generation_buckets(config: dict[str, Any]) -> list[int]:
    """The decode buckets (autobucketing.py L203-290: the same rule up to max_length)."""
    length = config["max_length"]
    if not config.get("enable_bucketing"):
        return [length]
    return list(config.get("token_generation_buckets") or _powers_of_two_buckets(length))


def _powers_of_two_buckets(length: int, smallest: int = 128) -> list[int]:
    """generate_buckets(128, length) (autobucketing.py L8-19)."""
    if length == smallest:
        return [length]
    return [2 ** i for i in range(int(math.log2(smallest)), round(math.log2(length)))] + [length]


def _kernel_buckets(config: dict[str, Any], start: str, failures: list[EngineFailure]) -> None:
    if not any(config.get(flag) for flag in KERNEL_FLAGS):
        return
    for name, buckets in (("context_encoding_buckets", context_buckets(config)),
                          ("token_generation_buckets", token_generation_buckets(config))):
        small = [b for b in buckets if b < SMALLEST_SAFE_KERNEL_BUCKET]
        if small:
            failures.append(EngineFailure(start, name, f"buckets {small} with kernels enabled may fail with 'RuntimeError: Failed to "
                                                       "execute the model status=1003 message=Numerical Error' (a known issue)",
                                          TUTORIAL_405B))


# ---------------------------------------------------------------------------------------------
# The vLLM Neuron fork's loader (legacy engine) over NxD Inference: lines of
# vllm/model_executor/model_loader/neuronx_distributed.py on FORK_RELEASE unless a file is named.


def fork_defaults(variant: Variant) -> dict[str, Any]:
    """The neuron config the fork builds from vLLM's arguments before applying the override:
    _get_default_neuron_config (L603-655) for a baseline, _get_default_speculation_config
    (L658-691) for speculation. The keys the checks read; they are the branch's values without
    chunked prefill, which vLLM leaves off on Neuron unless asked (engine/arg_utils.py
    L1121-1150) and the program never asks for."""
    serving = variant.serving
    common = {"tp_degree": variant.tensor_parallel_size, "batch_size": serving.max_num_seqs,
              "max_context_length": serving.max_model_len, "seq_len": serving.max_model_len, "enable_bucketing": True,
              "quantized": False}
    if variant.is_speculative:
        return {**common, "speculation_length": variant.num_speculative_tokens, "enable_fused_speculation": True,
                "on_device_sampling_config": {"top_k": 1, "do_sample": False}}
    return {**common, "on_device_sampling_config": OnDeviceSampling(dynamic=True, deterministic=False)}


@dataclass
class LoadedModel:
    """What a start leaves behind: the target's neuron config, the draft's, and (first start)
    the config.json the compile saved with the artifacts."""

    target: dict[str, Any]
    draft: dict[str, Any] | None = None
    saved: str = ""
    failures: list[EngineFailure] = field(default_factory=list)


def _draft_config(target: dict[str, Any]) -> dict[str, Any]:
    """The fork's draft config for fused speculation: a deep copy of the target's, not
    re-validated (NeuronSpeculationCausalLM.load_weights, L519-533)."""
    draft = copy.deepcopy(target)
    eagle = target.get("enable_eagle_speculation")
    if not eagle:
        draft["speculation_length"] = 0
    draft["trace_tokengen_model"] = True
    draft["enable_fused_speculation"] = False
    if target.get("draft_model_modules_to_not_convert"):
        draft["modules_to_not_convert"] = target["draft_model_modules_to_not_convert"]
    if eagle:
        draft["is_eagle_draft"] = True
        draft["sequence_parallel_enabled"] = False
    return draft


def _to_json(config: dict[str, Any]) -> dict[str, Any]:
    """InferenceConfig.to_json_string (models/config.py L705-707, to_dict L71-86): objects
    become plain dicts of their attributes."""
    return json.loads(json.dumps(config, default=lambda o: o.__dict__))


def legacy_first_start(variant: Variant, override: dict[str, Any]) -> LoadedModel:
    """An empty artifacts folder: the fork merges its defaults with the override (a shallow
    update, L694-703), constructs the target's NeuronConfig from the result (L218-219, L513-514),
    derives the draft's, and compiles, which saves config.json before tracing
    (application_base.py L269)."""
    failures: list[EngineFailure] = []
    merged = {**fork_defaults(variant), **override}
    target = nxdi_neuron_config(merged, FIRST_START, failures)
    _kernel_buckets(target, FIRST_START, failures)
    draft = _draft_config(target) if variant.is_speculative else None
    saved = {"neuron_config": _to_json(target)}
    if draft is not None:
        saved["fused_spec_config"] = {"draft_config": {"neuron_config": _to_json(draft)}}
    loaded = LoadedModel(target, draft, json.dumps(saved, sort_keys=True), failures)
    _serve(loaded, FIRST_START)
    return loaded


def legacy_reload(saved: str, override: dict[str, Any]) -> LoadedModel:
    """Artifacts restored into NEURON_COMPILED_ARTIFACTS: the application loads config.json
    (application_base.py L79-80), which constructs the target's NeuronConfig and the draft's again
    (InferenceConfig.from_json_string, models/config.py L737-784). The fork then copies every
    override key onto the loaded target config with setattr: no conversion, no validation
    (L239-245, L556-562). Only FileNotFoundError and ValueError make it recompile (L251-254,
    L567-570); any other error stops the server."""
    failures: list[EngineFailure] = []
    document = json.loads(saved)
    target = nxdi_neuron_config(document["neuron_config"], RESTART, failures)
    draft_saved = (document.get("fused_spec_config") or {}).get("draft_config")
    draft = nxdi_neuron_config(draft_saved["neuron_config"], RESTART, failures) if draft_saved else None
    target.update(copy.deepcopy(override))
    loaded = LoadedModel(target, draft, saved, failures)
    _serve(loaded, RESTART)
    return loaded


def _serve(loaded: LoadedModel, start: str) -> None:
    """What the first request reads: the sampling config, by attribute in the fork's runner
    (worker/neuronx_distributed_model_runner.py L93-96, .global_topk) and by key or attribute in
    NxDI's validation (modules/generation/sampling.py L116-119, called on every forward from
    models/model_base.py L3133)."""
    sampling = loaded.target.get("on_device_sampling_config")
    if sampling is not None and not isinstance(sampling, OnDeviceSampling):
        failures = loaded.failures
        failures.append(EngineFailure(start, "on_device_sampling_config",
                                      f"the sampling config is the plain dict {sampling!r}, not NxDI's OnDeviceSamplingConfig: the "
                                      "runner's .global_topk raises AttributeError", RUNNER_SAMPLING_READ))


def legacy_override(args: list[str]) -> dict[str, Any]:
    return json.loads(args[args.index("--override-neuron-config") + 1])


def legacy_failures(variant: Variant, args: list[str]) -> list[EngineFailure]:
    """The variant's server, started twice: compiling, then from the restored artifacts."""
    override = legacy_override(args)
    first = legacy_first_start(variant, override)
    return first.failures + legacy_reload(first.saved, override).failures


def serves_greedily(variant: Variant, request: dict[str, Any]) -> bool:
    """Fused speculation compiles with the fork's default sampling config, top_k 1 without
    sampling (L681-684), and NxDI keeps it greedy (models/model_base.py L1487); a baseline
    compiles dynamic on-device sampling (L609-610), which follows each request, greedy only at
    temperature 0 (worker/neuron_model_runner.py L551-560) or top_k 1."""
    return variant.is_speculative or request.get("temperature") == 0 or request.get("top_k") == 1


def check_variant(variant: Variant) -> list[tuple[str, str]]:
    """Bucket lists given in an NxDI neuron config must fit the lengths it compiles for: context
    buckets end at max_context_length or below, token-generation buckets at the sequence length
    (NeuronConfig asserts both). vllm-neuron's lists, whose largest bucket must equal
    max_num_seqs and max_num_batched_tokens (Neuron 2.32 reference-configuration.md), are the
    program's own (vllm_neuron.py neuron_config; validation refuses them in config) and end there."""
    problems: list[tuple[str, str]] = []
    config, serving = variant.neuron_config, variant.serving
    context = config.get("max_context_length", serving.max_model_len)
    if not isinstance(context, int) or isinstance(context, bool):
        problems.append(("neuronConfig.max_context_length", f"must be an integer, got {context!r}"))
        context = serving.max_model_len
    elif context > serving.max_model_len:
        problems.append(("neuronConfig.max_context_length", f"{context} is above serving.maxModelLen {serving.max_model_len}"))
    for name, limit in (("context_encoding_buckets", context), ("token_generation_buckets", serving.max_model_len)):
        buckets = config.get(name)
        if buckets is None:
            continue
        if not isinstance(buckets, list) or not buckets or not all(isinstance(b, int) for b in buckets) or buckets != sorted(set(buckets)):
            problems.append((f"neuronConfig.{name}", "must be a non-empty, strictly ascending list of integers"))
        elif buckets[-1] > limit:
            problems.append((f"neuronConfig.{name}", f"the largest bucket {buckets[-1]} is above {limit}"))
    return problems


def refused_neuron_config(config: dict[str, Any]) -> dict[str, str]:
    if config.get("enable_fused_speculation") is False:
        return {"enable_fused_speculation": "the legacy fork always builds fused speculation and reads its fused outputs; "
                                            "unfused draft-model speculation cannot be served through vLLM"}
    return {}


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
    failures=legacy_failures,
    serves_greedily=serves_greedily,
    saves_sharded_weights=True,
    refused_neuron_config=refused_neuron_config,
    check_variant=check_variant,
    rescaled_fp8=True,
    beyond_newest=(" (NxD Inference's support on Trn2 ends with Neuron 2.34: the legacy engine is frozen; migrate to vllm-neuron, "
                   "docs/configuration.md, 'Engines')"),
)
