"""The AWS side of an offline plan as a Terraform plan (`terraform show -json`), for checkov.

checkov reads Terraform plans (`--framework terraform_plan`), not Pulumi's. Every AWS resource the
program registers is a resource of the Terraform AWS provider under another name (pulumi-aws is
bridged from it): the type maps through TERRAFORM_TYPES, properties go from camelCase to
snake_case, and the few blocks Pulumi names in the plural take Terraform's singular name
(BLOCK_NAMES). Two pulumi-eks components stand for the AWS resources they create
(COMPONENT_TYPES): under the recording engine their children are not registered, so the cluster
and its node group are written from the component's inputs, the way pulumi-eks passes them on
(pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts and nodes/nodegroup.ts).

A property whose value another resource computed (an id, an ARN, a name) is written as Terraform
writes a value not known until apply: null in `planned_values`, with a reference in
`configuration` (checkov's plan parser puts the reference in its place, and its graph checks
connect resources through it: a bucket to its public access block, a VPC to its flow log).

The format: Terraform's "JSON Output Format" (format_version 1.2); what checkov reads of it is
checkov/terraform/plan_parser.py (planned_values.root_module.resources, resource_changes,
configuration.root_module.resources[].expressions[].references).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .engine import RecordedResource, Recording

PROVIDER = "registry.terraform.io/hashicorp/aws"

# Pulumi type token -> Terraform resource type (pulumi-aws resources.go maps each Terraform type to
# its token; these are the ones this program uses).
TERRAFORM_TYPES: dict[str, str] = {
    "aws:cloudwatch/dashboard:Dashboard": "aws_cloudwatch_dashboard",
    "aws:cloudwatch/eventRule:EventRule": "aws_cloudwatch_event_rule",
    "aws:cloudwatch/eventTarget:EventTarget": "aws_cloudwatch_event_target",
    "aws:cloudwatch/logGroup:LogGroup": "aws_cloudwatch_log_group",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "aws_default_security_group",
    "aws:ec2/eip:Eip": "aws_eip",
    "aws:ec2/flowLog:FlowLog": "aws_flow_log",
    "aws:ec2/internetGateway:InternetGateway": "aws_internet_gateway",
    "aws:ec2/launchTemplate:LaunchTemplate": "aws_launch_template",
    "aws:ec2/natGateway:NatGateway": "aws_nat_gateway",
    "aws:ec2/routeTable:RouteTable": "aws_route_table",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "aws_route_table_association",
    "aws:ec2/subnet:Subnet": "aws_subnet",
    "aws:ec2/tag:Tag": "aws_ec2_tag",
    "aws:ec2/vpc:Vpc": "aws_vpc",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "aws_vpc_endpoint",
    "aws:ec2/vpcEndpointPolicy:VpcEndpointPolicy": "aws_vpc_endpoint_policy",
    "aws:eks/accessEntry:AccessEntry": "aws_eks_access_entry",
    "aws:eks/addon:Addon": "aws_eks_addon",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": "aws_eks_pod_identity_association",
    "aws:iam/role:Role": "aws_iam_role",
    "aws:iam/rolePolicy:RolePolicy": "aws_iam_role_policy",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "aws_iam_role_policy_attachment",
    "aws:kms/key:Key": "aws_kms_key",
    "aws:s3/bucket:Bucket": "aws_s3_bucket",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": "aws_s3_bucket_lifecycle_configuration",
    "aws:s3/bucketLogging:BucketLogging": "aws_s3_bucket_logging",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": "aws_s3_bucket_ownership_controls",
    "aws:s3/bucketPolicy:BucketPolicy": "aws_s3_bucket_policy",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "aws_s3_bucket_public_access_block",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration":
        "aws_s3_bucket_server_side_encryption_configuration",
    "aws:s3/bucketVersioning:BucketVersioning": "aws_s3_bucket_versioning",
    "aws:sqs/queue:Queue": "aws_sqs_queue",
    "aws:sqs/queuePolicy:QueuePolicy": "aws_sqs_queue_policy",
}

# Repeated blocks Pulumi names in the plural where Terraform has the singular block name
# (pulumi-aws's schema for each type: `rules`, `routes`).
BLOCK_NAMES: dict[str, dict[str, str]] = {
    "aws_s3_bucket_lifecycle_configuration": {"rules": "rule"},
    "aws_s3_bucket_server_side_encryption_configuration": {"rules": "rule"},
    "aws_route_table": {"routes": "route"},
}

# Attributes of another resource a property may hold (what Terraform would leave unknown at plan).
REFERENCED_ATTRIBUTES = ("id", "arn", "name", "bucket")


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def snake_keys(value: Any, parent: str = "") -> Any:
    """camelCase keys to snake_case, all the way down; tags and labels are data, not schema."""
    if isinstance(value, dict):
        if parent in ("tags", "labels"):
            return dict(value)
        return {snake(k): snake_keys(v, snake(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v, parent) for v in value]
    return value


def _eks_cluster(inputs: dict[str, Any]) -> dict[str, Any]:
    """aws_eks_cluster as pulumi-eks creates it from its component's inputs (cluster.ts:
    vpcConfig from the subnets and endpoint settings, encryptionConfig for "secrets" from
    encryptionConfigKeyArn, enabledClusterLogTypes, version, upgradePolicy)."""
    values = {
        "name": inputs.get("name"),
        "version": inputs.get("version"),
        "enabled_cluster_log_types": inputs.get("enabledClusterLogTypes", []),
        "vpc_config": [{
            "endpoint_private_access": inputs.get("endpointPrivateAccess", False),
            "endpoint_public_access": inputs.get("endpointPublicAccess", True),
            "public_access_cidrs": inputs.get("publicAccessCidrs", ["0.0.0.0/0"]),
            "subnet_ids": [*inputs.get("privateSubnetIds", []), *inputs.get("publicSubnetIds", [])],
        }],
        "access_config": [{"authentication_mode": inputs.get("authenticationMode")}],
        "tags": inputs.get("tags", {}),
    }
    if inputs.get("encryptionConfigKeyArn"):
        values["encryption_config"] = [{"resources": ["secrets"], "provider": [{"key_arn": inputs["encryptionConfigKeyArn"]}]}]
    if inputs.get("upgradePolicy"):
        values["upgrade_policy"] = [snake_keys(inputs["upgradePolicy"])]
    return values


def _eks_node_group(inputs: dict[str, Any]) -> dict[str, Any]:
    """aws_eks_node_group as pulumi-eks creates it (nodegroup.ts passes these through)."""
    names = ("capacityType", "instanceTypes", "labels", "launchTemplate", "scalingConfig", "subnetIds", "tags",
             "version", "releaseVersion", "amiType", "diskSize")
    values = snake_keys({k: inputs[k] for k in names if k in inputs})
    for block in ("launch_template", "scaling_config"):
        if block in values:
            values[block] = [values[block]]
    return values


COMPONENT_TYPES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "eks:index:Cluster": ("aws_eks_cluster", _eks_cluster),
    "eks:index:ManagedNodeGroup": ("aws_eks_node_group", _eks_node_group),
}


@dataclass(frozen=True)
class Converted:
    plan: dict[str, Any]
    """The Terraform plan JSON document."""
    unconverted: list[str]
    """AWS types (and AWS components) in the recording with no Terraform counterpart here."""


def _is_aws(resource: RecordedResource) -> bool:
    return (resource.type.startswith("aws:") and resource.custom and not resource.read) or resource.type in COMPONENT_TYPES


def to_terraform_plan(recording: Recording) -> Converted:
    """The recording's AWS resources as a Terraform plan (every one a create)."""
    aws = [r for r in recording.resources if _is_aws(r) and not r.type.startswith("aws:index/")]
    addresses: dict[str, str] = {}
    used: set[str] = set()
    unconverted = sorted({r.type for r in aws if r.type not in TERRAFORM_TYPES and r.type not in COMPONENT_TYPES})
    for resource in aws:
        tf_type = TERRAFORM_TYPES.get(resource.type) or COMPONENT_TYPES.get(resource.type, ("",))[0]
        if not tf_type:
            continue
        name, index = resource.name, 1
        while f"{tf_type}.{name}" in used:
            index += 1
            name = f"{resource.name}-{index}"
        addresses[resource.urn] = f"{tf_type}.{name}"
        used.add(addresses[resource.urn])
    by_urn = {r.urn: r for r in aws}
    planned, changes, configured = [], [], []
    for resource in aws:
        if resource.urn not in addresses:
            continue
        address = addresses[resource.urn]
        tf_type, name = address.split(".", 1)
        if resource.type in COMPONENT_TYPES:
            values = COMPONENT_TYPES[resource.type][1](resource.inputs)
        else:
            values = snake_keys(resource.inputs)
            for pulumi_name, block in BLOCK_NAMES.get(tf_type, {}).items():
                if pulumi_name in values:
                    values[block] = values.pop(pulumi_name)
        expressions = {}
        for key, value in list(values.items()):
            reference = _reference(value, resource, by_urn, addresses)
            if reference:
                values[key] = None
                expressions[key] = {"references": [reference, reference.rsplit(".", 1)[0]]}
        common = {"address": address, "mode": "managed", "type": tf_type, "name": name}
        planned.append({**common, "provider_name": PROVIDER, "schema_version": 0, "values": values})
        changes.append({**common, "provider_name": PROVIDER,
                        "change": {"actions": ["create"], "before": None, "after": values,
                                   "after_unknown": {k: True for k in expressions}}})
        configured.append({**common, "provider_config_key": "aws", "expressions": expressions, "schema_version": 0})
    plan = {
        "format_version": "1.2",
        "terraform_version": "1.9.8",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {"provider_config": {"aws": {"name": "aws", "full_name": PROVIDER}},
                          "root_module": {"resources": configured}},
    }
    return Converted(plan, unconverted)


def _reference(value: Any, resource: RecordedResource, by_urn: dict[str, RecordedResource],
               addresses: dict[str, str]) -> str | None:
    """`<address>.<attribute>` when `value` is what a resource this one depends on computed."""
    if not isinstance(value, str) or not value:
        return None
    for urn in resource.dependencies:
        other = by_urn.get(urn)
        if other is None or urn not in addresses or other.type in COMPONENT_TYPES:
            continue
        for attribute in REFERENCED_ATTRIBUTES:
            if other.outputs.get(attribute) == value:
                return f"{addresses[urn]}.{attribute}"
    return None
