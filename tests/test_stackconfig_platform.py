"""The platform part of a stack's config: cluster, capacity and model store, in a platform stack,
a standalone pairing, or read from the platform stack of a shared pairing. Every rule reports
the key to change with exactly what is allowed; every setting lands in the spec as given."""
from __future__ import annotations

import pytest

from stackconfig import ConfigError, PlatformSpec, parse_stack_config
from stackconfig.model import CapacitySettings, ClusterSettings
from stackconfig.source import PROJECT
from stackconfig.versions import AMI_RELEASE

from .stackconfig_helpers import (
    SMALL,
    edits_id,
    parse,
    problem_list,
    qualified,
    with_edits,
)

DEFAULT_CLUSTER = ClusterSettings(kubernetes_version="1.35", system_node_instance_type="m7i.xlarge", system_node_count=2,
                                  vpc_cidr="10.64.0.0/16", availability_zone_count=2, availability_zones=(),
                                  workload_identity="irsa")
ZONES = ["us-east-2a", "us-east-2b"]


def test_defaults_of_a_standalone_pairing():
    spec = parse(SMALL)
    assert spec.platform == PlatformSpec(project=PROJECT, stack="test", region="us-east-2", cluster=DEFAULT_CLUSTER,
                                         instance_type="trn2.48xlarge", retain_model_store=False, tags={})
    assert spec.capacity == CapacitySettings(instance_type="trn2.48xlarge", capacity_type="on-demand", reservation_ids=(),
                                             ami_alias=AMI_RELEASE.alias, root_volume_gib=200)
    assert (spec.shared, spec.platform_reference, spec.cluster, spec.retain_model_store) == (False, None, DEFAULT_CLUSTER, False)


def test_every_platform_setting_lands_in_the_spec():
    spec = parse(with_edits(SMALL, {
        "cluster": {"kubernetesVersion": "1.34", "systemNodeInstanceType": "m7i.2xlarge", "systemNodeCount": 10,
                    "vpcCidr": "10.1.0.0/16", "availabilityZones": ["us-east-2a", "us-east-2b", "us-east-2c"],
                    "availabilityZoneCount": 3, "workloadIdentity": "pod-identity", "supportType": "EXTENDED",
                    "logRetentionDays": 3653},
        "capacity": {"instanceType": "trn2.3xlarge", "capacityType": "reserved", "reservationIds": ["cr-0abc", "cr-1"],
                     "amiAlias": "al2023@v20260101", "rootVolumeGiB": 2000, "replacementHeadroomNodes": 1},
        "modelStore": {"retainOnDestroy": True},
        "serving.devicesPerVariant": 1,
    }))
    assert spec.cluster == ClusterSettings(kubernetes_version="1.34", system_node_instance_type="m7i.2xlarge",
                                           system_node_count=10, vpc_cidr="10.1.0.0/16", availability_zone_count=3,
                                           availability_zones=("us-east-2a", "us-east-2b", "us-east-2c"),
                                           workload_identity="pod-identity", support_type="EXTENDED",
                                           log_retention_days=3653)
    assert spec.capacity == CapacitySettings(instance_type="trn2.3xlarge", capacity_type="reserved",
                                             reservation_ids=("cr-0abc", "cr-1"), ami_alias="al2023@v20260101",
                                             root_volume_gib=2000, replacement_headroom_nodes=1)
    assert spec.platform.instance_type == "trn2.3xlarge" and spec.retain_model_store is True


@pytest.mark.parametrize("edits", [
    {"cluster.systemNodeCount": 2, "cluster.availabilityZoneCount": 6, "capacity.rootVolumeGiB": 100},
    {"cluster.availabilityZones": ZONES, "cluster.availabilityZoneCount": 2},
    {"cluster.kubernetesVersion": "1.34", "cluster.vpcCidr": "10.255.0.0/16"},
    {"cluster.kubernetesVersion": "1.36"},
], ids=["lowest-and-highest", "zone-count-matching-the-zones", "explicit-defaults", "the-newest-version-offered"])
def test_values_at_the_limits_are_accepted(edits):
    parse(with_edits(SMALL, edits))


def test_the_zone_count_follows_the_zones_listed():
    assert parse(with_edits(SMALL, {"cluster.availabilityZones": ZONES + ["us-east-2c"]})).cluster.availability_zone_count == 3


@pytest.mark.parametrize("edits, problems", [
    ({"cluster.kubernetesVersion": "1.33"}, [("cluster.kubernetesVersion", "1.33 is below 1.34, the first version the Neuron DRA driver supports")]),
    ({"cluster.kubernetesVersion": "1.38"}, [("cluster.kubernetesVersion", "1.38 is above 1.37, the newest EKS version this program knows")]),
    ({"cluster.kubernetesVersion": "1.37"}, [("cluster.kubernetesVersion", "no EKS add-on builds are pinned for 1.37 (stackconfig/versions.py "
                                              "EKS_ADDONS; pinned: 1.34, 1.35, 1.36); `aws eks describe-addon-versions --kubernetes-version "
                                              "1.37` lists them")]),
    ({"cluster.kubernetesVersion": "1.x"}, [("cluster.kubernetesVersion", "'1.x' is not valid: a \"1.N\" version")]),
    ({"cluster.availabilityZones": ["us-east-2a"]},
     [("cluster.availabilityZones", "needs at least two zones: EKS requires subnets in two availability zones")]),
    ({"cluster.availabilityZones": ["us-east-2a", "us-east-2a"]}, [("cluster.availabilityZones", "lists a zone twice")]),
    ({"cluster.availabilityZones": ZONES, "cluster.availabilityZoneCount": 3},
     [("cluster.availabilityZoneCount", "3 disagrees with the 2 availabilityZones listed; omit it")]),
    ({"cluster.availabilityZones": ["us-east-2a", 7, "us-west-2b", "us-east-2"]}, [
        ("cluster.availabilityZones[1]", "7 is not an availability zone of us-east-2 (e.g. us-east-2a)"),
        ("cluster.availabilityZones[2]", "'us-west-2b' is not an availability zone of us-east-2 (e.g. us-east-2a)"),
        ("cluster.availabilityZones[3]", "'us-east-2' is not an availability zone of us-east-2 (e.g. us-east-2a)")]),
    ({"cluster.availabilityZones": [["us-east-2a"], "us-east-2b"]},
     [("cluster.availabilityZones[0]", "['us-east-2a'] is not an availability zone of us-east-2 (e.g. us-east-2a)")]),
    ({"cluster.availabilityZones": ["us-east-2a", {"zone": 1}, "us-east-2a"]}, [
        ("cluster.availabilityZones[1]", "{'zone': 1} is not an availability zone of us-east-2 (e.g. us-east-2a)"),
        ("cluster.availabilityZones", "lists a zone twice")]),
    ({"cluster.availabilityZones": "us-east-2a"}, [("cluster.availabilityZones", "must be a list, got 'us-east-2a'")]),
    ({"cluster.availabilityZoneCount": 1}, [("cluster.availabilityZoneCount", "1 is outside 2..6")]),
    ({"cluster.availabilityZoneCount": 7}, [("cluster.availabilityZoneCount", "7 is outside 2..6")]),
    ({"cluster.vpcCidr": "10.64.0.0/20"}, [("cluster.vpcCidr", "'10.64.0.0/20' is not a /16 inside 10.0.0.0/8 (e.g. 10.64.0.0/16)")]),
    ({"cluster.vpcCidr": "8.8.0.0/16"}, [("cluster.vpcCidr", "'8.8.0.0/16' is not a /16 inside 10.0.0.0/8 (e.g. 10.64.0.0/16)")]),
    ({"cluster.vpcCidr": "nope"}, [("cluster.vpcCidr", "'nope' is not a CIDR block (e.g. 10.64.0.0/16)")]),
    ({"cluster.systemNodeCount": 1}, [("cluster.systemNodeCount", "1 is outside 2..10")]),
    ({"cluster.systemNodeCount": 11}, [("cluster.systemNodeCount", "11 is outside 2..10")]),
    ({"cluster.workloadIdentity": "kiam"}, [("cluster.workloadIdentity", "'kiam' is not one of irsa, pod-identity")]),
    ({"cluster.supportType": "standard"}, [("cluster.supportType", "'standard' is not one of STANDARD, EXTENDED")]),
    ({"cluster.logRetentionDays": 10}, [("cluster.logRetentionDays", "10 is not one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, "
                                                                     "180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653")]),
    ({"cluster.logRetentionDays": 0}, [("cluster.logRetentionDays", "0 is not one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, "
                                                                    "180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653")]),
    ({"cluster.systemNodeInstanceType": 5}, [("cluster.systemNodeInstanceType", "must be a string, got 5")]),
    ({"capacity.instanceType": "p5.48xlarge"}, [("capacity.instanceType", "'p5.48xlarge' is not one of trn2.48xlarge, trn2.3xlarge")]),
    ({"capacity.capacityType": "spot"}, [("capacity.capacityType", "'spot' is not one of on-demand, reserved")]),
    ({"capacity.capacityType": "reserved", "capacity.reservationIds": ["cr-0abc", "r-1", 5], "cluster.availabilityZones": ZONES}, [
        ("capacity.reservationIds[1]", "'r-1' is not a capacity reservation id (cr-...)"),
        ("capacity.reservationIds[2]", "5 is not a capacity reservation id (cr-...)")]),
    ({"capacity.reservationIds": ["cr-0abc"], "cluster.availabilityZones": ZONES}, [
        ("capacity.capacityType", 'must be "reserved" when reservationIds are set (Karpenter launches into reservations only '
                                  'for reserved capacity)')]),
    ({"capacity.capacityType": "reserved"}, [("capacity.reservationIds", 'are required when capacityType is "reserved"')]),
    ({"capacity.capacityType": "reserved", "capacity.reservationIds": ["cr-0abc"]}, [
        ("cluster.availabilityZones", "a capacity reservation needs this stack's cluster.availabilityZones to list its availability zone")]),
    ({"capacity.amiAlias": "al2023@latest"}, [("capacity.amiAlias", "'al2023@latest' is not valid: al2023@vYYYYMMDD, pinned (not @latest)")]),
    ({"capacity.rootVolumeGiB": 99}, [("capacity.rootVolumeGiB", "99 is outside 100..2000")]),
    ({"capacity.rootVolumeGiB": 2001}, [("capacity.rootVolumeGiB", "2001 is outside 100..2000")]),
    ({"capacity": "big"}, [("capacity", "must be an object with keys ['amiAlias', 'capacityType', 'instanceType', "
                                        "'replacementHeadroomNodes', 'reservationIds', 'rootVolumeGiB'], got str")]),
    ({"capacity.instanceType": "trn2.3xlarge"}, [("serving.devicesPerVariant", "8 devices do not fit on a trn2.3xlarge (1 devices)")]),
    ({"modelStore.retainOnDestroy": "yes"}, [("modelStore.retainOnDestroy", "must be true or false, got 'yes'")]),
    ({"modelStore.keep": True}, [("modelStore.keep", "unknown key; allowed: retainOnDestroy")]),
], ids=edits_id)
def test_platform_rules_name_the_key_and_what_is_allowed(edits, problems):
    assert problem_list(with_edits(SMALL, edits)) == problems


def test_the_pinned_kubernetes_versions_are_listed(monkeypatch):
    from stackconfig.parse import platform as platform_rules

    monkeypatch.setattr(platform_rules, "EKS_ADDONS", {"1.34": {}, "1.36": {}})
    parse(with_edits(SMALL, {"cluster.kubernetesVersion": "1.36"}))
    assert problem_list(with_edits(SMALL, {"cluster.kubernetesVersion": "1.35"})) == [
        ("cluster.kubernetesVersion", "no EKS add-on builds are pinned for 1.35 (stackconfig/versions.py EKS_ADDONS; "
                                      "pinned: 1.34, 1.36); `aws eks describe-addon-versions --kubernetes-version 1.35` lists them")]


def test_kubernetes_1_34_is_still_allowed_with_its_own_ami_alias(monkeypatch):
    """The alias default follows the cluster's version (one release serves both today, so the
    table is replaced here to tell them apart)."""
    from stackconfig.parse import platform as platform_rules
    from stackconfig.versions import Pin

    monkeypatch.setattr(platform_rules, "AMI_ALIASES", {"1.34": Pin("al2023@v20260101", "a"), "1.35": Pin("al2023@v20260202", "b")})
    spec = parse(with_edits(SMALL, {"cluster.kubernetesVersion": "1.34"}))
    assert spec.cluster.kubernetes_version == "1.34" and spec.capacity.ami_alias == "al2023@v20260101"
    assert parse(SMALL).capacity.ami_alias == "al2023@v20260202"


def test_without_a_region_zones_are_checked_against_none_in_particular():
    values = with_edits(SMALL, {"cluster.availabilityZones": ["us-west-2a", "zone"]})
    assert problem_list(values, region=None) == [
        ("aws:region", "is required: the region to deploy to (`pulumi config set aws:region us-east-2`); docs/configuration.md, 'Regions'"),
        ("cluster.availabilityZones[1]", "'zone' is not an availability zone of the region (e.g. us-east-2a)")]
    (region_problem, zone_problem) = problem_list(values, region=12)
    assert region_problem[0] == "aws:region" and zone_problem == (
        "cluster.availabilityZones[1]", "'zone' is not an availability zone of the region (e.g. us-east-2a)")


PLATFORM_STACK = {"stackKind": "platform"}


def test_a_platform_stack_is_a_platform_spec():
    spec = parse({"stackKind": "platform", "cluster": {"availabilityZones": ZONES}, "capacity": {"instanceType": "trn2.3xlarge"},
                  "modelStore": {"retainOnDestroy": True}, "tags": {"team": "ml"}}, stack="platform")
    assert spec == PlatformSpec(project=PROJECT, stack="platform", region="us-east-2",
                                cluster=ClusterSettings(**{**DEFAULT_CLUSTER.__dict__, "availability_zones": tuple(ZONES)}),
                                instance_type="trn2.3xlarge", retain_model_store=True, tags={"team": "ml"})
    assert spec.cluster_name == "sd-platform"
    assert parse(PLATFORM_STACK, stack="p").instance_type == "trn2.48xlarge"


@pytest.mark.parametrize("values, problems", [
    ({**PLATFORM_STACK, "capacity": {"instanceType": "trn2.3xlarge", "rootVolumeGiB": 100}, "serving": {}}, [
        ("serving", "unknown key; allowed: capacity, cluster, modelStore, stackKind, tags"),
        ("capacity.rootVolumeGiB", "unknown key; allowed: instanceType")]),
    ({**PLATFORM_STACK, "capacity": {"instanceType": "trn3.48xlarge"}, "cluster": {"systemNodeCount": 0}}, [
        ("cluster.systemNodeCount", "0 is outside 2..10"),
        ("capacity.instanceType", "'trn3.48xlarge' is not one of trn2.48xlarge, trn2.3xlarge")]),
    ({**PLATFORM_STACK, "stackKind": "cluster"}, [("stackKind", "'cluster' is not one of pairing, platform"),
                                                  ("serving.devicesPerVariant", "is required (an integer)"),
                                                  ("serving.maxModelLen", "is required (an integer)"),
                                                  ("serving.target", "is required (a Hugging Face model id)"),
                                                  ("serving.maxNumSeqs", "is required (an integer)"),
                                                  ("benchmark.inputTokens", "is required (an integer)"),
                                                  ("benchmark.outputTokens", "is required (an integer)"),
                                                  ("variants", "must be a non-empty list of variants (at least one baseline and one sd)"),
                                                  ("variants", "needs at least one baseline and one sd variant to compare")]),
], ids=["pairing-keys", "bad-values", "unknown-kind-is-read-as-a-pairing"])
def test_platform_stack_rules(values, problems):
    assert problem_list(values, stack="platform") == problems


REFERENCE = "org/sd-trn2/platform"
SHARED = with_edits(SMALL, {"platform": REFERENCE})


def platform_reader(**stacks: dict):
    """read_stack over project values of the given stacks (region us-east-2 unless they set one)."""
    def read(stack: str) -> dict:
        if stack not in stacks:
            raise FileNotFoundError(f"no stack file Pulumi.{stack}.yaml")
        return qualified(stacks[stack])
    return read


def shared_problems(values: dict, region: str | None = "us-east-2", **stacks: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", qualified(values, region), read_stack=platform_reader(**stacks))
    return caught.value.problems


def test_a_shared_pairing_runs_on_its_platform_stacks_platform():
    platform = {**PLATFORM_STACK, "cluster": {"availabilityZones": ZONES, "workloadIdentity": "pod-identity"}, "tags": {"a": "b"}}
    spec = parse_stack_config(PROJECT, "test", qualified(with_edits(SHARED, {
        "capacity.capacityType": "reserved", "capacity.reservationIds": ["cr-0abc"]})), read_stack=platform_reader(platform=platform))
    assert spec.platform == parse(platform, stack="platform")
    assert (spec.shared, spec.platform_reference, spec.cluster_name) == (True, REFERENCE, "sd-platform")
    assert spec.capacity.reservation_ids == ("cr-0abc",)


@pytest.mark.parametrize("values, stacks, problems", [
    (SHARED, {}, [("platform", "org/sd-trn2/platform: no stack file Pulumi.platform.yaml")]),
    (SHARED, {"platform": {**PLATFORM_STACK, "cluster": {"vpcCidr": "1.2.3.4/16", "systemNodeCount": 1}}}, [
        ("platform", "org/sd-trn2/platform has configuration problems of its own: cluster.systemNodeCount: 1 is outside 2..10; "
                     "cluster.vpcCidr: '1.2.3.4/16' is not a CIDR block (e.g. 10.64.0.0/16)")]),
    (SHARED, {"platform": SMALL}, [
        ("platform", "org/sd-trn2/platform is a pairing stack; set `sd-trn2:stackKind: platform` in the platform's stack file")]),
    (with_edits(SHARED, {"platform": "org/other/platform"}), {"platform": PLATFORM_STACK}, [
        ("platform", "org/other/platform is a stack of project 'other'; a platform must be a stack of 'sd-trn2'")]),
    (with_edits(SHARED, {"platform": "platform"}), {"platform": PLATFORM_STACK}, [
        ("platform", "'platform' is not valid: <organization>/<project>/<stack>")]),
    (with_edits(SHARED, {"cluster.vpcCidr": "10.1.0.0/16", "modelStore.retainOnDestroy": True}), {"platform": PLATFORM_STACK}, [
        ("cluster", "belongs to the platform stack org/sd-trn2/platform; set it there"),
        ("modelStore", "belongs to the platform stack org/sd-trn2/platform; set it there")]),
    (with_edits(SHARED, {"capacity.instanceType": "trn2.3xlarge", "serving.devicesPerVariant": 1}), {"platform": PLATFORM_STACK}, [
        ("capacity.instanceType", "trn2.3xlarge differs from trn2.48xlarge, the instance type the platform org/sd-trn2/platform's "
                                  "zones were chosen for; set capacity.instanceType there")]),
    (with_edits(SHARED, {"capacity.capacityType": "reserved", "capacity.reservationIds": ["cr-0abc"]}), {"platform": PLATFORM_STACK}, [
        ("capacity.reservationIds", "a capacity reservation needs the platform org/sd-trn2/platform's cluster.availabilityZones "
                                    "to list its availability zone")]),
], ids=["missing", "broken", "not-a-platform", "other-project", "not-a-reference", "platform-owned-keys", "instance-type",
        "reservation-without-zones"])
def test_shared_pairing_rules(values, stacks, problems):
    assert shared_problems(values, **stacks) == problems


def test_a_shared_pairing_runs_in_its_platforms_region():
    assert shared_problems(SHARED, "us-west-2", platform=PLATFORM_STACK) == [
        ("aws:region", "us-west-2 differs from the platform org/sd-trn2/platform's us-east-2; a pairing runs in its platform's region")]
    assert shared_problems(SHARED, None, platform=PLATFORM_STACK) == [
        ("aws:region", "is required: the region to deploy to (`pulumi config set aws:region us-east-2`); docs/configuration.md, 'Regions'")]


def test_a_shared_pairing_needs_a_way_to_read_its_platform():
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, "test", qualified(SHARED))
    assert caught.value.problems == [("platform", "shared pairings need the platform's stack file, and none can be read here")]
