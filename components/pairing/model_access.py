"""The Hugging Face token, from a Pulumi secret into a Kubernetes Secret for pods that download."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.server import TOKEN_VARIABLE

from ..handle import ClusterHandle

SECRET_NAME = "hugging-face"
TOKEN_KEY = "token"


@dataclass(frozen=True)
class ModelAccessArgs:
    token: pulumi.Output[str]
    """A Pulumi secret; it stays one end to end (state, plan output, pod env via secretKeyRef)."""
    cluster: ClusterHandle
    namespace: pulumi.Input[str]


class ModelAccess(pulumi.ComponentResource):
    secret_name: str
    secret: k8s.core.v1.Secret

    def __init__(self, name: str, args: ModelAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:models:ModelAccess", name, None, opts)
        self.secret = k8s.core.v1.Secret(
            name,
            metadata={"name": SECRET_NAME, "namespace": args.namespace},
            type="Opaque",
            string_data={TOKEN_KEY: pulumi.Output.secret(args.token)},
            opts=args.cluster.k8s_options(self),
        )
        self.secret_name = SECRET_NAME
        self.register_outputs({"secretName": SECRET_NAME})


def token_env(secret_name: str | None) -> list[dict]:
    """The token's variable for containers, read from the Secret at pod start (never inlined)."""
    if secret_name is None:
        return []
    return [{"name": TOKEN_VARIABLE, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": TOKEN_KEY}}}]
