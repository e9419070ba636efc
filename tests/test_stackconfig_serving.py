"""serving: what every variant of a stack shares. Derived values (tensor parallel degree from
devices and logical cores), engine settings checked against the fields each engine defines, the
plugin's prefill budget rules, and environment the program leaves to the stack."""
from __future__ import annotations

import pytest

from stackconfig.engines import ENGINES
from stackconfig.model import ServingSettings

from .stackconfig_helpers import (
    PLUGIN,
    SMALL,
    edits_id,
    parse,
    problem_list,
    with_edits,
)


def test_serving_defaults():
    assert parse(SMALL).serving == ServingSettings(
        engine="nxdi-legacy", image=None, target="Qwen/Qwen3-32B", devices_per_variant=8, logical_neuron_cores=2,
        max_num_seqs=4, max_model_len=1024, neuron_config={},
        environment={}, max_num_batched_tokens=None)


def test_every_serving_setting_lands_in_the_spec():
    serving = parse(with_edits(PLUGIN, {"serving": {
        "engine": "vllm-neuron", "image": "example.com/neuron/vllm:1.0-sdk2.32", "target": "meta-llama/Llama-3.1-8B-Instruct", "devicesPerVariant": 2,
        "logicalNeuronCores": 1, "tensorParallelSize": 16, "maxNumSeqs": 256, "maxModelLen": 16384,
        "maxNumBatchedTokens": 16384, "neuronConfig": {"ep_degree": 1},
        "environment": {"NEURON_RT_EXEC_TIMEOUT": "600", "_X1": ""}}})).serving
    assert serving == ServingSettings(
        engine="vllm-neuron", image="example.com/neuron/vllm:1.0-sdk2.32", target="meta-llama/Llama-3.1-8B-Instruct", devices_per_variant=2,
        logical_neuron_cores=1, max_num_seqs=256, max_model_len=16384,
        neuron_config={"ep_degree": 1}, environment={"NEURON_RT_EXEC_TIMEOUT": "600", "_X1": ""}, max_num_batched_tokens=16384)


@pytest.mark.parametrize("devices, lnc, tp", [(1, 2, 4), (1, 1, 8), (2, 2, 8), (4, 2, 16), (8, 2, 32), (8, 1, 64), (16, 2, 64)])
def test_tensor_parallel_size_is_devices_times_logical_cores_per_device(devices, lnc, tp):
    values = with_edits(SMALL, {"serving.devicesPerVariant": devices, "serving.logicalNeuronCores": lnc, "serving.tensorParallelSize": tp})
    assert parse(values).serving.tensor_parallel_size == tp


@pytest.mark.parametrize("edits", [
    {"serving.maxModelLen": 128, "serving.maxNumSeqs": 1},
    {"serving.maxModelLen": 131072, "serving.maxNumSeqs": 256},
    {"serving.devicesPerVariant": 1, "capacity.instanceType": "trn2.3xlarge"},
    {"serving.devicesPerVariant": 16, "serving.logicalNeuronCores": 1},
], ids=["lowest", "highest", "one-device-on-a-one-device-node", "a-whole-node"])
def test_serving_values_at_the_limits_are_accepted(edits):
    parse(with_edits(SMALL, edits))


@pytest.mark.parametrize("length, budget", [(128, 128), (1000, 1000), (1024, 512), (16384, 16384), (32768, 8192), (131072, 512)])
def test_a_prefill_budget_is_the_whole_context_up_to_16384_else_a_kv_segment_size(length, budget):
    values = with_edits(PLUGIN, {"serving.maxModelLen": length, "serving.maxNumBatchedTokens": budget})
    assert parse(values).serving.max_num_batched_tokens == budget


KNOWN_MODELS = ("Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-32B, RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3, "
                "RedHatAI/Qwen3-32B-speculator.eagle3, meta-llama/Llama-3.1-405B-Instruct, meta-llama/Llama-3.1-405B-Instruct-FP8, "
                "meta-llama/Llama-3.1-8B, meta-llama/Llama-3.1-8B-Instruct, meta-llama/Llama-3.2-1B, meta-llama/Llama-3.2-1B-Instruct")
SEGMENTS = "use a KV segment size: 512, 1024, 2048, 4096, 8192"


@pytest.mark.parametrize("base, edits, problems", [
    (SMALL, {"serving.devicesPerVariant": 3}, [("serving.devicesPerVariant", "3 is not one of 1, 2, 4, 8, 16")]),
    (SMALL, {"serving.devicesPerVariant": True}, [("serving.devicesPerVariant", "must be an integer, got True")]),
    (SMALL, {"serving.devicesPerVariant": 2, "capacity.instanceType": "trn2.3xlarge"},
     [("serving.devicesPerVariant", "2 devices do not fit on a trn2.3xlarge (1 devices)")]),
    (SMALL, {"serving.logicalNeuronCores": 4}, [("serving.logicalNeuronCores", "4 is not one of 1, 2")]),
    (SMALL, {"serving.engine": "tgi"}, [("serving.engine", "'tgi' is not one of nxdi-legacy, vllm-neuron, distributed")]),
    (SMALL, {"serving.maxModelLen": 127}, [("serving.maxModelLen", "127 is outside 128..131072")]),
    (SMALL, {"serving.maxModelLen": 131073}, [("serving.maxModelLen", "131073 is outside 128..131072")]),
    (SMALL, {"serving.maxNumSeqs": 0}, [("serving.maxNumSeqs", "0 is outside 1..256")]),
    (SMALL, {"serving.maxNumSeqs": 257}, [("serving.maxNumSeqs", "257 is outside 1..256")]),
    (SMALL, {"serving.target": None}, [("serving.target", "is required (a Hugging Face model id)")]),
    (SMALL, {"serving.target": "Qwen/Qwen9"},
     [("serving.target", f"'Qwen/Qwen9' is not a known model: declare it under `models` (docs/configuration.md, 'Models'); known: {KNOWN_MODELS}")]),
    (SMALL, {"serving.nodeCachePath": "/etc"}, [("serving.nodeCachePath", "is no longer used: each server's cache is an emptyDir on "
                                                                           "the node's instance store, not a host path (docs/security.md, 'Pods'); "
                                                                           "remove it")]),
    (SMALL, {"serving.tensorParallelSize": 0}, [("serving.tensorParallelSize", "0 is outside >= 1")]),
    (SMALL, {"serving.tensorParallelSize": 1}, [("serving.tensorParallelSize", "1 does not match devicesPerVariant x (8 / "
                                                                                "logicalNeuronCores) = 8 x 4 = 32; omit it to derive it")]),
    (SMALL, {"serving.tensorParallelSize": 32, "serving.logicalNeuronCores": 1},
     [("serving.tensorParallelSize", "32 does not match devicesPerVariant x (8 / logicalNeuronCores) = 8 x 8 = 64; omit it to derive it")]),
    (SMALL, {"serving.image": "public.ecr.aws/neuron/vllm:latest"},
     [("serving.image", "'public.ecr.aws/neuron/vllm:latest' is not pinned: give a version tag (not latest) or a @sha256 digest")]),
    (SMALL, {"serving.image": "Not An Image"}, [("serving.image", "'Not An Image' is not an image reference (registry/repository:tag)")]),
    (SMALL, {"serving.maxNumBatchedTokens": 1024},
     [("serving.maxNumBatchedTokens", "only vllm-neuron variants use it; no variant runs on vllm-neuron")]),
    (PLUGIN, {"serving.maxNumSeqs": 0}, [("serving.maxNumSeqs", "0 is outside 1..256")]),
    (PLUGIN, {"serving.maxModelLen": 0}, [("serving.maxModelLen", "0 is outside 128..131072")]),
    (SMALL, {"serving.maxModelLen": None, "serving.neuronConfig": {"token_generation_buckets": [128]}},
     [("serving.maxModelLen", "is required (an integer)")]),
    (PLUGIN, {"serving.maxNumBatchedTokens": 127}, [("serving.maxNumBatchedTokens", "127 is outside >= 128")]),
    (PLUGIN, {"serving.maxNumBatchedTokens": 700}, [("serving.maxNumBatchedTokens", "700 is below maxModelLen 1024, so prefill is "
                                                     "segmented and the budget must be a KV segment size: 512, 1024, 2048, 4096, 8192")]),
    (PLUGIN, {"serving.maxModelLen": 16385, "serving.maxNumBatchedTokens": 16385},
     [("serving.maxNumBatchedTokens", f"single-shot prefill is limited to 16384 tokens; {SEGMENTS}")]),
    (PLUGIN, {"serving.maxModelLen": 32768, "serving.maxNumBatchedTokens": 40000},
     [("serving.maxNumBatchedTokens", f"single-shot prefill is limited to 16384 tokens; {SEGMENTS}")]),
    (SMALL, {"serving.environment": {"lower": "x", "OK_NAME": 5, "VLLM_USE_V1": "1", "HF_TOKEN": "x", "9X": "x", 7: "x"}}, [
        ("serving.environment.lower", "must map an UPPER_CASE variable name to a string"),
        ("serving.environment.OK_NAME", "must map an UPPER_CASE variable name to a string"),
        ("serving.environment.VLLM_USE_V1", "is set by the program (stackconfig/server.py)"),
        ("serving.environment.HF_TOKEN", "is set by the program (stackconfig/server.py)"),
        ("serving.environment.9X", "must map an UPPER_CASE variable name to a string"),
        ("serving.environment.7", "must map an UPPER_CASE variable name to a string")]),
    (SMALL, {"serving.environment": "x"}, [("serving.environment", "must be an object, got 'x'")]),
    (SMALL, {"serving.neuronConfig": {"tp_degree": 8, "fused_qvk": True, "zzzzzz": 1}}, [
        ("serving.neuronConfig.tp_degree", "is set by the program from typed config for nxdi-legacy; remove it"),
        ("serving.neuronConfig.fused_qvk", "is not a nxdi-legacy neuron config field (did you mean fused_qkv?)"),
        ("serving.neuronConfig.zzzzzz", "is not a nxdi-legacy neuron config field")]),
    (SMALL, {"serving.neuronConfig": {"enable_fused_speculation": False}}, [
        ("serving.neuronConfig.enable_fused_speculation", "is set by the program from typed config for nxdi-legacy; remove it"),
        ("serving.neuronConfig.enable_fused_speculation", "the legacy fork always builds fused speculation and reads its fused "
                                                          "outputs; unfused draft-model speculation cannot be served through vLLM")]),
    (PLUGIN, {"serving.neuronConfig": {"num_seqs_buckets": [1, 2], "enable_fused_speculation": False, "quantisation": "x"}}, [
        ("serving.neuronConfig.num_seqs_buckets", "is set by the program from typed config for vllm-neuron; remove it"),
        ("serving.neuronConfig.enable_fused_speculation", "is not a vllm-neuron neuron config field"),
        ("serving.neuronConfig.quantisation", "is not a vllm-neuron neuron config field (did you mean quantization?)")]),
    (SMALL, {"serving.neuronConfig": "x"}, [("serving.neuronConfig", "must be an object, got 'x'")]),
], ids=edits_id)
def test_serving_rules_name_the_key_and_what_is_allowed(base, edits, problems):
    assert problem_list(with_edits(base, edits)) == problems


def test_the_plugins_single_shot_prefill_is_exactly_16384_tokens():
    parse(with_edits(PLUGIN, {"serving.maxModelLen": 16384, "serving.maxNumBatchedTokens": 16384}))
    parse(with_edits(PLUGIN, {"serving.maxModelLen": 1000, "serving.maxNumBatchedTokens": 1000}))


def test_engine_settings_given_in_config_reach_the_neuron_config():
    legacy = parse(with_edits(SMALL, {"serving.neuronConfig": {"fused_qkv": True}}))
    assert legacy.serving.neuron_config == {"fused_qkv": True}
    plugin = parse(with_edits(PLUGIN, {"serving.neuronConfig": {"enable_structured_outputs": True, "ep_degree": 2}}))
    assert plugin.serving.neuron_config == {"enable_structured_outputs": True, "ep_degree": 2}


LEGACY_IMAGE = "example.com/vllm:1.0-sdk2.26.1"


@pytest.mark.parametrize("serving_image, variant_engine, variant_image, expected", [
    (None, None, None, ENGINES["nxdi-legacy"].image),
    (None, "vllm-neuron", None, ENGINES["vllm-neuron"].image),
    (LEGACY_IMAGE, None, None, LEGACY_IMAGE),
    (LEGACY_IMAGE, "vllm-neuron", None, ENGINES["vllm-neuron"].image),   # serving.image is for the serving engine
    (LEGACY_IMAGE, None, "example.com/other:2-sdk2.33@sha256:" + "0" * 64, "example.com/other:2-sdk2.33@sha256:" + "0" * 64),
])
def test_a_variants_image(serving_image, variant_engine, variant_image, expected):
    other = {"name": "other", "role": "baseline", "target": "meta-llama/Llama-3.2-1B",
             **({"engine": variant_engine} if variant_engine else {}), **({"image": variant_image} if variant_image else {})}
    values = with_edits(SMALL, {"variants": [*SMALL["variants"], other], "variants.1.baseline": "base", "huggingFaceToken": "hf_x"})
    if serving_image:
        values = with_edits(values, {"serving.image": serving_image})
    assert parse(values).variant("other").image == expected


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("image", [
    "registry.example.com:5000/team/vllm:1.0-sdk2.26.1", f"vllm:sdk2.33@{DIGEST}", f"vllm:0.9.1-neuronx-sdk2.30.0-ubuntu22.04@{DIGEST}",
    "public.ecr.aws/a/b:Tag_1.2-x-sdk2.26",
])
def test_pinned_images_are_accepted(image):
    assert parse(with_edits(SMALL, {"serving.image": image})).serving.image == image


NEURON_DLC = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"


@pytest.mark.parametrize("base, image, key, message", [
    (SMALL, f"vllm@{DIGEST}", "serving.image",
     f"'vllm@{DIGEST}' does not name its Neuron SDK release in its tag (...-sdk2.32.0-..., as the Neuron DLC tags do); "
     "what nxdi-legacy accepts depends on it"),
    (SMALL, f"{NEURON_DLC}:0.29.0.1.2.0-neuronx-py313-sdk2.34.0-ubuntu24.04", "serving.image",
     f"'{NEURON_DLC}:0.29.0.1.2.0-neuronx-py313-sdk2.34.0-ubuntu24.04' is Neuron SDK 2.34; nxdi-legacy runs on images of Neuron "
     "2.26 to 2.33 (NxD Inference's support on Trn2 ends with Neuron 2.34: the legacy engine is frozen; migrate to vllm-neuron, "
     "docs/configuration.md, 'Engines')"),
    (SMALL, f"{NEURON_DLC}:0.7.2-neuronx-py310-sdk2.22.0-ubuntu22.04", "serving.image",
     f"'{NEURON_DLC}:0.7.2-neuronx-py310-sdk2.22.0-ubuntu22.04' is Neuron SDK 2.22; nxdi-legacy runs on images of Neuron 2.26 to 2.33"),
    (PLUGIN, f"{NEURON_DLC}:0.19.0-neuronx-py312-sdk2.31.0-ubuntu24.04", "serving.image",
     f"'{NEURON_DLC}:0.19.0-neuronx-py312-sdk2.31.0-ubuntu24.04' is Neuron SDK 2.31; vllm-neuron runs on images of Neuron 2.32 or newer"),
])
def test_an_image_outside_its_engines_sdk_releases_is_refused(base, image, key, message):
    assert problem_list(with_edits(base, {"serving.image": image})) == [(key, message)]


def test_qwen3_on_the_plugin_needs_an_image_newer_than_2_32():
    qwen3 = with_edits(PLUGIN, {"serving.target": "Qwen/Qwen3-32B", "variants.1.draft": "RedHatAI/Qwen3-32B-speculator.eagle3"})
    ((key, message),) = problem_list(qwen3)
    assert key == "serving.target" and message.startswith("the vLLM Neuron plugin of Neuron 2.32 documents no text-generation "
                                                          "recipe for qwen3 models")
    newer = f"{NEURON_DLC}:0.29.0.1.2.0-neuronx-py313-sdk2.33.0-ubuntu24.04"
    assert parse(with_edits(qwen3, {"serving.image": newer})).variant("sd").image == newer


@pytest.mark.parametrize("image, message", [
    ("vllm", "is not pinned: give a version tag (not latest) or a @sha256 digest"),
    ("registry:5000/vllm", "is not pinned: give a version tag (not latest) or a @sha256 digest"),
    ("vllm:latest", "is not pinned: give a version tag (not latest) or a @sha256 digest"),
    ("Vllm:1.0", "is not an image reference (registry/repository:tag)"),
    ("vllm@sha256:abc", "is not an image reference (registry/repository:tag)"),
    ("vllm:-1", "is not an image reference (registry/repository:tag)"),
])
def test_moving_or_malformed_images_are_refused(image, message):
    assert problem_list(with_edits(SMALL, {"serving.image": image})) == [("serving.image", f"{image!r} {message}")]


def test_every_variable_the_program_sets_is_refused_in_serving_environment_whatever_the_variant():
    """The refused names are the program's own environment tables (stackconfig/server.py), so a
    variable set only for FP8 or for prepared weights is refused in a stack that uses neither, and
    every name a variant is rendered with is one of them."""
    from stackconfig.server import RESERVED_ENVIRONMENT, environment

    for name in ("XLA_HANDLE_SPECIAL_SCALAR", "WEIGHTS_STORE", "VLLM_CACHE_ROOT", "NEURON_COMPILED_ARTIFACTS"):
        assert problem_list(with_edits(SMALL, {"serving.environment": {name: "x"}})) == [
            (f"serving.environment.{name}", "is set by the program (stackconfig/server.py)")]
    for base in (SMALL, PLUGIN):
        for variant in parse(base).variants:
            assert set(environment(variant)) <= RESERVED_ENVIRONMENT
            assert set(ENGINES[variant.engine].environment) & set(environment(variant))
    allowed = parse(with_edits(SMALL, {"serving.environment": {"NEURON_RT_EXEC_TIMEOUT": "600"}}))
    assert environment(allowed.variants[0])["NEURON_RT_EXEC_TIMEOUT"] == "600"


def test_a_servers_cache_must_fit_its_share_of_the_nodes_instance_store():
    """405B weights and its compiled set (~1.7 TiB with room) on one device's sixteenth of 6369 GiB."""
    values = with_edits(SMALL, {"huggingFaceToken": "hf_x", "serving.target": "meta-llama/Llama-3.1-405B-Instruct",
                                "serving.devicesPerVariant": 1, "variants.1.draft": "meta-llama/Llama-3.2-1B-Instruct"})
    found = dict(problem_list(values))
    assert found["variants[0]"] == ("its weights and compiled set need 1719 GiB of the node's instance store; its share of a "
                                    "trn2.48xlarge is 398 GiB (give it more devices: serving.devicesPerVariant)")
