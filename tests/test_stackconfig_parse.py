"""parse_stack_config as a whole: namespaces and region, the kinds of stack, how each config object
is read (unknown keys, types, required values), the error that carries every problem, tags, and
what a valid config becomes."""
from __future__ import annotations

import pytest

from stackconfig import ConfigError, StackSpec, parse_stack_config
from stackconfig.source import PROJECT

from .stackconfig_helpers import SMALL, parse, problem_list, qualified, with_edits

KARPENTER = ("Karpenter reserves it (the EC2NodeClass refuses tags matching eks:eks-cluster-name, kubernetes.io/cluster/, "
             "karpenter.sh/nodepool, karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass)")
TOO_LONG = "AWS allows keys of 128 and values of 256 characters"


def test_tags_reach_the_pairing_and_its_platform():
    tags = {"team": "ml", "k" * 128: "v" * 256, "kubernetes.io/other": "x", "aws-team": "x"}
    spec = parse(with_edits(SMALL, {"tags": tags}))
    assert spec.tags == tags == spec.platform.tags


@pytest.mark.parametrize("stack_kind", ["pairing", "platform"])
def test_each_bad_tag_is_reported_once(stack_kind):
    tags = {"aws:team": "ml", "AWS:Team": "x", "": "x", "k": 5, "kubernetes.io/cluster/x": "y", "eks:eks-cluster-name": "x",
            "karpenter.k8s.aws/ec2nodeclass": "x", "x" * 129: "v", "v": "x" * 257, "fine": "x"}
    values = with_edits(SMALL, {"tags": tags}) if stack_kind == "pairing" else {"stackKind": "platform", "tags": tags}
    assert problem_list(values) == [
        ("tags.aws:team", "tag keys starting with aws: are reserved by AWS"),
        ("tags.AWS:Team", "tag keys starting with aws: are reserved by AWS"),
        ("tags.", "tags map non-empty strings to strings"),
        ("tags.k", "tags map non-empty strings to strings"),
        ("tags.kubernetes.io/cluster/x", KARPENTER),
        ("tags.eks:eks-cluster-name", KARPENTER),
        ("tags.karpenter.k8s.aws/ec2nodeclass", KARPENTER),
        ("tags." + "x" * 129, TOO_LONG),
        ("tags.v", TOO_LONG)]


def test_tags_must_be_an_object():
    assert problem_list(with_edits(SMALL, {"tags": ["a"]})) == [("tags", "must be an object, got ['a']")]


READS = "this program reads sd-trn2:<key> and aws:region"


def test_other_providers_namespaces_pass_and_others_are_named():
    config = {**qualified(SMALL), "aws:profile": "lab", "pulumi:template": "x"}
    assert parse_stack_config(PROJECT, "test", config).region == "us-east-2"
    config = {**qualified(SMALL), "serving": 1, "sdtrn:x": 1, 5: 1, "aws:": 1}
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", config)
    problems = caught.value.problems
    assert problems[:3] == [
        ("serving", f"unknown config namespace 'serving'; {READS}"),
        ("sdtrn:x", f"unknown config namespace 'sdtrn' (did you mean sd-trn2:x?); {READS}"),
        ("5", f"unknown config namespace '5'; {READS}")]
    assert [key for key, _ in problems[3:]] == ["aws:"] and problems[3][1].startswith("unknown config namespace 'aws'")


@pytest.mark.parametrize("region", ["us-west-9", 12, ["us-east-2"]])
def test_the_region_is_one_where_eks_runs(region):
    from stackconfig.catalog import known_regions

    assert problem_list(SMALL, region=region) == [
        ("aws:region", f"{region!r} is not an AWS region with EKS; known: {', '.join(known_regions())}")]


def test_a_pairing_spec_carries_its_names():
    spec = parse(SMALL, stack="qwen3-1.7b")
    assert isinstance(spec, StackSpec)
    assert (spec.project, spec.stack, spec.region, spec.platform_reference) == (PROJECT, "qwen3-1.7b", "us-east-2", None)
    assert (spec.name, spec.namespace, spec.cluster_name) == ("qwen3-1-7b-c7b98a", "sd-qwen3-1-7b-c7b98a", "sd-qwen3-1-7b-c7b98a")
    assert spec.variants == tuple(spec.variants) and len(spec.variants) == 2
    assert parse({**SMALL, "stackKind": "pairing"}).stack == "test"


def test_a_stack_name_too_long_for_its_names():
    assert problem_list(SMALL, stack="x" * 61) == [
        ("stack name", "derives 'sd-" + "x" * 61 + "' (64 characters) but Kubernetes namespaces and label values allow 63; "
                       "rename the stack (`pulumi stack rename`) to at most 60 characters")]


PAIRING_KEYS = ("benchmark, capacity, cluster, huggingFaceToken, modelRevisions, modelStore, models, platform, serving, stackKind, study, "
                "tags, variants")
SERVING_KEYS = ("addCapabilities, devicesPerVariant, engine, environment, image, logicalNeuronCores, maxModelLen, maxNumBatchedTokens, "
                "maxNumSeqs, neuronConfig, nodeCachePath, runAs, seccompProfile, target, tensorParallelSize")


@pytest.mark.parametrize("values, problems", [
    ({**SMALL, "servng": {}}, [("servng", f"unknown key (did you mean serving?); allowed: {PAIRING_KEYS}")]),
    (with_edits(SMALL, {"serving.zz": 3, "serving.1": 2}), [("serving.1", f"unknown key; allowed: {SERVING_KEYS}"),
                                                         ("serving.zz", f"unknown key; allowed: {SERVING_KEYS}")]),
    ({**SMALL, "serving": {**SMALL["serving"], 1: 2, "a": 3}}, [("serving.1", f"unknown key; allowed: {SERVING_KEYS}"),
                                                                ("serving.a", f"unknown key; allowed: {SERVING_KEYS}")]),
    ({**SMALL, "stackKind": ["platform"]}, [("stackKind", "['platform'] is not one of pairing, platform")]),
    ({**SMALL, "platform": 5}, [("platform", "must be a string, got 5")]),
    (with_edits(SMALL, {"modelStore.retainOnDestroy": 1}), [("modelStore.retainOnDestroy", "must be true or false, got 1")]),
    (with_edits(SMALL, {"serving.maxNumSeqs": 4.0}), [("serving.maxNumSeqs", "must be an integer, got 4.0")]),
], ids=["unknown-top-level-key", "unknown-keys-sorted", "non-string-keys", "kind-not-a-string", "reference-not-a-string",
        "integer-for-boolean", "float-for-integer"])
def test_each_object_is_read_by_its_own_rules(values, problems):
    assert problem_list(values) == problems


def test_null_is_the_default_where_there_is_one():
    values = {**SMALL, "cluster": None, "capacity": None, "tags": None, "models": None, "modelStore": None,
              "serving": {**SMALL["serving"], "logicalNeuronCores": None},
              "benchmark": {**SMALL["benchmark"], "concurrency": None}}
    spec = parse(values)
    assert (spec.serving.logical_neuron_cores, spec.benchmark.concurrency, spec.tags) == (2, 1, {})


def test_the_error_lists_every_problem_under_the_stack_name():
    error = ConfigError("demo", [("a.b", "is wrong"), ("c", "is missing")])
    assert str(error) == "Stack 'demo' has 2 configuration problem(s):\n  - a.b: is wrong\n  - c: is missing"
    assert (error.stack, error.problems) == ("demo", [("a.b", "is wrong"), ("c", "is missing")])
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("values", [
    {"stackKind": "platform", "cluster": {"systemNodeCount": 1}},
    with_edits(SMALL, {"serving.maxNumSeqs": 0}),
    with_edits(SMALL, {"variants": [*SMALL["variants"], {"name": "again", "role": "baseline"}], "variants.1.baseline": "base"}),
], ids=["platform", "pairing", "pairing-whose-variants-collide"])
def test_every_error_names_its_stack(values):
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "demo", qualified(values))
    assert caught.value.stack == "demo" and str(caught.value).startswith("Stack 'demo' has 1 configuration problem(s):")


def test_a_section_reads_its_values_by_the_rules_it_is_given():
    """The readers as other modules may call them: required unless a default is given, a pattern
    refused with or without a hint."""
    import re

    from stackconfig.parse.reader import _Section

    problems: list = []
    section = _Section("demo", {"name": "Bad", "items": []}, problems, {"name", "items", "other"})
    assert section.string("name", pattern=re.compile("^[a-z]+$")) is None
    assert section.listing("other") is None and section.listing("other", ["x"]) == ["x"] and section.listing("items") == []
    assert section.string("other", "fallback") == "fallback" and section.mapping("other", None) is None
    assert problems == [("demo.name", "'Bad' is not valid"), ("demo.other", "is required (a list)")]
