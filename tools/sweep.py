"""`make sweep STACK=<s>`: after `pulumi destroy`, list anything Karpenter left behind.

Karpenter's instances, launch templates and instance profiles are not in Pulumi's state. The
stack's destroy order removes them first, but an interrupted destroy can strand some, and their
network interfaces then block VPC deletion (FACTS.md, "Destroy pitfalls"). This finds them by
the tags Karpenter and the VPC CNI put on them. Read-only; exits 1 when something is left.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from offline.stacks import load_stack


def leftovers(cluster_name: str, ec2: Any, iam: Any) -> dict[str, list[str]]:
    owned = {"Name": f"tag:kubernetes.io/cluster/{cluster_name}", "Values": ["owned"]}
    found: dict[str, list[str]] = {}
    reservations = ec2.describe_instances(Filters=[owned, {"Name": "instance-state-name",
                                                           "Values": ["pending", "running", "stopping", "stopped"]}])
    found["instances"] = [i["InstanceId"] for r in reservations["Reservations"] for i in r["Instances"]]
    found["launch templates"] = [t["LaunchTemplateId"] for t in ec2.describe_launch_templates(Filters=[owned])["LaunchTemplates"]]
    found["network interfaces"] = [n["NetworkInterfaceId"] for n in ec2.describe_network_interfaces(
        Filters=[{"Name": "tag:cluster.k8s.amazonaws.com/name", "Values": [cluster_name]}])["NetworkInterfaces"]]
    profiles = []
    for page in iam.get_paginator("list_instance_profiles").paginate():
        # Karpenter names its profiles "<cluster>_<hash>"; the tag confirms ownership.
        for profile in page["InstanceProfiles"]:
            name = profile["InstanceProfileName"]
            if not name.startswith(f"{cluster_name}_"):
                continue
            tags = {t["Key"]: t["Value"] for t in iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Tags", [])}
            if tags.get(f"kubernetes.io/cluster/{cluster_name}") == "owned":
                profiles.append(name)
    found["instance profiles"] = profiles
    return {kind: ids for kind, ids in found.items() if ids}


def main(argv: list[str] | None = None, ec2: Any = None, iam: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    args = parser.parse_args(argv)
    if ec2 is None or iam is None:
        import boto3

        ec2, iam = boto3.client("ec2"), boto3.client("iam")
    cluster_name = load_stack(args.stack).spec().cluster_name
    found = leftovers(cluster_name, ec2, iam)
    if not found:
        print(f"nothing left for cluster {cluster_name}")
        return 0
    print(f"left behind for cluster {cluster_name}:")
    for kind, ids in found.items():
        print(f"  {kind}: {', '.join(ids)}")
    print("delete them (instances first), then re-run `pulumi destroy`; README, 'Troubleshooting'.")
    return 1


if __name__ == "__main__":
    sys.exit(main())
