"""What the servers are told, checked against what their engines do with it (stackconfig/semantics.py):
every stack's rendered servers pass the checks on the first start and on a restart from the model
store, and each check fires on the setting it guards (the configurations shipped before this file
fail them: seed 004's FP8 variants, its sampling override, its 1024 bucket, the plugin's empty
sampling config)."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from offline.stacks import load_stack
from stackconfig import ConfigError, parse_stack_config
from stackconfig.catalog import MODELS
from stackconfig.engines.failure import FIRST_START, RESTART
from stackconfig.engines.nxdi_legacy import (
    FORK_RELEASE,
    RUNNER_SAMPLING_READ,
    OnDeviceSampling,
    legacy_first_start,
    legacy_override,
    legacy_reload,
)
from stackconfig.engines.vllm_neuron import plugin_failures
from stackconfig.semantics import engine_failures, serves_greedily
from stackconfig.server import arguments
from stackconfig.source import PROJECT

from .conftest import STANDALONE, recorded

ROOT = Path(__file__).resolve().parent.parent
LLAMA_405B = "llama3.1-405b-llama3.2-1b"
EAGLE3 = "llama3.1-8b-instruct-eagle3"


def served(stack: str):
    """(variant, vllm serve arguments) of every vLLM server the plan renders for a stack (a
    distributed variant's pods run distributed/'s servers, whose NxD Inference calls are listed in
    distributed/data/nxdi-0.6.10598-calls.json: tests/test_distributed_neuron.py)."""
    spec = load_stack(stack).spec()
    for deployment in recorded(stack).of_type("kubernetes:apps/v1:Deployment"):
        (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
        variant = spec.variant(deployment.inputs["metadata"]["labels"]["sd-trn2/variant"])
        if len(variant.servers) == 1:
            yield variant, container["args"]


@pytest.mark.parametrize("stack", STANDALONE)
def test_every_rendered_server_passes_its_engines_checks_on_both_starts(stack):
    checked = 0
    for variant, args in served(stack):
        assert args == arguments(variant)
        assert engine_failures(variant, args) == [], variant.name
        if variant.engine == "nxdi-legacy":
            override = legacy_override(args)
            restarted = legacy_reload(legacy_first_start(variant, override).saved, override)
            # The restart really ran: the config it serves with is the one rebuilt from config.json.
            assert isinstance(restarted.target["on_device_sampling_config"], OnDeviceSampling)
            assert (restarted.draft is not None) == variant.is_speculative
        checked += 1
    # Every vLLM server: the baseline and, where vLLM serves one, an SD variant (a distributed study's
    # configurations are distributed/'s servers, tests/test_distributed_stack.py).
    assert checked >= 1 + any(v.is_speculative and len(v.servers) == 1 for v in load_stack(stack).spec().variants)


def variant_of(stack: str, name: str):
    return load_stack(stack).spec().variant(name)


def problems_of(config: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", config)
    return dict(caught.value.problems)


# Defect 1: FP8 with the QKV kernel needs modules_to_not_convert (NxDI models/config.py L425-429).

TUTORIAL_TARGET_LIST = {"lm_head", "layers.0.mlp", "layers.125.mlp", *(f"layers.{i}.self_attn" for i in range(126))}
"""The 405B tutorial's modules_to_not_convert.json, target list: 129 entries."""
TUTORIAL_DRAFT_LIST = {"lm_head", *(f"layers.{i}.mlp" for i in range(16)), *(f"layers.{i}.self_attn" for i in range(16)), "fc"}
"""Its draft list: 34 entries, the whole 16-layer draft, and fc (an EAGLE head's fusion layer)."""


@pytest.mark.parametrize("name", ["fp8", "sd-fp8"])
def test_fp8_variants_keep_the_tutorials_modules_in_bf16(name):
    override = legacy_override(arguments(variant_of(LLAMA_405B, name)))
    assert len(override["modules_to_not_convert"]) == 129
    assert set(override["modules_to_not_convert"]) == TUTORIAL_TARGET_LIST
    if name == "sd-fp8":
        # A plain Llama draft has no fc layer; the rest is the tutorial's list.
        assert set(override["draft_model_modules_to_not_convert"]) == TUTORIAL_DRAFT_LIST - {"fc"}
    else:
        assert "draft_model_modules_to_not_convert" not in override


def test_a_bf16_variant_gets_no_list():
    assert "modules_to_not_convert" not in legacy_override(arguments(variant_of(LLAMA_405B, "base-bf16")))


def test_without_the_list_the_fp8_server_stops_at_its_first_start():
    variant = variant_of(LLAMA_405B, "sd-fp8")
    override = legacy_override(arguments(variant))
    del override["modules_to_not_convert"]
    (failure,) = legacy_first_start(variant, override).failures
    assert (failure.start, failure.setting) == (FIRST_START, "modules_to_not_convert")
    assert failure.error == "AssertionError: Could not find modules_to_not_convert for quantized model."
    assert failure.source.path.endswith("models/config.py") and failure.source.lines == "425-429"


def test_the_draft_inherits_the_targets_flags_and_is_validated_again_on_restart():
    variant = variant_of(LLAMA_405B, "sd-fp8")
    override = legacy_override(arguments(variant))
    first = legacy_first_start(variant, override)
    assert first.draft["quantized_mlp_kernel_enabled"] and first.draft["qkv_kernel_enabled"]
    assert first.draft["modules_to_not_convert"] == override["draft_model_modules_to_not_convert"]
    # Neither list: the first start stops at the target; config.json would hold a draft with the
    # same flags and no list, which its rebuild refuses too.
    del override["modules_to_not_convert"], override["draft_model_modules_to_not_convert"]
    restarted = legacy_reload(legacy_first_start(variant, override).saved, override)
    assert [f.setting for f in restarted.failures] == ["modules_to_not_convert", "modules_to_not_convert"]


def test_an_fp8_target_without_its_bf16_modules_is_refused_by_key():
    config = copy.deepcopy(load_stack(LLAMA_405B).config)
    config.pop("sd-trn2:modelRevisions")  # its pins name the draft replaced here
    fp8 = MODELS["meta-llama/Llama-3.1-405B-Instruct-FP8"]
    config["sd-trn2:models"] = {"example/Llama-FP8": {"tokenizerFamily": "llama3", "gated": True, "paramsBillion": 405, "checkpointBytes": 487 * 10 ** 9,
                                                      "checkpointDtype": "fp8"},
                                "example/draft": {"tokenizerFamily": "llama3", "gated": True, "paramsBillion": 1,
                                                  "checkpointBytes": 2 * 10 ** 9}}
    for variant in config["sd-trn2:variants"][1:]:
        variant["target"] = "example/Llama-FP8"
    config["sd-trn2:variants"][2]["draft"] = "example/draft"
    found = problems_of(config)
    assert "models.example/Llama-FP8.bf16Modules" in found["variants[1].target"]
    assert "models.example/draft.layers" in found["variants[2].draft"]
    config["sd-trn2:models"]["example/Llama-FP8"]["bf16Modules"] = list(fp8.bf16_modules)
    config["sd-trn2:models"]["example/draft"]["layers"] = 16
    spec = parse_stack_config(PROJECT, "test", config)
    assert set(spec.variant("sd-fp8").neuron_config["modules_to_not_convert"]) == TUTORIAL_TARGET_LIST


# Defect 2: an override is copied onto the reloaded config with setattr (the fork's loader
# L181-187, L548-553), so a sampling config given there stays a plain dict.

SEED_004_SAMPLING = {"on_device_sampling_config": {"top_k": 1}}


@pytest.mark.parametrize("name", ["base-bf16", "sd-fp8"])
def test_a_sampling_config_in_the_override_starts_once_and_breaks_every_restart(name):
    variant = variant_of(LLAMA_405B, name)
    override = {**legacy_override(arguments(variant)), **SEED_004_SAMPLING}
    first = legacy_first_start(variant, override)
    assert first.failures == [] and isinstance(first.target["on_device_sampling_config"], OnDeviceSampling)
    (failure,) = legacy_reload(first.saved, override).failures
    assert (failure.start, failure.setting) == (RESTART, "on_device_sampling_config")
    assert "global_topk" in failure.error and failure.source == RUNNER_SAMPLING_READ


def test_validation_refuses_a_sampling_config_in_the_legacy_override():
    config = copy.deepcopy(load_stack(LLAMA_405B).config)
    config["sd-trn2:serving"]["neuronConfig"].update(SEED_004_SAMPLING)
    message = problems_of(config)["serving.neuronConfig.on_device_sampling_config"]
    assert message.startswith("the nxdi-legacy server would fail on the restart from the model store")


@pytest.mark.parametrize("name, expected", [
    ("base-bf16", OnDeviceSampling(dynamic=True)),  # the fork's default for a baseline: follows each request
    ("sd-fp8", OnDeviceSampling(top_k=1, do_sample=False)),  # its default for fused speculation: greedy
])
def test_the_405b_servers_restart_with_the_engines_own_sampling_config(name, expected):
    variant = variant_of(LLAMA_405B, name)
    override = legacy_override(arguments(variant))
    assert "on_device_sampling_config" not in override
    restarted = legacy_reload(legacy_first_start(variant, override).saved, override)
    assert restarted.target["on_device_sampling_config"] == expected


def test_the_stand_in_sampling_config_has_nxdis_defaults():
    # models/config.py L808-818 at v0.6.10598.
    assert dataclasses.asdict(OnDeviceSampling()) == {"do_sample": False, "top_k": 1, "top_p": 1.0, "temperature": 1.0,
                                                      "dynamic": False, "deterministic": False, "global_topk": 256}
    assert OnDeviceSampling.from_mapping({"top_k": 1, "unknown": 3}) == OnDeviceSampling()


# Defect 3: the tutorial's current buckets and warm-up setting.

def test_the_405b_stack_compiles_with_the_tutorials_current_buckets():
    for variant, args in served(LLAMA_405B):
        override = legacy_override(args)
        assert override["context_encoding_buckets"] == [2048, 4096, 10240, 12288]
        assert override["token_generation_buckets"] == [12800] and override["skip_warmup"] is True


def test_kernels_with_a_context_bucket_of_1024_are_refused():
    config = copy.deepcopy(load_stack(LLAMA_405B).config)
    config["sd-trn2:serving"]["neuronConfig"]["context_encoding_buckets"] = [1024, 2048, 4096, 10240, 12288]
    message = problems_of(config)["serving.neuronConfig.context_encoding_buckets"]
    assert "[1024]" in message and "Numerical Error" in message and "trn2-llama3.1-405b-speculative-tutorial.rst" in message


def test_kernels_with_nxdis_own_buckets_are_refused_too():
    # No list: NxDI buckets prefill in powers of two from 128 (autobucketing.py generate_buckets).
    config = copy.deepcopy(load_stack(LLAMA_405B).config)
    del config["sd-trn2:serving"]["neuronConfig"]["context_encoding_buckets"]
    message = problems_of(config)["variants[0]"]
    assert "[128, 256, 512, 1024]" in message and "Numerical Error" in message


# Defect 4: the plugin's on-device sampling.

def test_plugin_servers_sample_greedily_on_the_device():
    for variant, args in served(EAGLE3):
        neuron = json.loads(args[args.index("--additional-config") + 1])["neuron_config"]
        assert neuron["on_device_sampling_config"] == {"all_greedy": True}


@pytest.mark.parametrize("sampling, settings", [({}, ["on_device_sampling_config"]),
                                                (None, ["on_device_sampling_config"])])
def test_an_empty_or_missing_sampling_config_is_refused_for_plugin_speculation(sampling, settings):
    variant = dataclasses.replace(variant_of(EAGLE3, "eagle3"), neuron_config_extra={"on_device_sampling_config": sampling})
    failures = plugin_failures(variant, arguments(variant))
    assert [f.setting for f in failures][:1] == settings
    assert all(f.source.ref == "v2.32.0" for f in failures)


def test_plugin_stacks_must_request_greedy_decoding():
    config = copy.deepcopy(load_stack(EAGLE3).config)
    config.setdefault("sd-trn2:benchmark", {})["samplingParams"] = {"temperature": 0.7}
    assert "decode greedily" in problems_of(config)["benchmark.samplingParams.temperature"]


@pytest.mark.parametrize("stack, name, request_params, greedy", [
    (LLAMA_405B, "base-bf16", {"temperature": 0}, True),
    (LLAMA_405B, "base-bf16", {}, False),
    (LLAMA_405B, "base-bf16", {"top_k": 1, "temperature": 0.6}, True),
    (LLAMA_405B, "sd-fp8", {}, True),
    (EAGLE3, "base", {}, True),
])
def test_which_servers_decode_greedily(stack, name, request_params, greedy):
    assert serves_greedily(variant_of(stack, name), request_params) is greedy


def docs_section(heading: str) -> str:
    text = (ROOT / "docs" / "engines.md").read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def fork_comparison() -> tuple[list[str], dict[str, list[str]]]:
    """docs/engines.md's comparison of the fork's branches: the table's header cells, and each
    check's cells (release branch, main, what the project does)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in docs_section("Release branch and main of the fork").splitlines() if line.startswith("| ")]
    return rows[0], {row[0]: row[1:] for row in rows[1:]}


def test_the_forks_branches_cited_are_the_ones_documented():
    """The legacy engine's citations of the vLLM Neuron fork and docs/engines.md's comparison of its
    release branch with main name the same branches, commits and files (the loader and runners from
    the release branch, vLLM's flags from main): changing either side alone fails here."""
    header, rows = fork_comparison()
    branch, commit = FORK_RELEASE
    flags = json.loads((ROOT / "tests" / "data" / "vllm-legacy-neuron-fork-serve-flags.json").read_text())["source"]
    assert f"`{branch}` ({commit[:8]})" in header[1] and f"`{flags['ref']}` ({flags['commit'][:8]})" in header[2]
    versions = docs_section("Versions read")
    assert f"`{branch}` at {commit[:8]}" in versions and f"`{flags['ref']}` at {flags['commit'][:8]}" in versions
    assert (RUNNER_SAMPLING_READ.ref.split(",")[0], RUNNER_SAMPLING_READ.commit) == FORK_RELEASE
    assert f"`{RUNNER_SAMPLING_READ.path}` L{RUNNER_SAMPLING_READ.lines}" in rows["the runner's sampling read"][0]
    assert all(f"`{path}`" in rows["vLLM's `serve` flags"][1] for path in flags["paths"])
    assert {"attention heads vs tensor-parallel degree", "Qwen3 in the supported-model table"} <= set(rows)
