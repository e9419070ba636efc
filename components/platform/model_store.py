"""The model store: a bucket and the Mountpoint for S3 CSI driver that mounts it. Each pairing
mounts it through a volume of its own (components/pairing/model_volume.py)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from modelstore.publish import STAGING_STATE_TAG, UNCOMMITTED
from stackconfig.model import CACHE_ROOT
from stackconfig.store import COMPILED_ROOT, SERVED_ROOTS, STAGING_EXPIRY_DAYS, STAGING_ROOT, WEIGHTS_ROOT

from ..iam import deny_insecure_transport, policy_document
from ..identity import WorkloadIdentity, WorkloadRole, WorkloadRoleArgs
from .addons import addon_version

# The driver's node plugin runs as this service account and hands its own IRSA or Pod Identity
# token to the Mountpoint pods it starts in namespace mount-s3 (driver-level credentials:
# awslabs/mountpoint-s3-csi-driver@v2.1.0 docs/CONFIGURATION.md and
# pkg/driver/node/credentialprovider/provider_driver.go); the add-on cannot rename it.
CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"
DRIVER_ADDON = "aws-mountpoint-s3-csi-driver"
CSI_NAMESPACE = "kube-system"
REPLACED_VERSION_DAYS = 7
ACCESS_LOG_PREFIX = "model-store/"
"""Where S3 delivers the model bucket's server access logs in the log bucket."""


def bucket_access_policy(bucket_arn: str) -> dict:
    """What a read-only Mountpoint mount needs on one bucket, and nothing on any other (docs/facts.md,
    "Mountpoint for Amazon S3 CSI driver"): the pairings' volumes are read-only and limited to the
    roots servers read (stackconfig/store.py SERVED_ROOTS), so the driver reads neither results nor
    the benchmark's caches; every write goes through the S3 API under a workload identity of its
    own (modelstore/)."""
    return policy_document([
        {"Sid": "ListServedPrefixes", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{root}*" for root in SERVED_ROOTS]}}},
        {"Sid": "ReadServedObjects", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"{bucket_arn}/{root}*" for root in SERVED_ROOTS]},
    ])


def lifecycle_rules() -> list[dict]:
    """The bucket is versioned, so a result is never lost to an overwrite and a writer's mistake can
    be undone. Staging objects tagged uncommitted expire (stackconfig/store.py): a set nobody
    committed, or one already copied into place; a set tagged committed, which a commit may name
    and which is not in place yet, never does (modelstore/publish.py). Replaced versions of
    prepared weights, compiled sets and tokenizer caches go after REPLACED_VERSION_DAYS (a second
    preparation of a model would otherwise be paid for twice); replaced versions of results are kept.
    Delete markers with nothing behind them and multipart uploads a killed writer left open are
    cleaned up."""
    return [
        {"id": "expire-uncommitted-staging-sets", "status": "Enabled",
         "filter": {"and_": {"prefix": STAGING_ROOT, "tags": {STAGING_STATE_TAG: UNCOMMITTED}}},
         "expiration": {"days": STAGING_EXPIRY_DAYS}},
        {"id": "expire-replaced-staging-versions", "status": "Enabled", "filter": {"prefix": STAGING_ROOT},
         "noncurrent_version_expiration": {"noncurrent_days": 1}},
        *({"id": f"expire-replaced-{root.rstrip('/')}-versions", "status": "Enabled", "filter": {"prefix": root},
           "noncurrent_version_expiration": {"noncurrent_days": REPLACED_VERSION_DAYS}}
          for root in (WEIGHTS_ROOT, COMPILED_ROOT, CACHE_ROOT)),
        {"id": "remove-expired-delete-markers", "status": "Enabled", "filter": {"prefix": ""},
         "expiration": {"expired_object_delete_marker": True}},
        {"id": "abort-abandoned-multipart-uploads", "status": "Enabled", "filter": {"prefix": ""},
         "abort_incomplete_multipart_upload": {"days_after_initiation": 1}},
    ]


WRITE_ONCE_ROOTS = (WEIGHTS_ROOT, COMPILED_ROOT)
"""Prepared weights with their manifests and markers; committed sets with commit.json and
complete.json: keys that must never change. Staging sets are each one writer's own, uncommitted or
copied out, and expire (lifecycle_rules)."""


def write_once_statement(bucket_arn: str) -> dict:
    """Refuse any write under WRITE_ONCE_ROOTS that could replace an object: a PutObject or
    CompleteMultipartUpload without `If-None-Match` (with it, S3 answers 412 when the key exists).
    That makes CopyObject unusable there (403 without the header, 501 with it). The multipart calls that cannot carry
    the header (CreateMultipartUpload, UploadPart, UploadPartCopy) are exempt by
    `s3:ObjectCreationOperation`, so uploads and server-side copies complete with it
    (modelstore/objects.py). AWS S3 User Guide, "Enforce conditional writes on Amazon S3 buckets",
    examples 1 and 2; no principal is exempt, the deployer included."""
    return {"Sid": "DenyUnconditionalWritesOfWriteOnceKeys", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
            "Resource": [f"{bucket_arn}/{root}*" for root in WRITE_ONCE_ROOTS],
            "Condition": {"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}}}


def bucket_policy(bucket_arn: str) -> dict:
    """TLS only, and write-once where keys must never change."""
    return policy_document([deny_insecure_transport("s3", [bucket_arn, f"{bucket_arn}/*"]), write_once_statement(bucket_arn)])


def access_log_bucket_policy(log_bucket_arn: str, source_bucket_arn: str, account_id: str) -> dict:
    """S3 user guide, "Enabling Amazon S3 server access logging" ("Grant permissions to the logging
    service principal by using a bucket policy"): logging.s3.amazonaws.com may put objects under the
    target prefix, for the source bucket (aws:SourceArn) of this account (aws:SourceAccount) only.
    With Object Ownership "bucket owner enforced" the bucket policy is the only way to grant it (same
    page: target grants and ACLs are refused). Nothing else may write; every access is TLS-only."""
    return policy_document([
        {"Sid": "S3ServerAccessLogsDelivery", "Effect": "Allow", "Principal": {"Service": "logging.s3.amazonaws.com"},
         "Action": "s3:PutObject", "Resource": f"{log_bucket_arn}/{ACCESS_LOG_PREFIX}*",
         "Condition": {"ArnLike": {"aws:SourceArn": source_bucket_arn}, "StringEquals": {"aws:SourceAccount": account_id}}},
        deny_insecure_transport("s3", [log_bucket_arn, f"{log_bucket_arn}/*"]),
    ])


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
    access_log_days: int = 14
    """How long the bucket's server access logs are kept (the cluster's log retention)."""


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
        # Results are never overwritten: a second write of a key keeps the first as a version
        # (no writer role holds s3:DeleteObjectVersion). force_destroy removes every version on destroy.
        versioning = aws.s3.BucketVersioning(name, bucket=bucket.id, versioning_configuration={"status": "Enabled"},
                                             opts=child)
        aws.s3.BucketLifecycleConfiguration(name, bucket=bucket.id, rules=lifecycle_rules(),
                                            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]))
        aws.s3.BucketPolicy(name, bucket=bucket.id,
                            policy=bucket.arn.apply(lambda arn: json.dumps(bucket_policy(arn), sort_keys=True)),
                            opts=child)
        self._access_logging(name, bucket, args)

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

    def _access_logging(self, name: str, bucket: aws.s3.Bucket, args: ModelStoreArgs) -> None:
        """Server access logs of the model bucket (who read or wrote which key), delivered by S3 to a
        bucket of their own, hardened like the model bucket: no public access, ACLs disabled, SSE-S3,
        TLS only; the logs expire with the cluster's log retention. The log bucket logs nothing itself
        (S3 user guide, "Enabling Amazon S3 server access logging": "Your target bucket should not have
        server access logging enabled"). It follows the model bucket on destroy: retained when it is."""
        child = pulumi.ResourceOptions(parent=self)
        logs = aws.s3.Bucket(
            f"{name}-access-logs",
            bucket_prefix=f"{args.cluster_name[:29]}-logs-",  # 37 characters at most, as above
            force_destroy=not args.retain_on_destroy,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain_on_destroy),
        )
        aws.s3.BucketPublicAccessBlock(f"{name}-access-logs", bucket=logs.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
                                       opts=child)
        aws.s3.BucketOwnershipControls(f"{name}-access-logs", bucket=logs.id,
                                       rule={"object_ownership": "BucketOwnerEnforced"}, opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-access-logs", bucket=logs.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}], opts=child)
        aws.s3.BucketLifecycleConfiguration(f"{name}-access-logs", bucket=logs.id, rules=[
            {"id": "expire-access-logs", "status": "Enabled", "filter": {"prefix": ""},
             "expiration": {"days": args.access_log_days}},
            {"id": "abort-abandoned-multipart-uploads", "status": "Enabled", "filter": {"prefix": ""},
             "abort_incomplete_multipart_upload": {"days_after_initiation": 1}},
        ], opts=child)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        delivery = aws.s3.BucketPolicy(
            f"{name}-access-logs", bucket=logs.id,
            policy=pulumi.Output.all(logs.arn, bucket.arn, account.account_id).apply(
                lambda v: json.dumps(access_log_bucket_policy(*v), sort_keys=True)),
            opts=child)
        # After the policy that lets S3 deliver, so that no log is refused in between.
        aws.s3.BucketLogging(name, bucket=bucket.id, target_bucket=logs.id, target_prefix=ACCESS_LOG_PREFIX,
                             opts=pulumi.ResourceOptions(parent=self, depends_on=[delivery]))
