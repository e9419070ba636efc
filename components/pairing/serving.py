"""All variants of the stack: the shared start script and one VllmVariant each."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from modelstore.layout import shell_assignments
from stackconfig import StackSpec
from stackconfig.engines import ENGINES

from ..handle import ClusterHandle
from .distributed_variant import DistributedVariant, peer_flows
from .vllm_variant import VllmVariant, VllmVariantArgs

WORKLOADS: dict[str, type[VllmVariant] | type[DistributedVariant]] = {"vllm": VllmVariant, "distributed": DistributedVariant}
"""The component that renders a variant, by its engine's workload (stackconfig/engines/ EngineInfo.workload)."""
PEER_FLOWS = {"distributed": peer_flows}
"""What the pods of a workload call of each other, which the network fence admits (a vLLM server: nothing)."""
SERVE_SCRIPT = Path(__file__).parent / "scripts" / "serve.sh"
STORE_LAYOUT_SCRIPT = "store-layout.sh"
"""Beside serve.sh, which sources it by this name."""


def script_files() -> dict[str, str]:
    """The ConfigMap mounted as the servers' script directory: serve.sh, and the store's names it
    sources (modelstore/layout.py), so the script declares none of them itself."""
    return {SERVE_SCRIPT.name: SERVE_SCRIPT.read_text(), STORE_LAYOUT_SCRIPT: shell_assignments()}


@dataclass(frozen=True)
class ServingArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    node_labels: dict[str, str]
    """The pairing's own trn2 nodes (Trn2Nodes.node_labels)."""
    claim_templates: dict[int, str]
    code_config_map: pulumi.Input[str]
    """modelstore/'s code (ModelPreparation's ConfigMap), for each server's publisher."""
    depends_on: list[pulumi.Resource]
    """Node pool, claim templates, volume claim, the servers' identity: the servers go before them on destroy."""


class Serving(pulumi.ComponentResource):
    endpoints: dict[str, str]

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:Serving", name, None, opts)
        script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata={"name": "vllm-serve", "namespace": args.namespace},
            data=script_files(),
            opts=args.cluster.k8s_options(self),
        )
        self.endpoints = {}
        for variant in args.spec.variants:
            server = WORKLOADS[ENGINES[variant.engine].workload](f"{name}-{variant.name}", VllmVariantArgs(
                variant=variant,
                cluster=args.cluster,
                namespace=args.namespace,
                namespace_name=args.spec.namespace,
                node_labels=args.node_labels,
                instance_type=args.spec.capacity.instance_type,
                claim_templates=args.claim_templates,
                script_config_map=script.metadata.name,
                code_config_map=args.code_config_map,
                depends_on=args.depends_on,
                scaled_by_tuner=variant in args.spec.tuned_servers,
            ), opts=pulumi.ResourceOptions(parent=self))
            self.endpoints[variant.name] = server.endpoint
        self.register_outputs({"endpoints": self.endpoints})
