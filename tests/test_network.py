"""Availability zones come from where the instance type is offered, or from config.

The offline engine answers DescribeInstanceTypeOfferings from moto's snapshot of the real API
(trn2.48xlarge: us-east-2a/b/c and ap-south-2; none in us-west-2), so these tests exercise the
program against real offerings data, not against zones the test chose.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import pulumi
import pytest

from offline import plan
from offline.stacks import load_stack, run_stack
from stackconfig.zones import ZoneSelectionError, choose_zones

OFFERINGS = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "availability-zone"


def offered(region: str, instance_type: str) -> set[str]:
    return {o["Location"] for o in json.load(gzip.open(OFFERINGS / f"{region}.json.gz")) if o["InstanceType"] == instance_type}


def subnet_zones(recording, tier: str) -> list[str]:
    """Zones of a tier's subnets, by subnet index (registration order is not deterministic)."""
    subnets = [s for s in recording.of_type("aws:ec2/subnet:Subnet") if f"-{tier}-" in s.name]
    return [s.inputs["availabilityZone"] for s in sorted(subnets, key=lambda s: int(s.name.rsplit("-", 1)[1]))]


def test_private_subnets_are_in_zones_that_offer_the_instance_type(recording, spec):
    zones = subnet_zones(recording, "private")
    assert len(zones) == spec.cluster.availability_zone_count == len(set(zones))
    assert set(zones) <= offered(spec.region, spec.capacity.instance_type), zones
    assert subnet_zones(recording, "public") == zones


def test_the_offerings_lookup_asks_for_the_stack_instance_type_by_zone():
    """Guards the fixture above: the engine's answer depends on the invoke's filter."""
    assert offered("us-east-2", "trn2.48xlarge") == {"us-east-2a", "us-east-2b", "us-east-2c"}
    assert offered("us-west-2", "trn2.48xlarge") == set()


def test_a_region_without_the_instance_type_stops_the_program_naming_the_keys():
    with pytest.raises(pulumi.RunError) as caught:  # printed by the engine without a stack trace
        run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"aws:region": "us-west-2"}))
    message = str(caught.value)
    assert "aws:region us-west-2" in message and "capacity.instanceType trn2.48xlarge" in message


def test_make_plan_exits_2_and_removes_the_stale_plan(tmp_path, capsys, monkeypatch):
    stack = "qwen3-32b-qwen3-1.7b"
    assert plan.main(["--stack", stack, "--out", str(tmp_path)]) == 0
    assert (tmp_path / stack / "resources.json").exists()
    real_load = plan.load_stack
    monkeypatch.setattr(plan, "load_stack", lambda name, overrides=None: real_load(name, {**(overrides or {}), "aws:region": "us-west-2"}))
    assert plan.main(["--stack", stack, "--out", str(tmp_path)]) == 2
    assert not (tmp_path / stack).exists()
    err = capsys.readouterr().err
    assert "aws:region us-west-2" in err and "Traceback" not in err


def test_configured_zones_are_used_as_given():
    zones = ["us-east-2c", "us-east-2a"]
    recording = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:cluster": {"availabilityZones": zones}}))
    assert subnet_zones(recording, "private") == zones


def test_zones_are_chosen_among_the_offering_ones_not_by_name():
    asked = {"region": "us-east-1", "instance_type": "trn2.48xlarge", "count": 2, "configured": ()}
    assert choose_zones(["us-east-1c", "us-east-1f"], **asked) == ["us-east-1c", "us-east-1f"]
    with pytest.raises(ZoneSelectionError):
        choose_zones(["us-east-1f"], **asked)


@pytest.mark.parametrize("stack", ["platform", "qwen3-32b-qwen3-1.7b"])
def test_s3_traffic_takes_a_gateway_endpoint_on_the_private_route_table(stack):
    from .conftest import recorded

    recording = recorded(stack)
    region = load_stack(stack).spec().region
    (endpoint,) = recording.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert (endpoint.inputs["serviceName"], endpoint.inputs["vpcEndpointType"]) == (f"com.amazonaws.{region}.s3", "Gateway")
    (private,) = [t for t in recording.of_type("aws:ec2/routeTable:RouteTable") if t.name.endswith("-private")]
    assert endpoint.inputs["routeTableIds"] == [private.outputs["id"]]
    (policy,) = recording.of_type("aws:ec2/vpcEndpointPolicy:VpcEndpointPolicy")
    assert policy.inputs["vpcEndpointId"] == endpoint.outputs["id"]


@pytest.mark.parametrize("stack", ["platform", "qwen3-32b-qwen3-1.7b"])
def test_the_endpoint_passes_the_model_store_and_image_layers_and_no_other_bucket(stack):
    """Every action a role of the program holds on the model bucket crosses the endpoint, so do
    ECR's image layers (Amazon ECR User Guide: the prod-<region>-starport-layer-bucket); another
    bucket does not."""
    from .conftest import recorded
    from .iam_eval import allows

    recording = recorded(stack)
    region = load_stack(stack).spec().region
    endpoint_policy = json.loads(recording.one("aws:ec2/vpcEndpointPolicy:VpcEndpointPolicy").inputs["policy"])
    bucket = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
    granted = {(action, resource) for role in recording.of_type("aws:iam/rolePolicy:RolePolicy")
               for statement in json.loads(role.inputs["policy"])["Statement"]
               for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
               for resource in ([statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"])
               if action.startswith("s3:") and resource.startswith(bucket)}
    # A platform's own role (the CSI driver's) reads; a standalone stack's pairing roles also write.
    assert {a for a, _ in granted} >= ({"s3:GetObject", "s3:ListBucket"} | ({"s3:PutObject"} if stack != "platform" else set()))
    for action, resource in granted:
        key = resource.replace("*", "x")
        assert allows(endpoint_policy, action, key, {"s3:prefix": "weights/"}), (action, resource)
    assert allows(endpoint_policy, "s3:GetObject", f"arn:aws:s3:::prod-{region}-starport-layer-bucket/sha256/abc")
    for other in ("arn:aws:s3:::someone-elses-bucket/data", f"arn:aws:s3:::prod-{region}-starport-layer-bucket-2/x"):
        assert not allows(endpoint_policy, "s3:GetObject", other)
        assert not allows(endpoint_policy, "s3:PutObject", other)
    assert not allows(endpoint_policy, "s3:PutObject", f"arn:aws:s3:::prod-{region}-starport-layer-bucket/x")
