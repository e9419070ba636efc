"""What a pairing's servers may do in the store, and the publisher beside each of them.

The vLLM container only reads the store, through the read-only Mountpoint volume, and holds no AWS
credentials: the pod skips it (identity.py SKIP_CONTAINERS_ANNOTATION). Publication is the
publisher's (modelstore/publish.py), a native sidecar under the pairing's server identity: it may put
objects under its variants' staging and artifact prefixes, read them back and list them, and never
delete. The vLLM container itself runs as before (hardening it is the Neuron runtime's question)."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from modelstore.pod import CODE_MOUNT, DEPS_MOUNT, TMP_MOUNT, environment, security_context, start_script
from stackconfig import StackSpec
from stackconfig.server import NODE_CACHE_MOUNT, VLLM_PORT
from stackconfig.store import staging_prefix
from stackconfig.versions import MODEL_STORE_IMAGE

from ..handle import ClusterHandle
from ..iam import policy_document
from .workload_account import workload_account

SERVICE_ACCOUNT = "vllm"
PUBLISHER_CPU_MILLICORES = 1000
PUBLISHER_MEMORY_MIB = 2048
"""The publisher's share of the variant's node (taken from the vLLM container's: serving.py)."""


def publisher_policy(bucket_arn: str, artifact_paths: list[str]) -> dict:
    prefixes = [p for path in artifact_paths for p in (staging_prefix(path), f"{path}/")]
    return policy_document([
        {"Sid": "PublishCompiledSets", "Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
         "Resource": [f"{bucket_arn}/{prefix}*" for prefix in prefixes]},
        # A staging set's state tag, which the bucket's lifecycle reads (modelstore/publish.py).
        {"Sid": "TagStagingSets", "Effect": "Allow", "Action": "s3:PutObjectTagging",
         "Resource": [f"{bucket_arn}/{staging_prefix(path)}*" for path in artifact_paths]},
        {"Sid": "ListCompiledSets", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}}},
    ])


def publisher_container(artifact_path: str, bucket: pulumi.Input[str], region: str) -> dict:
    """A native sidecar (an init container that keeps running): it starts before the server and
    outlives its restarts; it publishes the server's compiled set (Variant.server_artifact_path).
    Plain data with the bucket Output at its leaf."""
    arguments = ["--bucket", "$BUCKET", "--artifact", artifact_path, "--compile-dir",
                 f"{NODE_CACHE_MOUNT}/{artifact_path}", "--health", f"http://127.0.0.1:{VLLM_PORT}/health",
                 "--writer", "$POD_NAME"]
    return {
        "name": "publisher",
        "image": MODEL_STORE_IMAGE.version,
        "restartPolicy": "Always",
        "command": ["bash", "-c", start_script("publish", arguments)],
        "env": [{"name": "BUCKET", "value": bucket}, {"name": "AWS_REGION", "value": region},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
               + [{"name": k, "value": v} for k, v in environment().items()],
        "resources": {"requests": {"cpu": f"{PUBLISHER_CPU_MILLICORES}m", "memory": f"{PUBLISHER_MEMORY_MIB}Mi"},
                      "limits": {"memory": f"{PUBLISHER_MEMORY_MIB}Mi"}},
        "securityContext": security_context(),
        "volumeMounts": [{"name": "modelstore-code", "mountPath": CODE_MOUNT, "readOnly": True},
                         {"name": "publisher-deps", "mountPath": DEPS_MOUNT}, {"name": "publisher-tmp", "mountPath": TMP_MOUNT},
                         # It reads what the server compiled; serve.sh alone writes there.
                         {"name": "node-cache", "mountPath": NODE_CACHE_MOUNT, "readOnly": True}],
    }


@dataclass(frozen=True)
class ServerAccessArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    tags: dict[str, str]


class ServerAccess(pulumi.ComponentResource):
    """The servers' identity: publish their variants' compiled sets, and nothing else."""

    service_account: k8s.core.v1.ServiceAccount
    grants: list[pulumi.Resource]

    def __init__(self, name: str, args: ServerAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:ServerAccess", name, None, opts)
        spec, cluster = args.spec, args.cluster
        paths = sorted({v.artifact_path for v in spec.variants})
        role, self.service_account = workload_account(
            self, cluster, role_name=f"{name}-role", account_name=f"{name}-sa", namespace=args.namespace,
            namespace_name=spec.namespace, service_account=SERVICE_ACCOUNT,
            policy=pulumi.Output.from_input(cluster.model_bucket_arn).apply(lambda arn: publisher_policy(arn, paths)),
            tags=args.tags, uses_kubernetes_api=False)
        self.grants = [role, self.service_account]
        self.register_outputs({"serviceAccount": SERVICE_ACCOUNT, "roleArn": role.arn})
