"""Every model the pairing's servers load, prepared once in the store: one Job per prepared model
(model, revision, form; stackconfig/store.py), on the platform's preparation nodes, under an identity
that may write only those models' prefixes. The Job exits at once when the model is already there
(prepared by this pairing before, or by another pairing on the same platform); servers wait for its
marker (components/pairing/scripts/serve.sh). The pod code is modelstore/ (prepare.py)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from modelstore.pod import CODE_MOUNT, DEPS_MOUNT, TMP_MOUNT, code_items, environment, pod_code, security_context, start_script
from stackconfig import StackSpec
from stackconfig.store import PREPARATION_STREAMS, PreparedModel
from stackconfig.versions import MODEL_STORE_IMAGE

from ..handle import ClusterHandle
from ..iam import policy_document
from .model_access import TokenFile
from .workload_account import workload_account

SERVICE_ACCOUNT = "model-prep"
SCRATCH_MOUNT = "/scratch"
DEPS_GIB, TMP_GIB = 2, 1
RESOURCES = {
    # Downloads, hashes and uploads in parallel: a few cores; memory for buffers only.
    "hub": {"cpu": "8", "memory": "16Gi"},
    # Rescaling, one shard at a time while the other files in flight download and upload, holds that
    # shard's rescaled tensors and one weight's float32 arrays (the 405B's largest MLP weight has
    # 0.87 G elements: a few float32 copies of it in verify_pair, ~3.5 GB each).
    "neuron-fp8": {"cpu": "8", "memory": "64Gi"},
}


def preparation_policy(bucket_arn: str, prefixes: list[str]) -> dict:
    """Write the prepared models' prefixes and read them back; list only them. No delete."""
    return policy_document([
        {"Sid": "WritePreparedModels", "Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
         "Resource": [f"{bucket_arn}/{prefix}*" for prefix in prefixes]},
        {"Sid": "ListPreparedModels", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}}},
    ])


def job_spec(model: PreparedModel, bucket: pulumi.Input[str], region: str, code_config_map: pulumi.Input[str],
             node_selector: dict[str, str], toleration: dict[str, str], token_secret: str | None) -> dict:
    """Plain data with Outputs only at the leaves (bucket, ConfigMap name)."""
    arguments = ["--model", model.model, "--revision", model.revision, "--form", model.form, "--bucket", "$BUCKET",
                 "--prefix", model.prefix, "--work-dir", SCRATCH_MOUNT, "--scratch-bytes", str(model.scratch_bytes),
                 "--parallel", str(PREPARATION_STREAMS)]
    if model.form == "neuron-fp8":
        arguments += ["--bf16-modules", json.dumps(list(model.bf16_modules))]
    resources = RESOURCES[model.form]
    disk = f"{model.disk_gib}Gi"
    # The pod's ephemeral storage: its emptyDirs (kubelet counts them against the containers' limits).
    ephemeral = f"{model.disk_gib + DEPS_GIB + TMP_GIB}Gi"
    token = TokenFile(token_secret if model.info.gated else None)
    return {
        # A failed preparation is retried twice (a hub or S3 hiccup), then left failed to be read.
        "backoffLimit": 2,
        "activeDeadlineSeconds": 24 * 3600,
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "model-prep"}},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT,
                # It calls no Kubernetes API; its AWS token is a projected volume of its own.
                "automountServiceAccountToken": False,
                "restartPolicy": "Never",
                "nodeSelector": node_selector,
                "tolerations": [toleration],
                "securityContext": {"runAsNonRoot": True, "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "prepare",
                    "image": MODEL_STORE_IMAGE.version,
                    "command": ["bash", "-c", start_script("prepare", arguments)],
                    "env": [{"name": "BUCKET", "value": bucket}, {"name": "AWS_REGION", "value": region}]
                           + [{"name": k, "value": v} for k, v in environment().items()]
                           + token.env,
                    "resources": {"requests": {**resources, "ephemeral-storage": ephemeral},
                                  "limits": {"memory": resources["memory"], "ephemeral-storage": ephemeral}},
                    "securityContext": security_context(),
                    "volumeMounts": [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
                                     {"name": "deps", "mountPath": DEPS_MOUNT}, {"name": "tmp", "mountPath": TMP_MOUNT},
                                     {"name": "scratch", "mountPath": SCRATCH_MOUNT}, *token.mounts],
                }],
                "volumes": [{"name": "code", "configMap": {"name": code_config_map, "items": code_items()}},
                            {"name": "deps", "emptyDir": {"sizeLimit": f"{DEPS_GIB}Gi"}},
                            {"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}},
                            # On the node's instance-store RAID (kubelet's ephemeral storage).
                            {"name": "scratch", "emptyDir": {"sizeLimit": disk}}, *token.volumes],
            },
        },
    }


@dataclass(frozen=True)
class ModelPreparationArgs:
    spec: StackSpec
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    token_secret: str | None
    tags: dict[str, str]
    depends_on: list[pulumi.Resource]
    """The token's Secret: the Jobs wait for it and go before it."""


class ModelPreparation(pulumi.ComponentResource):
    jobs: dict[str, str]
    """Prepared model prefix -> its Job's name."""
    code_config_map: k8s.core.v1.ConfigMap
    """modelstore/'s code and lock: the Jobs' and the servers' publishers'."""

    def __init__(self, name: str, args: ModelPreparationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:models:ModelPreparation", name, None, opts)
        spec, cluster = args.spec, args.cluster
        models = spec.prepared_models
        role, account = workload_account(
            self, cluster, role_name=f"{name}-role", account_name=f"{name}-sa", namespace=args.namespace,
            namespace_name=spec.namespace, service_account=SERVICE_ACCOUNT,
            policy=pulumi.Output.from_input(cluster.model_bucket_arn).apply(
                lambda arn: preparation_policy(arn, [m.prefix for m in models])),
            tags=args.tags, uses_kubernetes_api=False)
        self.code_config_map = k8s.core.v1.ConfigMap(
            f"{name}-code", metadata={"name": "modelstore-code", "namespace": args.namespace}, data=pod_code(),
            opts=cluster.k8s_options(self))
        self.jobs = {}
        for model in models:
            k8s.batch.v1.Job(
                f"{name}-{model.job_name}",
                metadata={"name": model.job_name, "namespace": args.namespace,
                          "labels": {"app.kubernetes.io/name": "model-prep"},
                          # Hours for 405B: `pulumi up` does not wait (the servers do, for its marker).
                          "annotations": {"pulumi.com/skipAwait": "true", "sd-trn2/prepares": model.prefix}},
                spec=job_spec(model, cluster.model_bucket, cluster.region, self.code_config_map.metadata.name,
                              cluster.preparation_node_selector, cluster.preparation_toleration, args.token_secret),
                opts=cluster.k8s_options(self, depends_on=[role, account, self.code_config_map, *args.depends_on]),
            )
            self.jobs[model.prefix] = model.job_name
        self.register_outputs({"jobs": self.jobs})
