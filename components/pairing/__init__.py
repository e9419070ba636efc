"""Wiring of a pairing on a cluster: its namespace, trn2 capacity, claim templates, volume onto
the model store, model access and preparation, vLLM servers and their publishers' identity, and
benchmark. Creates components only; every
cluster-scoped name comes from the stack (StackSpec), so pairings on one platform never collide."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from stackconfig import StackSpec
from stackconfig.engines import ENGINES
from stackconfig.server import BASELINE_CAPABILITIES

from ..handle import PAIRING_LABEL, ClusterHandle
from .benchmark import Benchmark, BenchmarkArgs
from .benchmark_access import BenchmarkAccess, BenchmarkAccessArgs
from .claim_templates import ClaimTemplates, ClaimTemplatesArgs
from .dashboard import Dashboard, DashboardArgs
from .model_access import ModelAccess, ModelAccessArgs
from .model_preparation import ModelPreparation, ModelPreparationArgs
from .model_volume import ModelVolume, ModelVolumeArgs
from .network_policy import NetworkFence, NetworkFenceArgs
from .server_access import ServerAccess, ServerAccessArgs
from .serving import PEER_FLOWS, Serving, ServingArgs
from .trn2_nodes import Trn2Nodes, Trn2NodesArgs
from .workspace import Workspace, WorkspaceArgs


@dataclass(frozen=True)
class Pairing:
    """What a pairing exports."""

    namespace: pulumi.Output[str]
    claim_templates: dict[int, str]
    endpoints: dict[str, str]
    dashboard_url: str
    results_prefix: pulumi.Output[str]
    benchmark_cron_job: str


def build_pairing(spec: StackSpec, cluster: ClusterHandle, token: pulumi.Output[str] | None,
                  tags: dict[str, str], provider: aws.Provider) -> Pairing:
    with_aws = pulumi.ResourceOptions(providers=[provider])
    beyond_baseline = set(spec.serving.add_capabilities) - BASELINE_CAPABILITIES
    workspace = Workspace("workspace", WorkspaceArgs(
        cluster=cluster, namespace=spec.namespace, labels={PAIRING_LABEL: spec.name},
        enforce="privileged" if beyond_baseline else "baseline"))
    flows = tuple(flow for v in spec.variants if ENGINES[v.engine].workload in PEER_FLOWS for flow in PEER_FLOWS[ENGINES[v.engine].workload](v))
    fence = NetworkFence("network-fence", NetworkFenceArgs(cluster=cluster, namespace=workspace.namespace, flows=flows))
    trn2 = Trn2Nodes("trn2", Trn2NodesArgs(
        cluster=cluster,
        name=spec.node_pool_name,
        pairing=spec.name,
        capacity=spec.capacity,
        node_count=spec.node_count,
        tags=tags,
    ))
    claims = ClaimTemplates("neuron-claims", ClaimTemplatesArgs(
        cluster=cluster,
        namespace=workspace.namespace,
        device_group_sizes=spec.device_group_sizes,
        instance_type=spec.capacity.instance_type,
        logical_neuron_cores=spec.serving.logical_neuron_cores,
    ))
    volume = ModelVolume("model-volume", ModelVolumeArgs(
        spec=spec,
        cluster=cluster,
        namespace=workspace.namespace,
        instance_shape=spec.capacity.shape,
    ))
    model_access = None if token is None else ModelAccess("model-access", ModelAccessArgs(
        token=token, cluster=cluster, namespace=workspace.namespace))
    preparation = ModelPreparation("model-preparation", ModelPreparationArgs(
        spec=spec,
        cluster=cluster,
        namespace=workspace.namespace,
        token_secret=model_access.secret_name if model_access else None,
        tags=tags,
        depends_on=[*fence.policies, *([model_access.secret] if model_access else [])],
    ), opts=with_aws)
    server_access = ServerAccess("server-access", ServerAccessArgs(
        spec=spec, cluster=cluster, namespace=workspace.namespace, tags=tags), opts=with_aws)
    serving = Serving("serving", ServingArgs(
        spec=spec,
        cluster=cluster,
        namespace=workspace.namespace,
        node_labels=trn2.node_labels,
        claim_templates=claims.names,
        code_config_map=preparation.code_config_map.metadata.name,
        depends_on=[trn2.node_pool, *claims.templates, *volume.claims, preparation.code_config_map, *server_access.grants,
                    *fence.policies],
    ))
    access = BenchmarkAccess("benchmark-access", BenchmarkAccessArgs(
        spec=spec, cluster=cluster, namespace=workspace.namespace, tags=tags), opts=with_aws)
    benchmark = Benchmark("benchmark", BenchmarkArgs(
        spec=spec,
        cluster=cluster,
        namespace=workspace.namespace,
        endpoints=serving.endpoints,
        depends_on=[serving, *access.grants, *fence.policies],
        token_secret=model_access.secret_name if model_access else None,
    ))
    dashboard = Dashboard("dashboard", DashboardArgs(spec=spec), opts=with_aws)
    return Pairing(
        namespace=workspace.namespace,
        claim_templates=claims.names,
        endpoints=serving.endpoints,
        dashboard_url=dashboard.url,
        results_prefix=benchmark.results_prefix,
        benchmark_cron_job=benchmark.cron_job_name,
    )
