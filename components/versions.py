"""Pinned Helm charts the program installs. EKS add-on builds are pinned per Kubernetes minor in
stackconfig/catalog.py (EKS_ADDON_VERSIONS), where the config is validated against them."""

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
# The CRDs as their own chart, so upgrades reach them (Helm never upgrades a chart's crds/).
KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
KARPENTER_VERSION = "1.14.1"  # FACTS.md: latest 1.14.x; CRD schemas in shared/schemas match it

NEURON_HELM_CHART = "oci://public.ecr.aws/neuron/neuron-helm-chart"
# 1.10.0 ships the DRA driver (draDriver.*, image neuron-dra-driver:1.2.0) beside the device plugin.
NEURON_HELM_CHART_VERSION = "1.10.0"
