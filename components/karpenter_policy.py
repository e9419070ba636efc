"""The Karpenter controller's IAM policy, as data.

Follows the scoping of Karpenter's getting-started CloudFormation (v1.14): mutating EC2 and IAM
calls only on resources tagged as owned by this cluster and created for a NodePool/EC2NodeClass,
read calls limited to the cluster's region, PassRole only for the node role and only to EC2.
No statement uses a "*" action, and no mutating statement an unconditioned "*" resource.
"""
from __future__ import annotations

from typing import Any

from .iam import policy_document

DESCRIBE_ACTIONS = [
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
]


def controller_policy(
    *, cluster_name: str, region: str, account_id: Any, partition: str, node_role_arn: Any, queue_arn: Any
) -> dict[str, Any]:
    ec2 = f"arn:{partition}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    requested_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    instance_profile = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    launched = ["fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"]
    return policy_document([
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:security-group/*",
                         f"{ec2}:*:subnet/*", f"{ec2}:*:capacity-reservation/*"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": [f"{ec2}:*:{kind}/*" for kind in launched],
            "Condition": {"StringEquals": requested_owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [f"{ec2}:*:{kind}/*" for kind in launched],
            "Condition": {
                "StringEquals": {**requested_owned, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:*:instance/*",
            "Condition": {
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Action": DESCRIBE_ACTIONS,
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
        },
        {
            # Read-only and not resource-scoped by the Pricing API.
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Action": "pricing:GetProducts",
            "Resource": "*",
        },
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": queue_arn,
        },
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Action": "iam:CreateInstanceProfile",
            "Resource": instance_profile,
            "Condition": {
                "StringEquals": {**requested_owned, "aws:RequestTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Action": "iam:TagInstanceProfile",
            "Resource": instance_profile,
            "Condition": {
                "StringEquals": {**owned, "aws:ResourceTag/topology.kubernetes.io/region": region,
                                 **requested_owned, "aws:RequestTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                               "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Resource": instance_profile,
            "Condition": {
                "StringEquals": {**owned, "aws:ResourceTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Action": ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"],
            "Resource": instance_profile,
        },
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
        },
    ])
