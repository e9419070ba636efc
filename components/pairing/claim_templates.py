"""A pairing's ResourceClaimTemplates: they carve its trn2 nodes into the device groups its variants
claim, through the DeviceClass the platform's Neuron DRA driver creates."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.catalog import device_group_for

from ..handle import ClusterHandle

# Created by the Neuron chart the platform installs (templates/dra-driver/, resource.k8s.io/v1
# DeviceClass "neuron.aws.com"; components/platform/neuron_dra.py).
DEVICE_CLASS = "neuron.aws.com"
CLAIM_REQUEST = "neurons"


def claim_template_name(devices: int) -> str:
    return f"neuron-{devices}-device{'s' if devices > 1 else ''}"


def claim_template_spec(devices: int, instance_type: str, logical_neuron_cores: int) -> dict:
    """resource.k8s.io/v1 claim for `devices` connected Neuron devices (docs/facts.md, "Neuron DRA driver").

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
