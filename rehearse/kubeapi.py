"""A Kubernetes API on 127.0.0.1 with just what the benchmark and a study's tuner call, each request
authorized by RBAC rules the way the API server's RBAC authorizer matches them; used by the
rehearsal (in front of its controllers, with the rendered Roles, over TLS) and by the tests (in
front of stand-in servers, tests/fake_kubernetes.py).

- the scale subresource of Deployments: GET, and PATCH as a JSON merge patch;
- pods by label selector (GET, a list);
- Leases (coordination.k8s.io/v1): GET, POST to create, PUT to replace, refused with 409 Conflict
  unless the body carries the current resourceVersion, as the API server's optimistic concurrency
  does.

A request's bearer token names a service account (`grants`: token -> its namespace and the rules
of the Roles bound to it); no token, or an unknown one, answers 401; a rule the caller lacks, or
another namespace, 403, as the API server would. What is scaled and which pods exist is asked of
`workloads` (the `Workloads` protocol), so the same authorizer and lease semantics serve both.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import threading
import urllib.parse
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

from .localserver import LocalServer

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where kubelet mounts a pod's service-account token, the cluster's CA and the namespace
(Kubernetes docs, "Configure Service Accounts for Pods")."""
API_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
"""The API server's in-cluster names, in its serving certificate (kubeadm's apiserver cert SANs)."""
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


def service_account_token(namespace: str, account: str) -> str:
    """The token the rehearsal's kubelet projects for a service account (opaque, as a bound token is)."""
    return hashlib.sha256(f"{namespace}/{account}".encode()).hexdigest()


def grants_of(manifests: list[dict[str, Any]]) -> dict[str, tuple[str, list[dict]]]:
    """Rendered ServiceAccounts, Roles and RoleBindings -> token -> (namespace, the rules of every
    Role bound to that service account in its namespace)."""
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d.get("rules") or [] for d in manifests if d["kind"] == "Role"}
    grants: dict[str, tuple[str, list[dict]]] = {}
    for binding in (d for d in manifests if d["kind"] == "RoleBinding"):
        namespace = binding["metadata"]["namespace"]
        if binding["roleRef"]["kind"] != "Role":
            raise ValueError(f"RoleBinding {binding['metadata']['name']} binds a {binding['roleRef']['kind']}: not rehearsed")
        rules = roles[(namespace, binding["roleRef"]["name"])]
        for subject in binding.get("subjects") or []:
            if subject["kind"] == "ServiceAccount":
                account_ns = subject.get("namespace", namespace)
                token = service_account_token(account_ns, subject["name"])
                grants[token] = (account_ns, grants.get(token, (account_ns, []))[1] + rules)
    return grants


def serving_certificate(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a serving certificate it signed for the API server's in-cluster names and
    127.0.0.1: (ca.crt, tls.crt, tls.key) in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rehearsal-kubernetes-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
          .not_valid_after(now + timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    names = [x509.DNSName(n) for n in API_NAMES] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "ca.crt", folder / "tls.crt", folder / "tls.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class Workloads(Protocol):
    """What the API asks of whoever runs the servers."""

    def deployments(self) -> list[str]: ...

    def replica_count(self, deployment: str) -> int: ...

    def set_replicas(self, deployment: str, replicas: int) -> None: ...

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]: ...


class KubernetesApi(LocalServer):
    """The API server, in a thread; a context manager. `tls`: (certificate, key) to serve HTTPS."""

    owner_attribute = "api"

    def __init__(self, grants: dict[str, tuple[str, list[dict]]], workloads: Workloads, tls: tuple[Path, Path] | None = None,
                 on_scale: Any = None):
        """`on_scale(deployment, replicas)`: told of every scale request allowed (the rehearsal's timeline)."""
        self.grants, self.workloads, self.tls, self.on_scale = grants, workloads, tls, on_scale
        self.handler = _Handler  # below: it names this class
        self.history: list[frozenset[str]] = []
        """The deployments at one replica or more after every scale request, in order."""
        self.requests: list[tuple[str, str, dict]] = []
        self.forbidden: list[str] = []
        self.leases: dict[str, dict] = {}
        self.lease_holders: list[str] = []
        """Every holderIdentity a lease was written with, in order."""
        self.version = 0
        self.lock = threading.Lock()

    def scale_request(self, name: str, replicas: int) -> None:
        with self.lock:
            self.workloads.set_replicas(name, replicas)
            self.history.append(frozenset(n for n in self.workloads.deployments() if self.workloads.replica_count(n)))
        if self.on_scale:
            self.on_scale(name, replicas)

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


class _Handler(BaseHTTPRequestHandler):
    api: KubernetesApi

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
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in self.api.grants:
            self.answer(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
            return False
        account_namespace, rules = self.api.grants[token]
        if namespace != account_namespace or not allowed(rules, group, resource, verb, name):
            self.api.forbidden.append(f"{verb} {resource} {name}")
            self.answer(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
            return False
        return True

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        scale = _SCALE.match(url.path)
        if scale:
            if self.authorized("apps", "deployments/scale", "get", scale["name"], scale["ns"]):
                if scale["name"] not in self.api.workloads.deployments():
                    self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return
                self.api.requests.append(("GET", url.path, {}))
                replicas = self.api.workloads.replica_count(scale["name"])
                self.answer(200, {"kind": "Scale", "apiVersion": "autoscaling/v1", "spec": {"replicas": replicas},
                                  "status": {"replicas": replicas}})
            return
        lease = _LEASES.match(url.path)
        if lease and lease["name"]:
            if self.authorized("coordination.k8s.io", "leases", "get", lease["name"], lease["ns"]):
                found = self.api.leases.get(lease["name"])
                self.answer(200 if found else 404, found or {"kind": "Status", "code": 404, "reason": "NotFound"})
            return
        match = _PODS.match(url.path)
        if not match:
            self.answer(404, {"kind": "Status", "code": 404})
            return
        if self.authorized("", "pods", "list", None, match["ns"]):
            query = urllib.parse.parse_qs(url.query).get("labelSelector", [""])[0]
            selector = dict(term.split("=", 1) for term in query.split(",") if term)
            self.api.requests.append(("GET", url.path, selector))
            self.answer(200, {"kind": "PodList", "apiVersion": "v1", "items": self.api.workloads.list_pods(match["ns"], selector)})

    def do_PATCH(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        match = _SCALE.match(url.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not match or self.headers.get("Content-Type") != "application/merge-patch+json":
            self.answer(415 if match else 404, {"kind": "Status"})
            return
        if self.authorized("apps", "deployments/scale", "patch", match["name"], match["ns"]):
            self.api.requests.append(("PATCH", self.path, body))
            replicas = body["spec"]["replicas"]
            self.api.scale_request(match["name"], replicas)
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
            self.api.requests.append(("POST" if create else "PUT", self.path, body))
            status = self.api.write_lease(name, body, create)
            self.answer(status, self.api.leases[name] if status < 300 else {"kind": "Status", "code": status})
