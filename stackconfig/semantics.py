"""What each engine does with the settings this program renders, at the version it pins.

A key list (stackconfig/data/*-fields.json) proves a key exists, not what the engine does with its
value. This module restates, as small functions, the parts of each engine's own code that the
rendered settings reach, each beside the file and lines it restates, and runs a variant's rendered
server configuration through them: the first start, which compiles, and, for NxD Inference, the
second start, which loads the compiled artifacts restored from the model store (the path this
product is built around: components/pairing/scripts/serve.sh). Validation (stackconfig/parse.py)
refuses a stack whose servers would fail here, naming the config key to change;
tests/test_engine_semantics.py runs every stack through it and shows that each check fires.

Versions read (docs/engines.md says more, and lists what could not be read):
- NxD Inference v0.6.10598, the version the legacy image installs (its Dockerfile pins
  0.6.10598+a59fdc00; the tag is the Neuron 2.26.0 release commit).
- The vLLM Neuron fork: the legacy image clones its branch 2.26.1, which could not be read; its main
  branch at dd417b31 (2025-06-24, vLLM 0.9.1 with the Neuron 2.23/2.24 changes) stands in for it.
- The vLLM Neuron plugin 0.24.0.1.1.0 (Neuron 2.32.0): its source at that release could not be
  read; the plugin documentation shipped with Neuron 2.32.0 is the authority for it.
"""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field, fields
from typing import Any

from .model import Variant
from .server import arguments


@dataclass(frozen=True)
class Source:
    """Where a behaviour is written: repository, the ref this program pins, the commit read."""

    repository: str
    ref: str
    commit: str
    path: str
    lines: str

    def __str__(self) -> str:
        return f"{self.repository}@{self.ref} ({self.commit[:8]}) {self.path} L{self.lines}"


def _nxdi(path: str, lines: str) -> Source:
    return Source("aws-neuron/neuronx-distributed-inference", "v0.6.10598", "e07f0567ad8b77969b0f6eec650234ecb7359419",
                  f"src/neuronx_distributed_inference/{path}", lines)


def _fork(path: str, lines: str) -> Source:
    return Source("aws-neuron/upstreaming-to-vllm", "main, standing in for branch 2.26.1",
                  "dd417b311607e53f2c7be614e69a5979facdb344", f"vllm/{path}", lines)


def _plugin_docs(path: str, lines: str) -> Source:
    return Source("aws-neuron/aws-neuron-sdk", "v2.32.0", "a3247f5b8c305f9b70a19993acb306122e736eec",
                  f"vllm-neuron/docs/{path}", lines)


LOADER = "model_executor/model_loader/neuronx_distributed.py"
TUTORIAL_405B = Source("aws-neuron/aws-neuron-sdk", "master of 2026-08-21", "81ce03ae",
                       "libraries/nxd-inference/tutorials/trn2-llama3.1-405b-speculative-tutorial.rst", "98-104, 324-330")
"""The known issue it notes since Neuron 2.22 (commit 2ae3525e), when it dropped the 1024 bucket."""


FIRST_START, RESTART = "first start", "restart from the model store"


@dataclass(frozen=True)
class EngineFailure:
    """What a server would do with a setting: fail to start, or fail on its first request."""

    start: str
    """FIRST_START (compiles) or RESTART (loads the artifacts restored from the model store)."""
    setting: str
    """The neuron config key at fault, or "" when no single key is."""
    error: str
    """What the engine raises, in its own words where it has them."""
    source: Source


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
# The vLLM Neuron fork's loader (legacy engine) over NxD Inference


def fork_defaults(variant: Variant) -> dict[str, Any]:
    """The neuron config the fork builds from vLLM's arguments before applying the override:
    _get_default_neuron_config (L594-617) for a baseline, _get_default_speculation_config
    (L620-643) for speculation. The keys the checks read."""
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
    re-validated (NeuronSpeculationCausalLM.load_weights, L511-525)."""
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
    update, L646-651), constructs the target's NeuronConfig from the result (L160-161, L505-506),
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
    (L181-187, L548-553). Only FileNotFoundError and ValueError make it recompile (L192-195,
    L558-561); any other error stops the server."""
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
    (worker/neuronx_distributed_model_runner.py L77-80, .global_topk) and by key or attribute in
    NxDI's validation (modules/generation/sampling.py L116-119, called on every forward from
    models/model_base.py L3133)."""
    sampling = loaded.target.get("on_device_sampling_config")
    if sampling is not None and not isinstance(sampling, OnDeviceSampling):
        failures = loaded.failures
        failures.append(EngineFailure(start, "on_device_sampling_config",
                                      f"the sampling config is the plain dict {sampling!r}, not NxDI's OnDeviceSamplingConfig: the "
                                      "runner's .global_topk raises AttributeError", _fork("worker/neuronx_distributed_model_runner.py", "77-80")))


def legacy_override(args: list[str]) -> dict[str, Any]:
    return json.loads(args[args.index("--override-neuron-config") + 1])


def legacy_failures(variant: Variant, args: list[str]) -> list[EngineFailure]:
    """The variant's server, started twice: compiling, then from the restored artifacts."""
    override = legacy_override(args)
    first = legacy_first_start(variant, override)
    return first.failures + legacy_reload(first.saved, override).failures


def serves_greedily(variant: Variant, request: dict[str, Any]) -> bool:
    """Whether the server decodes greedily for requests carrying these sampling parameters.

    Legacy engine: fused speculation compiles with the fork's default sampling config, top_k 1
    without sampling (L639-642), and NxDI keeps it greedy (models/model_base.py L1487); a
    baseline compiles dynamic on-device sampling (L599-600), which follows each request, greedy
    only at temperature 0 (worker/neuron_model_runner.py L355-364) or top_k 1. Plugin: the
    program renders on_device_sampling_config {"all_greedy": true} (Variant.neuron_config)."""
    if variant.engine == "vllm-neuron" or variant.is_speculative:
        return True
    return request.get("temperature") == 0 or request.get("top_k") == 1


# ---------------------------------------------------------------------------------------------
# The vLLM Neuron plugin 0.24 (Neuron 2.32.0), from its documentation


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


ENGINE_FAILURES = {"nxdi-legacy": legacy_failures, "vllm-neuron": plugin_failures}


def engine_failures(variant: Variant, args: list[str] | None = None) -> list[EngineFailure]:
    """Every way the variant's server would fail, on the first start and on a restart from the
    model store, given its `vllm serve` arguments (by default those the program renders)."""
    return ENGINE_FAILURES[variant.engine](variant, arguments(variant) if args is None else args)
