"""All variants of the stack: the shared start script and one VllmVariant each."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from stackconfig import StackSpec

from .vllm_variant import VllmVariant, VllmVariantArgs

SERVE_SCRIPT = Path(__file__).parent / "scripts" / "serve.sh"


@dataclass(frozen=True)
class ServingArgs:
    spec: StackSpec
    namespace: pulumi.Input[str]
    claim_templates: dict[int, str]
    model_store_claim: str
    token_secret: str | None
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]


class Serving(pulumi.ComponentResource):
    endpoints: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:Serving", name, None, opts)
        script = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata={"name": "vllm-serve", "namespace": args.namespace},
            data={"serve.sh": SERVE_SCRIPT.read_text()},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.endpoints = {}
        for variant in args.spec.variants:
            server = VllmVariant(f"{name}-{variant.name}", VllmVariantArgs(
                variant=variant,
                namespace=args.namespace,
                instance_type=args.spec.capacity.instance_type,
                claim_template=args.claim_templates[variant.devices],
                model_store_claim=args.model_store_claim,
                script_config_map=script.metadata.name,
                token_secret=args.token_secret,
                provider=args.provider,
                depends_on=args.depends_on,
            ), opts=pulumi.ResourceOptions(parent=self))
            self.endpoints[variant.name] = server.endpoint
        self.register_outputs({"endpoints": self.endpoints})
