"""The EKS cluster: control plane, an on-demand system node group, the add-ons that need nodes,
the workload-identity mechanism, and the Kubernetes provider every later component deploys through."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from stackconfig.versions import AMI_RELEASE

from ..handle import SYSTEM_NODE_LABEL
from ..iam import ec2_node_role, key_policy
from ..identity import Mechanism, WorkloadIdentity
from .addons import addon_version

SYSTEM_ROOT_VOLUME_GIB = 50
"""The system nodes' root volume: images, logs and the benchmark's emptyDirs (about 12 GiB,
benchmark/pod.py WRITABLE_VOLUMES), with room to spare; EKS's default is 20 GiB."""


@dataclass(frozen=True)
class ClusterArgs:
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    public_subnet_ids: list[pulumi.Input[str]]
    system_node_instance_type: str
    system_node_count: int
    workload_identity: Mechanism
    support_type: str
    """STANDARD or EXTENDED; always explicit (pulumi-eks would default to EXTENDED)."""
    control_plane_log_group: aws.cloudwatch.LogGroup
    """EKS writes the control plane's logs there; created first, so EKS does not create its own."""
    public_access_cidrs: tuple[str, ...]
    """Who may reach the public API endpoint (cluster.publicAccessCidrs); always sent, so that
    narrowing and re-opening it are both explicit updates."""
    tags: dict[str, str]


def node_addon(name: str, cluster_name: str, addon: str, version: pulumi.Input[str], system_nodes: pulumi.Resource,
               parent: pulumi.Resource, configuration: dict | None = None) -> aws.eks.Addon:
    """An EKS add-on whose pods need a node: created only once the system node group exists.

    Created with the control plane, such an add-on stays DEGRADED and the provider's waiter fails
    the first `pulumi up` after ~20 minutes (pulumi/pulumi-eks#1819, #1525; docs/facts.md, "pulumi-eks outputs and add-ons"). OVERWRITE
    takes over the self-managed copy EKS bootstraps (bootstrapSelfManagedAddons defaults to true).
    """
    return aws.eks.Addon(
        name,
        cluster_name=cluster_name,
        addon_name=addon,
        addon_version=version,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[system_nodes]),
    )


class Cluster(pulumi.ComponentResource):
    name: str
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    identity: WorkloadIdentity
    """How workload roles are trusted and bound (IRSA or Pod Identity)."""
    cluster_security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    system_node_selector: dict[str, str]
    """Selects the on-demand system nodes (Karpenter, the benchmark)."""
    ready: list[pulumi.Resource]
    """What Kubernetes workloads must wait for: the control plane, nodes to run them on, DNS and
    (with Pod Identity) the agent that hands out credentials."""
    secrets_key: aws.kms.Key
    """The customer-managed key Kubernetes Secrets are envelope-encrypted with (rotation on)."""
    addon_versions: dict[str, pulumi.Input[str]]
    """The builds of the add-ons it installs (pinned, or EKS's default: components/addons.py)."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        irsa = args.workload_identity == "irsa"
        versions = self.addon_versions = {
            addon: addon_version(addon, args.kubernetes_version, self)
            for addon in ("vpc-cni", "kube-proxy", "coredns", *(() if irsa else ("eks-pod-identity-agent",)))}
        # Kubernetes Secrets (the Hugging Face token) are envelope-encrypted with a key of the
        # cluster's own, rotated yearly. Adding encryption to an existing cluster is an in-place
        # AssociateEncryptionConfig; removing it would replace the cluster, so it is never optional.
        # EKS user guide, "Encrypt Kubernetes secrets with KMS on existing clusters";
        # pulumi-eks v4.3.0 nodejs/eks/cluster/cluster.ts (encryptionConfigKeyArn). Its policy is
        # KMS's default one, written out (CKV2_AWS_64): the account's IAM policies decide.
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
        self.secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"{args.cluster_name}: envelope encryption of Kubernetes Secrets",
            enable_key_rotation=True,
            deletion_window_in_days=7,  # the minimum: `pulumi destroy` leaves it pending deletion a week
            policy=pulumi.Output.all(account.account_id, partition.partition).apply(
                lambda v: json.dumps(key_policy(v[0], v[1], []), sort_keys=True)),
            tags=args.tags,
            opts=child,
        )
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
            public_access_cidrs=list(args.public_access_cidrs),
            encryption_config_key_arn=self.secrets_key.arn,
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=irsa,
            skip_default_node_group=True,
            enabled_cluster_log_types=["api", "audit", "authenticator"],
            # pulumi-eks 4.4.0 defaults the support type to EXTENDED (its upgrade_policy docstring):
            # without this a cluster moves to extended-support billing when its version ages.
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.support_type),
            # Network policy enforced by the VPC CNI's node agent: each pairing namespace is fenced
            # (components/pairing/network_policy.py). Needs a build that passes its requirement
            # (stackconfig/versions.py addon_requirement).
            vpc_cni_options=eks.VpcCniOptionsArgs(addon_version=versions["vpc-cni"], enable_network_policy=True),
            # pulumi-eks creates CoreDNS with the control plane when enabled (its default is
            # true: CoreDnsAddonOptionsArgs.enabled); it is created below, after the nodes.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            # kube-proxy is a DaemonSet: with no node yet it has nothing to wait for.
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=True, version=versions["kube-proxy"]),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.control_plane_log_group]),
        )
        node_role = ec2_node_role(f"{name}-system-node", self, args.tags)
        # What the trn2 nodes' EC2NodeClass already says (components/nodeclass.py), for the system
        # nodes: IMDSv2 only, at hop limit 1 so pods cannot borrow the node's role, and an encrypted
        # root volume. A managed node group has no setting for either; its launch template does
        # (pulumi-eks v4.3.0 nodegroup.ts: a custom template excludes disk_size and enable_imd_sv2).
        # Adding it replaces the node group of a running stack once (docs/security.md, "Upgrading a running stack to this release").
        system_template = aws.ec2.LaunchTemplate(
            f"{name}-system",
            description=f"{args.cluster_name}: system nodes",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",  # AL2023's root device
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=SYSTEM_ROOT_VOLUME_GIB, volume_type="gp3", encrypted="true", delete_on_termination="true"))],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=args.tags)
                                for kind in ("instance", "volume")],
            tags=args.tags,
            opts=child,
        )
        # On-demand and never managed by Karpenter: the Karpenter controller must not run on
        # nodes it could terminate, and the benchmark must outlive the trn2 nodes it measures.
        system_nodes = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=cluster,
            node_role=node_role,
            subnet_ids=args.private_subnet_ids,
            instance_types=[args.system_node_instance_type],
            capacity_type="ON_DEMAND",
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=system_template.id, version=system_template.latest_version.apply(str)),
            # Named here, or the nodes never follow an upgrade: pulumi-eks copies the cluster's
            # version into a node group only when it names neither a version nor a launch template
            # (pulumi/pulumi-eks nodejs/eks/nodes/nodegroup.ts, `if (!args.version &&
            # !args.launchTemplate)`, v4.3.0 and 7bf0c1b). The template holds no AMI, so EKS picks
            # the AL2023 AMI (its default for new node groups from Kubernetes 1.30: EKS user guide,
            # "Kubernetes versions on extended support", 1.30) of this release version.
            version=args.kubernetes_version,
            release_version=AMI_RELEASE.release_version(args.kubernetes_version),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=args.system_node_count, min_size=args.system_node_count, max_size=args.system_node_count + 1
            ),
            labels=SYSTEM_NODE_LABEL,
            tags=args.tags,
            opts=child,
        )
        addons = [node_addon(f"{name}-coredns", args.cluster_name, "coredns", versions["coredns"], system_nodes, self)]
        if not irsa:
            # The agent (a DaemonSet on 169.254.170.23) serves Pod Identity credentials; the node
            # role's AmazonEKSWorkerNodePolicy carries eks-auth:AssumeRoleForPodIdentity.
            addons.append(node_addon(f"{name}-pod-identity-agent", args.cluster_name, "eks-pod-identity-agent",
                                     versions["eks-pod-identity-agent"], system_nodes, self))
        # Karpenter's nodes join through the EKS-managed cluster security group, which it finds
        # by the discovery tag: selectors by tag keep working when the group is replaced.
        described = aws.eks.get_cluster_output(
            name=args.cluster_name, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[cluster])
        )
        self.cluster_security_group_id = described.vpc_config.cluster_security_group_id
        aws.ec2.Tag(f"{name}-sg-discovery", resource_id=self.cluster_security_group_id,
                    key="karpenter.sh/discovery", value=args.cluster_name, opts=child)

        self.name = args.cluster_name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.identity = WorkloadIdentity(
            mechanism=args.workload_identity,
            # Read back from the API, so associations wait for the control plane to exist.
            cluster_name=described.name,
            oidc_provider_arn=cluster.oidc_provider_arn if irsa else None,
            oidc_issuer=cluster.oidc_issuer if irsa else None,
        )
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]))
        self.system_node_selector = dict(SYSTEM_NODE_LABEL)
        self.ready = [cluster, system_nodes, *addons]
        self.register_outputs({"clusterName": self.name, "kubeconfig": self.kubeconfig,
                               "oidcProviderArn": self.oidc_provider_arn})
