"""variants: the servers of a pairing. Roles and baselines, what an sd variant needs, the method a
draft speculates with on each engine, FP8 and DFlash limits, and the bucket lists a neuron
config may give. Valid variants are checked field by field, invalid ones by the exact problems."""
from __future__ import annotations

import pytest

from stackconfig.catalog import MODELS

from .stackconfig_helpers import (
    PLUGIN,
    SMALL,
    edits_id,
    parse,
    problem_list,
    with_edits,
)

FIELDS = ("role", "target", "engine", "baseline", "draft", "num_speculative_tokens", "draft_max_model_len", "speculation_method",
          "quantization", "target_revision", "draft_revision", "neuron_config_extra")


def fields(variant) -> dict:
    return {name: getattr(variant, name) for name in FIELDS}


def test_a_baseline_and_a_plain_draft_on_the_legacy_engine():
    spec = parse(SMALL)
    assert [v.name for v in spec.variants] == ["base", "sd"]
    base, sd = spec.variants
    assert fields(base) == {"role": "baseline", "target": "Qwen/Qwen3-32B", "engine": "nxdi-legacy", "baseline": None, "draft": None,
                            "num_speculative_tokens": None, "draft_max_model_len": None, "speculation_method": None,
                            "quantization": "none", "target_revision": "main", "draft_revision": "main", "neuron_config_extra": {}}
    assert fields(sd) == {**fields(base), "role": "sd", "baseline": "base", "draft": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 7,
                          "draft_max_model_len": 1024, "speculation_method": "draft_model"}
    assert (base.target_info, base.draft_info) == (MODELS["Qwen/Qwen3-32B"], None)
    assert (sd.target_info, sd.draft_info) == (MODELS["Qwen/Qwen3-32B"], MODELS["Qwen/Qwen3-1.7B"])
    assert (base.serving, base.is_speculative, sd.is_speculative) == (spec.serving, False, True)


def test_an_eagle3_head_on_the_plugin():
    sd = parse(PLUGIN).variant("sd")
    assert fields(sd) == {"role": "sd", "target": "meta-llama/Llama-3.1-8B-Instruct", "engine": "vllm-neuron", "baseline": "base",
                          "draft": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "num_speculative_tokens": 3, "draft_max_model_len": 1024,
                          "speculation_method": "eagle3", "quantization": "none", "target_revision": "main", "draft_revision": "main", "neuron_config_extra": {}}


DFLASH_HEAD = {"example/Llama-3.1-8B-Instruct-dflash": {
    "tokenizerFamily": "llama3", "gated": False, "paramsBillion": 0.6, "checkpointBytes": 12 * 10 ** 8, "kind": "dflash-head", "draftFor": ["meta-llama/Llama-3.1-8B-Instruct"]}}


def test_every_variant_setting_lands_in_the_variant():
    # One bucket of 4096 tokens: FP8 kernels must not meet buckets of 1024 or less (stackconfig/semantics.py).
    values = with_edits(SMALL, {"huggingFaceToken": "hf_x", "serving.maxModelLen": 4096,
                                "serving.neuronConfig": {"enable_bucketing": False}, "variants": [
        {"name": "base-bf16", "role": "baseline", "target": "meta-llama/Llama-3.1-405B-Instruct", "engine": "nxdi-legacy"},
        {"name": "fp8", "role": "baseline", "target": "meta-llama/Llama-3.1-405B-Instruct-FP8", "quantization": "fp8",
         "baseline": "base-bf16", "neuronConfig": {"fused_qkv": True}},
        {"name": "sd-fp8", "role": "sd", "target": "meta-llama/Llama-3.1-405B-Instruct-FP8", "quantization": "fp8",
         "baseline": "fp8", "draft": "meta-llama/Llama-3.2-1B-Instruct",
         "numSpeculativeTokens": 15, "draftMaxModelLen": 128, "speculationMethod": "draft_model"},
    ]})
    spec = parse(values)
    assert fields(spec.variant("fp8")) == {
        "role": "baseline", "target": "meta-llama/Llama-3.1-405B-Instruct-FP8", "engine": "nxdi-legacy", "baseline": "base-bf16",
        "draft": None, "num_speculative_tokens": None, "draft_max_model_len": None, "speculation_method": None,
        "quantization": "fp8", "target_revision": "main", "draft_revision": "main", "neuron_config_extra": {"fused_qkv": True}}
    assert fields(spec.variant("sd-fp8")) == {
        "role": "sd", "target": "meta-llama/Llama-3.1-405B-Instruct-FP8", "engine": "nxdi-legacy", "baseline": "fp8",
        "draft": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 15, "draft_max_model_len": 128,
        "speculation_method": "draft_model", "quantization": "fp8", "target_revision": "main", "draft_revision": "main",
        "neuron_config_extra": {}}
    assert spec.variant("base-bf16").baseline is None
    assert spec.variant("sd-fp8").draft_info == MODELS["meta-llama/Llama-3.2-1B-Instruct"]


@pytest.mark.parametrize("edits", [
    {"variants.1.numSpeculativeTokens": 1},
    {"variants.1.numSpeculativeTokens": 15},
    {"variants.1.draftMaxModelLen": 1024},
    {"benchmark.inputTokens": 64, "benchmark.outputTokens": 600, "variants.1.draftMaxModelLen": 671},
    {"variants.1.speculationMethod": "draft_model"},
    {"variants.1.name": "a" * 32},
], ids=["fewest-tokens", "most-tokens", "draft-as-long-as-target", "draft-exactly-long-enough", "matching-method", "longest-name"])
def test_variant_values_at_the_limits_are_accepted(edits):
    parse(with_edits(SMALL, edits))


def test_a_variant_may_serve_another_target_than_the_stacks():
    values = with_edits(SMALL, {"variants.0.target": "Qwen/Qwen3-1.7B", "variants.1.draft": "Qwen/Qwen3-0.6B"})
    spec = parse(values)
    assert (spec.variant("base").target, spec.variant("base").target_info) == ("Qwen/Qwen3-1.7B", MODELS["Qwen/Qwen3-1.7B"])
    assert spec.variant("sd").target == "Qwen/Qwen3-32B"


def test_with_several_baselines_each_sd_variant_names_its_own():
    values = with_edits(SMALL, {"variants": [
        {"name": "a", "role": "baseline"}, {"name": "b", "role": "baseline", "target": "Qwen/Qwen3-1.7B"},
        {"name": "sd-a", "role": "sd", "baseline": "a", "draft": "Qwen/Qwen3-0.6B", "numSpeculativeTokens": 4},
        {"name": "sd-b", "role": "sd", "baseline": "b", "target": "Qwen/Qwen3-1.7B", "draft": "Qwen/Qwen3-0.6B",
         "numSpeculativeTokens": 4}]})
    spec = parse(values)
    assert [(v.name, v.baseline) for v in spec.variants] == [("a", None), ("b", None), ("sd-a", "a"), ("sd-b", "b")]
    assert problem_list(with_edits(values, {"variants.3.baseline": None})) == [
        ("variants[3].baseline", "is required when there are several baselines: a, b")]


def test_a_baseline_that_is_not_one_is_refused_naming_those_there_are():
    sd = SMALL["variants"][1]
    values = with_edits(SMALL, {"variants": [{"name": "a", "role": "baseline"}, {"name": "b", "role": "baseline", "target": "Qwen/Qwen3-1.7B"},
                                             {**sd, "baseline": "c"}]})
    assert problem_list(values) == [("variants[2].baseline", "'c' is not another baseline variant; baselines: a, b")]
    values = with_edits(SMALL, {"variants": [{**sd, "baseline": "c"}]})
    assert problem_list(values) == [("variants", "needs at least one baseline and one sd variant to compare"),
                                    ("variants[0].baseline", "'c' is not another baseline variant; baselines: none")]


def test_a_variant_whose_target_is_refused_is_checked_as_serving_the_stacks_target():
    """Parsing goes on with the stack's target in its place: here the token that target needs."""
    values = with_edits(SMALL, {"serving.target": "meta-llama/Llama-3.1-8B", "serving.devicesPerVariant": 1,
                                "variants.0.target": "x/y", "variants.1.target": "Qwen/Qwen3-32B"})
    problems = problem_list(values)
    assert [key for key, _ in problems] == ["variants[0].target", "huggingFaceToken"]
    assert problems[1][1] == ("is required for the gated model(s) meta-llama/Llama-3.1-8B: "
                              "pulumi config set --secret huggingFaceToken hf_...")


def test_a_head_trained_for_several_targets_names_them_all():
    head = {**DFLASH_HEAD["example/Llama-3.1-8B-Instruct-dflash"], "kind": "eagle3-head",
            "draftFor": ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"]}
    values = with_edits(PLUGIN, {"models": {"example/head": head}, "variants.1.draft": "example/head",
                                 "variants.1.target": "meta-llama/Llama-3.1-8B"})
    assert problem_list(values) == [
        ("variants[1].draft", "example/head was trained for meta-llama/Llama-3.1-8B-Instruct, meta-llama/Llama-3.2-1B-Instruct, "
                              "not for meta-llama/Llama-3.1-8B")]


def test_without_any_baseline_sd_variants_are_not_told_there_are_several():
    sd = SMALL["variants"][1]
    values = with_edits(SMALL, {"variants": [{**sd, "name": "sd-a"}, {**sd, "name": "sd-b", "numSpeculativeTokens": 3}]})
    assert problem_list(values) == [("variants", "needs at least one baseline and one sd variant to compare")]


PLUGIN_HAS_NO_QWEN3 = ("the vLLM Neuron plugin of Neuron 2.32 documents no text-generation recipe for qwen3 models (its model "
                       "recipes: Llama 3, GPT-OSS, Qwen3-VL, Qwen3-Embedding); serve it on nxdi-legacy, or pin a newer plugin image "
                       "that has the recipe (serving.image)")
QWEN_DRAFT_ON_PLUGIN = ("Qwen/Qwen3-1.7B is a full model, which speculates as 'draft_model' on nxdi-legacy or distributed only, not on vllm-neuron "
                        "(Neuron's migration guide: vanilla draft-model speculative decoding is not supported; migrate to an EAGLE3 draft)")
KNOWN = ("Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-32B, RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3, "
         "RedHatAI/Qwen3-32B-speculator.eagle3, meta-llama/Llama-3.1-405B-Instruct, meta-llama/Llama-3.1-405B-Instruct-FP8, "
         "meta-llama/Llama-3.1-8B, meta-llama/Llama-3.1-8B-Instruct, meta-llama/Llama-3.2-1B, meta-llama/Llama-3.2-1B-Instruct")
VARIANT_KEYS = ("['baseline', 'draft', 'draftMaxModelLen', 'engine', 'image', 'name', 'neuronConfig', 'numSpeculativeTokens', "
                "'placement', 'quantization', 'role', 'speculationLength', 'speculationMethod', 'target', 'weightsPath']")
NO_PAIR = ("variants", "needs at least one baseline and one sd variant to compare")


@pytest.mark.parametrize("base, edits, problems", [
    (SMALL, {"variants": []}, [("variants", "must be a non-empty list of variants (at least one baseline and one sd)"), NO_PAIR]),
    (SMALL, {"variants": "x"}, [("variants", "must be a non-empty list of variants (at least one baseline and one sd)"), NO_PAIR]),
    (SMALL, {"variants.1": "x"}, [("variants[1]", f"must be an object with keys {VARIANT_KEYS}, got str"),
                                  ("variants[1].name", "is required (a string)"), ("variants[1].role", "is required (a string)"),
                                  NO_PAIR]),
    (SMALL, {"variants.1.speed": 1}, [("variants[1].speed", "unknown key; allowed: baseline, draft, draftMaxModelLen, engine, image, "
                                       "name, neuronConfig, numSpeculativeTokens, placement, quantization, role, speculationLength, "
                                       "speculationMethod, target, weightsPath")]),
    (SMALL, {"variants.1.name": None}, [("variants[1].name", "is required (a string)")]),
    (SMALL, {"variants.1.name": "a" * 33}, [("variants[1].name", f"'{'a' * 33}' is not valid: a lowercase DNS label of at most 32 characters")]),
    (SMALL, {"variants.1.name": "base"}, [("variants", "variant name 'base' is used more than once")]),
    (SMALL, {"variants.1.role": "turbo"}, [("variants[1].role", "'turbo' is not one of baseline, sd"), NO_PAIR]),
    (SMALL, {"variants.1.role": "baseline", "variants.1.draft": None, "variants.1.numSpeculativeTokens": None,
             "variants.1.target": "Qwen/Qwen3-1.7B"}, [NO_PAIR]),
    (SMALL, {"variants.1.engine": "tgi"}, [("variants[1].engine", "'tgi' is not one of nxdi-legacy, vllm-neuron, distributed")]),
    (SMALL, {"variants.0.draft": "Qwen/Qwen3-1.7B", "variants.0.numSpeculativeTokens": 3, "variants.0.draftMaxModelLen": 512,
             "variants.0.speculationMethod": "draft_model"}, [
        ("variants[0].draft", "is only allowed on an sd variant"), ("variants[0].numSpeculativeTokens", "is only allowed on an sd variant"),
        ("variants[0].draftMaxModelLen", "is only allowed on an sd variant"),
        ("variants[0].speculationMethod", "is only allowed on an sd variant")]),
    (SMALL, {"variants.1.draft": None}, [("variants[1].draft", "is required on an sd variant")]),
    (SMALL, {"variants.1.numSpeculativeTokens": None}, [("variants[1].numSpeculativeTokens", "is required on an sd variant (1..15)")]),
    (SMALL, {"variants.1.numSpeculativeTokens": "7"}, [("variants[1].numSpeculativeTokens", "must be an integer, got '7'")]),
    (SMALL, {"variants.1.numSpeculativeTokens": 0}, [("variants[1].numSpeculativeTokens", "0 is outside 1..15")]),
    (SMALL, {"variants.1.numSpeculativeTokens": 16}, [("variants[1].numSpeculativeTokens", "16 is outside 1..15")]),
    (SMALL, {"variants.1.draft": "x/y", "variants.1.speculationMethod": "eagle"},
     [("variants[1].draft", f"'x/y' is not a known model: declare it under `models` (docs/configuration.md, 'Models'); known: {KNOWN}")]),
    (SMALL, {"variants.1.target": "x/y", "variants.1.speculationMethod": "eagle"},
     [("variants[1].target", f"'x/y' is not a known model: declare it under `models` (docs/configuration.md, 'Models'); known: {KNOWN}")]),
    (SMALL, {"variants.1.draft": "meta-llama/Llama-3.2-1B", "huggingFaceToken": "hf_x"}, [
        ("variants[1].draft", "meta-llama/Llama-3.2-1B uses the llama3 tokenizer but the target Qwen/Qwen3-32B uses qwen3; "
                              "speculative decoding needs a shared tokenizer")]),
    (SMALL, {"variants.1.draftMaxModelLen": 127}, [("variants[1].draftMaxModelLen", "127 is outside >= 128")]),
    (SMALL, {"variants.1.draftMaxModelLen": 1025},
     [("variants[1].draftMaxModelLen", "1025 is above serving.maxModelLen 1024; vLLM refuses a draft longer than its target")]),
    (SMALL, {"benchmark.inputTokens": 64, "benchmark.outputTokens": 600, "variants.1.draftMaxModelLen": 670}, [
        ("variants[1].draftMaxModelLen", "670 is smaller than the longest benchmark sequence plus the speculation window (671)")]),
    (SMALL, {"benchmark.inputTokens": 64, "benchmark.outputTokens": 600, "variants.1.draftMaxModelLen": 128,
             "variants.1.numSpeculativeTokens": None}, [
        ("variants[1].numSpeculativeTokens", "is required on an sd variant (1..15)"),
        ("variants[1].draftMaxModelLen", "128 is smaller than the longest benchmark sequence plus the speculation window (664)")]),
    (SMALL, {"benchmark.inputTokens": 0, "variants.1.draftMaxModelLen": 128}, [("benchmark.inputTokens", "0 is outside >= 1")]),
    (SMALL, {"variants.1.speculationMethod": "medusa"},
     [("variants[1].speculationMethod", "'medusa' is not one of draft_model, eagle, eagle3, dflash")]),
    (SMALL, {"variants.1.speculationMethod": "eagle"}, [
        ("variants[1].speculationMethod", "'eagle' does not fit Qwen/Qwen3-1.7B, which is a full model; use 'draft_model' or omit the key")]),
    (SMALL, {"variants.1.quantization": "int4"}, [("variants[1].quantization", "'int4' is not one of none, fp8")]),
    (SMALL, {"variants.1.quantization": "fp8"}, [
        ("variants[1].quantization", "fp8 needs an FP8 checkpoint as target; Qwen/Qwen3-32B is bf16")]),
    (PLUGIN, {"variants.1.quantization": "fp8"}, [
        ("variants[1].quantization", "fp8 needs an FP8 checkpoint as target; meta-llama/Llama-3.1-8B-Instruct is bf16"),
        ("variants[1].quantization", "fp8 with rescaled weights is an NxD Inference path: use engine nxdi-legacy")]),
    (SMALL, {"variants.0.target": "meta-llama/Llama-3.1-405B-Instruct-FP8", "huggingFaceToken": "hf_x"},
     [("variants[0].quantization", "meta-llama/Llama-3.1-405B-Instruct-FP8 is an FP8 checkpoint; set quantization: fp8")]),
    (SMALL, {"variants.0.weightsPath": "weights/x"},
     [("variants[0].weightsPath", "is no longer needed: the program prepares every model in the store itself, FP8 rescaled "
                                  "for Neuron included (docs/models.md, 'Models prepared once'); remove it")]),
    (SMALL, {"variants.1.target": "RedHatAI/Qwen3-32B-speculator.eagle3"},
     [("variants[1].target", "RedHatAI/Qwen3-32B-speculator.eagle3 is an EAGLE3 head, not a model that can be served")]),
    (SMALL, {"variants.1.baseline": "sd"}, [("variants[1].baseline", "'sd' is not another baseline variant; baselines: base")]),
    (SMALL, {"variants.0.baseline": "base"}, [("variants[0].baseline", "'base' is not another baseline variant; baselines: base")]),
    (SMALL, {"variants.1.image": "x:latest"},
     [("variants[1].image", "'x:latest' is not pinned: give a version tag (not latest) or a @sha256 digest")]),
    (SMALL, {"variants.1.neuronConfig": {"tp_degree": 1}},
     [("variants[1].neuronConfig.tp_degree", "is set by the program from typed config for nxdi-legacy; remove it")]),
    (PLUGIN, {"variants.1.draftMaxModelLen": 512},
     [("variants[1].draftMaxModelLen", "vllm-neuron drafts share the target's length; the plugin has no draft max_model_len")]),
    (PLUGIN, {"variants.1.speculationMethod": "dflash"}, [
        ("variants[1].speculationMethod", "'dflash' does not fit RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3, which is an EAGLE3 head; "
                                          "use 'eagle3' or omit the key")]),
    (PLUGIN, {"variants.1.engine": "nxdi-legacy"}, [
        ("variants[1].draft", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 is an EAGLE3 head, which speculates as 'eagle3' on "
                              "vllm-neuron only, not on nxdi-legacy"),
        ("variants[1].engine", "nxdi-legacy differs from its baseline 'base''s vllm-neuron; compare like with like")]),
    (PLUGIN, {"variants.0.engine": "nxdi-legacy"},
     [("variants[1].engine", "vllm-neuron differs from its baseline 'base''s nxdi-legacy; compare like with like")]),
    (SMALL, {"variants.1.engine": "vllm-neuron"}, [
        ("variants[1].draft", QWEN_DRAFT_ON_PLUGIN),
        ("variants[1].engine", PLUGIN_HAS_NO_QWEN3),
        ("variants[1].engine", "vllm-neuron differs from its baseline 'base''s nxdi-legacy; compare like with like")]),
    (PLUGIN, {"variants.1.draft": "RedHatAI/Qwen3-32B-speculator.eagle3"}, [
        ("variants[1].draft", "RedHatAI/Qwen3-32B-speculator.eagle3 uses the qwen3 tokenizer but the target "
                              "meta-llama/Llama-3.1-8B-Instruct uses llama3; speculative decoding needs a shared tokenizer"),
        ("variants[1].draft", "RedHatAI/Qwen3-32B-speculator.eagle3 was trained for Qwen/Qwen3-32B, "
                              "not for meta-llama/Llama-3.1-8B-Instruct")]),
    (PLUGIN, {"variants.1.target": "meta-llama/Llama-3.1-8B"}, [
        ("variants[1].draft", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 was trained for meta-llama/Llama-3.1-8B-Instruct, "
                              "not for meta-llama/Llama-3.1-8B")]),
], ids=edits_id)
def test_variant_rules_name_the_key_and_what_is_allowed(base, edits, problems):
    assert problem_list(with_edits(base, edits)) == problems


def test_an_sd_variant_whose_draft_or_token_count_is_null_has_none():
    """A null value is no value: before this was reported, `draft: null` slipped through and the
    server was given a speculative config with model None."""
    sd = {"name": "sd", "role": "sd", "draft": None, "numSpeculativeTokens": None}
    assert problem_list(with_edits(SMALL, {"variants.1": sd})) == [
        ("variants[1].draft", "is required on an sd variant"),
        ("variants[1].numSpeculativeTokens", "is required on an sd variant (1..15)")]


def test_two_variants_that_would_compile_into_one_folder():
    path = parse(SMALL).variant("base").artifact_path
    values = with_edits(SMALL, {"variants": [*SMALL["variants"], {"name": "again", "role": "baseline"}], "variants.1.baseline": "base"})
    assert problem_list(values) == [("variants", f"two variants compile into the same path {path}; they would overwrite each other")]


def test_a_compiler_variable_in_the_environment_compiles_into_a_path_of_its_own():
    """NEURON_CC_FLAGS reaches neuronx-cc: graphs built without it must not be loaded with it."""
    plain = parse(SMALL).variant("base").artifact_path
    flagged = parse(with_edits(SMALL, {"serving.environment": {"NEURON_CC_FLAGS": "--auto-cast=none"}})).variant("base")
    other = parse(with_edits(SMALL, {"serving.environment": {"NEURON_CC_FLAGS": "-O1"}})).variant("base")
    assert len({plain, flagged.artifact_path, other.artifact_path}) == 3
    assert flagged.compile_settings["environment"] == {"NEURON_CC_FLAGS": "--auto-cast=none"}
    # A stack without variables keeps the path it had before the environment entered the fingerprint.
    assert "environment" not in parse(SMALL).variant("base").compile_settings


DFLASH = with_edits(PLUGIN, {"models": DFLASH_HEAD, "variants.1.draft": "example/Llama-3.1-8B-Instruct-dflash",
                             "serving.devicesPerVariant": 2})


@pytest.mark.parametrize("devices, lnc", [(1, 2), (1, 1), (2, 2)])
def test_dflash_runs_at_tensor_parallel_4_or_8(devices, lnc):
    sd = parse(with_edits(DFLASH, {"serving.devicesPerVariant": devices, "serving.logicalNeuronCores": lnc})).variant("sd")
    assert (sd.speculation_method, sd.speculative_config["method"]) == ("dflash", "dflash")


@pytest.mark.parametrize("edits, problems", [
    ({"serving.devicesPerVariant": 4}, [("variants[1].draft", "DFlash runs at TP 4 or 8; this stack's TP is 16 "
                                                              "(serving.devicesPerVariant, serving.logicalNeuronCores)")]),
    ({"serving.devicesPerVariant": 2, "serving.logicalNeuronCores": 1}, [
        ("variants[1].draft", "DFlash runs at TP 4 or 8; this stack's TP is 16 (serving.devicesPerVariant, serving.logicalNeuronCores)")]),
    ({"variants.1.quantization": "fp8"}, [
        ("variants[1].quantization", "DFlash is validated with BF16 target, draft and KV cache only"),
        ("variants[1].quantization", "fp8 needs an FP8 checkpoint as target; meta-llama/Llama-3.1-8B-Instruct is bf16"),
        ("variants[1].quantization", "fp8 with rescaled weights is an NxD Inference path: use engine nxdi-legacy")]),
    ({"variants.1.quantization": "int4"}, [("variants[1].quantization", "'int4' is not one of none, fp8")]),
    # A refused device count or core size is reported alone, not as a TP DFlash cannot run at.
    ({"serving.devicesPerVariant": 3}, [("serving.devicesPerVariant", "3 is not one of 1, 2, 4, 8, 16")]),
    ({"serving.devicesPerVariant": 1, "serving.logicalNeuronCores": 4}, [("serving.logicalNeuronCores", "4 is not one of 1, 2")]),
], ids=["tp-16", "tp-16-at-lnc-1", "fp8", "unknown-quantization", "refused-devices", "refused-cores"])
def test_dflash_limits(edits, problems):
    assert problem_list(with_edits(DFLASH, edits)) == problems


def test_an_eagle_head_on_the_legacy_engine_switches_eagle_speculation_on():
    head = {"example/Qwen3-32B-eagle": {"tokenizerFamily": "qwen3", "gated": False, "paramsBillion": 0.5, "checkpointBytes": 10 ** 9, "kind": "eagle-head",
                                        "draftFor": ["Qwen/Qwen3-32B"]}}
    sd = parse(with_edits(SMALL, {"models": head, "variants.1.draft": "example/Qwen3-32B-eagle",
                                  "variants.1.speculationMethod": "eagle"})).variant("sd")
    assert sd.speculation_method == "eagle" and sd.speculative_config["method"] == "eagle"
    assert sd.neuron_config["enable_eagle_speculation"] is True


@pytest.mark.parametrize("neuron_config, problems", [
    ({"max_context_length": 2048}, [("variants[0].neuronConfig.max_context_length", "2048 is above serving.maxModelLen 1024")]),
    ({"context_encoding_buckets": [512, 2048]},
     [("variants[0].neuronConfig.context_encoding_buckets", "the largest bucket 2048 is above 1024")]),
    ({"max_context_length": 512, "context_encoding_buckets": [256, 1024]},
     [("variants[0].neuronConfig.context_encoding_buckets", "the largest bucket 1024 is above 512")]),
    ({"token_generation_buckets": [128, 2048, 4096]},
     [("variants[0].neuronConfig.token_generation_buckets", "the largest bucket 4096 is above 1024")]),
    ({"token_generation_buckets": [1024, 512]}, [("variants[0].neuronConfig.token_generation_buckets",
                                                  "must be a non-empty, strictly ascending list of integers")]),
    ({"token_generation_buckets": []}, [("variants[0].neuronConfig.token_generation_buckets",
                                         "must be a non-empty, strictly ascending list of integers")]),
    ({"token_generation_buckets": "x"}, [("variants[0].neuronConfig.token_generation_buckets",
                                          "must be a non-empty, strictly ascending list of integers")]),
    ({"token_generation_buckets": [1, 1]}, [("variants[0].neuronConfig.token_generation_buckets",
                                             "must be a non-empty, strictly ascending list of integers")]),
    ({"context_encoding_buckets": [1, 2.0]}, [("variants[0].neuronConfig.context_encoding_buckets",
                                               "must be a non-empty, strictly ascending list of integers")]),
    ({"max_context_length": "big", "context_encoding_buckets": [128]},
     [("variants[0].neuronConfig.max_context_length", "must be an integer, got 'big'")]),
    ({"max_context_length": True}, [("variants[0].neuronConfig.max_context_length", "must be an integer, got True")]),
], ids=["context-too-long", "context-bucket-above-length", "context-bucket-above-context", "generation-bucket-above-length",
        "descending", "empty", "not-a-list", "repeated", "not-integers", "context-not-an-integer", "context-a-boolean"])
def test_legacy_bucket_lists_fit_the_lengths_compiled_for(neuron_config, problems):
    assert problem_list(with_edits(SMALL, {"variants.0.neuronConfig": neuron_config})) == problems


@pytest.mark.parametrize("neuron_config", [
    {"max_context_length": 1024, "context_encoding_buckets": [512, 1024], "token_generation_buckets": [512, 1024]},
    {"max_context_length": 512, "context_encoding_buckets": [128, 512], "token_generation_buckets": [1024]},
    {"context_encoding_buckets": [1024]},
])
def test_legacy_bucket_lists_up_to_their_limits_are_accepted(neuron_config):
    base = parse(with_edits(SMALL, {"variants.0.neuronConfig": neuron_config})).variant("base")
    assert base.neuron_config_extra == neuron_config


@pytest.mark.parametrize("seqs, length, batched, seq_buckets, token_buckets", [
    (6, 1000, None, [1, 2, 4, 6], [128, 256, 512, 1000]),
    (1, 32768, None, [1], [128, 256, 512, 1024, 2048, 4096, 8192]),
    (256, 2048, 512, [1, 2, 4, 8, 16, 32, 64, 128, 256], [128, 256, 512]),
])
def test_the_plugins_bucket_lists_end_at_the_limits_they_are_derived_from(seqs, length, batched, seq_buckets, token_buckets):
    """The plugin requires the largest buckets to equal max_num_seqs and max_num_batched_tokens; the
    program builds both lists (a stack cannot set them), so this is where that rule is kept."""
    edits = {"serving.maxNumSeqs": seqs, "serving.maxModelLen": length, **({"serving.maxNumBatchedTokens": batched} if batched else {})}
    for variant in parse(with_edits(PLUGIN, edits)).variants:
        assert variant.neuron_config["num_seqs_buckets"] == seq_buckets
        assert variant.neuron_config["num_batched_tokens_buckets"] == token_buckets
