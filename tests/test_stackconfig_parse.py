"""parse_stack_config as a whole: namespaces and region, the kinds of stack, how each config object
is read (unknown keys, types, required values), the error that carries every problem, tags, and
what a valid config becomes."""
from __future__ import annotations

import pytest

from offline.stacks import PROJECT
from stackconfig import ConfigError, StackSpec, parse_stack_config

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
