"""Speculative decoding on Trainium2: one stack per model pairing (see stacks/ and README)."""
import pulumi
import pulumi_aws as aws

from components.benchmark import Benchmark, BenchmarkArgs
from components.cluster import SYSTEM_NODE_LABEL, Cluster, ClusterArgs
from components.karpenter import Karpenter, KarpenterArgs
from components.model_access import ModelAccess, ModelAccessArgs
from components.model_store import ModelStore, ModelStoreArgs
from components.network import Network, NetworkArgs
from components.neuron_dra import NeuronDra, NeuronDraArgs
from components.serving import Serving, ServingArgs
from components.trn2_nodes import Trn2Nodes, Trn2NodesArgs
from stackconfig import HUGGING_FACE_TOKEN_KEY, parse_stack_config
from stackconfig.source import hugging_face_token, stack_config

project, stack = pulumi.get_project(), pulumi.get_stack()
spec = parse_stack_config(project, stack, stack_config())
tags = {"project": project, "stack": stack, "managed-by": "pulumi", **spec.tags}
region = spec.region

aws_provider = aws.Provider("aws", region=region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags))
with_aws = pulumi.ResourceOptions(providers=[aws_provider])

network = Network("network", NetworkArgs(
    cluster_name=spec.cluster_name,
    cidr=spec.cluster.vpc_cidr,
    region=region,
    instance_type=spec.capacity.instance_type,
    availability_zone_count=spec.cluster.availability_zone_count,
    availability_zones=spec.cluster.availability_zones,
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
    tags=tags,
), opts=with_aws)

karpenter = Karpenter("karpenter", KarpenterArgs(
    cluster_name=spec.cluster_name,
    region=region,
    identity=cluster.identity,
    system_node_selector=SYSTEM_NODE_LABEL,
    provider=cluster.provider,
    cluster_ready=cluster.ready,
    tags=tags,
), opts=with_aws)
trn2 = Trn2Nodes("trn2", Trn2NodesArgs(
    cluster_name=spec.cluster_name,
    node_role_name=karpenter.node_role_name,
    capacity=spec.capacity,
    node_count=spec.node_count,
    tags=tags,
    provider=cluster.provider,
    karpenter=[karpenter.crds, karpenter.release],
))
neuron = NeuronDra("neuron-dra", NeuronDraArgs(
    device_group_sizes=spec.device_group_sizes,
    instance_type=spec.capacity.instance_type,
    logical_neuron_cores=spec.serving.logical_neuron_cores,
    workload_namespace=cluster.workload_namespace,
    provider=cluster.provider,
    cluster_ready=cluster.ready,
))
model_store = ModelStore("model-store", ModelStoreArgs(
    cluster_name=spec.cluster_name,
    region=region,
    retain_on_destroy=spec.retain_model_store,
    instance_shape=spec.capacity.shape,
    identity=cluster.identity,
    workload_namespace=cluster.workload_namespace,
    provider=cluster.provider,
    cluster_ready=cluster.ready,
    tags=tags,
), opts=with_aws)
token = hugging_face_token(project, HUGGING_FACE_TOKEN_KEY)
model_access = None if token is None else ModelAccess("model-access", ModelAccessArgs(
    token=token, namespace=cluster.workload_namespace, provider=cluster.provider))
serving = Serving("serving", ServingArgs(
    spec=spec,
    namespace=cluster.workload_namespace,
    claim_templates=neuron.claim_templates,
    model_store_claim=model_store.claim_name,
    token_secret=model_access.secret_name if model_access else None,
    provider=cluster.provider,
    depends_on=[trn2.node_pool, *neuron.resources, *model_store.resources, *([model_access.secret] if model_access else [])],
))
benchmark = Benchmark("benchmark", BenchmarkArgs(
    spec=spec,
    region=region,
    namespace=cluster.workload_namespace,
    endpoints=serving.endpoints,
    bucket_name=model_store.bucket_name,
    bucket_arn=model_store.bucket_arn,
    identity=cluster.identity,
    node_selector=SYSTEM_NODE_LABEL,
    provider=cluster.provider,
    depends_on=[serving],
    tags=tags,
    token_secret=model_access.secret_name if model_access else None,
), opts=with_aws)

pulumi.export("region", region)
pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("workloadNamespace", cluster.workload_namespace)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
pulumi.export("trn2Nodes", spec.node_count)
pulumi.export("claimTemplates", {str(k): v for k, v in neuron.claim_templates.items()})
pulumi.export("modelBucket", model_store.bucket_name)
pulumi.export("endpoints", serving.endpoints)
pulumi.export("artifactPrefixes", {
    v.name: pulumi.Output.concat("s3://", model_store.bucket_name, "/", v.artifact_path, "/") for v in spec.variants})
pulumi.export("dashboardUrl", benchmark.dashboard_url)
pulumi.export("resultsPrefix", benchmark.results_prefix)
pulumi.export("benchmarkCronJob", benchmark.cron_job_name)
