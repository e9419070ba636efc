"""The artifact bucket and the Mountpoint for S3 CSI driver that mounts it in every serving pod."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from .iam import IrsaRole, IrsaRoleArgs, deny_insecure_transport, policy_document
from .versions import EKS_ADDON_VERSIONS

CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"
CSI_NAMESPACE = "kube-system"
VOLUME_NAME = "model-store"


def bucket_access_policy(bucket_arn: str) -> dict:
    """What Mountpoint needs on one bucket, and nothing on any other (FACTS.md, Mountpoint)."""
    return policy_document([
        {"Sid": "ListTheModelBucket", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn},
        {"Sid": "ReadWriteModelObjects", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
         "Resource": f"{bucket_arn}/*"},
    ])


def tls_only_bucket_policy(bucket_arn: str) -> dict:
    return policy_document([deny_insecure_transport("s3", [bucket_arn, f"{bucket_arn}/*"])])


@dataclass(frozen=True)
class ModelStoreArgs:
    cluster_name: str
    region: str
    retain_on_destroy: bool
    """False: `pulumi destroy` empties and deletes the bucket. True: the bucket (compiled
    artifacts, prepared weights, benchmark results) outlives the stack."""
    oidc_provider_arn: pulumi.Input[str]
    oidc_provider_url: pulumi.Input[str]
    workload_namespace: pulumi.Input[str]
    provider: k8s.Provider
    cluster_ready: list[pulumi.Resource]
    tags: dict[str, str]


class ModelStore(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    claim_name: str
    """The PersistentVolumeClaim every serving pod mounts at /var/mdl."""
    resources: list[pulumi.Resource]

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:storage:ModelStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            name,
            bucket_prefix=f"{args.cluster_name}-models-"[:37],
            force_destroy=not args.retain_on_destroy,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain_on_destroy),
        )
        aws.s3.BucketPublicAccessBlock(name, bucket=bucket.id, block_public_acls=True, block_public_policy=True,
                                       ignore_public_acls=True, restrict_public_buckets=True, opts=child)
        aws.s3.BucketOwnershipControls(name, bucket=bucket.id, rule={"object_ownership": "BucketOwnerEnforced"}, opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            name, bucket=bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}, "bucket_key_enabled": True}],
            opts=child)
        aws.s3.BucketPolicy(name, bucket=bucket.id,
                            policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn), sort_keys=True)),
                            opts=child)

        csi_role = IrsaRole(f"{name}-csi", IrsaRoleArgs(
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_provider_url=args.oidc_provider_url,
            namespace=CSI_NAMESPACE,
            service_account=CSI_SERVICE_ACCOUNT,
            policy=bucket.arn.apply(bucket_access_policy),
            tags=args.tags,
        ), opts=child)
        addon = aws.eks.Addon(
            f"{name}-csi",
            cluster_name=args.cluster_name,
            addon_name="aws-mountpoint-s3-csi-driver",
            addon_version=EKS_ADDON_VERSIONS["aws-mountpoint-s3-csi-driver"],
            service_account_role_arn=csi_role.arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            # The driver's node pods must also run on the tainted trn2 nodes.
            configuration_values=json.dumps({"node": {"tolerateAllTaints": True}}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.cluster_ready),
        )
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[addon])
        volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": VOLUME_NAME},
            spec={
                "capacity": {"storage": "10Ti"},  # required by the API, ignored by Mountpoint
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain",
                # Mountpoint semantics (FACTS.md): new files only, written sequentially, deletes
                # allowed here so a half-published compile can be cleared and redone.
                "mountOptions": [f"region {args.region}", "allow-delete", "allow-overwrite"],
                "csi": {
                    "driver": "s3.csi.aws.com",
                    "volumeHandle": bucket.id.apply(lambda b: f"s3-{b}"),
                    "volumeAttributes": {"bucketName": bucket.id},
                },
            },
            opts=k8s_opts,
        )
        claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": VOLUME_NAME, "namespace": args.workload_namespace},
            spec={"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": VOLUME_NAME,
                  "resources": {"requests": {"storage": "10Ti"}}},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[volume]),
        )
        self.bucket_name = bucket.id
        self.bucket_arn = bucket.arn
        self.claim_name = VOLUME_NAME
        self.resources = [claim, volume, addon]
        self.register_outputs({"bucketName": self.bucket_name, "claimName": self.claim_name})
