"""offline/terraform_plan.py: the AWS side of a plan in the Terraform-plan shape checkov reads. checkov
itself runs in `make scan` (its own virtualenv); here, what it is given: every AWS type converted,
properties in Terraform's names and block shapes, and references where a value is another
resource's (checkov's graph checks connect resources through them)."""
from __future__ import annotations

import json

import pytest

from offline.engine import RecordedResource, Recording
from offline.terraform_plan import snake_keys, to_terraform_plan

from .conftest import PLATFORMS, SHARED, STANDALONE, recorded


def by_address(plan: dict) -> dict[str, dict]:
    return {r["address"]: r for r in plan["planned_values"]["root_module"]["resources"]}


def expressions(plan: dict, address: str) -> dict:
    return next(r["expressions"] for r in plan["configuration"]["root_module"]["resources"] if r["address"] == address)


@pytest.mark.parametrize("stack", [STANDALONE[0], PLATFORMS[0], SHARED[0]])
def test_every_aws_resource_of_a_stack_is_converted(stack):
    recording = recorded(stack)
    converted = to_terraform_plan(recording)
    assert converted.unconverted == []
    aws = [r for r in recording.resources if r.type.startswith("aws:") and r.custom and not r.read]
    components = [r for r in recording.resources if r.type.startswith("eks:index:")]
    assert len(by_address(converted.plan)) == len(aws) + len(components)
    assert {r["address"] for r in converted.plan["resource_changes"]} == set(by_address(converted.plan))


def test_an_unknown_aws_type_is_named_not_dropped_silently():
    recording = Recording(resources=[RecordedResource("urn:x", "aws:ec2/instance:Instance", "x", None, True, {}, [])],
                          stack_outputs={})
    converted = to_terraform_plan(recording)
    assert converted.unconverted == ["aws:ec2/instance:Instance"] and by_address(converted.plan) == {}


def test_properties_take_terraforms_names_and_block_shapes():
    assert snake_keys({"retentionInDays": 14, "tags": {"keepCamel": "v"}, "rule": {"objectOwnership": "x"}}) == {
        "retention_in_days": 14, "tags": {"keepCamel": "v"}, "rule": {"object_ownership": "x"}}
    plan = to_terraform_plan(recorded(STANDALONE[0])).plan
    resources = by_address(plan)
    encryption = resources["aws_s3_bucket_server_side_encryption_configuration.model-store"]["values"]
    assert encryption["rule"][0]["apply_server_side_encryption_by_default"]["sse_algorithm"] == "AES256"
    assert "rules" not in encryption
    assert resources["aws_route_table.network-private"]["values"]["route"][0]["cidr_block"] == "0.0.0.0/0"
    cluster = resources["aws_eks_cluster.cluster-eks"]["values"]
    assert cluster["vpc_config"][0]["public_access_cidrs"] == ["0.0.0.0/0"]
    assert cluster["encryption_config"][0]["resources"] == ["secrets"]
    assert json.loads(resources["aws_iam_role.flow-logs"]["values"]["assume_role_policy"])["Statement"]


def test_a_value_another_resource_computed_is_a_reference_as_terraform_writes_it():
    plan = to_terraform_plan(recorded(STANDALONE[0])).plan
    resources = by_address(plan)
    block = "aws_s3_bucket_public_access_block.model-store"
    assert resources[block]["values"]["bucket"] is None  # unknown until the bucket exists
    assert expressions(plan, block)["bucket"]["references"] == ["aws_s3_bucket.model-store.id", "aws_s3_bucket.model-store"]
    assert expressions(plan, "aws_flow_log.flow-logs")["vpc_id"]["references"][0] == "aws_vpc.network-vpc.id"
    # An input the program wrote itself stays a value.
    assert resources["aws_cloudwatch_log_group.flow-logs"]["values"]["name"].startswith("/aws/vpc/")
