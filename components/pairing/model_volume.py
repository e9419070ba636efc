"""A pairing's windows onto the platform's model store: one static PersistentVolume per prefix its
servers read, for the Mountpoint for S3 CSI driver the platform runs
(components/platform/model_store.py), each bound to its own claim. Every volume is read-only and
limited to its prefix (stackconfig/store.py StoreMount): a server sees its prepared models, its
committed set and its staging sets, never another pairing's results; every write goes through the
S3 API under a role of its own (modelstore/)."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.catalog import InstanceShape
from stackconfig.model import StackSpec
from stackconfig.store import StoreMount

from ..handle import ClusterHandle


def mount_options(region: str, shape: InstanceShape, mount: StoreMount) -> list[str]:
    """Mountpoint options for one of the model store's volumes (the driver prefixes each with --).

    `prefix` limits the mount to one prefix; Mountpoint checks it at mount time with a list of that
    prefix only (awslabs/mountpoint-s3 v1.21.0, the build driver v2.3.0 ships,
    mountpoint-s3-fs/src/s3/config.rs validate_client_for_bucket), so the driver's role needs no
    list right outside the served roots. The driver passes the option through unchanged
    (awslabs/mountpoint-s3-csi-driver v2.3.0 pkg/mountpoint/args.go drops only --foreground,
    --help and --version).

    Mountpoint v2 pods cannot reach IMDS at hop limit 1 (components/pairing/trn2_nodes.py), so region and
    network bandwidth detection fail and throughput falls back to 10 Gbps
    (awslabs/mountpoint-s3@v1.23.0 doc/CONFIGURATION.md; mountpoint-s3/src/cli.rs). Its released
    table would also say 32000 Gbps for trn2.48xlarge, a 10x typo fixed only after v1.23.0. So
    both are given: the region, and the bandwidth of the card that carries pod traffic.
    """
    return [f"region {region}", f"maximum-throughput-gbps {shape.primary_network_gbps}", f"prefix {mount.prefix}"]


@dataclass(frozen=True)
class ModelVolumeArgs:
    spec: StackSpec
    """The pairing: the prefixes its servers read and the volumes' names derive from it."""
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    instance_shape: InstanceShape
    """The nodes that mount the store: their bandwidth sizes Mountpoint's throughput target."""


class ModelVolume(pulumi.ComponentResource):
    """A pairing's static, read-only PersistentVolumes onto the platform's bucket, one per prefix,
    and their claims."""

    claims: list[k8s.core.v1.PersistentVolumeClaim]

    def __init__(self, name: str, args: ModelVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:storage:ModelVolume", name, None, opts)
        bucket = args.cluster.model_bucket
        self.claims = []
        for mount in args.spec.store_mounts:
            volume_name = args.spec.volume_name(mount)
            volume = k8s.core.v1.PersistentVolume(
                f"{mount.key}-pv",
                metadata={"name": volume_name, "labels": {"sd-trn2/store-prefix": mount.kind}},
                spec={
                    "capacity": {"storage": "10Ti"},  # required by the API, ignored by Mountpoint
                    # ReadOnlyMany makes the driver mount with --read-only
                    # (awslabs/mountpoint-s3-csi-driver v2.4.0 pkg/driver/node/node.go L115-116).
                    "accessModes": ["ReadOnlyMany"],
                    "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "mountOptions": mount_options(args.cluster.region, args.instance_shape, mount),
                    # Reserved for the pairing's own claim: no other namespace's claim can bind it.
                    "claimRef": {"namespace": args.namespace, "name": mount.claim_name},
                    "csi": {
                        "driver": "s3.csi.aws.com",
                        # Unique across the cluster's PVs: one per pairing and prefix onto the same bucket.
                        "volumeHandle": pulumi.Output.concat("s3-", bucket, "-", volume_name),
                        "volumeAttributes": {"bucketName": bucket},
                    },
                },
                opts=args.cluster.k8s_options(self),
            )
            self.claims.append(k8s.core.v1.PersistentVolumeClaim(
                f"{mount.key}-pvc",
                metadata={"name": mount.claim_name, "namespace": args.namespace},
                spec={"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": volume_name,
                      "resources": {"requests": {"storage": "10Ti"}}},
                opts=args.cluster.k8s_options(self, depends_on=[volume]),
            ))
        self.register_outputs({"claims": [m.claim_name for m in args.spec.store_mounts]})
