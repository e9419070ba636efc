"""The EKS cluster: control plane, OIDC for IRSA, an on-demand system node group, core add-ons,
and the Kubernetes provider every later component deploys through."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from .iam import ec2_node_role
from .versions import EKS_ADDON_VERSIONS

SYSTEM_NODE_LABEL = {"sd-trn2/node-role": "system"}
WORKLOAD_NAMESPACE = "inference"


@dataclass(frozen=True)
class ClusterArgs:
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    public_subnet_ids: list[pulumi.Input[str]]
    system_node_instance_type: str
    system_node_count: int
    tags: dict[str, str]


class Cluster(pulumi.ComponentResource):
    name: str
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    workload_namespace: pulumi.Output[str]
    """Namespace of the vLLM servers, their claims and the benchmark."""
    ready: list[pulumi.Resource]
    """What Kubernetes workloads must wait for: the control plane and nodes to run them on."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster = eks.Cluster(
            f"{name}-eks",
            name=args.cluster_name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            node_associate_public_ip_address=False,
            endpoint_private_access=True,
            endpoint_public_access=True,
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=True,
            skip_default_node_group=True,
            enabled_cluster_log_types=["api", "audit", "authenticator"],
            vpc_cni_options=eks.VpcCniOptionsArgs(addon_version=EKS_ADDON_VERSIONS["vpc-cni"]),
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=True, version=EKS_ADDON_VERSIONS["coredns"]),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=True, version=EKS_ADDON_VERSIONS["kube-proxy"]),
            tags=args.tags,
            opts=child,
        )
        node_role = ec2_node_role(f"{name}-system-node", self, args.tags)
        # On-demand and never managed by Karpenter: the Karpenter controller must not run on
        # nodes it could terminate, and the benchmark must outlive the trn2 nodes it measures.
        system_nodes = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=cluster,
            node_role=node_role,
            subnet_ids=args.private_subnet_ids,
            instance_types=[args.system_node_instance_type],
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=args.system_node_count, min_size=args.system_node_count, max_size=args.system_node_count + 1
            ),
            labels=SYSTEM_NODE_LABEL,
            tags=args.tags,
            opts=child,
        )
        # Karpenter's nodes join through the EKS-managed cluster security group, which it finds
        # by the discovery tag (FACTS.md: selectors by tag, not by id).
        described = aws.eks.get_cluster_output(
            name=args.cluster_name, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[cluster])
        )
        self.cluster_security_group_id = described.vpc_config.cluster_security_group_id
        aws.ec2.Tag(f"{name}-sg-discovery", resource_id=self.cluster_security_group_id,
                    key="karpenter.sh/discovery", value=args.cluster_name, opts=child)

        self.name = args.cluster_name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]))
        self.ready = [cluster, system_nodes]
        namespace = k8s.core.v1.Namespace(f"{name}-workloads", metadata={"name": WORKLOAD_NAMESPACE},
                                          opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=self.ready))
        self.workload_namespace = namespace.metadata.name
        self.register_outputs({"clusterName": self.name, "kubeconfig": self.kubeconfig,
                               "oidcProviderArn": self.oidc_provider_arn})
