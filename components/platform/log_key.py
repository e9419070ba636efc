"""The customer-managed KMS key the cluster's log groups are encrypted with (flow logs, control
plane, Container Insights): rotated yearly, usable by CloudWatch Logs for those log groups only.

CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs using AWS Key Management Service",
step 2 ("Set permissions on the KMS key"): the key policy lets the regional service principal
logs.<region>.amazonaws.com use the key (kms:Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*,
Describe*) under the condition that `kms:EncryptionContext:aws:logs:arn` is the ARN of a log group
(ArnLike; the guide's note: that condition restricts a key to given log groups). CloudWatch Logs
encrypts and decrypts itself: writers (EKS, Fluent Bit, the flow-logs role) and readers need no
KMS permission. If the key is disabled or deleted, the logs it encrypted can no longer be read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from ..iam import key_policy

LOGS_KEY_ACTIONS = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]


def log_key_policy(account_id: str, partition: str, dns_suffix: str, region: str, log_groups: tuple[str, ...]) -> dict:
    return key_policy(account_id, partition, [{
        "Sid": "CloudWatchLogsEncryptsTheClusterLogGroups",
        "Effect": "Allow",
        "Principal": {"Service": f"logs.{region}.{dns_suffix}"},
        "Action": LOGS_KEY_ACTIONS,
        "Resource": "*",
        "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [
            f"arn:{partition}:logs:{region}:{account_id}:log-group:{group}" for group in log_groups]}},
    }])


@dataclass(frozen=True)
class LogKeyArgs:
    cluster_name: str
    region: str
    log_groups: tuple[str, ...]
    """The names of every log group the key may encrypt (PlatformSpec.log_groups)."""
    tags: dict[str, str]


class LogKey(pulumi.ComponentResource):
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: LogKeyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:observability:LogKey", name, None, opts)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
        policy = pulumi.Output.all(account.account_id, partition.partition, partition.dns_suffix).apply(
            lambda v: json.dumps(log_key_policy(v[0], v[1], v[2], args.region, args.log_groups), sort_keys=True))
        key = aws.kms.Key(
            name,
            description=f"{args.cluster_name}: encryption of the cluster's CloudWatch log groups",
            enable_key_rotation=True,
            deletion_window_in_days=7,  # the minimum, as for the Secrets key (components/platform/cluster.py)
            policy=policy,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.arn = key.arn
        self.register_outputs({"arn": self.arn})
