"""The Karpenter controller's IAM policy, as data.

Statement for statement the v1.15.0 controller policy of Karpenter's Getting Started
CloudFormation (the six KarpenterController*Policy documents, as the v1.15 CloudFormation reference
page reproduces them: aws/karpenter-provider-aws@d77d1a3 website/content/en/v1.15/reference/
cloudformation.md), written as one inline policy. tests/test_karpenter_policy.py diffs it against a checked-in copy
of those statements; DEVIATIONS lists what differs and why.

Scoping, as upstream: mutating EC2 and IAM calls only on resources tagged as owned by this
cluster and created for a NodePool/EC2NodeClass, read calls limited to the cluster's region,
PassRole only for the node role and only to EC2. Two statements need `Resource: "*"` because
their actions support no resource ARN: pricing:GetProducts and iam:ListInstanceProfiles (the
Service Authorization Reference lists no resource type for either), and the zonal-shift read is
scoped by its condition key instead.
"""
from __future__ import annotations

from typing import Any

from ..iam import policy_document

# Sid -> why this policy differs from upstream there; a deviation must be written down here to
# pass the diff test (tests/test_karpenter_policy.py).
DEVIATIONS: dict[str, str] = {
    "AllowScopedDeletion": "without ec2:RebootInstances, which v1.15 adds for node repair by reboot: only the "
                           "RebootForRepair AWS feature gate uses it (charts/karpenter/values.yaml at 1.15.0), and this "
                           "program does not enable it",
}

DESCRIBE_ACTIONS = sorted([
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
])
LAUNCHED = ["fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"]


def controller_policy(
    *, cluster_name: str, region: str, account_id: Any, partition: str, node_role_arn: Any, queue_arn: Any
) -> dict[str, Any]:
    ec2 = f"arn:{partition}:ec2:{region}"
    cluster_arn = f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
    instance_profile = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    requested_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    launched = [f"{ec2}:*:{kind}/*" for kind in LAUNCHED]
    return policy_document([
        # KarpenterControllerNodeLifecyclePolicy
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
            "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:security-group/*",
                         f"{ec2}:*:subnet/*", f"{ec2}:*:capacity-reservation/*", f"{ec2}:*:placement-group/*"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Action": ["ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:RunInstances"],
            "Resource": launched,
            "Condition": {"StringEquals": requested_owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags"],
            "Resource": launched,
            "Condition": {
                "StringEquals": {**requested_owned, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags"],
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
            "Action": ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        # KarpenterControllerIAMIntegrationPolicy
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": node_role_arn,
            # Upstream names both partitions' EC2 principals so one template serves aws and aws-cn.
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Action": ["iam:CreateInstanceProfile"],
            "Resource": instance_profile,
            "Condition": {
                "StringEquals": {**requested_owned, "aws:RequestTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Action": ["iam:TagInstanceProfile"],
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
            "Action": ["iam:AddRoleToInstanceProfile", "iam:DeleteInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
            "Resource": instance_profile,
            "Condition": {
                "StringEquals": {**owned, "aws:ResourceTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        # KarpenterControllerEKSIntegrationPolicy
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Action": ["eks:DescribeCluster"],
            "Resource": cluster_arn,
        },
        # KarpenterControllerInterruptionPolicy
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": queue_arn,
        },
        # KarpenterControllerZonalShiftPolicy
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Resource": "*",
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        },
        # KarpenterControllerResourceDiscoveryPolicy
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
            "Action": ["ssm:GetParameter"],
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
        },
        {
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Action": ["pricing:GetProducts"],
            "Resource": "*",
        },
        {
            # The action has no resource type: scoped to an ARN it is never granted, and
            # instance-profile garbage collection fails on every pass (docs/facts.md, "Karpenter v1").
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Action": ["iam:ListInstanceProfiles"],
            "Resource": "*",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Action": ["iam:GetInstanceProfile"],
            "Resource": instance_profile,
        },
    ])
