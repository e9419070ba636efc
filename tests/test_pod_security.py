"""Every rendered workload meets the Pod Security level its namespace enforces, and the ones this
program wrote for itself meet "restricted": the benchmark, the model preparation Jobs and the
publisher beside each server. The vLLM server meets baseline: root, for the reason its security
context states (components/pairing/vllm_variant.py)."""
from __future__ import annotations

import copy

import pytest

from .conftest import STANDALONE, recorded
from .pod_security import violations

KINDS = {"kubernetes:apps/v1:Deployment": lambda spec: spec["template"]["spec"],
         "kubernetes:batch/v1:Job": lambda spec: spec["template"]["spec"],
         "kubernetes:batch/v1:CronJob": lambda spec: spec["jobTemplate"]["spec"]["template"]["spec"]}


def workloads(recording):
    for kind, pod_of in KINDS.items():
        for workload in recording.of_type(kind):
            yield workload, pod_of(workload.inputs["spec"])


def namespace_levels(recording) -> dict[str, dict[str, str]]:
    return {n.inputs["metadata"]["name"]: {mode: n.inputs["metadata"]["labels"].get(f"pod-security.kubernetes.io/{mode}", "privileged")
                                           for mode in ("enforce", "warn", "audit")}
            for n in recording.of_type("kubernetes:core/v1:Namespace")}


@pytest.mark.parametrize("stack", STANDALONE)
def test_every_workload_meets_the_level_its_namespace_enforces(stack):
    recording = recorded(stack)
    levels = namespace_levels(recording)
    checked = 0
    for workload, pod in workloads(recording):
        namespace = workload.inputs["metadata"]["namespace"]
        level = levels[namespace]
        assert level == {"enforce": "baseline", "warn": "restricted", "audit": "restricted"}, namespace
        assert violations(pod, level["enforce"]) == [], workload.name
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("stack", STANDALONE)
def test_only_the_servers_vllm_container_falls_short_of_restricted_and_only_by_running_as_root(stack):
    for workload, pod in workloads(recorded(stack)):
        found = violations(pod, "restricted")
        if workload.inputs["kind"] == "Deployment":
            assert found == ["vllm.runAsNonRoot"], workload.name
        else:
            assert found == [], workload.name


def test_the_checks_can_fail():
    """Guards the checker: each rule this program relies on fires on a pod that breaks it."""
    _, pod = next(workloads(recorded(STANDALONE[0])))
    pod = copy.deepcopy(pod)
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/etc"}})
    pod["containers"][0]["securityContext"] = {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}
    pod["securityContext"] = {"seccompProfile": {"type": "Unconfined"}}
    assert set(violations(pod, "baseline")) >= {"volumes[host].hostPath", "vllm.privileged", "vllm.capabilities.add ['SYS_ADMIN']",
                                                "pod.seccompProfile Unconfined"}
    restricted = violations({"containers": [{"name": "c"}], "volumes": [{"name": "x", "nfs": {}}]}, "restricted")
    assert restricted == ["volumes[x] type", "c.allowPrivilegeEscalation", "c.runAsNonRoot", "c.seccompProfile", "c.capabilities.drop ALL"]


# --- opt-ins: a non-root server, and a capability added back ------------------------------------

STACK = "qwen3-32b-qwen3-1.7b"


def opted_in(serving: dict):
    """The stack planned with extra `serving` keys."""
    from offline.stacks import load_stack, run_stack

    base = load_stack(STACK).config["sd-trn2:serving"]
    return run_stack(load_stack(STACK, {"sd-trn2:serving": {**base, **serving}}))


def test_a_server_opted_into_a_user_runs_as_it_and_meets_restricted():
    """serving.runAs: the pod runs as that user and group, its volumes are the group's (fsGroup),
    and nothing else falls short of "restricted", so a cluster enforcing it can try the servers.
    Unverified on Neuron hardware (docs/security.md, "Pods")."""
    recording = opted_in({"runAs": {"user": 1000, "group": 2000}})
    servers = [(w, pod) for w, pod in workloads(recording) if w.inputs["kind"] == "Deployment"]
    assert servers
    for workload, pod in servers:
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                                          "runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 2000}, workload.name
        assert violations(pod, "restricted") == [], workload.name
        # The publisher keeps its own user: its container context names it.
        assert pod["initContainers"][0]["securityContext"]["runAsUser"] != 1000


def test_a_capability_added_back_reaches_only_the_vllm_container_and_the_namespace_admits_it():
    """serving.addCapabilities: everything else is still dropped. One outside Pod Security
    baseline's list can only be admitted by a namespace that enforces no level (privileged); warn
    and audit stay at restricted, so each admission is still reported."""
    recording = opted_in({"addCapabilities": ["IPC_LOCK"]})
    levels = namespace_levels(recording)
    for workload, pod in workloads(recording):
        if workload.inputs["kind"] == "Deployment":
            vllm = pod["containers"][0]
            assert vllm["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
            assert levels[workload.inputs["metadata"]["namespace"]] == {"enforce": "privileged", "warn": "restricted",
                                                                        "audit": "restricted"}
    within_baseline = opted_in({"addCapabilities": ["CHOWN"]})
    assert {level["enforce"] for level in namespace_levels(within_baseline).values()} == {"baseline"}
    for workload, pod in workloads(within_baseline):
        assert violations(pod, "baseline") == [], workload.name
