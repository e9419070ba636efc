"""What the cluster is built from: the pinned node AMI, the EKS add-on builds (pinned, or EKS's
default), the Kubernetes version's support window and the version a deployed control plane runs,
in the stack's region."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from stackconfig import PlatformSpec, StackSpec
from stackconfig.catalog import APPROXIMATE_HOURLY_USD
from stackconfig.parse import OPEN_TO_ALL
from stackconfig.versions import EKS_ADDONS, EKS_SUPPORT, addon_requirement, stack_addons

from .result import Result

AMI, ADDONS, KUBERNETES, CONTROL_PLANE, ENDPOINT = "AMI", "EKS add-ons", "Kubernetes", "control plane", "API endpoint"
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


@dataclass(frozen=True)
class Offered:
    """What DescribeAddonVersions says of one add-on for one Kubernetes version."""

    builds: list[str]
    """Every build compatible with the version, in the API's order (newest first)."""
    default: str | None
    """The build whose compatibility for the version is marked defaultVersion."""


def offered(eks: Any, addon: str, kubernetes_version: str) -> Offered:
    """DescribeAddonVersions: addons[].addonVersions[].{addonVersion, compatibilities[].{clusterVersion,
    defaultVersion}} (botocore 1.44.5 data/eks/2017-11-01/service-2.json.gz)."""
    builds, default = [], None
    for page in eks.get_paginator("describe_addon_versions").paginate(addonName=addon, kubernetesVersion=kubernetes_version):
        for entry in page["addons"]:
            for info in entry.get("addonVersions", []):
                compatible = [c for c in info.get("compatibilities", []) if c.get("clusterVersion") == kubernetes_version]
                if compatible:
                    builds.append(info["addonVersion"])
                    if default is None and any(c.get("defaultVersion") for c in compatible):
                        default = info["addonVersion"]
    return Offered(builds, default)


def check_addons(spec: StackSpec | PlatformSpec, eks: Any, deployed: dict[str, str] | None = None) -> Result:
    """Every add-on build the stack would install: a pin EKS offers for the Kubernetes version, or
    EKS's default where the program takes it (stackconfig/versions.py EKS_ADDONS); never one of
    another Kubernetes minor. Pins that differ from EKS's default are named. With `deployed` (the
    builds a running stack reports in its `versions` output), so is every add-on the next
    `pulumi up` would move."""
    k8s = spec.cluster.kubernetes_version
    failures, notes, moves = [], [], []
    chosen = {}
    for addon, pin in stack_addons(k8s, spec.cluster.workload_identity).items():
        answer = offered(eks, addon, k8s)
        build = pin.build or answer.default
        if pin.build is not None and pin.build not in answer.builds:
            failures.append(f"{addon} {pin.build} is not offered (offered: {', '.join(answer.builds[:3]) or 'none'})")
            continue
        if build is None:
            failures.append(f"{addon}: EKS marks no default build and none is pinned")
            continue
        required = addon_requirement(addon, k8s)
        if required and not required.allows(build):
            failures.append(f"{addon} {build} is not {required.description} ({'pinned' if pin.build else 'EKS default'})")
            continue
        chosen[addon] = build if pin.build else f"{build} (EKS default)"
        if pin.build and answer.default and pin.build != answer.default:
            notes.append(f"{addon} pinned {pin.build}, EKS default {answer.default}")
        if deployed and addon in deployed and deployed[addon] != build:
            moves.append(f"{addon} {deployed[addon]} -> {build}")
    if failures:
        return Result("FAIL", ADDONS, f"for Kubernetes {k8s} in {spec.region}: {'; '.join(failures)}",
                      f"aws eks describe-addon-versions --kubernetes-version {k8s} --addon-name <name> --region "
                      f"{spec.region}; pin an offered build in stackconfig/versions.py EKS_ADDONS")
    found = f"{', '.join(f'{a} {b}' for a, b in chosen.items())}: offered for Kubernetes {k8s} in {spec.region}"
    if notes:
        found += f"; {'; '.join(notes)}"
    if moves:
        return Result("WARN", ADDONS, f"the next `pulumi up` changes {'; '.join(moves)} ({found})",
                      "expected after changing kubernetesVersion or a pin; otherwise EKS changed its default: pin the "
                      "deployed build in stackconfig/versions.py EKS_ADDONS to keep it")
    return Result("PASS", ADDONS, found)


def check_kubernetes_support(spec: StackSpec | PlatformSpec, today: datetime.date) -> Result:
    """The support window of the stack's Kubernetes version, and what its end does to a running
    stack: with supportType STANDARD EKS upgrades the control plane; with EXTENDED it bills the
    extended-support rate (botocore eks UpgradePolicyRequest.supportType; EKS user guide,
    view-upgrade-policy)."""
    k8s, support_type = spec.cluster.kubernetes_version, spec.cluster.support_type
    support = EKS_SUPPORT.get(k8s)
    if support is None:
        return Result("WARN", KUBERNETES, f"could not verify: no EKS support dates for {k8s} in stackconfig/versions.py",
                      "check the EKS Kubernetes version calendar and add the version to EKS_SUPPORT")
    standard, extended = APPROXIMATE_HOURLY_USD["eks-standard"][0], APPROXIMATE_HOURLY_USD["eks-extended"][0]
    after = (f"EKS then upgrades the control plane to the next version by itself (supportType STANDARD; EXTENDED "
             f"would bill ${extended:.2f}/h instead of ${standard:.2f}/h)"
             if support_type == "STANDARD" else
             f"the control plane then bills extended support, ${extended:.2f}/h instead of ${standard:.2f}/h "
             f"(supportType EXTENDED)")
    if today > support.extended_until:
        return Result("FAIL", KUBERNETES, f"EKS support for {k8s} ended {support.extended_until} ({support.source})",
                      "raise cluster.kubernetesVersion")
    if today > support.standard_until:
        return Result("WARN", KUBERNETES, f"{k8s} left EKS standard support {support.standard_until}: {after}, until "
                                          f"{support.extended_until} ({support.source})", "raise cluster.kubernetesVersion")
    if (support.standard_until - today).days <= SUPPORT_WARNING_DAYS:
        return Result("WARN", KUBERNETES, f"{k8s} leaves EKS standard support {support.standard_until}: {after} "
                                          f"({support.source})", "finish before then or raise cluster.kubernetesVersion")
    return Result("PASS", KUBERNETES, f"{k8s} in EKS standard support until {support.standard_until}, supportType "
                                      f"{support_type} ({support.source})")


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def check_control_plane(spec: StackSpec | PlatformSpec, eks: Any) -> Result:
    """The version the deployed control plane runs, against the stack file's. Under supportType
    STANDARD EKS upgrades a control plane by itself when its version leaves standard support (EKS
    user guide, extended-support-control: "automatically upgrade your cluster to the next version"),
    so a stack file left on the old minor would have the next `pulumi up` ask EKS to move it back.
    EKS upgrades one minor at a time (EKS user guide, update-cluster)."""
    k8s, name = spec.cluster.kubernetes_version, spec.cluster_name
    try:
        running = eks.describe_cluster(name=name)["cluster"]["version"]
    except eks.exceptions.ResourceNotFoundException:
        return Result("PASS", CONTROL_PLANE, f"{name} is not deployed yet: created at {k8s}")
    if _minor(running) > _minor(k8s):
        offered = "" if running in EKS_ADDONS else (f"; this program offers no add-on builds for {running} yet: add its "
                                                    "column to stackconfig/versions.py first")
        return Result("FAIL", CONTROL_PLANE, f"{name} runs Kubernetes {running}, newer than cluster.kubernetesVersion "
                                             f"{k8s} (EKS upgrades a control plane by itself at the end of standard "
                                             f"support under supportType STANDARD): `pulumi up` would ask EKS to move "
                                             f"it back to {k8s}",
                      f'set cluster.kubernetesVersion to "{running}" in the stack file{offered}')
    if _minor(k8s)[1] - _minor(running)[1] > 1:
        return Result("FAIL", CONTROL_PLANE, f"{name} runs Kubernetes {running}; cluster.kubernetesVersion {k8s} is more "
                                             "than one minor ahead, and EKS upgrades a control plane one minor at a time",
                      "raise cluster.kubernetesVersion one minor per `pulumi up`")
    if running != k8s:
        return Result("PASS", CONTROL_PLANE, f"{name} runs Kubernetes {running}: the next `pulumi up` upgrades it from "
                                             f"{running} to {k8s}")
    return Result("PASS", CONTROL_PLANE, f"{name} runs Kubernetes {running}, as the stack file says")


def check_endpoint(spec: StackSpec | PlatformSpec) -> Result:
    """The public Kubernetes API endpoint's allowed sources (cluster.publicAccessCidrs): open to the
    internet is EKS's default and works, but is worth narrowing to the networks that run
    `pulumi up` and kubectl."""
    cidrs = (spec if isinstance(spec, PlatformSpec) else spec.platform).cluster.public_access_cidrs
    if OPEN_TO_ALL in cidrs:
        return Result("WARN", ENDPOINT, f"the public Kubernetes API endpoint accepts {OPEN_TO_ALL} (the default); "
                                        "authentication still applies",
                      "set cluster.publicAccessCidrs to the blocks you run `pulumi up` and kubectl from (docs/security.md, \"Control plane and nodes\")")
    return Result("PASS", ENDPOINT, f"the public Kubernetes API endpoint accepts {', '.join(cidrs)} only; "
                                    "this machine must be inside them")
