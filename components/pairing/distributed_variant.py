"""A distributed variant (stackconfig/engines/distributed.py): a target verification server and a
draft server, each a Deployment of one pod on its own device group, each behind a ClusterIP Service.
The draft serves the OpenAI-compatible endpoint the benchmark measures and calls the target over
gRPC once per step; the network fence admits exactly that flow (peer_flows).

Both pods are built like a vLLM server's (vllm_variant.py pod_spec: serve.sh restores the weights
and compiled set, the publisher beside it publishes a first compile, the same hardening), with the
program and arguments of distributed/ instead of `vllm serve`, and distributed/'s code and lock
(distributed/pod.py) installed by an init container.
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from distributed import pod as distributed_pod
from modelstore.pod import security_context as restricted_security_context
from stackconfig.engines import Server
from stackconfig.engines.distributed import TARGET_PORT, draft_arguments, target_arguments
from stackconfig.model import Variant
from stackconfig.server import VLLM_PORT, server_environment

from ..identity import SKIP_CONTAINERS_ANNOTATION
from .vllm_variant import SERVER_CONTAINER, ServerProcess, VllmVariantArgs, endpoint, labels, pod_spec, workload_name

GRPC = "grpc"
INSTALL_CONTAINER = "install"
CODE_VOLUME, DEPS_VOLUME, INSTALL_TMP_VOLUME = "distributed-code", "distributed-deps", "distributed-tmp"


@dataclass(frozen=True)
class PeerFlow:
    """One flow between two pods of the pairing the fence admits: egress from `source`, ingress to
    `destination`, on one TCP port (components/pairing/network_policy.py)."""

    name: str
    source: dict[str, str]
    destination: dict[str, str]
    port: int


def part(variant: Variant, name: str) -> Server:
    return next(s for s in variant.servers if s.part == name)


def peer_flows(variant: Variant) -> list[PeerFlow]:
    """The draft calls its own target's gRPC port, and nothing else of the two talks to the other."""
    return [PeerFlow(f"{variant.name}-draft-to-target", labels(variant, part(variant, "draft")),
                     labels(variant, part(variant, "target")), TARGET_PORT)]


def target_address(variant: Variant, namespace: str) -> str:
    return f"{workload_name(variant, part(variant, 'target'))}.{namespace}.svc.cluster.local:{TARGET_PORT}"


def code_config_map_name(variant: Variant) -> str:
    return f"{workload_name(variant)}-code"


def process(variant: Variant, server: Server, namespace: str, code_config_map: pulumi.Input[str]) -> ServerProcess:
    """One of the two pods: its arguments from the engine module, with its own paths (serve.sh's
    COMPILE_DIR and WEIGHTS_DIR); the target also answers /health on the server port, which the
    probes, serve.sh and the publisher ask."""
    environment = {**server_environment(variant, server), **distributed_pod.environment()}
    model, compiled = environment["WEIGHTS_DIR"], environment["COMPILE_DIR"]
    if server.endpoint:
        args = draft_arguments(variant, model, compiled, VLLM_PORT, target_address(variant, namespace))
        ports: tuple[tuple[str, int], ...] = (("http", VLLM_PORT),)
    else:
        args = target_arguments(variant, model, compiled, VLLM_PORT)
        ports = (("http", VLLM_PORT), (GRPC, TARGET_PORT))
    install = {
        "name": INSTALL_CONTAINER,
        "image": variant.image,
        "command": ["bash", "-c", distributed_pod.install_script()],
        "env": [{"name": k, "value": v} for k, v in {**distributed_pod.environment(), "HOME": distributed_pod.TMP_MOUNT}.items()],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
        # The "restricted" container settings the model store's pods run with: it only writes its volumes.
        "securityContext": restricted_security_context(),
        "volumeMounts": [{"name": CODE_VOLUME, "mountPath": distributed_pod.CODE_MOUNT, "readOnly": True},
                         {"name": DEPS_VOLUME, "mountPath": distributed_pod.DEPS_MOUNT},
                         {"name": INSTALL_TMP_VOLUME, "mountPath": distributed_pod.TMP_MOUNT}],
    }
    return ServerProcess(
        server=server, arguments=args, environment=environment, ports=ports, init_containers=(install,),
        volumes=({"name": CODE_VOLUME, "configMap": {"name": code_config_map, "items": distributed_pod.code_items()}},
                 {"name": DEPS_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}},
                 {"name": INSTALL_TMP_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}}),
        mounts=({"name": CODE_VOLUME, "mountPath": distributed_pod.CODE_MOUNT, "readOnly": True},
                {"name": DEPS_VOLUME, "mountPath": distributed_pod.DEPS_MOUNT, "readOnly": True}),
    )


def affinity(variant: Variant, server: Server) -> dict:
    """The draft's: beside its target (same-node) or never on the target's node (separate-node); the
    packing that sized the node pool counted them so (stackconfig/model.py pack_variants)."""
    term = {"labelSelector": {"matchLabels": labels(variant, part(variant, "target"))}, "topologyKey": "kubernetes.io/hostname"}
    if server.node == part(variant, "target").node:
        return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


class DistributedVariant(pulumi.ComponentResource):
    endpoint: str
    """The draft's OpenAI-compatible base URL inside the cluster."""

    def __init__(self, name: str, args: VllmVariantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:DistributedVariant", name, None, opts)
        variant = args.variant
        code = k8s.core.v1.ConfigMap(
            f"{name}-code",
            metadata={"name": code_config_map_name(variant), "namespace": args.namespace, "labels": labels(variant)},
            data=distributed_pod.pod_code(),
            opts=args.cluster.k8s_options(self),
        )
        for server in variant.servers:
            workload, selected = workload_name(variant, server), labels(variant, server)
            pod_process = process(variant, server, args.namespace_name, code.metadata.name)
            spec = pod_spec(variant, node_labels=args.node_labels, toleration=args.cluster.neuron_toleration,
                            instance_type=args.instance_type, claim_template=args.claim_templates[server.devices],
                            script_config_map=args.script_config_map, code_config_map=args.code_config_map,
                            bucket=args.cluster.model_bucket, region=args.cluster.region,
                            process=pod_process)
            if server.endpoint:
                spec = {**spec, "affinity": affinity(variant, server)}
            k8s.apps.v1.Deployment(
                f"{name}-{server.part}",
                # A study in sequential mode: both pods created stopped, their counts the tuner's
                # (it scales the pair together), as vllm_variant.py's Deployment explains.
                metadata={"name": workload, "namespace": args.namespace, "labels": selected,
                          "annotations": {"pulumi.com/skipAwait": "true", "sd-trn2/artifacts": variant.server_artifact_path(server),
                                          **({} if args.scaled_by_tuner else {"pulumi.com/patchForce": "true"})}},
                spec={"replicas": 0 if args.scaled_by_tuner else 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selected},
                      # Only the publisher takes the pod's AWS identity: not the server, not the installer.
                      "template": {"metadata": {"labels": selected,
                                                "annotations": {SKIP_CONTAINERS_ANNOTATION: f"{SERVER_CONTAINER},{INSTALL_CONTAINER}"}},
                                   "spec": spec}},
                opts=args.cluster.k8s_options(self, depends_on=[*args.depends_on, code],
                                              ignore_changes=["spec.replicas"] if args.scaled_by_tuner else None),
            )
            # Every server's Service has the server port (the target's: /health only); the target's
            # also gRPC. Numeric targetPorts, as vllm_variant.py's Service explains (the network
            # policy controller).
            ports = [{"name": name, "port": port, "targetPort": port} for name, port in pod_process.ports]
            k8s.core.v1.Service(
                f"{name}-{server.part}-svc",
                metadata={"name": workload, "namespace": args.namespace, "labels": selected},
                spec={"type": "ClusterIP", "selector": selected, "ports": ports},
                opts=args.cluster.k8s_options(self),
            )
        self.endpoint = endpoint(variant, args.namespace_name)
        self.register_outputs({"endpoint": self.endpoint, "artifactPath": variant.artifact_path})
