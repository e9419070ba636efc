"""Speculative decoding on Trainium2: one stack per model pairing (see stacks/ and README)."""
import pulumi
import pulumi_aws as aws

from components.cluster import Cluster, ClusterArgs
from components.network import Network, NetworkArgs
from stackconfig import parse_stack_config
from stackconfig.source import project_config

project, stack = pulumi.get_project(), pulumi.get_stack()
spec = parse_stack_config(project, stack, project_config(project))
tags = {"project": project, "stack": stack, "managed-by": "pulumi", **spec.tags}
region = aws.config.region

aws_provider = aws.Provider("aws", region=region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags))
with_aws = pulumi.ResourceOptions(providers=[aws_provider])

network = Network("network", NetworkArgs(cluster_name=spec.cluster_name, cidr=spec.cluster.vpc_cidr,
                                         availability_zone_count=spec.cluster.availability_zone_count), opts=with_aws)
cluster = Cluster("cluster", ClusterArgs(
    cluster_name=spec.cluster_name,
    kubernetes_version=spec.cluster.kubernetes_version,
    vpc_id=network.vpc_id,
    private_subnet_ids=network.private_subnet_ids,
    public_subnet_ids=network.public_subnet_ids,
    system_node_instance_type=spec.cluster.system_node_instance_type,
    system_node_count=spec.cluster.system_node_count,
    tags=tags,
), opts=with_aws)

pulumi.export("region", region)
pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
