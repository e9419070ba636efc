"""An existing stack updates in place: every resource it had before a refactoring still has its
URN, or a resource now answers to it through an alias.

Two baselines (engine URN format; aliases resolved the way the engine does,
offline.engine.Recording.alias_urns): tests/data/urns-before-platform-split.json holds the four
standalone stacks' URNs at main bdd6aab, before the platform/pairing split;
tests/data/urns-before-two-wings.json every stack's, before components/ became platform/ and
pairing/ and the benchmark component was split into its parts.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackconfig.source import stack_names

from .conftest import STANDALONE, recorded

DATA = Path(__file__).parent / "data"
BEFORE = json.loads((DATA / "urns-before-platform-split.json").read_text())
BEFORE_WINGS = json.loads((DATA / "urns-before-two-wings.json").read_text())


def reachable(recording) -> dict[str, str]:
    """Every URN the new plan answers to -> the URN of the resource that answers."""
    found = {}
    for resource in recording.resources:
        found[resource.urn] = resource.urn
        for alias in recording.alias_urns(resource):
            found.setdefault(alias, resource.urn)
    return found


EARLIER = sorted(BEFORE["stacks"])
REPLACED_ON_PURPOSE = {
    "::model-store-pv": "the whole-bucket volume became one read-only volume per prefix a server reads "
                        "(components/pairing/model_volume.py): a PersistentVolume's source cannot change in place",
    "::model-store-pvc": "the claim of that volume, replaced with it",
    "-AmazonSSMManagedInstanceCore": "the node roles no longer carry Session Manager's policy (components/iam.py "
                                     "NODE_MANAGED_POLICIES): nothing uses it",
}


def kept(urns: list[str]) -> list[str]:
    """The earlier URNs the plan must still answer to: all but those replaced on purpose."""
    return [urn for urn in urns if not urn.endswith(tuple(REPLACED_ON_PURPOSE))]


def test_the_baseline_covers_every_stack_that_existed_then():
    assert EARLIER == ["llama3.1-405b-llama3.2-1b", "llama3.1-8b-llama3.2-1b", "qwen3-32b-qwen3-0.6b", "qwen3-32b-qwen3-1.7b"]
    assert set(EARLIER) <= set(STANDALONE)


@pytest.mark.parametrize("stack", EARLIER)
def test_every_earlier_urn_is_kept_or_aliased(stack):
    answers = reachable(recorded(stack))
    missing = [urn for urn in kept(BEFORE["stacks"][stack]) if urn not in answers]
    assert missing == []


@pytest.mark.parametrize("stack", EARLIER)
def test_renamed_resources_keep_their_type_or_are_aliased_components(stack):
    """An alias must point at a resource of the same Pulumi type (a rename, not a swap), except
    components whose type token was renamed on purpose (IrsaRole -> WorkloadRole)."""
    renamed_types = {"sdtrn2:iam:IrsaRole": "sdtrn2:iam:WorkloadRole"}
    recording = recorded(stack)
    by_urn = {r.urn: r for r in recording.resources}
    answers = reachable(recording)
    for urn in kept(BEFORE["stacks"][stack]):
        old_type = urn.split("::")[2].split("$")[-1]
        new_type = by_urn[answers[urn]].type
        assert new_type == renamed_types.get(old_type, old_type), (urn, new_type)


REMOVED_ON_PURPOSE = {"qwen3-32b-eagle3": "Qwen3 on the Neuron 2.32 plugin is refused by validation (docs/configuration.md, 'Engines')"}


def test_only_stacks_removed_on_purpose_are_gone():
    assert sorted(set(BEFORE_WINGS["stacks"]) - set(stack_names())) == sorted(REMOVED_ON_PURPOSE)


@pytest.mark.parametrize("stack", sorted(set(BEFORE_WINGS["stacks"]) - set(REMOVED_ON_PURPOSE)))
def test_every_urn_before_the_two_wings_is_kept_or_aliased_by_a_resource_of_its_type(stack):
    recording = recorded(stack)
    answers = reachable(recording)
    by_urn = {r.urn: r for r in recording.resources}
    missing = [urn for urn in kept(BEFORE_WINGS["stacks"][stack]) if urn not in answers]
    assert missing == []
    for urn in kept(BEFORE_WINGS["stacks"][stack]):
        assert by_urn[answers[urn]].type == urn.split("::")[2].split("$")[-1], urn


def test_an_alias_the_engine_would_not_resolve_is_not_counted():
    """Guards the resolver: a resource without aliases answers to its own URN only."""
    recording = recorded(STANDALONE[0])
    plain = next(r for r in recording.resources if r.type == "aws:ec2/vpc:Vpc")
    assert not plain.aliases and recording.alias_urns(plain) == set()
    moved = next(r for r in recording.resources if r.name == "benchmark-runner" and r.type == "sdtrn2:iam:WorkloadRole")
    assert moved.urn not in recording.alias_urns(moved) and recording.alias_urns(moved)


def test_only_what_was_replaced_on_purpose_is_gone():
    replaced = {urn for stack in BEFORE_WINGS["stacks"].values() for urn in stack if urn not in kept([urn])}
    assert replaced and {urn.split("::")[2].split("$")[-1] for urn in replaced} == {
        "kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim",
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment"}
