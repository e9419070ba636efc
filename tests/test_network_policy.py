"""The pairing's network fence, evaluated as flows: who may talk to whom, on which port, computed
from the NetworkPolicies the program renders with Kubernetes' own rules (a pod selected by no
policy of a direction is open in it; otherwise some rule must allow the flow, and both the
sender's egress and the receiver's ingress must). The pods are the ones the program renders, with
their own labels, so renaming a label without the policy fails here.

One rule of the AWS network policy controller is checked beside them: egress to a Service's
ClusterIP is admitted only for a Service whose selector the rule's pod selector matches and whose
targetPort is the rule's port (aws/amazon-network-policy-controller-k8s v1.1.7,
pkg/resolvers/endpoints.go getMatchingServiceClusterIPs)."""
from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass, field

import pytest

from components.pairing.network_policy import POD_IDENTITY_AGENT, POD_IDENTITY_PORTS
from stackconfig.server import VLLM_PORT

from .conftest import SHARED, STANDALONE, recorded

POD_TEMPLATES = {"kubernetes:apps/v1:Deployment": lambda spec: spec["template"],
                 "kubernetes:batch/v1:Job": lambda spec: spec["template"],
                 "kubernetes:batch/v1:CronJob": lambda spec: spec["jobTemplate"]["spec"]["template"]}
KUBE_DNS = ("kube-system", {"k8s-app": "kube-dns"})
APP = "app.kubernetes.io/name"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict = field(hash=False)
    name: str = ""


def selects(selector: dict, labels: dict) -> bool:
    """metav1.LabelSelector semantics: every matchLabels entry and every expression must hold."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {"In": key in labels and labels[key] in values,
                "NotIn": key not in labels or labels[key] not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not held:
            return False
    return True


def peer_matches(peer: dict, policy_namespace: str, other) -> bool:
    if "ipBlock" in peer:
        if isinstance(other, Pod):
            return False  # the flows below send pods' traffic to pods by selector, never by address
        block = peer["ipBlock"]
        address = ipaddress.ip_address(other)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(cidr) for cidr in block.get("except", []))
    if not isinstance(other, Pod):
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}):
            return False
    elif other.namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector", {}), other.labels)


def port_matches(ports: list[dict] | None, port: int, protocol: str) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports)


def direction_allows(policies: list[dict], pod: Pod, direction: str, other, port: int, protocol: str) -> bool:
    key, peers_key = direction.lower(), "to" if direction == "Egress" else "from"
    applicable = [p for p in policies if p["namespace"] == pod.namespace and selects(p["spec"]["podSelector"], pod.labels)
                  and direction in p["spec"].get("policyTypes", ["Ingress"])]
    if not applicable:
        return True
    return any(port_matches(rule.get("ports"), port, protocol)
               and (not rule.get(peers_key) or any(peer_matches(peer, policy["namespace"], other) for peer in rule[peers_key]))
               for policy in applicable for rule in policy["spec"].get(key, []))


def allowed(policies: list[dict], source: Pod, destination, port: int, protocol: str = "TCP") -> bool:
    egress = direction_allows(policies, source, "Egress", destination, port, protocol)
    if not isinstance(destination, Pod):
        return egress
    return egress and direction_allows(policies, destination, "Ingress", source, port, protocol)


def rendered_policies(recording) -> list[dict]:
    return [{"name": p.inputs["metadata"]["name"], "namespace": p.inputs["metadata"]["namespace"], "spec": p.inputs["spec"]}
            for p in recording.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]


def rendered_pods(recording) -> dict[str, list[Pod]]:
    """The pairing's pods by their app label, as the program renders them."""
    by_app: dict[str, list[Pod]] = {}
    for kind, template_of in POD_TEMPLATES.items():
        for workload in recording.of_type(kind):
            template = template_of(workload.inputs["spec"])
            labels = template["metadata"]["labels"]
            by_app.setdefault(labels[APP], []).append(
                Pod(workload.inputs["metadata"]["namespace"], labels, workload.inputs["metadata"]["name"]))
    return by_app


def uses_pod_identity(recording) -> bool:
    return bool(recording.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"))


@pytest.fixture(params=[*STANDALONE, *SHARED])
def fenced(request):
    recording = recorded(request.param)
    return recording, rendered_policies(recording), rendered_pods(recording)


def test_the_pairing_has_servers_a_benchmark_and_preparation_and_every_pod_sits_behind_a_default_deny(fenced):
    _, policies, pods = fenced
    assert {"vllm", "llmperf", "model-prep"} <= set(pods)
    for pod in (pod for group in pods.values() for pod in group):
        deny = [p for p in policies if p["namespace"] == pod.namespace and p["spec"]["podSelector"] == {}
                and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} and not p["spec"].get("ingress")
                and not p["spec"].get("egress")]
        assert deny, pod.name


def test_the_benchmark_reaches_every_server_on_the_server_port_only(fenced):
    _, policies, pods = fenced
    (benchmark, *_) = pods["llmperf"]
    assert len(pods["vllm"]) >= 2
    for server in pods["vllm"]:
        assert allowed(policies, benchmark, server, VLLM_PORT), server.name
        assert not allowed(policies, benchmark, server, VLLM_PORT + 1), server.name
        assert not allowed(policies, benchmark, server, VLLM_PORT, "UDP"), server.name


def test_nothing_else_reaches_a_server(fenced):
    _, policies, pods = fenced
    servers = pods["vllm"]
    (benchmark, *_) = pods["llmperf"]
    elsewhere = Pod("another-team", benchmark.labels, "same labels, other namespace")
    for server in servers:
        for source in [*pods["model-prep"], *(other for other in servers if other != server), elsewhere]:
            assert not allowed(policies, source, server, VLLM_PORT), (source.name, server.name)


def test_every_pod_resolves_names_through_kube_dns_and_no_other_resolver(fenced):
    _, policies, pods = fenced
    kube_dns = Pod(KUBE_DNS[0], KUBE_DNS[1], "coredns")
    for pod in (pod for group in pods.values() for pod in group):
        for protocol in ("UDP", "TCP"):
            assert allowed(policies, pod, kube_dns, 53, protocol), (pod.name, protocol)
        assert not allowed(policies, pod, "8.8.8.8", 53, "UDP"), pod.name
        assert not allowed(policies, pod, Pod("kube-system", {"k8s-app": "metrics-server"}), 53, "UDP"), pod.name


def test_outbound_traffic_is_https_only(fenced):
    """AWS APIs, the hub and package indexes: all HTTPS. Port 80 and other ports stay closed."""
    _, policies, pods = fenced
    for pod in (pod for group in pods.values() for pod in group):
        assert allowed(policies, pod, "52.216.0.1", 443), pod.name
        assert not allowed(policies, pod, "52.216.0.1", 80), pod.name
        assert not allowed(policies, pod, "10.0.12.7", 22), pod.name


def test_pods_reach_the_pod_identity_agent_exactly_when_they_take_their_role_from_it(fenced):
    recording, policies, pods = fenced
    agent = str(ipaddress.ip_network(POD_IDENTITY_AGENT).network_address)
    for pod in (pod for group in pods.values() for pod in group):
        for port in POD_IDENTITY_PORTS:
            assert allowed(policies, pod, agent, port) == uses_pod_identity(recording), (pod.name, port)


def test_egress_to_a_server_is_admitted_at_its_cluster_ip(fenced):
    """kube-proxy rewrites the ClusterIP after the agent's egress check, so the controller must list
    the Service's ClusterIP. It does only for a Service whose selector the rule's pod selector
    matches and whose targetPort equals the rule's port (a named targetPort goes through a lookup on
    running pods instead)."""
    recording, policies, pods = fenced
    services = [s.inputs for s in recording.of_type("kubernetes:core/v1:Service")]
    checked = 0
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                if "podSelector" not in peer or "namespaceSelector" in peer:
                    continue
                matching = [s for s in services if s["metadata"]["namespace"] == policy["namespace"]
                            and selects(peer["podSelector"], s["spec"]["selector"])]
                assert matching, policy["name"]
                for service in matching:
                    for port in rule["ports"]:
                        assert any(p.get("targetPort") == port["port"] and p.get("protocol", "TCP") == port["protocol"]
                                   for p in service["spec"]["ports"]), (policy["name"], service["metadata"]["name"])
                        checked += 1
    flows = [p for p in policies if p["name"].endswith("-draft-to-target-egress")]
    assert checked == len(pods["vllm"]) + len(flows)  # one Service per server, and each draft's egress to its target


def test_the_evaluator_can_fail():
    """Guards the evaluator: without the two server rules, the benchmark's flow is refused; with a
    rule that allows everything, the flows the fence refuses pass."""
    recording = recorded(STANDALONE[0])
    policies, pods = rendered_policies(recording), rendered_pods(recording)
    benchmark, server = pods["llmperf"][0], pods["vllm"][0]
    without = [p for p in policies if p["name"] not in {"benchmark-to-servers"}]
    assert not allowed(without, benchmark, server, VLLM_PORT)
    without = [p for p in policies if p["name"] not in {"servers-from-benchmark"}]
    assert not allowed(without, benchmark, server, VLLM_PORT)
    open_everything = copy.deepcopy(policies) + [
        {"name": "open", "namespace": server.namespace,
         "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}}]
    assert allowed(open_everything, pods["model-prep"][0], server, VLLM_PORT)
    assert allowed(open_everything, server, "8.8.8.8", 53, "UDP")
