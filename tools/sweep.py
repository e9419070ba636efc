"""`make sweep STACK=<s>`: after `pulumi destroy`, list what Karpenter or the cluster left behind.

Karpenter's instances, launch templates and instance profiles are not in Pulumi's state; an
interrupted destroy can strand them, and their network interfaces then block security-group and
VPC deletion (docs/facts.md, "Destroy pitfalls"). The cluster's log groups (control plane, Container
Insights) belong to the program, which deletes them after their writers; one still here means a
destroy did not finish, or a writer recreated it. This searches the stack's own region (its
aws:region, whatever the shell's region says) by the tags those owners put on what they create.
For a pairing on a shared platform it lists only what that pairing's own EC2NodeClass left: the
cluster and everything else are the platform's, still in use by other pairings. Read-only; exits 1
when something is left.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable

from stackconfig import PlatformSpec, StackSpec

from .stack import aws_session, cluster_name_of, stack_spec, stack_tool

LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def cluster_tag_filters(cluster: str) -> list[dict]:
    """Tags that name the cluster, each one EC2 filter (EC2 ANDs filters, so one query per tag).

    - kubernetes.io/cluster/<c> = owned and eks:eks-cluster-name = <c>: Karpenter must set both
      on every instance, volume, ENI and launch template it creates (its controller policy's
      aws:RequestTag conditions, aws/karpenter-provider-aws v1.14.1 CloudFormation, statement
      AllowScopedEC2InstanceActionsWithTags); EKS puts the first on its cluster security group.
    - karpenter.sh/discovery = <c>: this program's EC2NodeClass tags (components/pairing/trn2_nodes.py)
      and the cluster security group's discovery tag (components/platform/cluster.py).
    Karpenter's karpenter.k8s.aws/ec2nodeclass tag always comes with the two above, so it finds
    nothing they miss.
    """
    return [{"Name": f"tag:kubernetes.io/cluster/{cluster}", "Values": ["owned"]},
            {"Name": "tag:eks:eks-cluster-name", "Values": [cluster]},
            {"Name": "tag:karpenter.sh/discovery", "Values": [cluster]}]


def union(results: Iterable[Iterable[str]]) -> list[str]:
    return sorted({found for ids in results for found in ids})


def paged(client: Any, operation: str, key: str, field: str, **kwargs: Any) -> list[str]:
    return [item[field] for page in client.get_paginator(operation).paginate(**kwargs) for item in page[key]]


@dataclass(frozen=True)
class SweepClients:
    ec2: Any
    iam: Any
    logs: Any


def instances(ec2: Any, cluster: str) -> list[str]:
    state = {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES}

    def query(tag: dict) -> list[str]:
        return [i["InstanceId"] for page in ec2.get_paginator("describe_instances").paginate(Filters=[tag, state])
                for r in page["Reservations"] for i in r["Instances"]]
    return union(query(tag) for tag in cluster_tag_filters(cluster))


def launch_templates(ec2: Any, cluster: str) -> list[str]:
    return union(paged(ec2, "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId", Filters=[tag])
                 for tag in cluster_tag_filters(cluster))


def security_groups(ec2: Any, cluster: str) -> list[str]:
    """Security groups tagged for the cluster; never a VPC's default group (deleted with its VPC)."""
    def query(tag: dict) -> list[str]:
        return [g["GroupId"] for page in ec2.get_paginator("describe_security_groups").paginate(Filters=[tag])
                for g in page["SecurityGroups"] if g["GroupName"] != "default"]
    return union(query(tag) for tag in cluster_tag_filters(cluster))


def network_interfaces(ec2: Any, cluster: str, groups: list[str]) -> list[str]:
    """ENIs the VPC CNI tagged with the cluster's name, and any ENI still in one of the cluster's
    security groups (node and "aws-K8S-<instance>" ENIs the CNI left untagged, control-plane ENIs)."""
    filters = [{"Name": "tag:cluster.k8s.amazonaws.com/name", "Values": [cluster]}]
    if groups:
        filters.append({"Name": "group-id", "Values": groups})
    return union(paged(ec2, "describe_network_interfaces", "NetworkInterfaces", "NetworkInterfaceId", Filters=[f])
                 for f in filters)


def instance_profiles(iam: Any, cluster: str, region: str) -> list[str]:
    """Instance profiles Karpenter created for the cluster.

    Karpenter >= 1.7 creates them under path /karpenter/<region>/<cluster>/<nodeclass-uid>/
    (aws/karpenter-provider-aws@v1.14.1 pkg/controllers/nodeclass/instanceprofile.go L91,
    instanceprofile.FormatPath); older releases at "/" named "<cluster>_<hash>"
    (pkg/apis/v1/ec2nodeclass.go L613). Those are confirmed by the tags Karpenter must set on
    them, kubernetes.io/cluster/<cluster>=owned and topology.kubernetes.io/region=<region> (its
    policy's AllowScopedInstanceProfileCreationActions), which ListInstanceProfiles does not
    return (hence GetInstanceProfile). IAM is global: the region keeps another region's
    cluster of the same name out.
    """
    path = f"/karpenter/{region}/{cluster}/"
    found = []
    for page in iam.get_paginator("list_instance_profiles").paginate():
        for profile in page["InstanceProfiles"]:
            name = profile["InstanceProfileName"]
            if profile["Path"].startswith(path):
                found.append(name)
            elif name.startswith(f"{cluster}_"):
                tags = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Tags", [])
                wanted = [{"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
                          {"Key": "topology.kubernetes.io/region", "Value": region}]
                if all(tag in tags for tag in wanted):
                    found.append(name)
    return sorted(found)


def log_groups(logs: Any, names: Iterable[str]) -> list[str]:
    """Which of the cluster's log groups (PlatformSpec.log_groups) still exist. Listed by exact
    name: another cluster's name may begin with this one's."""
    return sorted(g for name in names
                  for g in paged(logs, "describe_log_groups", "logGroups", "logGroupName", logGroupNamePrefix=name)
                  if g == name)


def pairing_leftovers(clients: SweepClients, cluster: str, region: str, node_class: str) -> dict[str, list[str]]:
    """What a shared pairing's own EC2NodeClass (named like its NodePool, components/pairing/__init__.py)
    may leave on the platform's cluster. Karpenter tags the instances it launches, its launch
    templates and its instance profiles with eks:eks-cluster-name=<cluster> and
    karpenter.k8s.aws/ec2nodeclass=<name> (aws/karpenter-provider-aws@v1.14.1 pkg/utils/utils.go
    GetTags; pkg/apis/v1/ec2nodeclass.go InstanceProfileTags), and finds its launch templates by
    those two tags itself (pkg/providers/launchtemplate/launchtemplate.go DeleteAll). The cluster,
    its security groups and log group are the platform's: never listed here."""
    owned = [{"Name": "tag:eks:eks-cluster-name", "Values": [cluster]},
             {"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": [node_class]}]
    state = {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES}
    tag = {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": node_class}
    found = {
        "instances": sorted(i["InstanceId"] for page in clients.ec2.get_paginator("describe_instances").paginate(Filters=[*owned, state])
                            for r in page["Reservations"] for i in r["Instances"]),
        "launch templates": sorted(paged(clients.ec2, "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId", Filters=owned)),
        "instance profiles": [name for name in instance_profiles(clients.iam, cluster, region)
                              if tag in clients.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Tags", [])],
    }
    return {kind: ids for kind, ids in found.items() if ids}


def leftovers(clients: SweepClients, cluster: str, region: str, cluster_log_groups: Iterable[str]) -> dict[str, list[str]]:
    groups = security_groups(clients.ec2, cluster)
    found = {
        "instances": instances(clients.ec2, cluster),
        "launch templates": launch_templates(clients.ec2, cluster),
        "network interfaces": network_interfaces(clients.ec2, cluster, groups),
        "security groups": groups,
        "instance profiles": instance_profiles(clients.iam, cluster, region),
        "log groups": log_groups(clients.logs, cluster_log_groups),
    }
    return {kind: ids for kind, ids in found.items() if ids}


def sweep(stack: str) -> int:
    spec = stack_spec(stack)
    session = aws_session(spec.region)
    # Every client names the stack's region: the shell's AWS_REGION may point anywhere.
    clients = SweepClients(ec2=session.client("ec2", region_name=spec.region),
                           iam=session.client("iam", region_name=spec.region),
                           logs=session.client("logs", region_name=spec.region))
    cluster = cluster_name_of(spec)
    if isinstance(spec, StackSpec) and spec.shared:
        # The cluster is the platform's and other pairings run on it: only this pairing's own.
        found = pairing_leftovers(clients, cluster, spec.region, spec.node_pool_name)
        what = f"node class {spec.node_pool_name} on cluster {cluster}"
    else:
        platform = spec if isinstance(spec, PlatformSpec) else spec.platform
        found, what = leftovers(clients, cluster, spec.region, platform.log_groups), f"cluster {cluster}"
    if not found:
        print(f"nothing left for {what} in {spec.region}")
        return 0
    print(f"left behind for {what} in {spec.region}:")
    for kind, ids in found.items():
        print(f"  {kind}: {', '.join(ids)}")
    print("delete them (instances first, then network interfaces, security groups, launch templates, "
          "instance profiles), then re-run `make destroy`; docs/operations.md, 'Troubleshooting'.")
    return 1


def main(argv: list[str] | None = None) -> int:
    return stack_tool("sweep", __doc__, sweep, argv)


if __name__ == "__main__":
    sys.exit(main())
