"""One vLLM server (Deployment + ClusterIP Service) as a function of a typed Variant.

Baseline and SD servers come from the same function: they differ only where the Variant does
(draft, speculation, weights), which is what makes their comparison fair. What the container
runs depends on the variant's engine (stackconfig/server.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from modelstore.pod import code_items
from stackconfig.catalog import INSTANCE_SHAPES
from stackconfig.engines import Server
from stackconfig.model import Variant
from stackconfig.server import NODE_CACHE_MOUNT, VLLM_PORT, arguments, environment, node_cache_gib

from ..handle import ClusterHandle
from ..identity import SKIP_CONTAINERS_ANNOTATION
from .claim_templates import CLAIM_REQUEST
from .server_access import PUBLISHER_CPU_MILLICORES, PUBLISHER_MEMORY_MIB, SERVICE_ACCOUNT, publisher_container

SCRIPT_MOUNT = "/opt/sd-trn2"
SERVER_CONTAINER = "vllm"
# Left of the node's allocatable (as Karpenter models it: InstanceShape.allocatable_*) for the
# DaemonSets every trn2 node runs: VPC CNI, kube-proxy, the Pod Identity agent, the Mountpoint
# driver and its mount pods, the Neuron DRA driver, neuron-monitor, the CloudWatch agent and
# Fluent Bit. An allowance of this project's choosing, not the sum of their requests (not read).
DAEMONSET_CPU_MILLICORES = 2000
DAEMONSET_MEMORY_MIB = 8 * 1024


SERVER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}}
"""The vLLM container: no capability at all (NET_RAW included) and no way to gain one. The Neuron
documentation names no capability the runtime needs when devices come as device nodes, as the DRA
driver gives them; its DLC quickstarts add SYS_ADMIN and IPC_LOCK to `docker run` without a reason,
and memlock matters only with EFA, which one node does not use (docs/facts.md, "Serving engines on
Trainium2"); serving.addCapabilities gives named ones back (server_security_context). It runs as
root unless the stack opts into a user (serving.runAs, pod_security_context): neither DLC image sets a USER (aws-neuron/deep-learning-containers
vllm/inference/0.9.1 and 0.24.0.1.1.0 Dockerfile.neuronx), and the device files the DRA driver
creates are not documented, so a non-root user's access to them cannot be confirmed; nor a
read-only root, where the runtime's and vLLM's default cache and scratch paths are not all known."""


def server_security_context(variant: Variant) -> dict:
    """SERVER_SECURITY_CONTEXT, with the capabilities a stack gives back (serving.addCapabilities)."""
    added = variant.serving.add_capabilities
    if not added:
        return SERVER_SECURITY_CONTEXT
    return {**SERVER_SECURITY_CONTEXT, "capabilities": {"drop": ["ALL"], "add": list(added)}}


def pod_security_context(variant: Variant) -> dict:
    """RuntimeDefault seccomp unless the stack opts out (serving.seccompProfile), and with
    serving.runAs the user and group the pod runs as, its volumes owned by that group (fsGroup):
    the opt-in that meets "restricted", unverified on Neuron (docs/security.md, "Pods"). The publisher's
    container names its own user (modelstore/pod.py security_context)."""
    serving = variant.serving
    context = {"seccompProfile": {"type": "RuntimeDefault"}} if serving.seccomp_runtime_default else {}
    if serving.run_as:
        user, group = serving.run_as
        context.update({"runAsNonRoot": True, "runAsUser": user, "runAsGroup": group, "fsGroup": group})
    return context


def endpoint(variant: Variant, namespace: str) -> str:
    """The variant's OpenAI-compatible base URL inside the cluster: plain data, from names the
    config derives (the Service of its endpoint server in the pairing's namespace)."""
    return f"http://{workload_name(variant, variant.endpoint_server)}.{namespace}.svc.cluster.local:{VLLM_PORT}/v1"


def workload_name(variant: Variant, server: Server | None = None) -> str:
    """vllm-<variant>, and -<part> for each pod of a variant that runs several (its Deployment and Service)."""
    return f"vllm-{variant.name}" + (f"-{server.part}" if server is not None and server.part else "")


def resource_requests(devices: int, instance_type: str) -> dict[str, str]:
    """The server container's requests: the pod's share of what the node offers pods,
    proportional to its devices, so the stack's servers fit side by side on the nodes the
    NodePool brings up, less its publisher's. From the allocatable Karpenter models (its overhead,
    kube-reserved and eviction threshold), not the nominal memory."""
    shape = INSTANCE_SHAPES[instance_type]
    share = devices / shape.neuron_devices
    cpu = math.floor(((shape.allocatable_cpu_millicores - DAEMONSET_CPU_MILLICORES) * share - PUBLISHER_CPU_MILLICORES) / 1000)
    memory = math.floor((shape.allocatable_memory_mib - DAEMONSET_MEMORY_MIB) * share - PUBLISHER_MEMORY_MIB)
    return {"cpu": str(cpu), "memory": f"{memory}Mi"}


def labels(variant: Variant, server: Server | None = None) -> dict[str, str]:
    """The variant's pods; with a server of a variant that runs several, that pod alone."""
    return {"app.kubernetes.io/name": "vllm", "sd-trn2/variant": variant.name, "sd-trn2/role": variant.role,
            **({"sd-trn2/server": server.part} if server is not None and server.part else {})}


@dataclass(frozen=True)
class ServerProcess:
    """What one server pod runs: which of the variant's servers it is (stackconfig/engines/ Server),
    serve.sh's arguments and environment, its ports, and what it is given beside the image: init
    containers (after the publisher), volumes and the server container's mounts."""

    server: Server
    arguments: list[str]
    environment: dict[str, str]
    ports: tuple[tuple[str, int], ...] = (("http", VLLM_PORT),)
    init_containers: tuple[dict, ...] = ()
    volumes: tuple[dict, ...] = ()
    mounts: tuple[dict, ...] = ()


def vllm_process(variant: Variant) -> ServerProcess:
    """A vLLM variant's one server: `vllm serve ...` (stackconfig/server.py)."""
    return ServerProcess(variant.endpoint_server, arguments(variant), environment(variant))


def pod_spec(variant: Variant, *, node_labels: dict[str, str], toleration: dict[str, str], instance_type: str,
             claim_template: str, script_config_map: pulumi.Input[str],
             code_config_map: pulumi.Input[str], bucket: pulumi.Input[str], region: str,
             process: ServerProcess | None = None) -> dict:
    """Plain data with Outputs only at the leaves (ConfigMap and bucket names). No Hugging Face
    token: the server never reaches the hub. `process`: one server of the variant (default: its
    vLLM server)."""
    process = process or vllm_process(variant)
    probe = {"httpGet": {"path": "/health", "port": VLLM_PORT}}
    budget = variant.startup_budget_seconds
    requests = resource_requests(process.server.devices, instance_type)
    cache = node_cache_gib(variant)
    pod_context = pod_security_context(variant)
    return {
        "serviceAccountName": SERVICE_ACCOUNT,
        **({"securityContext": pod_context} if pod_context else {}),
        # No container calls the Kubernetes API; the publisher's AWS token is a projected volume of its own.
        "automountServiceAccountToken": False,
        "nodeSelector": node_labels,
        "tolerations": [toleration],
        "resourceClaims": [{"name": CLAIM_REQUEST, "resourceClaimTemplateName": claim_template}],
        "terminationGracePeriodSeconds": 60,
        "initContainers": [publisher_container(variant.server_artifact_path(process.server), bucket, region),
                           *process.init_containers],
        "containers": [{
            "name": SERVER_CONTAINER,
            "image": variant.image,
            "command": ["bash", f"{SCRIPT_MOUNT}/serve.sh"],
            "args": process.arguments,
            "env": [{"name": k, "value": v} for k, v in process.environment.items()],
            "ports": [{"name": name, "containerPort": port} for name, port in process.ports],
            "securityContext": server_security_context(variant),
            "resources": {"requests": {**requests, "ephemeral-storage": f"{cache}Gi"},
                          "limits": {"memory": requests["memory"], "ephemeral-storage": f"{cache}Gi"},
                          "claims": [{"name": CLAIM_REQUEST}]},
            "startupProbe": {**probe, "periodSeconds": 60, "failureThreshold": budget // 60, "timeoutSeconds": 5},
            "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5},
            "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 5, "timeoutSeconds": 10},
            "volumeMounts": [
                # The store prefixes this server reads, each read-only at its own path
                # (components/pairing/model_volume.py).
                *({"name": m.key, "mountPath": m.mount_path, "readOnly": True} for m in variant.server_store_mounts(process.server)),
                {"name": "node-cache", "mountPath": NODE_CACHE_MOUNT},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "scripts", "mountPath": SCRIPT_MOUNT, "readOnly": True},
                *process.mounts,
            ],
        }],
        "volumes": [
            *({"name": m.key, "persistentVolumeClaim": {"claimName": m.claim_name, "readOnly": True}}
              for m in variant.server_store_mounts(process.server)),
            # On the RAID0 instance store, which kubelet's ephemeral storage sits on (Karpenter docs,
            # concepts/nodeclasses.md "spec.instanceStorePolicy"): the weights and compiled set,
            # copied once per pod. No host path.
            {"name": "node-cache", "emptyDir": {"sizeLimit": f"{cache}Gi"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "scripts", "configMap": {"name": script_config_map, "defaultMode": 0o555}},
            {"name": "modelstore-code", "configMap": {"name": code_config_map, "items": code_items()}},
            {"name": "publisher-deps", "emptyDir": {"sizeLimit": "2Gi"}},
            {"name": "publisher-tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            *process.volumes,
        ],
    }


@dataclass(frozen=True)
class VllmVariantArgs:
    variant: Variant
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    """The Workspace's namespace Output: objects wait for it."""
    namespace_name: str
    """The same name as plain data, for the endpoint."""
    node_labels: dict[str, str]
    instance_type: str
    claim_templates: dict[int, str]
    """Device-group size -> ResourceClaimTemplate name (ClaimTemplates.names): each server claims its own group."""
    script_config_map: pulumi.Input[str]
    code_config_map: pulumi.Input[str]
    """modelstore/'s code, for the publisher."""
    depends_on: list[pulumi.Resource]
    """Node pool, claim templates, volume, identity: the Deployment goes before them on destroy."""
    scaled_by_tuner: bool = False
    """A study in sequential mode: created at zero replicas, its replica count the tuner's alone."""


class VllmVariant(pulumi.ComponentResource):
    """One vLLM server: a Deployment and its Service."""

    endpoint: str
    """OpenAI-compatible base URL inside the cluster."""

    def __init__(self, name: str, args: VllmVariantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:VllmVariant", name, None, opts)
        variant = args.variant
        workload = workload_name(variant)
        spec = pod_spec(variant, node_labels=args.node_labels, toleration=args.cluster.neuron_toleration,
                        instance_type=args.instance_type,
                        claim_template=args.claim_templates[variant.devices],
                        script_config_map=args.script_config_map,
                        code_config_map=args.code_config_map, bucket=args.cluster.model_bucket, region=args.cluster.region)
        k8s.apps.v1.Deployment(
            name,
            metadata={
                "name": workload, "namespace": args.namespace, "labels": labels(variant),
                # A first start downloads and compiles for up to hours; `pulumi up` must not wait
                # for it (docs/operations.md, "Watching it come up").
                "annotations": {"pulumi.com/skipAwait": "true", "sd-trn2/artifacts": variant.artifact_path,
                                # A server Pulumi sizes takes the replica count back from the tuner's
                                # field manager when a stack leaves sequential mode (else server-side
                                # apply reports a conflict on .spec.replicas): pulumi-kubernetes
                                # provider/pkg/await/await.go patchForce, docs/facts.md "Tuning study".
                                **({} if args.scaled_by_tuner else {"pulumi.com/patchForce": "true"})},
            },
            spec={
                # The tuner scales a study's servers one configuration at a time (benchmark/tuner.py);
                # `pulumi up` creates them stopped and leaves the count to it, so a later update
                # never starts or stops a server under a running study.
                "replicas": 0 if args.scaled_by_tuner else 1,
                # Never two pods of one variant: two compilers must not write one artifact path.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels(variant)},
                # The pod's identity is the publisher's: the server process (root, serving
                # requests) gets none of its credentials; it reads the store through the mount.
                "template": {"metadata": {"labels": labels(variant),
                                          "annotations": {SKIP_CONTAINERS_ANNOTATION: SERVER_CONTAINER}},
                             "spec": spec},
            },
            opts=args.cluster.k8s_options(self, depends_on=args.depends_on,
                                          ignore_changes=["spec.replicas"] if args.scaled_by_tuner else None),
        )
        k8s.core.v1.Service(
            f"{name}-svc",
            metadata={"name": workload, "namespace": args.namespace, "labels": labels(variant)},
            # A numeric targetPort: the network policy controller admits the benchmark's egress to
            # this ClusterIP only when the policy's port matches the Service's (a named targetPort
            # sends it through a lookup on running pods, which finds none before the server starts).
            # aws/amazon-network-policy-controller-k8s v1.1.7 pkg/resolvers/endpoints.go
            # getMatchingServiceClusterIPs, pkg/k8s/service_utils.go LookupServiceListenPort.
            spec={"type": "ClusterIP", "selector": labels(variant),
                  "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": VLLM_PORT}]},
            opts=args.cluster.k8s_options(self),
        )
        self.endpoint = endpoint(variant, args.namespace_name)
        self.register_outputs({"endpoint": self.endpoint, "artifactPath": variant.artifact_path})
