"""Wiring of a platform: network, EKS and its add-ons, Karpenter, the Neuron DRA driver, the
model store, the nodes models are prepared on, and Container Insights, returned as the ClusterHandle pairings build on. Creates
components only."""
from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stackconfig import PlatformSpec
from stackconfig.versions import AMI_ALIASES, KARPENTER, NEURON_HELM_CHART_VERSION

from ..handle import ClusterHandle
from .cluster import Cluster, ClusterArgs
from .flow_logs import FlowLogs, FlowLogsArgs
from .karpenter import Karpenter, KarpenterArgs
from .log_key import LogKey, LogKeyArgs
from .model_store import ModelStore, ModelStoreArgs
from .network import Network, NetworkArgs, S3EndpointPolicy, S3EndpointPolicyArgs
from .neuron_dra import NeuronDra, NeuronDraArgs
from .observability import (
    ClusterLogGroups,
    ClusterLogGroupsArgs,
    ContainerInsights,
    ContainerInsightsArgs,
)
from .preparation_nodes import PreparationNodes, PreparationNodesArgs


def stack_tags(project: str, stack: str, extra: dict[str, str]) -> dict[str, str]:
    """Tags on every AWS resource a stack creates (through the provider's default tags)."""
    return {"project": project, "stack": stack, "managed-by": "pulumi", **extra}


def aws_provider(region: str, tags: dict[str, str]) -> aws.Provider:
    """The stack's AWS provider: its region, and its tags on everything it creates."""
    return aws.Provider("aws", region=region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags))


def build_platform(spec: PlatformSpec, tags: dict[str, str], provider: aws.Provider) -> ClusterHandle:
    with_aws = pulumi.ResourceOptions(providers=[provider])
    network = Network("network", NetworkArgs.from_spec(spec), opts=with_aws)
    log_key = LogKey("log-key", LogKeyArgs(cluster_name=spec.cluster_name, region=spec.region,
                                           log_groups=spec.log_groups, tags=tags), opts=with_aws)
    FlowLogs("flow-logs", FlowLogsArgs(vpc_id=network.vpc_id, log_group=spec.flow_log_group,
                                       retention_days=spec.cluster.log_retention_days, kms_key_arn=log_key.arn,
                                       tags=tags), opts=with_aws)
    logs = ClusterLogGroups("cluster-logs", ClusterLogGroupsArgs(
        control_plane=spec.control_plane_log_group,
        container_insights=spec.container_insights_log_groups,
        retention_days=spec.cluster.log_retention_days,
        kms_key_arn=log_key.arn,
    ), opts=with_aws)
    cluster = Cluster("cluster", ClusterArgs(
        cluster_name=spec.cluster_name,
        kubernetes_version=spec.cluster.kubernetes_version,
        vpc_id=network.vpc_id,
        private_subnet_ids=network.private_subnet_ids,
        public_subnet_ids=network.public_subnet_ids,
        system_node_instance_type=spec.cluster.system_node_instance_type,
        system_node_count=spec.cluster.system_node_count,
        workload_identity=spec.cluster.workload_identity,
        support_type=spec.cluster.support_type,
        control_plane_log_group=logs.control_plane,
        public_access_cidrs=spec.cluster.public_access_cidrs,
        tags=tags,
    ), opts=with_aws)
    karpenter = Karpenter("karpenter", KarpenterArgs(
        cluster_name=spec.cluster_name,
        region=spec.region,
        identity=cluster.identity,
        system_node_selector=cluster.system_node_selector,
        provider=cluster.provider,
        cluster_ready=cluster.ready,
        tags=tags,
    ), opts=with_aws)
    neuron = NeuronDra("neuron-dra", NeuronDraArgs(provider=cluster.provider, cluster_ready=cluster.ready))
    model_store = ModelStore("model-store", ModelStoreArgs(
        cluster_name=spec.cluster_name,
        kubernetes_version=spec.cluster.kubernetes_version,
        retain_on_destroy=spec.retain_model_store,
        identity=cluster.identity,
        cluster_ready=cluster.ready,
        tags=tags,
        access_log_days=spec.cluster.log_retention_days,
    ), opts=with_aws)
    S3EndpointPolicy("s3-endpoint-policy", S3EndpointPolicyArgs(
        endpoint_id=network.s3_endpoint_id, region=spec.region, bucket_arn=model_store.bucket_arn), opts=with_aws)
    preparation = PreparationNodes("preparation-nodes", PreparationNodesArgs(
        cluster_name=spec.cluster_name,
        node_role_name=karpenter.node_role_name,
        ami_alias=AMI_ALIASES[spec.cluster.kubernetes_version].version,
        provider=cluster.provider,
        ready=[*cluster.ready, karpenter.crds, karpenter.release],
        tags=tags,
    ))
    insights = ContainerInsights("container-insights", ContainerInsightsArgs(
        cluster_name=spec.cluster_name,
        kubernetes_version=spec.cluster.kubernetes_version,
        identity=cluster.identity,
        cluster_ready=cluster.ready,
        log_groups=logs.container_insights,
        tags=tags,
    ), opts=with_aws)
    return ClusterHandle(
        name=spec.cluster_name,
        region=spec.region,
        kubeconfig=cluster.kubeconfig,
        provider=cluster.provider,
        identity=cluster.identity,
        node_role_name=karpenter.node_role_name,
        model_bucket=model_store.bucket_name,
        model_bucket_arn=model_store.bucket_arn,
        versions={
            "kubernetes": spec.cluster.kubernetes_version,
            "supportType": spec.cluster.support_type,
            "karpenter": KARPENTER.version,
            "neuronHelmChart": NEURON_HELM_CHART_VERSION.version,
            "addons": {**cluster.addon_versions, model_store.driver.addon_name: model_store.driver.addon_version,
                       insights.addon.addon_name: insights.addon.addon_version},
        },
        ready=(*cluster.ready, karpenter.crds, karpenter.release, neuron.release, model_store.driver, preparation.node_pool),
    )
