"""A pairing's volume onto the platform's model store: a static PersistentVolume for the
Mountpoint for S3 CSI driver the platform runs (components/platform/model_store.py), and its claim,
mounted in every serving pod, read-only: the servers read prepared weights and committed sets
through it; every write goes through the S3 API (modelstore/)."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.catalog import InstanceShape

from ..handle import ClusterHandle

# The PersistentVolumeClaim's name inside a pairing's namespace (namespaced, so one name serves all).
CLAIM_NAME = "model-store"


def mount_options(region: str, shape: InstanceShape) -> list[str]:
    """Mountpoint options for the model store's volume (the driver prefixes each with --).

    Mountpoint v2 pods cannot reach IMDS at hop limit 1 (components/pairing/trn2_nodes.py), so region and
    network bandwidth detection fail and throughput falls back to 10 Gbps
    (awslabs/mountpoint-s3@v1.23.0 doc/CONFIGURATION.md; mountpoint-s3/src/cli.rs). Its released
    table would also say 32000 Gbps for trn2.48xlarge, a 10x typo fixed only after v1.23.0. So
    both are given: the region, and the bandwidth of the card that carries pod traffic.
    """
    return [f"region {region}", f"maximum-throughput-gbps {shape.primary_network_gbps}"]


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
                # ReadOnlyMany makes the driver mount with --read-only
                # (awslabs/mountpoint-s3-csi-driver v2.4.0 pkg/driver/node/node.go L115-116).
                "accessModes": ["ReadOnlyMany"],
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
            spec={"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": args.volume_name,
                  "resources": {"requests": {"storage": "10Ti"}}},
            opts=args.cluster.k8s_options(self, depends_on=[volume], aliases=[previous_parent]),
        )
        self.claim_name = CLAIM_NAME
        self.register_outputs({"volumeName": args.volume_name, "claimName": self.claim_name})
