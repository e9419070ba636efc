"""IAM building blocks shared by components: policy documents as data, and IRSA roles."""
from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class IrsaRoleArgs:
    oidc_provider_arn: pulumi.Input[str]
    oidc_provider_url: pulumi.Input[str]
    """Issuer host and path without https://, as IAM condition keys spell it."""
    namespace: pulumi.Input[str]
    service_account: str
    policy: Any
    """Inline policy document (a dict, or an Output of one)."""
    tags: dict[str, str] | None = None


class IrsaRole(pulumi.ComponentResource):
    """An IAM role only one Kubernetes service account can assume (":sub" and ":aud" pinned)."""

    arn: pulumi.Output[str]
    name: pulumi.Output[str]

    def __init__(self, name: str, args: IrsaRoleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:iam:IrsaRole", name, None, opts)
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_provider_url, args.namespace).apply(
            lambda values: json.dumps(
                policy_document([
                    {
                        "Sid": "AssumeFromOneServiceAccount",
                        "Effect": "Allow",
                        "Principal": {"Federated": values[0]},
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {
                            "StringEquals": {
                                f"{values[1]}:sub": f"system:serviceaccount:{values[2]}:{args.service_account}",
                                f"{values[1]}:aud": "sts.amazonaws.com",
                            }
                        },
                    }
                ]),
                sort_keys=True,
            )
        )
        role = aws.iam.Role(name, assume_role_policy=trust, tags=args.tags, opts=pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(name, role=role.id, policy=render_policy(args.policy), opts=pulumi.ResourceOptions(parent=self))
        self.arn = role.arn
        self.name = role.name
        self.register_outputs({"arn": self.arn})


NODE_MANAGED_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)


def ec2_node_role(name: str, parent: pulumi.Resource, tags: dict[str, str] | None = None) -> aws.iam.Role:
    """An instance role with the four policies every EKS node needs (FACTS.md, Karpenter)."""
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
