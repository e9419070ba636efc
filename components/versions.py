"""Pinned versions of everything the program installs, in one place so upgrades are one diff.

EKS add-on builds differ by Kubernetes minor and region: list what your region offers with
`aws eks describe-addon-versions --kubernetes-version 1.34 --addon-name <name>`.
"""

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
# The CRDs as their own chart, so upgrades reach them (Helm never upgrades a chart's crds/).
KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
KARPENTER_VERSION = "1.14.1"  # FACTS.md: latest 1.14.x; CRD schemas in shared/schemas match it

NEURON_HELM_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"
# 1.10.0 ships the DRA driver (draDriver.*, image neuron-dra-driver:1.2.0) beside the device plugin.
NEURON_HELM_CHART_VERSION = "1.10.0"

# Builds for Kubernetes 1.34. `make preflight` checks each against DescribeAddonVersions in the
# stack's region before anything is created. Sources (EKS user guide version tables, read from
# stored copies; dates not shown on the pages):
# - vpc-cni: "Amazon VPC CNI" table, 1.34 row (docs.amazonaws.cn/eks/latest/userguide/pod-networking.html)
# - coredns: "Manage CoreDNS" table, 1.34 row (docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md)
# - kube-proxy: "Manage kube-proxy" table, 1.34 row (docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md)
# - eks-pod-identity-agent: no AWS table exists; a public Terraform pin for 1.34 (unverified)
# - aws-mountpoint-s3-csi-driver: v2.3.0-eksbuild.1 is quoted with its configuration schema in
#   aws/containers-roadmap#2785 (2026-03); its 1.34 compatibility is not documented
EKS_ADDON_VERSIONS = {
    "vpc-cni": "v1.20.4-eksbuild.1",
    "coredns": "v1.13.2-eksbuild.11",
    "kube-proxy": "v1.34.6-eksbuild.13",
    "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
    "aws-mountpoint-s3-csi-driver": "v2.3.0-eksbuild.1",
}


def eks_addons(workload_identity: str) -> dict[str, str]:
    """The EKS add-ons a stack installs, name -> pinned build: what `make preflight` checks.

    vpc-cni and kube-proxy come with the control plane (components/cluster.py, through pulumi-eks),
    coredns after the system nodes, the Mountpoint driver with the model store
    (components/model_store.py), and the Pod Identity agent only when pods get their roles that
    way. tests/test_cluster.py holds this list to what the program registers.
    """
    names = ["vpc-cni", "kube-proxy", "coredns", "aws-mountpoint-s3-csi-driver"]
    if workload_identity == "pod-identity":
        names.append("eks-pod-identity-agent")
    return {name: EKS_ADDON_VERSIONS[name] for name in names}
