"""Container Insights with Neuron metrics: the Amazon CloudWatch Observability EKS add-on.

The benchmark reads each variant's NeuronCore utilization and memory from CloudWatch
(benchmark/telemetry.py: namespace ContainerInsights, node_neuroncore_* metrics); this add-on
is what publishes them. Its chart runs neuron-monitor on every Trainium node (trn2.48xlarge is in
the DaemonSet's instance-type affinity, tolerations `operator: Exists` reach the tainted trn2
nodes) and the CloudWatch agent with `enhanced_container_insights: true`, which declares the
Neuron metrics (aws-observability/helm-charts@amazon-cloudwatch-observability-4.10.2
charts/amazon-cloudwatch-observability/values.yaml: agent.defaultConfig, neuronMonitor). It
also ships container logs with Fluent Bit to /aws/containerinsights/<cluster>/application, which
keeps the vLLM servers' compile and start logs after their pods are gone.

Permissions: the agent runs as service account cloudwatch-agent in namespace amazon-cloudwatch
(the chart's cloudwatch-agent.serviceAccountName default, templates/_helpers.tpl) and needs the
AWS managed CloudWatchAgentServerPolicy, the policy AWS documents for this add-on
(docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-setup-EKS-addon.html);
it is AWS's to keep in step with the agent, so it is attached rather than copied. The add-on takes
Pod Identity from v3.1.0 (same page).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from ..identity import WorkloadIdentity, WorkloadRole, WorkloadRoleArgs
from .addons import addon_version

ADDON = "amazon-cloudwatch-observability"
AGENT_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
AGENT_POLICY_ARN = "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"


@dataclass(frozen=True)
class ClusterLogGroupsArgs:
    control_plane: str
    """/aws/eks/<cluster>/cluster (PlatformSpec.control_plane_log_group)."""
    container_insights: tuple[str, ...]
    """/aws/containerinsights/<cluster>/* (PlatformSpec.container_insights_log_groups)."""
    retention_days: int
    kms_key_arn: pulumi.Input[str]
    """The key every group is encrypted with (components/platform/log_key.py)."""


class ClusterLogGroups(pulumi.ComponentResource):
    """The log groups EKS and Container Insights write to, created first so that Pulumi owns them:
    with a retention, and deleted by `pulumi destroy` after what writes to them (the cluster, the
    add-on), which depend on them. Left to their writers, they would be created with no retention
    and outlive the stack."""

    control_plane: aws.cloudwatch.LogGroup
    container_insights: list[aws.cloudwatch.LogGroup]

    def __init__(self, name: str, args: ClusterLogGroupsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:observability:ClusterLogGroups", name, None, opts)

        def group(suffix: str, log_group: str) -> aws.cloudwatch.LogGroup:
            return aws.cloudwatch.LogGroup(f"{name}-{suffix}", name=log_group, retention_in_days=args.retention_days,
                                           kms_key_id=args.kms_key_arn, opts=pulumi.ResourceOptions(parent=self))

        self.control_plane = group("control-plane", args.control_plane)
        self.container_insights = [group(path.rsplit("/", 1)[-1], path) for path in args.container_insights]
        self.register_outputs({"logGroups": [g.name for g in (self.control_plane, *self.container_insights)]})


@dataclass(frozen=True)
class ContainerInsightsArgs:
    cluster_name: str
    kubernetes_version: str
    """Selects the add-on's build (stackconfig/versions.py EKS_ADDONS)."""
    identity: WorkloadIdentity
    cluster_ready: list[pulumi.Resource]
    log_groups: list[aws.cloudwatch.LogGroup]
    """Where the agent and Fluent Bit write (ClusterLogGroups): they must exist first."""
    tags: dict[str, str]


class ContainerInsights(pulumi.ComponentResource):
    """The CloudWatch agent and neuron-monitor on every node, with the agent's role."""

    addon: aws.eks.Addon

    def __init__(self, name: str, args: ContainerInsightsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:observability:ContainerInsights", name, None, opts)
        role = WorkloadRole(f"{name}-agent", WorkloadRoleArgs(
            identity=args.identity,
            namespace=AGENT_NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            managed_policy_arns=(AGENT_POLICY_ARN,),
            tags=args.tags,
        ), opts=pulumi.ResourceOptions(parent=self))
        self.addon = aws.eks.Addon(
            name,
            cluster_name=args.cluster_name,
            addon_name=ADDON,
            addon_version=addon_version(ADDON, args.kubernetes_version, self),
            # As for the Mountpoint driver (components/platform/model_store.py): IRSA through the add-on's
            # service-account annotation; Pod Identity through the role's own association, made
            # before the agent's pods start.
            service_account_role_arn=role.arn if args.identity.mechanism == "irsa" else None,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.cluster_ready, role, *args.log_groups]),
        )
        self.register_outputs({"addonVersion": self.addon.addon_version})
