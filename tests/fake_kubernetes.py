"""A Kubernetes API on 127.0.0.1 with just what a study's tuner calls: the scale subresource of
Deployments (PATCH, as a JSON merge patch), pods by label selector (GET) and Leases (GET, POST to
create, PUT to replace, refused with 409 Conflict unless it carries the current resourceVersion,
as the API server's optimistic concurrency does), each authorized
against RBAC rules the way the API server's RBAC authorizer matches them (apiGroup, resource with
its subresource, verb, resourceNames), so a rule the tuner lacks answers 403 here as it would there.

Each Deployment stands for a server: scaling it to 1 brings its stand-in vLLM up (tests/fake_vllm.py)
and gives it a Running pod, unless the server is told to fail, whose pod then shows the container
status of a server that exited twice (the fields of the Pod schema, checked in tests/test_tuner.py).
`evicted` pods stay listed in phase Failed whatever the count, as kubelet leaves an evicted pod.
"""
from __future__ import annotations

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from .local_server import LocalServer

TOKEN = "tuner-token"
_SCALE = re.compile(r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/deployments/(?P<name>[^/]+)/scale$")
_PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$")
_LEASES = re.compile(r"^/apis/coordination.k8s.io/v1/namespaces/(?P<ns>[^/]+)/leases(?:/(?P<name>[^/]+))?$")


def allowed(rules: list[dict], group: str, resource: str, verb: str, name: str | None) -> bool:
    """RBAC: some rule names the group, the resource ("deployments/scale" for the subresource),
    the verb, and, if it lists resourceNames, this name (a list request has none, so such a rule
    never allows list)."""
    for rule in rules:
        names = rule.get("resourceNames")
        if (group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
                and (not names or name in names)):
            return True
    return False


class FakeKubernetes(LocalServer):
    def __init__(self, namespace: str, rules: list[dict], servers: dict[str, Any], labels: dict[str, dict[str, str]],
                 failing: dict[str, str] | None = None):
        """`servers`: deployment -> its stand-in (FakeVllm); `labels`: deployment -> its pods'
        labels; `failing`: deployment -> the message its container exits with."""
        self.namespace, self.rules, self.servers, self.labels = namespace, rules, servers, labels
        self.failing = failing or {}
        self.evicted: dict[str, list[dict]] = {}
        self.replicas = {name: 0 for name in servers}
        self.history: list[frozenset[str]] = []
        """The deployments at one replica after every scale request, in order."""
        self.requests: list[tuple[str, str, dict]] = []
        self.forbidden: list[str] = []
        self.leases: dict[str, dict] = {}
        self.lease_holders: list[str] = []
        """Every holderIdentity a lease was written with, in order."""
        self.version = 0
        self.lock = threading.Lock()
        for server in servers.values():
            server.up = False

    def scale(self, name: str, replicas: int) -> None:
        with self.lock:
            self.replicas[name] = replicas
            self.servers[name].up = bool(replicas) and name not in self.failing
            self.history.append(frozenset(n for n, r in self.replicas.items() if r))

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
        with self.lock:
            matching = [name for name in self.replicas if all(self.labels[name].get(k) == v for k, v in selector.items())]
            return ([self.pod(name) for name in matching if self.replicas[name]]
                    + [pod for name in matching for pod in self.evicted.get(name, [])])

    def write_lease(self, name: str, body: dict, create: bool) -> int:
        """Create or replace a lease; the HTTP status the API server would answer."""
        with self.lock:
            current = self.leases.get(name)
            if create and current is not None:
                return 409
            if not create and current is None:
                return 404
            if not create and body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return 409
            self.version += 1
            self.leases[name] = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
            self.lease_holders.append(body["spec"].get("holderIdentity") or "")
            return 201 if create else 200

    def evict(self, name: str) -> None:
        """Leave an evicted pod of `name` behind (phase Failed, reason Evicted)."""
        pod = self.pod(name)
        pod["metadata"]["name"] += "-evicted"
        pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: ephemeral-storage."}
        self.evicted.setdefault(name, []).append(pod)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKubernetes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self, group: str, resource: str, verb: str, name: str | None, namespace: str) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.answer(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
            return False
        if namespace != self.fake.namespace or not allowed(self.fake.rules, group, resource, verb, name):
            self.fake.forbidden.append(f"{verb} {resource} {name}")
            self.answer(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
            return False
        return True

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        scale = _SCALE.match(url.path)
        if scale:
            if self.authorized("apps", "deployments/scale", "get", scale["name"], scale["ns"]):
                self.fake.requests.append(("GET", url.path, {}))
                replicas = self.fake.replicas[scale["name"]]
                self.answer(200, {"kind": "Scale", "apiVersion": "autoscaling/v1", "spec": {"replicas": replicas},
                                  "status": {"replicas": replicas}})
            return
        lease = _LEASES.match(url.path)
        if lease and lease["name"]:
            if self.authorized("coordination.k8s.io", "leases", "get", lease["name"], lease["ns"]):
                found = self.fake.leases.get(lease["name"])
                self.answer(200 if found else 404, found or {"kind": "Status", "code": 404, "reason": "NotFound"})
            return
        match = _PODS.match(url.path)
        if not match:
            self.answer(404, {"kind": "Status", "code": 404})
            return
        if self.authorized("", "pods", "list", None, match["ns"]):
            query = urllib.parse.parse_qs(url.query).get("labelSelector", [""])[0]
            selector = dict(term.split("=", 1) for term in query.split(",") if term)
            self.fake.requests.append(("GET", url.path, selector))
            self.answer(200, {"kind": "PodList", "apiVersion": "v1", "items": self.fake.pods(selector)})

    def do_PATCH(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        match = _SCALE.match(url.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not match or self.headers.get("Content-Type") != "application/merge-patch+json":
            self.answer(415 if match else 404, {"kind": "Status"})
            return
        if self.authorized("apps", "deployments/scale", "patch", match["name"], match["ns"]):
            self.fake.requests.append(("PATCH", self.path, body))
            replicas = body["spec"]["replicas"]
            self.fake.scale(match["name"], replicas)
            self.answer(200, {"kind": "Scale", "apiVersion": "autoscaling/v1",
                              "metadata": {"name": match["name"], "namespace": match["ns"]},
                              "spec": {"replicas": replicas}, "status": {"replicas": replicas}})

    def do_POST(self) -> None:
        self.write_lease(create=True)

    def do_PUT(self) -> None:
        self.write_lease(create=False)

    def write_lease(self, create: bool) -> None:
        match = _LEASES.match(urllib.parse.urlsplit(self.path).path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not match or bool(match["name"]) == create or self.headers.get("Content-Type") != "application/json":
            self.answer(404, {"kind": "Status", "code": 404})
            return
        name = body["metadata"]["name"] if create else match["name"]
        if self.authorized("coordination.k8s.io", "leases", "create" if create else "update", None if create else name, match["ns"]):
            self.fake.requests.append(("POST" if create else "PUT", self.path, body))
            status = self.fake.write_lease(name, body, create)
            self.answer(status, self.fake.leases[name] if status < 300 else {"kind": "Status", "code": status})


FakeKubernetes.handler = _Handler
