"""Two serving engines, compared like with like: every flag a server is given is one its engine's
vLLM defines, every neuron config key one its engine defines (lists derived from the engines'
sources, commits inside), and config that would mix engines or run a draft the engine cannot
run is refused by key."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from offline.stacks import load_stack
from stackconfig import ConfigError, engines, parse_stack_config
from stackconfig.engines import neuron_config_fields
from stackconfig.source import PROJECT

from .conftest import STANDALONE, recorded

DATA = Path(__file__).parent / "data"
FLAGS = {
    "nxdi-legacy": json.loads((DATA / "vllm-legacy-neuron-fork-serve-flags.json").read_text()),
    "vllm-neuron": json.loads((DATA / "vllm-neuron-0.24-serve-flags.json").read_text()),
}
EAGLE3_STACK, QWEN = "llama3.1-8b-instruct-eagle3", "qwen3-32b-qwen3-1.7b"


def servers(stack: str):
    """(variant, container) of every vLLM server of a stack (a distributed variant's pods run
    distributed/'s servers: tests/test_distributed_stack.py parses their arguments with their own settings)."""
    spec = load_stack(stack).spec()
    for deployment in recorded(stack).of_type("kubernetes:apps/v1:Deployment"):
        (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
        variant = spec.variant(deployment.inputs["metadata"]["labels"]["sd-trn2/variant"])
        if engines.ENGINES[variant.engine].program == "vllm":
            yield variant, container


def test_the_derived_lists_name_their_sources():
    for document in FLAGS.values():
        assert len(document["source"]["commit"]) == 40 and document["flags"]
    for engine in FLAGS:
        fields = json.loads((engines.DATA / engines.ENGINES[engine].neuron_config_fields).read_text())
        assert len(fields["source"]["commit"]) == 40 and set(fields["fields"]) == neuron_config_fields(engine)


@pytest.mark.parametrize("stack", STANDALONE)
def test_every_flag_and_neuron_config_key_is_one_the_engine_defines(stack):
    checked = 0
    for variant, container in servers(stack):
        args = container["args"]
        flags = [a for a in args if a.startswith("--")]
        assert set(flags) <= set(FLAGS[variant.engine]["flags"]), set(flags) - set(FLAGS[variant.engine]["flags"])
        config_flag = "--override-neuron-config" if variant.engine == "nxdi-legacy" else "--additional-config"
        config = json.loads(args[args.index(config_flag) + 1])
        neuron = config if variant.engine == "nxdi-legacy" else config["neuron_config"]
        assert set(neuron) <= neuron_config_fields(variant.engine), set(neuron) - neuron_config_fields(variant.engine)
        assert container["image"] == variant.image and ":" in container["image"]
        checked += 1
    # Every vLLM server: the baseline and, where vLLM serves one, an SD variant (a distributed study's
    # configurations are distributed/'s servers, tests/test_distributed_stack.py).
    assert checked >= 1 + any(v.is_speculative and len(v.servers) == 1 for v in load_stack(stack).spec().variants)


def test_the_engines_use_different_images_and_the_plugin_no_legacy_variable():
    legacy = [c for _, c in servers(QWEN)]
    plugin = [c for _, c in servers(EAGLE3_STACK)]
    (legacy_image,) = {c["image"] for c in legacy}
    (plugin_image,) = {c["image"] for c in plugin}
    assert "sdk2.26.1" in legacy_image and "sdk2.32.0" in plugin_image
    for container in plugin:
        names = {e["name"] for e in container["env"]}
        assert not names & {"VLLM_USE_V1", "VLLM_NEURON_FRAMEWORK", "NEURON_COMPILED_ARTIFACTS"}
        assert "--override-neuron-config" not in container["args"]


def test_the_405b_stack_compiles_with_seed_004s_settings():
    # Seed 004's inference_demo flags as the tutorial gives them today (no 1024 bucket, skip_warmup);
    # its sampling flags are the engine's defaults here (tests/test_engine_semantics.py).
    seed_004 = {"fused_qkv": True, "sequence_parallel_enabled": True, "qkv_kernel_enabled": True, "attn_kernel_enabled": True,
                "mlp_kernel_enabled": True, "cc_pipeline_tiling_factor": 1, "enable_bucketing": True, "max_context_length": 12288,
                "context_encoding_buckets": [2048, 4096, 10240, 12288], "token_generation_buckets": [12800], "skip_warmup": True}
    fp8_kernels = {"quantized_mlp_kernel_enabled": True, "quantization_type": "per_channel_symmetric",
                   "rmsnorm_quantize_kernel_enabled": True}
    seen = 0
    for variant, container in servers("llama3.1-405b-llama3.2-1b"):
        neuron = json.loads(container["args"][container["args"].index("--override-neuron-config") + 1])
        assert seed_004.items() <= neuron.items(), variant.name
        assert (fp8_kernels.items() <= neuron.items()) == (variant.quantization == "fp8"), variant.name
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["NEURON_RT_EXEC_TIMEOUT"] == "600"
        seen += 1
    assert seen == 3


def test_the_eagle3_stack_claims_two_devices_in_one_four_device_group():
    recording = recorded(EAGLE3_STACK)
    (template,) = recording.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    devices = template.inputs["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 2
    assert devices["constraints"][0]["matchAttribute"] == "resource.aws.com/devicegroup4_id"
    assert devices["config"][0]["opaque"]["parameters"]["logicalNeuronCore"] == 2
    assert recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs["spec"]["replicas"] == 1


BASE = load_stack(QWEN).config
PLUGIN = load_stack(EAGLE3_STACK).config


def problems(config: dict) -> dict[str, str]:
    """Key -> every message about it, joined (one key may have several problems)."""
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", config)
    found: dict[str, str] = {}
    for key, message in caught.value.problems:
        found[key] = f"{found[key]} | {message}" if key in found else message
    return found


def with_variant(config: dict, index: int, **fields) -> dict:
    config = copy.deepcopy(config)
    config["sd-trn2:variants"][index].update(fields)
    return config


@pytest.mark.parametrize("config, key, words", [
    (with_variant(BASE, 1, engine="vllm-neuron"), "variants[1].draft", "vanilla draft-model speculative decoding is not supported"),
    (with_variant(PLUGIN, 1, engine="nxdi-legacy"), "variants[1].draft", "on vllm-neuron only"),
    (with_variant(PLUGIN, 0, engine="nxdi-legacy"), "variants[1].engine", "compare like with like"),
    (with_variant(PLUGIN, 1, draft="RedHatAI/Qwen3-32B-speculator.eagle3"), "variants[1].draft", "shared tokenizer"),
    (with_variant(PLUGIN, 1, target="meta-llama/Llama-3.1-8B"), "variants[1].draft",
     "was trained for meta-llama/Llama-3.1-8B-Instruct, not for meta-llama/Llama-3.1-8B"),
    (with_variant(PLUGIN, 1, draftMaxModelLen=512), "variants[1].draftMaxModelLen", "no draft max_model_len"),
    (with_variant(PLUGIN, 1, speculationMethod="draft_model"), "variants[1].speculationMethod", "an EAGLE3 head"),
    (with_variant(BASE, 1, neuronConfig={"enable_fused_speculation": False}), "variants[1].neuronConfig.enable_fused_speculation",
     "unfused draft-model speculation cannot be served"),
    (with_variant(BASE, 1, neuronConfig={"fused_qvk": True}), "variants[1].neuronConfig.fused_qvk", "did you mean fused_qkv"),
    (with_variant(BASE, 1, neuronConfig={"tp_degree": 8}), "variants[1].neuronConfig.tp_degree", "set by the program"),
    (with_variant(PLUGIN, 1, neuronConfig={"num_seqs_buckets": [1, 2]}), "variants[1].neuronConfig.num_seqs_buckets", "set by the program"),
    (with_variant(PLUGIN, 1, neuronConfig={"context_encoding_buckets": [128]}), "variants[1].neuronConfig.context_encoding_buckets",
     "not a vllm-neuron neuron config field"),
    (with_variant(BASE, 0, neuronConfig={"context_encoding_buckets": [512, 2048]}), "variants[0].neuronConfig.context_encoding_buckets",
     "above 1024"),
    (with_variant(BASE, 1, target="RedHatAI/Qwen3-32B-speculator.eagle3"), "variants[1].target", "not a model that can be served"),
    ({**PLUGIN, "sd-trn2:serving": {**PLUGIN["sd-trn2:serving"], "maxNumBatchedTokens": 700}}, "serving.maxNumBatchedTokens",
     "must be a KV segment size"),
    ({**BASE, "sd-trn2:serving": {**BASE["sd-trn2:serving"], "environment": {"VLLM_USE_V1": "1"}}}, "serving.environment.VLLM_USE_V1",
     "set by the program"),
])
def test_engine_rules_are_config_errors_naming_the_key(config, key, words):
    found = problems(config)
    assert words in found.get(key, ""), found


def test_a_model_outside_the_catalog_can_be_declared():
    head = "example/Llama-3.1-8B-Instruct-dflash"
    config = with_variant({**PLUGIN, "sd-trn2:models": {head: {
        "tokenizerFamily": "llama3", "gated": False, "paramsBillion": 0.6, "checkpointBytes": 12 * 10 ** 8, "kind": "dflash-head",
        "draftFor": ["meta-llama/Llama-3.1-8B-Instruct"]}}}, 1, draft=head)
    # DFlash runs at TP 4 or 8 only; at 8 devices the variants are TP 32.
    config["sd-trn2:serving"] = {**config["sd-trn2:serving"], "devicesPerVariant": 8}
    assert "DFlash runs at TP 4 or 8" in problems(config)["variants[1].draft"]
    config["sd-trn2:serving"] = {**config["sd-trn2:serving"], "devicesPerVariant": 2}
    sd = parse_stack_config(PROJECT, "test", config).variant("eagle3")
    assert sd.speculation_method == "dflash" and sd.speculative_config["method"] == "dflash"
    bad = {**PLUGIN, "sd-trn2:models": {"no-slash": {}, "Qwen/Qwen3-32B": {}}}
    found = problems(bad)
    assert "organization" in found["models.no-slash"] and "already in the catalog" in found["models.Qwen/Qwen3-32B"]


def test_a_stack_whose_target_and_draft_are_both_declared_plans_with_their_own_facts():
    """The documented way to use models outside the catalog (docs/configuration.md, "Models") must plan, not only
    parse: the benchmark's run config once looked the models up in the catalog and raised
    KeyError. Its figures are the declared ones, which no catalog entry has."""
    from offline.stacks import load_stack, run_stack

    models = {"example/Target-9B": {"tokenizerFamily": "llama3", "gated": False, "paramsBillion": 9.1, "checkpointBytes": 18 * 10 ** 9},
              "example/Draft-1B": {"tokenizerFamily": "llama3", "gated": False, "paramsBillion": 1.3, "checkpointBytes": 26 * 10 ** 8}}
    overrides = {"sd-trn2:models": models, "sd-trn2:modelRevisions": None,  # the stack's pins name the models replaced
                 "sd-trn2:serving": {"target": "example/Target-9B", "devicesPerVariant": 1, "maxNumSeqs": 1, "maxModelLen": 1024},
                 "sd-trn2:variants": [{"name": "base", "role": "baseline"},
                                      {"name": "sd", "role": "sd", "draft": "example/Draft-1B", "numSpeculativeTokens": 5}]}
    recording = run_stack(load_stack("llama3.1-8b-llama3.2-1b", overrides))
    config_map = next(o for o in recording.kubernetes_objects() if o.inputs["metadata"]["name"] == "llmperf-benchmark")
    variants = {v["name"]: v for v in json.loads(config_map.inputs["data"]["run-config.json"])["variants"]}
    assert (variants["sd"]["targetParamsBillion"], variants["sd"]["draftParamsBillion"]) == (9.1, 1.3)
    assert (variants["base"]["target"], variants["base"]["draftParamsBillion"]) == ("example/Target-9B", None)
    deployments = [o for o in recording.kubernetes_objects() if o.inputs["kind"] == "Deployment"]
    # Served under its hub id, loaded from its prepared copy, which a Job of its own prepares.
    args = [d.inputs["spec"]["template"]["spec"]["containers"][0]["args"] for d in deployments]
    assert {a[a.index("--served-model-name") + 1] for a in args} == {"example/Target-9B"}
    assert {a[1] for a in args} == {"/node-cache/weights/target-9b/main/hub"}
    prepares = {j.inputs["metadata"]["annotations"].get("sd-trn2/prepares") for j in recording.of_type("kubernetes:batch/v1:Job")}
    assert {"weights/target-9b/main/hub/", "weights/draft-1b/main/hub/"} <= prepares
