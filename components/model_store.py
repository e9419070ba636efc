"""The model store: a bucket and the Mountpoint for S3 CSI driver (platform), and each pairing's
volume onto it, mounted in every serving pod (pairing)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from stackconfig.catalog import InstanceShape

from .addons import addon_version
from .handle import ClusterHandle
from .iam import deny_insecure_transport, policy_document
from .identity import WorkloadIdentity, WorkloadRole, WorkloadRoleArgs

# The driver's node plugin runs as this service account and hands its own IRSA or Pod Identity
# token to the Mountpoint pods it starts in namespace mount-s3 (driver-level credentials:
# awslabs/mountpoint-s3-csi-driver@v2.1.0 docs/CONFIGURATION.md and
# pkg/driver/node/credentialprovider/provider_driver.go); the add-on cannot rename it.
CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"
DRIVER_ADDON = "aws-mountpoint-s3-csi-driver"
CSI_NAMESPACE = "kube-system"
# The PersistentVolumeClaim's name inside a pairing's namespace (namespaced, so one name serves all).
CLAIM_NAME = "model-store"


def mount_options(region: str, shape: InstanceShape) -> list[str]:
    """Mountpoint options for the model store's volume (the driver prefixes each with --).

    Mountpoint v2 pods cannot reach IMDS at hop limit 1 (components/trn2_nodes.py), so region and
    network bandwidth detection fail and throughput falls back to 10 Gbps
    (awslabs/mountpoint-s3@v1.23.0 doc/CONFIGURATION.md; mountpoint-s3/src/cli.rs). Its released
    table would also say 32000 Gbps for trn2.48xlarge, a 10x typo fixed only after v1.23.0. So
    both are given: the region, and the bandwidth of the card that carries pod traffic.
    """
    return [f"region {region}", f"maximum-throughput-gbps {shape.primary_network_gbps}",
            # Mountpoint semantics (FACTS.md): new files only, written sequentially; deletes and
            # overwrites allowed so a half-published compile can be cleared and redone.
            "allow-delete", "allow-overwrite"]


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
    kubernetes_version: str
    """Selects the driver add-on's pinned build."""
    retain_on_destroy: bool
    """False: `pulumi destroy` empties and deletes the bucket. True: the bucket (compiled
    artifacts, prepared weights, benchmark results) outlives the stack."""
    identity: WorkloadIdentity
    cluster_ready: list[pulumi.Resource]
    tags: dict[str, str]


class ModelStore(pulumi.ComponentResource):
    """The platform's bucket and the driver that mounts it. Every pairing on the platform shares
    it: compiled artifacts and prepared weights live under content-addressed paths, so pairings
    that compile the same thing share it, and each pairing's results live under its own prefix."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    driver: aws.eks.Addon

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:storage:ModelStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            name,
            # bucket_prefix allows 37 characters (pulumi_aws s3.Bucket docs); the provider appends a unique suffix.
            bucket_prefix=f"{args.cluster_name[:29]}-models-",
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

        csi_role = WorkloadRole(f"{name}-csi", WorkloadRoleArgs(
            identity=args.identity,
            namespace=CSI_NAMESPACE,
            service_account=CSI_SERVICE_ACCOUNT,
            policy=bucket.arn.apply(bucket_access_policy),
            tags=args.tags,
        ), opts=child)
        self.driver = aws.eks.Addon(
            f"{name}-csi",
            cluster_name=args.cluster_name,
            addon_name=DRIVER_ADDON,
            addon_version=addon_version(DRIVER_ADDON, args.kubernetes_version, self),
            # IRSA: the add-on annotates its service account. Pod Identity: the role's own
            # association, which must exist before the driver's pods start (they only receive
            # credentials at start), hence the dependency on the role below.
            service_account_role_arn=csi_role.arn if args.identity.mechanism == "irsa" else None,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            # The driver's node pods must also run on the tainted trn2 nodes.
            # Accepted by the add-on's configuration schema (node.tolerateAllTaints, v2.3.0-eksbuild.1,
            # aws/containers-roadmap#2785); the chart's default is already true, stated here because
            # the trn2 nodes carry the Neuron taint and need the driver.
            configuration_values=json.dumps({"node": {"tolerateAllTaints": True}}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.cluster_ready, csi_role]),
        )
        self.bucket_name = bucket.id
        self.bucket_arn = bucket.arn
        self.register_outputs({"bucketName": self.bucket_name})


@dataclass(frozen=True)
class ModelVolumeArgs:
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    volume_name: str
    """The PersistentVolume's name: cluster-scoped, so derived from the pairing."""
    instance_shape: InstanceShape
    """The nodes that mount the store: their bandwidth sizes Mountpoint's throughput target."""


class ModelVolume(pulumi.ComponentResource):
    """A pairing's static PersistentVolume onto the platform's bucket, and its claim."""

    claim_name: str
    """The PersistentVolumeClaim every serving pod of the pairing mounts at /var/mdl."""
    claim: k8s.core.v1.PersistentVolumeClaim

    def __init__(self, name: str, args: ModelVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:storage:ModelVolume", name, None, opts)
        # Until the platform/pairing split these were children of the ModelStore component.
        previous_parent = pulumi.Alias(parent=pulumi.create_urn("model-store", "sdtrn2:storage:ModelStore"))
        bucket = args.cluster.model_bucket
        volume = k8s.core.v1.PersistentVolume(
            "model-store-pv",
            metadata={"name": args.volume_name},
            spec={
                "capacity": {"storage": "10Ti"},  # required by the API, ignored by Mountpoint
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain",
                "mountOptions": mount_options(args.cluster.region, args.instance_shape),
                "csi": {
                    "driver": "s3.csi.aws.com",
                    # Unique across the cluster's PVs: one per pairing onto the same bucket.
                    "volumeHandle": pulumi.Output.concat("s3-", bucket, "-", args.volume_name),
                    "volumeAttributes": {"bucketName": bucket},
                },
            },
            opts=args.cluster.k8s_options(self, aliases=[previous_parent]),
        )
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            "model-store-pvc",
            metadata={"name": CLAIM_NAME, "namespace": args.namespace},
            spec={"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": args.volume_name,
                  "resources": {"requests": {"storage": "10Ti"}}},
            opts=args.cluster.k8s_options(self, depends_on=[volume], aliases=[previous_parent]),
        )
        self.claim_name = CLAIM_NAME
        self.register_outputs({"volumeName": args.volume_name, "claimName": self.claim_name})
