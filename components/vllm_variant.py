"""One vLLM server (Deployment + ClusterIP Service) as a function of a typed Variant.

Baseline and SD servers come from the same function: they differ only where the Variant does
(draft, speculation, weights), which is what makes their comparison fair.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.catalog import INSTANCE_SHAPES, MODELS
from stackconfig.model import MODEL_STORE_MOUNT_PATH, Variant

from .handle import ClusterHandle
from .model_access import token_env
from .neuron_dra import CLAIM_REQUEST

VLLM_PORT = 8000
NODE_CACHE_MOUNT = "/node-cache"
SCRIPT_MOUNT = "/opt/sd-trn2"
# Kept off the trn2 node's allocatable for kubelet, the DRA/CSI/CNI daemons and headroom.
NODE_RESERVED_VCPUS = 8
NODE_MEMORY_USABLE = 0.9


def endpoint(variant: Variant, namespace: str) -> str:
    """The variant's OpenAI-compatible base URL inside the cluster: plain data, from names the
    config derives (Service vllm-<variant> in the pairing's namespace)."""
    return f"http://{workload_name(variant)}.{namespace}.svc.cluster.local:{VLLM_PORT}/v1"


def workload_name(variant: Variant) -> str:
    return f"vllm-{variant.name}"


def model_reference(variant: Variant) -> str:
    """What vLLM loads: the hub id, or the node-cache copy of prepared weights."""
    if variant.weights_path:
        return f"{NODE_CACHE_MOUNT}/{variant.weights_path}"
    return variant.target


def vllm_arguments(variant: Variant) -> list[str]:
    args = [
        "serve", model_reference(variant),
        "--served-model-name", variant.served_model_name,
        "--tensor-parallel-size", str(variant.tensor_parallel_size),
        "--max-num-seqs", str(variant.serving.max_num_seqs),
        "--max-model-len", str(variant.serving.max_model_len),
        "--port", str(VLLM_PORT),
        "--override-neuron-config", json.dumps(variant.override_neuron_config, sort_keys=True),
    ]
    if variant.is_speculative:
        args += ["--speculative-config", json.dumps(variant.speculative_config, sort_keys=True)]
    return args


def vllm_environment(variant: Variant, token_secret: str | None) -> list[dict]:
    env = {
        "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference",
        # Draft-model (fused) speculation exists only on vLLM's V0 Neuron path (FACTS.md).
        "VLLM_USE_V1": "0",
        "VLLM_RPC_TIMEOUT": "100000",
        "NEURON_RT_VIRTUAL_CORE_SIZE": str(variant.serving.logical_neuron_cores),
        "NEURON_COMPILED_ARTIFACTS": f"{NODE_CACHE_MOUNT}/{variant.artifact_path}",
        "ARTIFACT_DIR": f"{MODEL_STORE_MOUNT_PATH}/{variant.artifact_path}",
        "HF_HOME": f"{NODE_CACHE_MOUNT}/huggingface",
        "VLLM_PORT": str(VLLM_PORT),
    }
    if variant.weights_path:
        env["WEIGHTS_STORE"] = f"{MODEL_STORE_MOUNT_PATH}/{variant.weights_path}"
        env["WEIGHTS_DIR"] = model_reference(variant)
    if variant.quantization == "fp8":
        # Let the Neuron compiler read the rescaled FP8 (e4m3fn) weights as FP8_EXP4 (seed 004).
        env["XLA_HANDLE_SPECIAL_SCALAR"] = "1"
        env["UNSAFE_FP8FNCAST"] = "1"
    return [{"name": k, "value": v} for k, v in env.items()] + token_env(token_secret)


def startup_budget_seconds(variant: Variant) -> int:
    """Download + compile + load grows with the model: the sample allows ~4.75 h for 32B."""
    params = max(MODELS[variant.target].params_billion, MODELS[variant.draft].params_billion if variant.draft else 0)
    return int(min(12 * 3600, max(3 * 3600, 3600 + 450 * params)))


def resource_requests(variant: Variant, instance_type: str) -> dict[str, str]:
    """The variant's share of the node, proportional to its devices, so the stack's variants
    fit side by side on the nodes the NodePool brings up."""
    shape = INSTANCE_SHAPES[instance_type]
    share = variant.devices / shape.neuron_devices
    cpu = math.floor((shape.vcpus - NODE_RESERVED_VCPUS) * share)
    memory = math.floor(shape.memory_gib * NODE_MEMORY_USABLE * share)
    return {"cpu": str(cpu), "memory": f"{memory}Gi"}


def labels(variant: Variant) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm", "sd-trn2/variant": variant.name, "sd-trn2/role": variant.role}


def pod_spec(variant: Variant, *, node_labels: dict[str, str], toleration: dict[str, str], instance_type: str,
             claim_template: str,
             model_store_claim: str, node_cache_path: str, script_config_map: pulumi.Input[str],
             token_secret: str | None) -> dict:
    """Plain data with Outputs only at the leaves (the script ConfigMap's name)."""
    probe = {"httpGet": {"path": "/health", "port": VLLM_PORT}}
    budget = startup_budget_seconds(variant)
    requests = resource_requests(variant, instance_type)
    return {
        "nodeSelector": node_labels,
        "tolerations": [toleration],
        "resourceClaims": [{"name": CLAIM_REQUEST, "resourceClaimTemplateName": claim_template}],
        "terminationGracePeriodSeconds": 60,
        "containers": [{
            "name": "vllm",
            "image": variant.serving.image,
            "command": ["bash", f"{SCRIPT_MOUNT}/serve.sh"],
            "args": vllm_arguments(variant),
            "env": vllm_environment(variant, token_secret),
            "ports": [{"name": "http", "containerPort": VLLM_PORT}],
            "resources": {"requests": requests, "limits": {"memory": requests["memory"]}, "claims": [{"name": CLAIM_REQUEST}]},
            "startupProbe": {**probe, "periodSeconds": 60, "failureThreshold": budget // 60, "timeoutSeconds": 5},
            "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5},
            "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 5, "timeoutSeconds": 10},
            "volumeMounts": [
                {"name": "model-store", "mountPath": MODEL_STORE_MOUNT_PATH},
                {"name": "node-cache", "mountPath": NODE_CACHE_MOUNT},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "scripts", "mountPath": SCRIPT_MOUNT, "readOnly": True},
            ],
        }],
        "volumes": [
            {"name": "model-store", "persistentVolumeClaim": {"claimName": model_store_claim}},
            # On the RAID0 instance store: weights and compiled graphs downloaded once per node.
            {"name": "node-cache", "hostPath": {"path": node_cache_path, "type": "DirectoryOrCreate"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "scripts", "configMap": {"name": script_config_map, "defaultMode": 0o555}},
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
    claim_template: str
    model_store_claim: str
    script_config_map: pulumi.Input[str]
    token_secret: str | None
    depends_on: list[pulumi.Resource]
    """Node pool, claim templates, volume, secret: the Deployment goes before them on destroy."""


class VllmVariant(pulumi.ComponentResource):
    endpoint: str
    """OpenAI-compatible base URL inside the cluster."""

    def __init__(self, name: str, args: VllmVariantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:serving:VllmVariant", name, None, opts)
        variant = args.variant
        workload = workload_name(variant)
        spec = pod_spec(variant, node_labels=args.node_labels, toleration=args.cluster.neuron_toleration,
                        instance_type=args.instance_type,
                        claim_template=args.claim_template, model_store_claim=args.model_store_claim,
                        node_cache_path=variant.serving.node_cache_path, script_config_map=args.script_config_map,
                        token_secret=args.token_secret)
        k8s.apps.v1.Deployment(
            name,
            metadata={
                "name": workload, "namespace": args.namespace, "labels": labels(variant),
                # A first start downloads and compiles for up to hours; `pulumi up` must not wait
                # for it (README: watching compilation).
                "annotations": {"pulumi.com/skipAwait": "true", "sd-trn2/artifacts": variant.artifact_path},
            },
            spec={
                "replicas": 1,
                # Never two pods of one variant: two compilers must not write one artifact path.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels(variant)},
                "template": {"metadata": {"labels": labels(variant)}, "spec": spec},
            },
            opts=args.cluster.k8s_options(self, depends_on=args.depends_on),
        )
        k8s.core.v1.Service(
            f"{name}-svc",
            metadata={"name": workload, "namespace": args.namespace, "labels": labels(variant)},
            spec={"type": "ClusterIP", "selector": labels(variant),
                  "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http"}]},
            opts=args.cluster.k8s_options(self),
        )
        self.endpoint = endpoint(variant, args.namespace_name)
        self.register_outputs({"endpoint": self.endpoint, "artifactPath": variant.artifact_path})
