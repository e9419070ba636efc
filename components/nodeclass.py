"""The EC2NodeClass both wings launch Karpenter nodes with: the platform's preparation nodes and each
pairing's trn2 nodes. Pinned AMI, the instance store as RAID0 for kubelet, IMDSv2 with hop limit 1,
encrypted root volumes, the discovery tags."""
from __future__ import annotations

import pulumi


def ec2_node_class_spec(cluster_name: pulumi.Input[str], node_role_name: pulumi.Input[str], ami_alias: str,
                        root_volume_gib: int, tags: dict[str, str], reservation_ids: tuple[str, ...] = ()) -> dict:
    """Plain data with Outputs only at the leaves (role, cluster name), so `pulumi preview` shows it."""
    discovery = {"tags": {"karpenter.sh/discovery": cluster_name}}
    spec = {
        "role": node_role_name,
        # Pinned: @latest rolls nodes onto new AMIs and, here, loses the weight cache and compiled graphs.
        "amiSelectorTerms": [{"alias": ami_alias}],
        "subnetSelectorTerms": [discovery],
        "securityGroupSelectorTerms": [discovery],
        # Weights (up to ~810 GB), scratch space and images live on the local NVMe, striped: kubelet's
        # ephemeral storage then sits on it (Karpenter EC2NodeClass docs, instanceStorePolicy).
        "instanceStorePolicy": "RAID0",
        "blockDeviceMappings": [{
            "deviceName": "/dev/xvda",
            "ebs": {"volumeSize": f"{root_volume_gib}Gi", "volumeType": "gp3", "encrypted": True,
                    "deleteOnTermination": True},
        }],
        # Hop limit 1 (Karpenter's default) keeps every pod off the node role's credentials:
        # IMDS answers only the host network. Mountpoint v2 runs its mounts in unprivileged pods
        # that then cannot read the region or the instance's bandwidth from IMDS
        # (mountpoint-s3-csi-driver docs/UPGRADING_TO_V2.md), so the model store's volume passes
        # both as mount options instead (components/platform/model_store.py).
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                            "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        # A sweep after destroy finds anything Karpenter launched by these tags.
        "tags": {**tags, "karpenter.sh/discovery": cluster_name},
    }
    if reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": rid} for rid in reservation_ids]
    return spec
