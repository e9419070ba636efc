"""Pinned Helm charts the program installs. EKS add-on builds are pinned per Kubernetes minor in
stackconfig/catalog.py (EKS_ADDON_VERSIONS), where the config is validated against them."""
from stackconfig.catalog import EKS_ADDON_VERSIONS

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
# The CRDs as their own chart, so upgrades reach them (Helm never upgrades a chart's crds/).
KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
KARPENTER_VERSION = "1.14.1"  # FACTS.md: latest 1.14.x; CRD schemas in shared/schemas match it

NEURON_HELM_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"
# 1.10.0 ships the DRA driver (draDriver.*, image neuron-dra-driver:1.2.0) beside the device plugin.
NEURON_HELM_CHART_VERSION = "1.10.0"


def eks_addons(kubernetes_version: str, workload_identity: str) -> dict[str, str]:
    """The EKS add-ons a stack installs, name -> pinned build: what `make preflight` checks.

    vpc-cni and kube-proxy come with the control plane (components/cluster.py, through pulumi-eks),
    coredns after the system nodes, the Mountpoint driver with the model store
    (components/model_store.py), Container Insights with its Neuron metrics
    (components/observability.py), and the Pod Identity agent only when pods get their roles that
    way. tests/test_cluster.py holds this list to what the program registers.
    """
    names = ["vpc-cni", "kube-proxy", "coredns", "aws-mountpoint-s3-csi-driver", "amazon-cloudwatch-observability"]
    if workload_identity == "pod-identity":
        names.append("eks-pod-identity-agent")
    return {name: EKS_ADDON_VERSIONS[kubernetes_version][name] for name in names}
