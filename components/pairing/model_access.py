"""The Hugging Face token, from a Pulumi secret into a Kubernetes Secret, and into the pods that
download as a file: never an environment variable, which any process of the container and
`kubectl describe` readers of the pod spec's consumers could see (checkov CKV_K8S_35)."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.server import TOKEN_FILE, TOKEN_PATH_VARIABLE

from ..handle import ClusterHandle

SECRET_NAME = "hugging-face"
TOKEN_KEY = "token"


@dataclass(frozen=True)
class ModelAccessArgs:
    token: pulumi.Output[str]
    """A Pulumi secret; it stays one end to end (state, plan output, a secret volume in the pod)."""
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


@dataclass(frozen=True)
class TokenFile:
    """What a container needs to read the token from the Secret at pod start (never inlined):
    a read-only secret volume and HF_TOKEN_PATH naming its file, which huggingface_hub reads when
    HF_TOKEN is unset (huggingface_hub 0.27.0 constants.py L142, utils/_auth.py L121-123) and
    modelstore/prepare.py reads itself. Empty when the stack has no token."""

    secret_name: str | None

    VOLUME = "hugging-face-token"

    @property
    def env(self) -> list[dict]:
        return [] if self.secret_name is None else [{"name": TOKEN_PATH_VARIABLE, "value": TOKEN_FILE}]

    @property
    def volumes(self) -> list[dict]:
        if self.secret_name is None:
            return []
        # 0440 and the pod's fsGroup: the pod's own user reads it, nobody else on the node.
        return [{"name": self.VOLUME, "secret": {"secretName": self.secret_name, "defaultMode": 0o440,
                                                 "items": [{"key": TOKEN_KEY, "path": TOKEN_FILE.rsplit("/", 1)[1]}]}}]

    @property
    def mounts(self) -> list[dict]:
        if self.secret_name is None:
            return []
        return [{"name": self.VOLUME, "mountPath": TOKEN_FILE.rsplit("/", 1)[0], "readOnly": True}]
