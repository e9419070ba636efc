"""The tests' cluster behind the shared Kubernetes API stand-in (rehearse/kubeapi.py: RBAC as the
API server's authorizer matches it, the scale subresource, pods by label selector, Leases with
optimistic concurrency).

Each Deployment stands for a server: scaling it to 1 brings its stand-in vLLM up (tests/fake_vllm.py)
and gives it a Running pod, unless the server is told to fail, whose pod then shows the container
status of a server that exited twice (the fields of the Pod schema, checked in tests/test_tuner.py).
`evicted` pods stay listed in phase Failed whatever the count, as kubelet leaves an evicted pod.
"""
from __future__ import annotations

from typing import Any

from rehearse.kubeapi import KubernetesApi

TOKEN = "tuner-token"


class FakeKubernetes(KubernetesApi):
    def __init__(self, namespace: str, rules: list[dict], servers: dict[str, Any], labels: dict[str, dict[str, str]],
                 failing: dict[str, str] | None = None):
        """`rules`: what TOKEN may do in `namespace`; `servers`: deployment -> its stand-in
        (FakeVllm); `labels`: deployment -> its pods' labels; `failing`: deployment -> the message
        its container exits with."""
        super().__init__({TOKEN: (namespace, rules)}, self)
        self.namespace, self.servers, self.labels = namespace, servers, labels
        self.failing = failing or {}
        self.evicted: dict[str, list[dict]] = {}
        self.replicas = {name: 0 for name in servers}
        for server in servers.values():
            server.up = False

    @property
    def rules(self) -> list[dict]:
        return self.grants[TOKEN][1]

    @rules.setter
    def rules(self, rules: list[dict]) -> None:
        self.grants[TOKEN] = (self.namespace, rules)

    # -- Workloads --------------------------------------------------------------------------------
    def deployments(self) -> list[str]:
        return list(self.replicas)

    def replica_count(self, deployment: str) -> int:
        return self.replicas[deployment]

    def set_replicas(self, name: str, replicas: int) -> None:
        self.replicas[name] = replicas
        self.servers[name].up = bool(replicas) and name not in self.failing

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        return self.pods(selector)

    # -- what the tests do besides the API --------------------------------------------------------
    def scale(self, name: str, replicas: int) -> None:
        """A server left scaled up (by a killed tuner): not a request the API saw."""
        self.set_replicas(name, replicas)

    def pod(self, name: str) -> dict[str, Any]:
        running = {"running": {"startedAt": "2026-11-25T00:00:00Z"}}
        status: dict[str, Any] = {"phase": "Running", "containerStatuses": [{
            "name": "vllm", "ready": True, "restartCount": 0, "image": "vllm", "imageID": "", "state": running}]}
        if name in self.failing:
            status["containerStatuses"][0].update(ready=False, restartCount=2, state={
                "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"}},
                lastState={"terminated": {"exitCode": 1, "reason": "Error", "message": self.failing[name],
                                          "startedAt": "2026-11-25T00:00:00Z", "finishedAt": "2026-11-25T00:01:00Z"}})
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-5d8f7c9b4-abcde", "namespace": self.namespace, "labels": self.labels[name]},
                "spec": {"containers": [{"name": "vllm", "image": "vllm"}]}, "status": status}

    def pods(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        matching = [name for name in self.replicas if all(self.labels[name].get(k) == v for k, v in selector.items())]
        return ([self.pod(name) for name in matching if self.replicas[name]]
                + [pod for name in matching for pod in self.evicted.get(name, [])])

    def evict(self, name: str) -> None:
        """Leave an evicted pod of `name` behind (phase Failed, reason Evicted)."""
        pod = self.pod(name)
        pod["metadata"]["name"] += "-evicted"
        pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: ephemeral-storage."}
        self.evicted.setdefault(name, []).append(pod)
