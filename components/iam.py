"""IAM building blocks shared by components: policy documents as data, and the EC2 node role."""
from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws


def policy_document(statements: list[dict[str, Any]]) -> dict[str, Any]:
    """An IAM policy document; every statement must carry a Sid saying what it allows."""
    missing = [s for s in statements if not s.get("Sid")]
    if missing:
        raise ValueError(f"policy statements without Sid: {missing}")
    return {"Version": "2012-10-17", "Statement": statements}


def deny_insecure_transport(service: str, resources: Any) -> dict[str, Any]:
    """The statement that makes a resource policy TLS-only."""
    return {"Sid": "DenyNonTlsAccess", "Effect": "Deny", "Principal": "*", "Action": f"{service}:*",
            "Resource": resources, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}


def render_policy(document: Any) -> pulumi.Output[str]:
    """Serialize a document that may hold Outputs (ARNs) into the JSON string IAM expects."""
    return pulumi.Output.from_input(document).apply(lambda doc: json.dumps(doc, sort_keys=True))


NODE_MANAGED_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
)
"""What a node needs to join, network its pods and pull images. Not AmazonSSMManagedInstanceCore,
which Karpenter's getting-started role adds for Session Manager shells: nothing here uses it, and
`kubectl debug node/<name>` gives a shell without an agent the node's role must empower."""


def ec2_node_role(name: str, parent: pulumi.Resource, tags: dict[str, str] | None = None) -> aws.iam.Role:
    """An instance role with the policies every EKS node needs (NODE_MANAGED_POLICIES)."""
    role = aws.iam.Role(
        name,
        assume_role_policy=json.dumps(policy_document([
            {"Sid": "Ec2AssumesNodeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
             "Action": "sts:AssumeRole"},
        ])),
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    for policy_arn in NODE_MANAGED_POLICIES:
        aws.iam.RolePolicyAttachment(f"{name}-{policy_arn.rsplit('/', 1)[-1]}", role=role.name, policy_arn=policy_arn,
                                     opts=pulumi.ResourceOptions(parent=role))
    return role


def key_policy(account_id: str, partition: str, statements: list[dict[str, Any]]) -> dict[str, Any]:
    """A KMS key policy: the account's IAM policies decide who may use the key, as in the policy KMS
    gives a key created without one (KMS developer guide, "Default key policy": the statement that
    "Allows access to the AWS account and enables IAM policies"), plus `statements` for services."""
    return policy_document([
        {"Sid": "AccountIamPoliciesDecide", "Effect": "Allow", "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
         "Action": "kms:*", "Resource": "*"},
        *statements,
    ])
