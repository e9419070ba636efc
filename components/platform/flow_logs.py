"""The VPC's flow logs: every accepted and rejected flow, into a log group the program owns (with the
cluster's retention, deleted by `pulumi destroy`), delivered under a role only the flow-logs service
of this account can assume.

AWS VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs": the role trusts
vpc-flow-logs.amazonaws.com (aws:SourceAccount guards against a confused deputy) and may create
streams and put events; pulumi-aws 7.51.1 ec2.FlowLog takes the group's ARN as `log_destination`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from ..iam import policy_document, render_policy


def delivery_policy(log_group_arn: pulumi.Input[str]) -> dict:
    # A log group's ARN in a policy, for every action but a few, ends in ":*" (CloudWatch Logs user
    # guide, "Overview of managing access permissions": "Use the second version, with the trailing :*").
    in_the_group = pulumi.Output.concat(log_group_arn, ":*")
    return policy_document([
        # DescribeLogStreams takes the log group as its resource (Service Authorization Reference,
        # "Actions, resources, and condition keys for Amazon CloudWatch Logs": log-group*).
        {"Sid": "WriteFlowLogStreams", "Effect": "Allow",
         "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"], "Resource": in_the_group},
        # DescribeLogGroups lists the account's groups: it takes no narrower resource, and only reads.
        {"Sid": "FindTheLogGroup", "Effect": "Allow", "Action": "logs:DescribeLogGroups", "Resource": "*"},
    ])


def trust_policy(account_id: str) -> str:
    return json.dumps(policy_document([
        {"Sid": "VpcFlowLogsDeliver", "Effect": "Allow", "Principal": {"Service": "vpc-flow-logs.amazonaws.com"},
         "Action": "sts:AssumeRole", "Condition": {"StringEquals": {"aws:SourceAccount": account_id}}},
    ]), sort_keys=True)


@dataclass(frozen=True)
class FlowLogsArgs:
    vpc_id: pulumi.Input[str]
    log_group: str
    """/aws/vpc/<cluster>/flow-logs (PlatformSpec.flow_log_group)."""
    retention_days: int
    kms_key_arn: pulumi.Input[str]
    """The key the log group is encrypted with (components/platform/log_key.py)."""
    tags: dict[str, str]


class FlowLogs(pulumi.ComponentResource):
    log_group: aws.cloudwatch.LogGroup

    def __init__(self, name: str, args: FlowLogsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:network:FlowLogs", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.log_group = aws.cloudwatch.LogGroup(name, name=args.log_group, retention_in_days=args.retention_days,
                                                 kms_key_id=args.kms_key_arn, opts=child)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(name, assume_role_policy=account.account_id.apply(trust_policy), tags=args.tags, opts=child)
        policy = aws.iam.RolePolicy(name, role=role.id, policy=render_policy(delivery_policy(self.log_group.arn)), opts=child)
        aws.ec2.FlowLog(
            name,
            vpc_id=args.vpc_id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=self.log_group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=600,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        self.register_outputs({"logGroup": self.log_group.name})
