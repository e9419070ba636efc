"""Every version the program deploys, in one place, each with the source it was read from.

A pin changes what a stack runs, so it changes only here, with its source, and validation and
`make preflight` read it from here (docs/versions.md, "Pins" shows the same values; a test keeps them
equal). Nothing here is "latest": an unpinned chart, image or add-on would change a running stack at the next
`pulumi up` without a line of this repository changing.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Callable

from benchmark.loadgen import llmperf


@dataclass(frozen=True)
class Pin:
    version: str
    source: str


# --- Kubernetes on EKS ---------------------------------------------------------------------------

DEFAULT_KUBERNETES_VERSION = "1.35"
"""1.34 leaves EKS standard support on 2026-12-02 (EKS_SUPPORT); 1.35 is in it until 2027-03-27.

1.36 is offered (EKS_ADDONS, AMI_RELEASE) but not the default, because not every dependency states
support for it: no Mountpoint CSI driver release read here is tested on 1.36 (MOUNTPOINT_FLOOR), no
AWS table read here lists a vpc-cni build for 1.36 (its build is EKS's default, checked against
addon_requirement), and the Neuron Helm chart states a minimum (1.34) but names no version it was
tested on. Karpenter 1.15 and the AMI release do list 1.36. docs/versions.md, "Why 1.35 stays the default" says the
same; make 1.36 the default when those three state support."""


@dataclass(frozen=True)
class EksSupport:
    """When EKS stops standard support for a Kubernetes version (it then bills extended support
    per cluster-hour, or upgrades the control plane: cluster.supportType) and when extended
    support ends (EKS then supports the version no more)."""

    standard_until: datetime.date
    extended_until: datetime.date
    source: str


EKS_SUPPORT: dict[str, EksSupport] = {
    "1.34": EksSupport(datetime.date(2026, 12, 2), datetime.date(2027, 12, 2),
                       "awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc @0138560"),
    "1.35": EksSupport(datetime.date(2027, 3, 27), datetime.date(2028, 3, 27),
                       "endoflife.date products/amazon-eks.md @4e5af2e (third party, filled from the EKS version page; "
                       "no stored copy of the EKS user guide lists 1.35 yet)"),
    "1.36": EksSupport(datetime.date(2027, 8, 2), datetime.date(2028, 8, 2),
                       "endoflife.date products/amazon-eks.md @a70eca3 (third party, filled from the EKS version page: "
                       "released on EKS 2026-06-02; no stored copy of the EKS user guide lists 1.36 yet)"),
}

# --- EKS add-ons ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddonPin:
    """One add-on's build for one Kubernetes version.

    `build` None means the build EKS itself marks as the default for that Kubernetes version
    (DescribeAddonVersions compatibilities[].defaultVersion; pulumi-aws eks.get_addon_version with
    most_recent unset), looked up when the stack deploys: used where no source lists a build for
    the version. EKS moves its default rarely, and `make preflight` names any add-on whose next
    `pulumi up` would change it on a deployed stack. Never "latest"."""

    build: str | None
    source: str


EKS_DEFAULT_SOURCE = "no AWS document lists a build for this Kubernetes version: EKS's own default, looked up at deploy"
EKS_USER_GUIDE_JA = ("EKS user guide, Japanese edition, the first read here with a 1.36 row "
                     "(docs.aws.amazon.com/ja_jp/eks/latest/userguide/")
KEPT_FOR_1_34 = ("kept from this program's earlier releases, which running 1.34 stacks have installed (EKS's default "
                 "for 1.34 may be an older build); no AWS table read here lists this build; make preflight checks that "
                 "EKS offers it")

EKS_ADDONS: dict[str, dict[str, AddonPin]] = {
    "1.34": {
        "vpc-cni": AddonPin("v1.20.4-eksbuild.1", "EKS user guide, 'Amazon VPC CNI' versions table, 1.34 row "
                                                  "(docs.amazonaws.cn/eks/latest/userguide/pod-networking.html), as read by an earlier release"),
        "coredns": AddonPin("v1.13.2-eksbuild.11", KEPT_FOR_1_34),
        "kube-proxy": AddonPin("v1.34.6-eksbuild.13", KEPT_FOR_1_34),
        "eks-pod-identity-agent": AddonPin("v1.3.10-eksbuild.2", KEPT_FOR_1_34),
        "aws-mountpoint-s3-csi-driver": AddonPin("v2.3.0-eksbuild.1", KEPT_FOR_1_34 + "; its configuration schema "
                                                 "(node.tolerateAllTaints) is quoted in aws/containers-roadmap#2785"),
        "amazon-cloudwatch-observability": AddonPin("v4.10.2-eksbuild.1", KEPT_FOR_1_34),
    },
    "1.35": {
        # Pinned, not EKS's default: public configurations record v1.21.1-eksbuild.1 as the 1.35
        # default, whose network policy agent drops all traffic (VPC_CNI_BROKEN_WITH_NETWORK_POLICY).
        "vpc-cni": AddonPin("v1.22.1-eksbuild.2", "EKS upgrade insights list it among the vpc-cni builds compatible with "
                                                  "1.35 (v1.21.2-eksbuild.2, v1.22.1-eksbuild.2, v1.22.2-eksbuild.1, "
                                                  "v1.22.3-eksbuild.1), and public 1.35 cluster configurations pin it beside "
                                                  "kube-proxy v1.35.3 (code search); its network policy agent is v1.3.5, "
                                                  "which carries the fix (aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml)"),
        "coredns": AddonPin("v1.14.2-eksbuild.4", "EKS user guide, 'Manage CoreDNS', CoreDNS versions table, 1.35 row "
                                                  "(docs.amazonaws.cn/en_us/eks/latest/userguide/managing-coredns.md)"),
        "kube-proxy": AddonPin("v1.35.3-eksbuild.2", "EKS user guide, 'Manage kube-proxy', kube-proxy versions table, 1.35 row "
                                                     "(docs.amazonaws.cn/zh_cn/eks/latest/userguide/managing-kube-proxy.md)"),
        "eks-pod-identity-agent": AddonPin(None, EKS_DEFAULT_SOURCE),
        # Pinned, not EKS's default: the first release tested on 1.35, v2.4.0, fails reads after a
        # truncated file is closed (MOUNTPOINT_TRUNCATION_RACE); v2.4.1 fixes it.
        "aws-mountpoint-s3-csi-driver": AddonPin("v2.4.1-eksbuild.1", "the EKS add-on build an AWS China Blog cluster on EKS "
                                                 "1.35.2 ran (aws.amazon.com/cn/blogs/china/mountpoint-s3-s3-files-eks-comparison, "
                                                 "2026-06-15, 'test environment' table); driver v2.4.1 carries Mountpoint 1.22.1's "
                                                 "fix (awslabs/mountpoint-s3-csi-driver CHANGELOG.md at 57c6bed)"),
        "amazon-cloudwatch-observability": AddonPin(None, EKS_DEFAULT_SOURCE),
    },
    "1.36": {
        # EKS's default, checked against addon_requirement at deploy and by preflight: no AWS table
        # read here has a 1.36 row for vpc-cni; public 1.36 configurations pin v1.22.2-eksbuild.1 and
        # v1.22.3-eksbuild.1 (code search, unattributed excerpts), both after the network policy fix.
        "vpc-cni": AddonPin(None, EKS_DEFAULT_SOURCE),
        "coredns": AddonPin("v1.14.3-eksbuild.3", f"{EKS_USER_GUIDE_JA}managing-coredns.md), CoreDNS versions table, 1.36 row; "
                                                  "public 1.36 configurations pin the same build"),
        "kube-proxy": AddonPin("v1.36.0-eksbuild.14", f"{EKS_USER_GUIDE_JA}managing-kube-proxy.md), kube-proxy versions "
                                                      "table, 1.36 row (public 1.36 configurations pin the older "
                                                      "v1.36.0-eksbuild.9)"),
        "eks-pod-identity-agent": AddonPin(None, EKS_DEFAULT_SOURCE),
        # EKS's default, held to MOUNTPOINT_FLOOR: no source read here names an EKS build for 1.36.
        "aws-mountpoint-s3-csi-driver": AddonPin(None, EKS_DEFAULT_SOURCE),
        "amazon-cloudwatch-observability": AddonPin(None, EKS_DEFAULT_SOURCE),
    },
}


@dataclass(frozen=True)
class BuildRequirement:
    """What every build of an add-on must be on a Kubernetes version, pinned or EKS's default."""

    description: str
    """Said when a build fails it, after "is not"."""
    allows: Callable[[str], bool]


VPC_CNI_BROKEN_WITH_NETWORK_POLICY = ("v1.21.0-", "v1.21.1-", "v1.22.0-")
"""vpc-cni builds whose network policy agent dropped all traffic on EKS 1.34 with AL2023
(aws/aws-network-policy-agent issues #553 and #570; fixed by PR #551 in agent v1.3.5, shipped from
vpc-cni v1.21.2 and v1.22.1). Network policy itself needs v1.14.0 or later (EKS user guide,
"Configure your cluster for Kubernetes network policies")."""


MOUNTPOINT_TRUNCATION_RACE = "v2.4.0-"
"""The Mountpoint driver build whose Mountpoint (1.22.0) could fail reads with I/O errors after
concurrent operations on a closed, truncated file; v2.4.1 (Mountpoint 1.22.1) fixes it
(awslabs/mountpoint-s3-csi-driver CHANGELOG.md at 57c6bed, v2.4.1: "The issue was introduced in
v1.22.0"). The servers' mounts are read-only, so they never truncate; refused all the same, as
the preparation and publisher paths may grow."""
MOUNTPOINT_FLOOR: dict[str, tuple[tuple[int, ...], str]] = {
    "1.35": ((2, 4, 0), "1.35 is tested from v2.4.0"),
    "1.36": ((2, 4, 0), "no release read here is tested on 1.36, whose CI run gained it after v2.7.0, so 1.35's "
                        "floor applies"),
}
"""Per Kubernetes version, the oldest driver release allowed and why. 1.35: the first release whose
test matrix holds it (v2.4.0: awslabs/mountpoint-s3-csi-driver commit 0f46875, .github/matrix.yaml).
1.36: the matrix gained 1.36.1 in commit 3dd3838 (#838, 2026-06-26), after v2.7.0, the newest tag at
57c6bed (2026-08-08), so no release is tested on it. Older minors: any v2."""


def _version(build: str) -> tuple[int, ...]:
    return tuple(int(part) for part in build.lstrip("v").split("-")[0].split("."))


def addon_requirement(addon: str, kubernetes_version: str) -> BuildRequirement | None:
    """kube-proxy's minor is the cluster's (Kubernetes version skew policy: kube-proxy must not be
    newer than the API server, and EKS builds it per minor); the Mountpoint driver must be v2, whose
    unprivileged mount pods the volume's mount options are written for
    (components/pairing/model_volume.py mount_options); vpc-cni must enforce network policy
    (components/pairing/network_policy.py) without the agent that dropped all traffic."""
    if addon == "kube-proxy":
        prefix = f"v{kubernetes_version}."
        return BuildRequirement(f"{prefix}*", lambda build: build.startswith(prefix))
    if addon == "aws-mountpoint-s3-csi-driver":
        floor, why = MOUNTPOINT_FLOOR.get(kubernetes_version, ((2, 0, 0), ""))
        race = "v2.4.0 fails reads after a truncated file is closed"
        description = f"v2.4.1 or later ({why}; {race})" if why else f"v2.*, other than v2.4.0 ({race})"
        return BuildRequirement(description, lambda build: build.startswith("v2.") and not build.startswith(
            MOUNTPOINT_TRUNCATION_RACE) and _version(build) >= floor)
    if addon == "vpc-cni":
        return BuildRequirement(
            f"v1.14.0 or later, other than {', '.join(b.rstrip('-') for b in VPC_CNI_BROKEN_WITH_NETWORK_POLICY)} "
            "(their network policy agent drops all traffic)",
            lambda build: _version(build) >= (1, 14, 0) and not build.startswith(VPC_CNI_BROKEN_WITH_NETWORK_POLICY))
    return None


# --- Karpenter and its trn2 nodes ---------------------------------------------------------------

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
"""The CRDs as their own chart, so upgrades reach them (Helm never upgrades a chart's crds/)."""
KARPENTER = Pin("1.15.0", "aws/karpenter-provider-aws, release commit 6d1426c 'chore: Release v1.15.0 (#9719)', 2026-10-10; "
                          "charts/karpenter-crd/Chart.yaml version 1.15.0 at d77d1a3, whose compatibility matrix "
                          "(website/content/en/v1.15/upgrading/compatibility.md) lists Kubernetes 1.35 for >= 1.9, 1.36 "
                          "for >= 1.13 and 1.37 for 1.15.x. Karpenter maintains its newest minor only. v1.15.1 could not "
                          "be confirmed in any stored source")


@dataclass(frozen=True)
class AmiRelease:
    """One awslabs/amazon-eks-ami release: every AMI of a release carries its tag, and each
    Kubernetes minor's AMIs one release version, "<Kubernetes patch>-<date>" (the form an EKS
    managed node group's releaseVersion takes)."""

    tag: str
    kubernetes_patches: dict[str, str]
    """Kubernetes minor -> the patch release its AMIs of this release carry."""
    source: str

    @property
    def alias(self) -> str:
        """The EC2NodeClass alias of this release's AL2023 AMIs (Karpenter resolves it per minor)."""
        return f"al2023@{self.tag}"

    def release_version(self, kubernetes_version: str) -> str:
        return f"{self.kubernetes_patches[kubernetes_version]}-{self.tag.removeprefix('v')}"

    def neuron_ami(self, kubernetes_version: str) -> str:
        return f"amazon-eks-node-al2023-x86_64-neuron-{kubernetes_version}-{self.tag}"


AMI_RELEASE = AmiRelease(
    "v20260714", {"1.34": "1.34.9", "1.35": "1.35.6", "1.36": "1.36.2"},
    "awslabs/amazon-eks-ami CHANGELOG.md at 81fec2e (the tree of tag v20260724), 'AMI Release v20260714': Neuron, "
    "standard and NVIDIA AL2023 AMIs for Kubernetes 1.30 to 1.36, release versions 1.36.2-20260714, 1.35.6-20260714 "
    "and 1.34.9-20260714. The newest release whose AMI list for every minor could be read here: later release pages "
    "(to v20261023) were readable only down to their newest minor")
"""The AMI release of every node: the trn2 and preparation nodes' EC2NodeClass alias and the system
node group's releaseVersion. The only place a release is written (tests/test_versions.py)."""

AMI_ALIASES: dict[str, Pin] = {
    version: Pin(AMI_RELEASE.alias, f"{AMI_RELEASE.source}: {AMI_RELEASE.neuron_ami(version)} "
                                    f"({AMI_RELEASE.release_version(version)})")
    for version in AMI_RELEASE.kubernetes_patches
}
"""The EC2NodeClass AMI alias per Kubernetes version: an AL2023 release with Neuron AMIs for that
version (Karpenter resolves the alias through the SSM parameter `make preflight` checks). One
release serves every version, so an upgrade changes only the Kubernetes minor of the AMI."""


# --- Neuron --------------------------------------------------------------------------------------

NEURON_HELM_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"
NEURON_HELM_CHART_VERSION = Pin("1.10.0", "aws-neuron/neuron-helm-charts release 1.10.0 (commit 8ca1e5c, 19 Aug): the DRA "
                                          "driver (draDriver.*) beside the device plugin; the Neuron docs and the EKS user guide "
                                          "('Manage Neuron devices on Amazon EKS') ask for Kubernetes 1.34 or later, "
                                          "state no upper bound and name no version the driver was tested on")


def stack_addons(kubernetes_version: str, workload_identity: str) -> dict[str, AddonPin]:
    """The EKS add-ons a platform installs, name -> pin: what `make preflight` checks.

    vpc-cni and kube-proxy come with the control plane (components/platform/cluster.py, through
    pulumi-eks), coredns after the system nodes, the Mountpoint driver with the model store,
    Container Insights with its Neuron metrics, and the Pod Identity agent only when pods get
    their roles that way. tests/test_cluster.py holds this list to what the program registers.
    """
    names = ["vpc-cni", "kube-proxy", "coredns", "aws-mountpoint-s3-csi-driver", "amazon-cloudwatch-observability"]
    if workload_identity == "pod-identity":
        names.append("eks-pod-identity-agent")
    return {name: EKS_ADDONS[kubernetes_version][name] for name in names}


# --- Serving images -----------------------------------------------------------------------------

ENGINE_IMAGES: dict[str, Pin] = {
    "nxdi-legacy": Pin("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04",
                       "the image the source documents ran: vLLM 0.9.1 Neuron fork with NxD Inference 0.6.10598, "
                       "Neuron SDK 2.26.1"),
    "vllm-neuron": Pin("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04",
                       "the newest vLLM Neuron DLC aws-neuron/deep-learning-containers lists (README at tag 2.32.0, "
                       "commit 2be9ed1): vLLM 0.24.0 with vllm-neuron 0.24.0.1.1.0, Neuron SDK 2.32.0. Neuron 2.33 "
                       "ships vllm-neuron 0.29.0.1.2.0, but no image tag for it could be read"),
}
"""Each serving engine's default image (its module: stackconfig/engines/); a stack may pin another."""
ENGINE_IMAGES["distributed"] = Pin(ENGINE_IMAGES["nxdi-legacy"].version,
                                   "the legacy image: NxD Inference 0.6.10598, which distributed/neuron.py is written "
                                   "against, with torch-neuronx and transformers; its gRPC pins come from "
                                   "distributed/requirements-pod.lock")


# --- The benchmark -------------------------------------------------------------------------------

BENCHMARK_IMAGE = Pin(llmperf.IMAGE,
                      "docker-library/official-images library/python lists 3.11.14-slim-bookworm; public.ecr.aws/"
                      "docker/library mirrors the Docker official images. Python 3.11: the version "
                      "benchmark/requirements-pod.lock was resolved and install-tested for (header of "
                      "benchmark/requirements-pod.in); LLMPerf runs unchanged on 3.11 from src/ "
                      "(docs/facts.md, 'LLMPerf, measured')")
MODEL_STORE_IMAGE = Pin(BENCHMARK_IMAGE.version,
                        "the benchmark's image: the model store pods (preparation Jobs, the publisher beside each "
                        "server) need Python 3.11 and pip only; modelstore/requirements.lock was resolved and "
                        "install-tested for it")
LLMPERF_COMMIT = Pin("f1d6bed47e4501b0e371082b41601b59ab55269f",
                     "ray-project/llmperf, its last commit (2024-12); benchmark/llmperf/<commit>.manifest holds its "
                     "git tree, which the pod checks every file against")
