"""EKS add-on builds as the platform's components install them: a pinned build, or the build EKS
marks as the default for the cluster's Kubernetes version (stackconfig/versions.py EKS_ADDONS)."""
from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stackconfig.versions import EKS_ADDONS, addon_requirement


def addon_version(addon: str, kubernetes_version: str, parent: pulumi.Resource) -> pulumi.Input[str]:
    """The build to install. An EKS default is read with pulumi-aws eks.get_addon_version, which
    with most_recent unset returns the version whose compatibilities[].defaultVersion is true for
    the Kubernetes version (terraform-provider-aws internal/service/eks/addon_version_data_source.go
    findAddonVersionByTwoPartKey, which pulumi-aws wraps). An invoke runs at preview too, so the
    plan shows the build before anything changes."""
    pin = EKS_ADDONS[kubernetes_version][addon]
    if pin.build is not None:
        return pin.build
    looked_up = aws.eks.get_addon_version_output(addon_name=addon, kubernetes_version=kubernetes_version,
                                                 opts=pulumi.InvokeOutputOptions(parent=parent))
    return looked_up.version.apply(lambda build: checked_build(addon, kubernetes_version, build))


def checked_build(addon: str, kubernetes_version: str, build: str) -> str:
    """EKS's default, refused before it is installed when it breaks what the program relies on."""
    required = addon_requirement(addon, kubernetes_version)
    if required and not required.allows(build):
        raise pulumi.RunError(f"EKS's default {addon} build for Kubernetes {kubernetes_version} is {build}; this program "
                              f"needs {required.description}: pin one in stackconfig/versions.py EKS_ADDONS")
    return build
