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
    monkeypatch.setattr(plan, "load_stack", lambda name: real_load(name, {"aws:region": "us-west-2"}))
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
