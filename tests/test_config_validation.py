"""Invalid config stops the program with one message naming every bad key."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from offline.stacks import load_stack
from stackconfig import ConfigError, parse_stack_config
from stackconfig.parse import PAIRING_KEYS
from stackconfig.source import PROJECT

from .stackconfig_helpers import edited, parse, problems_for, qualified

BASE = load_stack("qwen3-32b-qwen3-1.7b").project_values()
LLAMA = load_stack("llama3.1-8b-llama3.2-1b").project_values()


@pytest.mark.parametrize(
    "path, value, bad_key, words",
    [
        ("serving.maxModelLenn", 1024, "serving.maxModelLenn", "unknown key"),
        ("servng", {}, "servng", "unknown key"),
        ("variants.1.numSpecTokens", 7, "variants[1].numSpecTokens", "unknown key"),
        ("serving.tensorParallelSize", 64, "serving.tensorParallelSize", "devicesPerVariant x (8 / logicalNeuronCores)"),
        ("serving.devicesPerVariant", 12, "serving.devicesPerVariant", "not one of 1, 2, 4, 8, 16"),
        ("serving.logicalNeuronCores", 4, "serving.logicalNeuronCores", "not one of 1, 2"),
        ("variants.1.numSpeculativeTokens", 16, "variants[1].numSpeculativeTokens", "outside 1..15"),
        ("variants.1.numSpeculativeTokens", 0, "variants[1].numSpeculativeTokens", "outside 1..15"),
        ("variants.0.numSpeculativeTokens", 7, "variants[0].numSpeculativeTokens", "only allowed on an sd variant"),
        ("variants.1.draft", "meta-llama/Llama-3.2-1B", "variants[1].draft", "shared tokenizer"),
        ("benchmark.outputTokens", 1000, "benchmark.outputTokens", "exceeds serving.maxModelLen"),
        ("variants.1.draftMaxModelLen", 600, "variants[1].draftMaxModelLen", "smaller than the longest benchmark sequence"),
        ("variants.1.draftMaxModelLen", 2048, "variants[1].draftMaxModelLen", "vLLM refuses a draft longer than its target"),
        ("variants.1.speculationMethod", "eagle", "variants[1].speculationMethod", "which is a full model; use 'draft_model'"),
        ("variants.1.speculationMethod", "medusa", "variants[1].speculationMethod", "not one of draft_model, eagle, eagle3, dflash"),
        ("cluster.workloadIdentity", "kiam", "cluster.workloadIdentity", "not one of irsa, pod-identity"),
        ("cluster.availabilityZones", ["us-east-2a"], "cluster.availabilityZones", "at least two zones"),
        ("cluster.availabilityZones", ["us-west-2a", "us-east-2b"], "cluster.availabilityZones[0]", "not an availability zone of us-east-2"),
        ("cluster.availabilityZones", ["us-east-2a", "us-east-2a"], "cluster.availabilityZones", "twice"),
        ("cluster.kubernetesVersion", "1.33", "cluster.kubernetesVersion", "below 1.34"),
        ("capacity.reservationIds", ["cr-0123456789abcdef0"], "capacity.capacityType", 'must be "reserved"'),
        ("capacity.capacityType", "reserved", "capacity.reservationIds", "required"),
        ("capacity.amiAlias", "al2023@latest", "capacity.amiAlias", "pinned"),
        ("serving.target", "Qwen/Qwen9-1T", "serving.target", "not a known model"),
        ("variants.1.role", "turbo", "variants[1].role", "not one of baseline, sd"),
        ("variants.1.baseline", "nope", "variants[1].baseline", "not another baseline variant"),
        ("variants.1.name", "base", "variants", "used more than once"),
        ("variants.1.name", "Not_DNS", "variants[1].name", "DNS label"),
        ("benchmark.metricsNamespace", "AWS/Mine", "benchmark.metricsNamespace", "AWS/"),
        ("benchmark.concurrency", 8, "benchmark.concurrency", "exceeds serving.maxNumSeqs"),
        ("serving.maxNumSeqs", "four", "serving.maxNumSeqs", "must be an integer"),
        ("variants.1.draft", None, "variants[1].draft", "required on an sd variant"),
        ("benchmark.samplingParams", {"max_tokens": 5}, "benchmark.samplingParams.max_tokens", "set by the benchmark itself"),
        ("benchmark.samplingParams", {"stream_options": {}}, "benchmark.samplingParams.stream_options", "set by the benchmark itself"),
        ("benchmark.samplingParams", {"temperature": -1}, "benchmark.samplingParams.temperature", "a number in [0, 2]"),
        ("benchmark.samplingParams", {"temperature": "hot"}, "benchmark.samplingParams.temperature", "a number in [0, 2]"),
        ("benchmark.samplingParams", "greedy", "benchmark.samplingParams", "must be an object"),
        ("benchmark.seed", "005", "benchmark.seed", "not one of 000, 001, 002, 003, 004"),
        ("benchmark.seed", 1, "benchmark.seed", "must be a string"),
        ("benchmark.llmperfCommit", "f1d6bed", "benchmark.llmperfCommit", "is not one of f1d6bed47e4501b0e371082b41601b59ab55269f"),
        ("benchmark.inputTokens", 32, "benchmark.inputTokens", "LLMPerf's prompt template alone is longer"),
    ],
)
def test_each_rule_names_the_key(path, value, bad_key, words):
    problems = problems_for(edited(BASE, path, value))
    assert bad_key in problems, problems
    assert words in problems[bad_key]


def test_tensor_parallel_degree_counts_logical_cores():
    """TP = devices x (8 / LNC): LNC 2 pairs a device's 8 physical cores into 4 logical ones."""
    assert parse(BASE).variant("base").tensor_parallel_size == 32
    one = parse(edited(BASE, "serving.logicalNeuronCores", 1))
    assert one.variant("base").tensor_parallel_size == 64 and one.variant("sd").tensor_parallel_size == 64


def test_region_is_required_and_known():
    for region, words in ((None, "is required"), ("us-west-9", "not an AWS region")):
        with pytest.raises(ConfigError) as caught:
            parse_stack_config(PROJECT, "test", qualified(BASE, region))
        assert words in dict(caught.value.problems)["aws:region"]


def test_a_misspelled_namespace_is_named():
    config = {**qualified(BASE), "sdtrn2:serving": {"target": "Qwen/Qwen3-32B"}}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", config)
    problems = dict(caught.value.problems)
    assert "did you mean sd-trn2:serving" in problems["sdtrn2:serving"]
    # Other providers' namespaces pass through untouched (the AWS provider reads its own keys).
    parse_stack_config(PROJECT, "test", {**qualified(BASE), "aws:profile": "lab"})


def test_a_plain_draft_speculates_as_draft_model_without_a_vllm_method():
    sd = parse(BASE).variant("sd")
    assert sd.speculation_method == "draft_model"
    assert "method" not in sd.speculative_config
    assert sd.neuron_config["enable_fused_speculation"] is True
    assert "enable_eagle_speculation" not in sd.neuron_config


def test_an_eagle_head_speculates_as_eagle_and_only_as_eagle():
    head = "example/Qwen3-32B-EAGLE"
    # The stack's pins name the draft replaced here: drop them (a pin for a model not served is refused).
    values = edited({**BASE, "modelRevisions": {}, "models": {head: {
        "tokenizerFamily": "qwen3", "gated": False, "paramsBillion": 0.5, "checkpointBytes": 10 ** 9, "kind": "eagle-head",
        "draftFor": ["Qwen/Qwen3-32B"]}}},
                    "variants.1.draft", head)
    sd = parse(values).variant("sd")
    assert sd.speculative_config["method"] == "eagle" and sd.neuron_config["enable_eagle_speculation"] is True
    problems = problems_for(edited(values, "variants.1.speculationMethod", "draft_model"))
    assert "an EAGLE head" in problems["variants[1].speculationMethod"]


def test_reservations_need_the_zones_named():
    values = edited(edited(BASE, "capacity.capacityType", "reserved"), "capacity.reservationIds", ["cr-0123456789abcdef0"])
    assert "to list its availability zone" in problems_for(values)["cluster.availabilityZones"]
    parse(edited(values, "cluster.availabilityZones", ["us-east-2a", "us-east-2b"]))


def test_device_count_a_node_cannot_hold():
    values = edited(edited(BASE, "capacity.instanceType", "trn2.3xlarge"), "serving.devicesPerVariant", 8)
    problems = problems_for(values)
    assert "do not fit on a trn2.3xlarge" in problems["serving.devicesPerVariant"]


def test_all_problems_are_reported_together():
    values = edited(edited(edited(BASE, "serving.devicesPerVariant", 3), "cluster.kubernetesVersion", "1.30"), "bogus", 1)
    with pytest.raises(ConfigError) as caught:
        parse(values)
    keys = [key for key, _ in caught.value.problems]
    assert {"serving.devicesPerVariant", "cluster.kubernetesVersion", "bogus"} <= set(keys)
    message = str(caught.value)
    assert message.startswith("Stack 'test' has") and all(k in message for k in keys)


def test_gated_models_need_a_token_and_open_ones_do_not():
    problems = problems_for({k: v for k, v in LLAMA.items() if k != "huggingFaceToken"})
    assert "meta-llama/Llama-3.1-8B" in problems["huggingFaceToken"]
    parse({k: v for k, v in BASE.items() if k != "huggingFaceToken"})


def test_a_stack_still_naming_prepared_weights_is_told_to_drop_them():
    values = load_stack("llama3.1-405b-llama3.2-1b").project_values()
    problems = problems_for(edited(values, "variants.1.weightsPath", "weights/llama-405b-fp8-rescaled"))
    assert "no longer needed" in problems["variants[1].weightsPath"]


def test_a_valid_stack_parses():
    spec = parse(BASE)
    assert spec.node_count == 1


def test_benchmark_defaults_sample_greedily_with_the_pinned_llmperf():
    values = edited(BASE, "benchmark.samplingParams", None)
    values = edited(values, "benchmark.seed", None)
    benchmark = parse(values).benchmark
    assert benchmark.sampling_params == {"temperature": 0} and benchmark.seed is None
    assert benchmark.llmperf_commit == "f1d6bed47e4501b0e371082b41601b59ab55269f"
    assert parse(edited(BASE, "benchmark.samplingParams", {})).benchmark.sampling_params == {}


# Property-based: any single corruption of a valid config is reported against the key that was
# corrupted, as a ConfigError, never as another exception.
LEAF_PATHS = [
    "cluster.kubernetesVersion", "cluster.systemNodeCount", "capacity.instanceType", "capacity.capacityType",
    "capacity.rootVolumeGiB", "serving.target", "serving.devicesPerVariant", "serving.logicalNeuronCores",
    "serving.maxNumSeqs", "serving.maxModelLen", "variants[1].numSpeculativeTokens", "variants[1].draft",
    "variants[0].role", "benchmark.inputTokens", "benchmark.concurrency", "modelStore.retainOnDestroy",
    "benchmark.samplingParams", "benchmark.seed", "benchmark.llmperfCommit",
]
junk = st.one_of(
    st.text(max_size=8), st.integers(min_value=-10**6, max_value=10**6), st.booleans(),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(LEAF_PATHS), value=junk)
@example(path="serving.maxModelLen", value=128)  # valid alone; breaks benchmark.outputTokens
def test_random_bad_values_name_their_key(path, value):
    values = edited(BASE, path.replace("[", ".").replace("]", ""), value)
    try:
        parse(values)
    except ConfigError as error:
        section = path.split(".")[0].split("[")[0]
        # Reported on the key itself, or (cross-field rules) on another key whose message names it.
        assert any(key == path or key.startswith(section) or path in message for key, message in error.problems), \
            (path, value, error.problems)
    # Some junk is valid (e.g. another allowed integer); that must parse, not crash.


@settings(max_examples=100, deadline=None, derandomize=True)
@given(key=st.text(alphabet="abcdefghijklmnopqrstuvwxyzXYZ_", min_size=1, max_size=12).filter(lambda k: k not in BASE and k not in PAIRING_KEYS))
def test_random_unknown_top_level_keys_are_rejected_by_name(key):
    problems = problems_for({**BASE, key: "x"})
    assert "unknown key" in problems[key]


@pytest.mark.parametrize("value, words", [
    ({"user": 0, "group": 1000}, "serving.runAs.user"),
    ({"user": 1000}, "serving.runAs.group"),
    ({"user": "1000", "group": 1000}, "serving.runAs.user"),
    ({"user": 1000, "group": 1000, "fsGroup": 5}, "serving.runAs.fsGroup"),
])
def test_a_non_root_server_names_a_user_and_a_group(value, words):
    assert words in problems_for(edited(BASE, "serving.runAs", value))


@pytest.mark.parametrize("value, key, words", [
    (["IPC_LCK"], "serving.addCapabilities[0]", "did you mean IPC_LOCK?"),
    (["CAP_IPC_LOCK"], "serving.addCapabilities[0]", "without the CAP_ prefix"),
    (["NET_RAW"], "serving.addCapabilities[0]", "never"),
    (["IPC_LOCK", "IPC_LOCK"], "serving.addCapabilities", "twice"),
    ("IPC_LOCK", "serving.addCapabilities", "must be a list"),
])
def test_an_added_capability_is_a_linux_capability(value, key, words):
    problems = problems_for(edited(BASE, "serving.addCapabilities", value))
    assert words in problems.get(key, ""), problems
