"""Pinned versions of everything the program installs, in one place so upgrades are one diff.

EKS add-on builds differ by Kubernetes minor and region: list what your region offers with
`aws eks describe-addon-versions --kubernetes-version 1.34 --addon-name <name>`.
"""

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_VERSION = "1.14.1"  # FACTS.md: latest 1.14.x; CRD schemas in shared/schemas match it

NEURON_HELM_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"
# 1.10.0 ships the DRA driver (draDriver.*, image neuron-dra-driver:1.2.0) beside the device plugin.
NEURON_HELM_CHART_VERSION = "1.10.0"

EKS_ADDON_VERSIONS = {
    "vpc-cni": "v1.20.4-eksbuild.1",
    "coredns": "v1.12.4-eksbuild.1",
    "kube-proxy": "v1.34.0-eksbuild.5",
    "aws-mountpoint-s3-csi-driver": "v2.1.0-eksbuild.1",
}
