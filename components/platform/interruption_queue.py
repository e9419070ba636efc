"""The SQS queue through which Karpenter learns of interruptions before they happen."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from ..iam import deny_insecure_transport, policy_document

# EventBridge events Karpenter acts on (docs/facts.md, "Karpenter v1").
INTERRUPTION_EVENTS = {
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "reservation-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
}


@dataclass(frozen=True)
class InterruptionQueueArgs:
    queue_name: str
    """Karpenter's settings.interruptionQueue takes the name, not the URL."""


class InterruptionQueue(pulumi.ComponentResource):
    name: pulumi.Output[str]
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: InterruptionQueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:karpenter:InterruptionQueue", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        queue = aws.sqs.Queue(name, name=args.queue_name, message_retention_seconds=300,
                              sqs_managed_sse_enabled=True, opts=child)
        aws.sqs.QueuePolicy(name, queue_url=queue.url, policy=queue.arn.apply(lambda arn: json.dumps(policy_document([
            {"Sid": "EventBridgeAndSqsDeliver", "Effect": "Allow",
             "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
             "Action": "sqs:SendMessage", "Resource": arn},
            deny_insecure_transport("sqs", arn),
        ]), sort_keys=True)), opts=child)
        for event, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(f"{name}-{event}", event_pattern=json.dumps(pattern, sort_keys=True), opts=child)
            aws.cloudwatch.EventTarget(f"{name}-{event}", rule=rule.name, arn=queue.arn, opts=child)
        self.name = queue.name
        self.arn = queue.arn
        self.register_outputs({"name": self.name, "arn": self.arn})
