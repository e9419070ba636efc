"""The Neuron DRA driver: publishes each trn2 node's devices as ResourceSlices and creates the
DeviceClass the pairings' claim templates name (components/pairing/claim_templates.py)."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.versions import NEURON_HELM_CHART, NEURON_HELM_CHART_VERSION

# The chart renders its own Namespace (templates/dra-driver/dra-driver-namespace.yaml, named by
# draDriver.namespaceOverride, default "neuron-dra-driver", no toggle) and puts the driver in it.
# Installing the release into that namespace with create_namespace would make Helm create it
# first and then fail on the chart's copy ("already exists", helm/helm#11916); without
# create_namespace Helm has nowhere to keep the release. So the release lives in kube-system and
# the chart alone creates the driver's namespace, as AWS's own test installs it
# (aws/amazon-cloudwatch-agent-test terraform/eks/daemon/otel-neuron-dra/main.tf). The 1.10.0
# chart tree itself could not be read here; its values and this template were confirmed from
# older chart versions and the release notes (docs/facts.md, "Neuron DRA driver").
RELEASE_NAMESPACE = "kube-system"
DRA_NAMESPACE = "neuron-dra-driver"


@dataclass(frozen=True)
class NeuronDraArgs:
    provider: k8s.Provider
    cluster_ready: list[pulumi.Resource]


class NeuronDra(pulumi.ComponentResource):
    """The Neuron DRA driver (platform): publishes each trn2 node's devices as ResourceSlices
    and creates the DeviceClass the pairings' claims name."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: NeuronDraArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:neuron:NeuronDra", name, None, opts)
        self.release = k8s.helm.v3.Release(
            name,
            name="neuron-dra-driver",
            namespace=RELEASE_NAMESPACE,
            chart=NEURON_HELM_CHART,
            version=NEURON_HELM_CHART_VERSION.version,
            values={
                # No tolerations here: the chart's default list (CriticalAddonsOnly, the Neuron taint
                # the trn2 nodes carry, SageMaker's node-health taint) is replaced, not merged, by a
                # value (templates/dra-driver/dra-driver-daemonset.yaml renders the list as given;
                # aws-neuron/neuron-helm-charts values.yaml at chart 1.9.0, commit b77a6f9; 1.10.0's
                # values could not be read; tests/test_capacity.py holds the 1.9.0 defaults).
                "draDriver": {"enabled": True, "namespaceOverride": DRA_NAMESPACE},
                # The device plugin defaults to on; beside the DRA driver it would hand the same
                # devices out twice (docs/facts.md, "Neuron DRA driver").
                "devicePlugin": {"enabled": False},
                "scheduler": {"enabled": False},
                "npd": {"enabled": False},
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.cluster_ready),
        )
        self.register_outputs({"release": self.release.name})
