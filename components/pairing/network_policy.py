"""A pairing's namespace, fenced: nothing in or out unless a policy below allows it. Enforced by the
VPC CNI's network policy agent (components/platform/cluster.py enables it).

What the agent does that these policies rely on (aws/aws-network-policy-agent and the EKS user guide,
"Configure your cluster for Kubernetes network policies"; docs/facts.md "Network policy"):
- a pod's own node may always reach it, so kubelet's probes pass without a rule;
- it checks egress before kube-proxy rewrites a Service address, so the Kubernetes API is reached
  at its ClusterIP on port 443, which the HTTPS rule below covers;
- DNS is blocked unless egress to kube-dns is allowed;
- Pod Identity's agent answers on 169.254.170.23, ports 80 and 2703, which must be allowed where
  pods take their AWS role that way.
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.server import VLLM_PORT

from ..handle import ClusterHandle
from .distributed_variant import PeerFlow

APP = "app.kubernetes.io/name"
SERVERS, BENCHMARK, PREPARATION = "vllm", "llmperf", "model-prep"
POD_IDENTITY_AGENT = "169.254.170.23/32"
POD_IDENTITY_PORTS = (80, 2703)
ANYWHERE = "0.0.0.0/0"


def pods(*names: str) -> dict:
    return {"matchExpressions": [{"key": APP, "operator": "In", "values": list(names)}]}


def policies(pod_identity: bool, flows: tuple[PeerFlow, ...] = ()) -> dict[str, dict]:
    """Name -> NetworkPolicy spec. Plain data. `flows`: what the pairing's servers call of each
    other (a distributed draft its target: components/pairing/distributed_variant.py peer_flows),
    each admitted at both ends, on its port, between exactly those pods."""
    aws_callers = pods(SERVERS, BENCHMARK, PREPARATION)
    specs = {
        # Everything denied, both ways, for every pod of the namespace.
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "dns": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]},
        # AWS APIs (S3, STS, CloudWatch), the hub, PyPI and GitHub (pod setup), the Kubernetes API
        # (the benchmark finds its variants' pods): all HTTPS. The servers' own process never
        # reaches out (HF_HUB_OFFLINE); their publisher does.
        "https-out": {"podSelector": aws_callers, "policyTypes": ["Egress"],
                      "egress": [{"to": [{"ipBlock": {"cidr": ANYWHERE}}], "ports": [{"protocol": "TCP", "port": 443}]}]},
        # The benchmark measures the servers, and reads their /metrics, on the server port.
        "benchmark-to-servers": {"podSelector": pods(BENCHMARK), "policyTypes": ["Egress"],
                                 "egress": [{"to": [{"podSelector": pods(SERVERS)}],
                                             "ports": [{"protocol": "TCP", "port": VLLM_PORT}]}]},
        "servers-from-benchmark": {"podSelector": pods(SERVERS), "policyTypes": ["Ingress"],
                                   "ingress": [{"from": [{"podSelector": pods(BENCHMARK)}],
                                                "ports": [{"protocol": "TCP", "port": VLLM_PORT}]}]},
    }
    for flow in flows:
        ports = [{"protocol": "TCP", "port": flow.port}]
        specs[f"{flow.name}-egress"] = {"podSelector": {"matchLabels": flow.source}, "policyTypes": ["Egress"],
                                        "egress": [{"to": [{"podSelector": {"matchLabels": flow.destination}}], "ports": ports}]}
        specs[f"{flow.name}-ingress"] = {"podSelector": {"matchLabels": flow.destination}, "policyTypes": ["Ingress"],
                                         "ingress": [{"from": [{"podSelector": {"matchLabels": flow.source}}], "ports": ports}]}
    if pod_identity:
        specs["pod-identity-agent"] = {"podSelector": aws_callers, "policyTypes": ["Egress"], "egress": [{
            "to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}],
            "ports": [{"protocol": "TCP", "port": port} for port in POD_IDENTITY_PORTS]}]}
    return specs


@dataclass(frozen=True)
class NetworkFenceArgs:
    cluster: ClusterHandle
    namespace: pulumi.Input[str]
    flows: tuple[PeerFlow, ...] = ()


class NetworkFence(pulumi.ComponentResource):
    policies: list[k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkFenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:pairing:NetworkFence", name, None, opts)
        specs = policies(args.cluster.identity.mechanism == "pod-identity", args.flows)
        self.policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy}", metadata={"name": policy, "namespace": args.namespace}, spec=spec,
                opts=args.cluster.k8s_options(self))
            for policy, spec in specs.items()
        ]
        self.register_outputs({"policies": sorted(specs)})
