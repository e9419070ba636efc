"""The Neuron DRA driver and the ResourceClaimTemplates that carve trn2 nodes into device groups."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.catalog import device_group_for
from stackconfig.versions import NEURON_HELM_CHART, NEURON_HELM_CHART_VERSION

from .handle import ClusterHandle

# The chart renders its own Namespace (templates/dra-driver/dra-driver-namespace.yaml, named by
# draDriver.namespaceOverride, default "neuron-dra-driver", no toggle) and puts the driver in it.
# Installing the release into that namespace with create_namespace would make Helm create it
# first and then fail on the chart's copy ("already exists", helm/helm#11916); without
# create_namespace Helm has nowhere to keep the release. So the release lives in kube-system and
# the chart alone creates the driver's namespace, as AWS's own test installs it
# (aws/amazon-cloudwatch-agent-test terraform/eks/daemon/otel-neuron-dra/main.tf). The 1.10.0
# chart tree itself could not be read here; its values and this template were confirmed from
# older chart versions and the release notes (FACTS.md, "Neuron DRA driver").
RELEASE_NAMESPACE = "kube-system"
DRA_NAMESPACE = "neuron-dra-driver"
# Created by the chart (templates/dra-driver/, resource.k8s.io/v1 DeviceClass "neuron.aws.com").
DEVICE_CLASS = "neuron.aws.com"
CLAIM_REQUEST = "neurons"


def claim_template_name(devices: int) -> str:
    return f"neuron-{devices}-device{'s' if devices > 1 else ''}"


def claim_template_spec(devices: int, instance_type: str, logical_neuron_cores: int) -> dict:
    """resource.k8s.io/v1 claim for `devices` connected Neuron devices (FACTS.md, Neuron DRA).

    The driver publishes groups of 1, 4, 8 and 16 connected devices (devicegroupN_id); a claim
    is constrained to the smallest group that holds it, so 2 devices (TP 8 at LNC 2, the
    EAGLE3 tutorial's shape) come from one 4-device group. No Neuron document shows a 2-device
    claim: this keeps the tutorial's LNC 2 rather than compiling for LNC 1 on one device."""
    return {
        "spec": {
            "devices": {
                "requests": [{
                    "name": CLAIM_REQUEST,
                    "exactly": {
                        "deviceClassName": DEVICE_CLASS,
                        "allocationMode": "ExactCount",
                        "count": devices,
                        "selectors": [{"cel": {"expression": f"device.attributes['{DEVICE_CLASS}'].instanceType == '{instance_type}'"}}],
                    },
                }],
                # Devices of one group share a devicegroupN_id: the allocation is contiguous,
                # which tensor-parallel collectives need.
                "constraints": [{"requests": [CLAIM_REQUEST],
                                 "matchAttribute": f"resource.aws.com/devicegroup{device_group_for(devices)}_id"}],
                "config": [{
                    "requests": [CLAIM_REQUEST],
                    "opaque": {
                        "driver": DEVICE_CLASS,
                        "parameters": {"apiVersion": "neuron.aws.com/v1", "kind": "NeuronConfig",
                                       "logicalNeuronCore": logical_neuron_cores},
                    },
                }],
            }
        }
    }


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
                # devices out twice (FACTS.md).
                "devicePlugin": {"enabled": False},
                "scheduler": {"enabled": False},
                "npd": {"enabled": False},
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.cluster_ready),
        )
        self.register_outputs({"release": self.release.name})


@dataclass(frozen=True)
class ClaimTemplatesArgs:
    cluster: ClusterHandle
    namespace: str
    device_group_sizes: tuple[int, ...]
    instance_type: str
    logical_neuron_cores: int


class ClaimTemplates(pulumi.ComponentResource):
    """A pairing's ResourceClaimTemplates: one per device-group size its variants use."""

    names: dict[int, str]
    """Device-group size -> ResourceClaimTemplate name."""
    templates: list[pulumi.Resource]

    def __init__(self, name: str, args: ClaimTemplatesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:neuron:ClaimTemplates", name, None, opts)
        # Until the platform/pairing split these were children of the NeuronDra component.
        previous_parent = pulumi.Alias(parent=pulumi.create_urn("neuron-dra", "sdtrn2:neuron:NeuronDra"))
        self.names, self.templates = {}, []
        for devices in args.device_group_sizes:
            template_name = claim_template_name(devices)
            self.templates.append(k8s.resource.v1.ResourceClaimTemplate(
                f"neuron-dra-{template_name}",
                metadata={"name": template_name, "namespace": args.namespace, "labels": {"sd-trn2/devices": str(devices)}},
                spec=claim_template_spec(devices, args.instance_type, args.logical_neuron_cores),
                opts=args.cluster.k8s_options(self, aliases=[previous_parent]),
            ))
            self.names[devices] = template_name
        self.register_outputs({"claimTemplates": {str(k): v for k, v in self.names.items()}})
