"""What the cluster is built from: the pinned node AMI, the pinned EKS add-on builds and the
Kubernetes version's support window, in the stack's region."""
from __future__ import annotations

import datetime
from typing import Any

from components.versions import eks_addons
from stackconfig import PlatformSpec, StackSpec
from stackconfig.catalog import EKS_SUPPORT

from .result import Result

AMI, ADDONS, KUBERNETES = "AMI", "EKS add-ons", "Kubernetes"
# Standard support ending within this many days is worth a warning before a multi-hour run.
SUPPORT_WARNING_DAYS = 30


def ami_parameter(spec: StackSpec) -> str:
    """The public SSM parameter Karpenter reads for an `al2023@vYYYYMMDD` alias on a Neuron
    instance type (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/al2023.go L73-80,
    resolvePath; every catalog instance type is Trainium, x86_64, hence the neuron variant)."""
    k8s = spec.cluster.kubernetes_version
    version = spec.capacity.ami_alias.split("@", 1)[1]
    name = f"amazon-eks-node-al2023-x86_64-neuron-{k8s}-{version}"
    return f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/x86_64/neuron/{name}/image_id"


def check_ami(spec: StackSpec, ssm: Any) -> Result:
    name = ami_parameter(spec)
    try:
        image = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return Result("FAIL", AMI, f"capacity.amiAlias {spec.capacity.ami_alias} has no Neuron AMI for Kubernetes "
                                   f"{spec.cluster.kubernetes_version} in {spec.region} (no SSM parameter {name})",
                      f"aws ssm get-parameters-by-path --path /aws/service/eks/optimized-ami/"
                      f"{spec.cluster.kubernetes_version}/amazon-linux-2023/x86_64/neuron --region {spec.region} "
                      f"lists the releases; pin one in capacity.amiAlias")
    return Result("PASS", AMI, f"{spec.capacity.ami_alias} resolves to {image} (Neuron, Kubernetes "
                               f"{spec.cluster.kubernetes_version}, {spec.region})")


def offered_builds(eks: Any, addon: str, kubernetes_version: str) -> list[str]:
    """Builds of `addon` EKS offers in the client's region for the version
    (DescribeAddonVersions: addons[].addonVersions[].{addonVersion, compatibilities[].clusterVersion},
    botocore 1.44.5 data/eks/2017-11-01/service-2.json.gz)."""
    builds = []
    for page in eks.get_paginator("describe_addon_versions").paginate(addonName=addon, kubernetesVersion=kubernetes_version):
        for entry in page["addons"]:
            for info in entry.get("addonVersions", []):
                clusters = {c.get("clusterVersion") for c in info.get("compatibilities", [])}
                if kubernetes_version in clusters:
                    builds.append(info["addonVersion"])
    return builds


def check_addons(spec: StackSpec | PlatformSpec, eks: Any) -> Result:
    k8s = spec.cluster.kubernetes_version
    pinned = eks_addons(spec.cluster.kubernetes_version, spec.cluster.workload_identity)
    problems = []
    for addon, build in pinned.items():
        builds = offered_builds(eks, addon, k8s)
        if build not in builds:
            problems.append(f"{addon} {build} (offered: {', '.join(builds[:3]) or 'none'})")
    if problems:
        return Result("FAIL", ADDONS, f"not offered for Kubernetes {k8s} in {spec.region}: {'; '.join(problems)}",
                      f"aws eks describe-addon-versions --kubernetes-version {k8s} --addon-name <name> --region "
                      f"{spec.region}; pin an offered build in components/versions.py")
    return Result("PASS", ADDONS, f"{', '.join(f'{a} {b}' for a, b in pinned.items())}: offered for Kubernetes {k8s} "
                                  f"in {spec.region}")


def check_kubernetes_support(spec: StackSpec | PlatformSpec, today: datetime.date) -> Result:
    k8s = spec.cluster.kubernetes_version
    support = EKS_SUPPORT.get(k8s)
    if support is None:
        return Result("WARN", KUBERNETES, f"could not verify: no EKS support dates for {k8s} in stackconfig/catalog.py",
                      "check the EKS Kubernetes version calendar and add the version to EKS_SUPPORT")
    if today > support.extended_until:
        return Result("FAIL", KUBERNETES, f"EKS support for {k8s} ended {support.extended_until} ({support.source})",
                      "raise cluster.kubernetesVersion")
    if today > support.standard_until:
        return Result("WARN", KUBERNETES, f"{k8s} left EKS standard support {support.standard_until}: the control plane "
                                          f"bills extended support until {support.extended_until} ({support.source})",
                      "raise cluster.kubernetesVersion")
    if (support.standard_until - today).days <= SUPPORT_WARNING_DAYS:
        return Result("WARN", KUBERNETES, f"{k8s} leaves EKS standard support {support.standard_until}; the control "
                                          f"plane bills extended support from then ({support.source})",
                      "finish before then or raise cluster.kubernetesVersion")
    return Result("PASS", KUBERNETES, f"{k8s} in EKS standard support until {support.standard_until} ({support.source})")
