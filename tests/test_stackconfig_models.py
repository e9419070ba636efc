"""Models: the catalog, models a stack declares under `models`, and which of a stack's models are
gated (they need the Hugging Face token, even when the rest of the config is broken)."""
from __future__ import annotations

import pytest

from stackconfig.catalog import Checkpoint, ModelInfo
from stackconfig.parse import gated_models
from stackconfig.source import PROJECT

from .stackconfig_helpers import PLUGIN, SMALL, parse, problem_list, with_edits

HEAD = {"tokenizerFamily": "llama3", "gated": False, "paramsBillion": 0.5, "checkpointBytes": 10 ** 9, "kind": "eagle3-head", "draftFor": ["meta-llama/Llama-3.1-8B-Instruct"]}


def test_a_declared_model_is_served_with_the_facts_given():
    model = {"tokenizerFamily": "qwen3.5_x-y", "gated": True, "paramsBillion": 2000, "checkpointDtype": "fp8", "kind": "model",
             "layers": 40, "checkpointBytes": 2 * 10 ** 12, "bf16Modules": ["lm_head", "layers.0.self_attn"]}
    # One 4096-token bucket: FP8 kernels must not meet buckets of 1024 or less (stackconfig/semantics.py).
    values = with_edits(SMALL, {"models": {"example/Big-FP8": model}, "variants.0.target": "example/Big-FP8",
                                "variants.0.quantization": "fp8", "huggingFaceToken": "hf_x",
                                "serving.maxModelLen": 4096, "serving.neuronConfig": {"enable_bucketing": False},
                                # The whole node: 2000B parameters and their compiled set need ~4 TiB of its NVMe.
                                "serving.devicesPerVariant": 16})
    base = parse(values).variant("base")
    assert base.target_info == ModelInfo("qwen3.5_x-y", gated=True, params_billion=2000, checkpoint_dtype="fp8", kind="model",
                                         draft_for=(), layers=40, bf16_modules=("lm_head", "layers.0.self_attn"),
                                         checkpoint=Checkpoint(2 * 10 ** 12, "declared in the stack (models.example/Big-FP8.checkpointBytes)"))
    assert base.gated_models == ("example/Big-FP8",)
    assert base.neuron_config["modules_to_not_convert"] == ["lm_head", "layers.0.self_attn"]


def test_a_declared_head_has_defaults_and_its_targets():
    spec = parse(with_edits(PLUGIN, {"models": {"example/Llama-3.1-8B-head": {**HEAD, "paramsBillion": 1}},
                                     "variants.1.draft": "example/Llama-3.1-8B-head"}))
    assert spec.variant("sd").draft_info == ModelInfo("llama3", gated=False, params_billion=1, checkpoint_dtype="bf16",
                                                      kind="eagle3-head", draft_for=("meta-llama/Llama-3.1-8B-Instruct",),
                                                      checkpoint=Checkpoint(10 ** 9, "declared in the stack (models.example/Llama-3.1-8B-head.checkpointBytes)"))
    assert spec.variant("sd").speculation_method == "eagle3"


def test_a_declared_plain_model_is_a_full_model_by_default():
    model = {"tokenizerFamily": "qwen3", "gated": False, "paramsBillion": 0.1, "checkpointBytes": 2 * 10 ** 8}
    sd = parse(with_edits(SMALL, {"models": {"example/Tiny": model}, "variants.1.draft": "example/Tiny"})).variant("sd")
    assert (sd.draft_info.kind, sd.draft_info.draft_for, sd.speculation_method) == ("model", (), "draft_model")


def test_declared_heads_may_speculate_for_each_other():
    models = {"example/A": {"tokenizerFamily": "llama3", "gated": False, "paramsBillion": 30, "checkpointBytes": 6 * 10 ** 10},
              "example/A-head": {**HEAD, "draftFor": ["example/A"]}}
    values = with_edits(PLUGIN, {"models": models, "serving.target": "example/A", "variants.1.draft": "example/A-head"})
    assert parse(values).variant("sd").draft == "example/A-head"


MODEL_KEYS = "['bf16Modules', 'checkpointBytes', 'checkpointDtype', 'draftFor', 'gated', 'kind', 'layers', 'paramsBillion', 'tokenizerFamily']"
REQUIRED = [("models.a/b.tokenizerFamily", "is required (a string)"), ("models.a/b.gated", "is required (true or false)"),
            ("models.a/b.paramsBillion", "is required (a number of billions)"),
            ("models.a/b.checkpointBytes", "is required (the checkpoint's bytes: metadata.total_size in its "
                                           "model.safetensors.index.json at the revision you prepare)")]


@pytest.mark.parametrize("models, problems", [
    ("x", [("models", "must be an object, got 'x'")]),
    ({"no-slash": {}, "Qwen/Qwen3-32B": {}, 7: {}}, [
        ("models.no-slash", "model ids look like <organization>/<name> (a Hugging Face repository)"),
        ("models.Qwen/Qwen3-32B", "is already in the catalog (stackconfig/catalog.py); remove it here"),
        ("models.7", "model ids look like <organization>/<name> (a Hugging Face repository)")]),
    ({"a/b": "x"}, [("models.a/b", f"must be an object with keys {MODEL_KEYS}, got str"), *REQUIRED]),
    ({"a/b": {}}, REQUIRED),
    ({"a/b": {"tokenizerFamily": "Llama 3", "gated": "no", "paramsBillion": 0, "kind": "lora", "checkpointDtype": "int8", "size": 1,
              "layers": 0, "bf16Modules": ["lm_head", "layers.0/mlp", 3], "checkpointBytes": 0}}, [
        ("models.a/b.size", "unknown key; allowed: bf16Modules, checkpointBytes, checkpointDtype, draftFor, gated, kind, layers, paramsBillion, tokenizerFamily"),
        ("models.a/b.kind", "'lora' is not one of model, eagle-head, eagle3-head, dflash-head"),
        ("models.a/b.tokenizerFamily", "'Llama 3' is not valid: e.g. llama3"),
        ("models.a/b.gated", "must be true or false, got 'no'"),
        ("models.a/b.paramsBillion", "0 is outside 0..2000"),
        ("models.a/b.checkpointDtype", "'int8' is not one of bf16, fp8"),
        ("models.a/b.layers", "0 is outside 1..1000"),
        ("models.a/b.bf16Modules[1]", "'layers.0/mlp' is not a module name (e.g. lm_head, layers.0.self_attn)"),
        ("models.a/b.bf16Modules[2]", "3 is not a module name (e.g. lm_head, layers.0.self_attn)"),
        ("models.a/b.checkpointBytes", "0 is not positive")]),
    ({"a/b": {"tokenizerFamily": "qwen3", "gated": False, "paramsBillion": 2001, "checkpointBytes": 10 ** 9, "draftFor": ["Qwen/Qwen3-32B"]}}, [
        ("models.a/b.draftFor", "lists the targets a draft head was trained for; full models have none"),
        ("models.a/b.paramsBillion", "2001 is outside 0..2000")]),
    ({"a/b": {"tokenizerFamily": "qwen3", "gated": False, "paramsBillion": "big", "checkpointBytes": 10 ** 9, "kind": "eagle-head"}}, [
        ("models.a/b.draftFor", "lists the targets a draft head was trained for; full models have none"),
        ("models.a/b.paramsBillion", "must be a number of billions, got 'big'")]),
    ({"a/b": {**HEAD, "paramsBillion": True}}, [("models.a/b.paramsBillion", "must be a number of billions, got True")]),
    ({"a/b": {**HEAD, "draftFor": ["x/y", "Qwen/Qwen3-32B"]}}, [("models.a/b.draftFor", "'x/y' is not a known model")]),
    ({"a/b": {**HEAD, "draftFor": "Qwen/Qwen3-32B"}}, [
        ("models.a/b.draftFor", "must be a list, got 'Qwen/Qwen3-32B'"),
        ("models.a/b.draftFor", "lists the targets a draft head was trained for; full models have none")]),
    ({"a/b": {**HEAD, "draftFor": [5, ["Qwen/Qwen3-32B"]]}}, [("models.a/b.draftFor[0]", "5 is not a model id"),
                                                           ("models.a/b.draftFor[1]", "['Qwen/Qwen3-32B'] is not a model id")]),
], ids=["not-an-object", "bad-ids", "model-not-an-object", "nothing-given", "bad-values", "model-with-targets-too-big",
        "head-without-targets", "boolean-size", "unknown-target", "targets-not-a-list", "targets-not-ids"])
def test_declared_model_rules(models, problems):
    assert problem_list(with_edits(SMALL, {"models": models})) == problems


def test_a_declared_model_with_bad_facts_still_takes_part_in_the_checks():
    """Parsing goes on past a bad fact: the draft's tokenizer is unknown (''), its dtype bf16."""
    draft = {"tokenizerFamily": "Qwen 3", "gated": False, "paramsBillion": 1, "checkpointBytes": 2 * 10 ** 9}
    target = {"tokenizerFamily": "qwen3", "gated": False, "paramsBillion": 30, "checkpointBytes": 6 * 10 ** 10, "checkpointDtype": "int4"}
    values = with_edits(SMALL, {"models": {"example/Draft": draft, "example/Target": target}, "variants.1.draft": "example/Draft",
                                "variants.1.target": "example/Target", "variants.1.quantization": "fp8"})
    assert problem_list(values) == [
        ("models.example/Draft.tokenizerFamily", "'Qwen 3' is not valid: e.g. llama3"),
        ("models.example/Target.checkpointDtype", "'int4' is not one of bf16, fp8"),
        ("variants[1].draft", "example/Draft uses the  tokenizer but the target example/Target uses qwen3; speculative decoding "
                              "needs a shared tokenizer"),
        ("variants[1].quantization", "fp8 needs an FP8 checkpoint as target; example/Target is bf16")]


GATED = "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize("config, gated", [
    ({}, []),
    ({f"{PROJECT}:serving": {"target": GATED}}, [GATED]),
    ({f"{PROJECT}:serving": GATED}, []),
    ({f"{PROJECT}:serving": {"target": [GATED]}}, []),
    ({f"{PROJECT}:variants": [{"target": GATED, "draft": "meta-llama/Llama-3.2-1B"}, "x", {"draft": "Qwen/Qwen3-1.7B"}]},
     [GATED, "meta-llama/Llama-3.2-1B"]),
    ({f"{PROJECT}:variants": {"target": GATED}}, []),
    ({f"{PROJECT}:variants": 5}, []),
    ({f"{PROJECT}:models": {"a/b": {"gated": True}, "c/d": {"gated": "yes"}, "e/f": "x"},
      f"{PROJECT}:variants": [{"target": "a/b", "draft": "c/d"}, {"target": "e/f"}], f"{PROJECT}:serving": {"target": "a/b"}}, ["a/b"]),
    ({f"{PROJECT}:models": "x", f"{PROJECT}:serving": {"target": GATED}}, [GATED]),
    ({"other:serving": {"target": GATED}}, []),
    ({f"{PROJECT}:x:serving": {"target": GATED}}, []),
], ids=["nothing", "serving-target", "serving-not-an-object", "target-not-a-string", "variants", "variants-an-object", "variants-a-number",
        "declared", "declared-not-an-object", "other-project", "nested-key"])
def test_the_gated_models_a_config_names_whatever_else_is_wrong(config, gated):
    assert gated_models(PROJECT, config) == gated


LLAMA = with_edits(SMALL, {"serving.target": GATED, "serving.devicesPerVariant": 1, "variants.1.draft": "meta-llama/Llama-3.2-1B"})


def test_gated_models_need_the_token():
    assert problem_list(LLAMA) == problem_list(with_edits(LLAMA, {"huggingFaceToken": ""})) == [
        ("huggingFaceToken", "is required for the gated model(s) meta-llama/Llama-3.1-8B, meta-llama/Llama-3.2-1B: "
                             "pulumi config set --secret huggingFaceToken hf_...")]
    spec = parse(with_edits(LLAMA, {"huggingFaceToken": "hf_x"}))
    assert spec.requires_hugging_face_token and spec.variant("sd").gated_models == (GATED, "meta-llama/Llama-3.2-1B")
    assert not parse(SMALL).requires_hugging_face_token
