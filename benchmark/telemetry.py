"""Where each variant runs, and what its Neuron devices did during a test case.

Placement: the driver reads the variant's vLLM pod (by its labels; a distributed variant's target
and draft pods, each on its own device group, both: locate_variant) and the ResourceClaim the pod
holds from the Kubernetes API, in-cluster, with the pod's service-account token (a namespaced Role
in components/pairing/benchmark_access.py allows get/list of pods and resource.k8s.io resourceclaims). Field
names, checked against the Kubernetes 1.34 schemas (kubernetes-validate): Pod
status.resourceClaimStatuses[].resourceClaimName and spec.nodeName; ResourceClaim
(resource.k8s.io/v1) status.allocation.devices.results[] {request, driver, pool, device}.

Device names: the Neuron DRA driver names devices like "neurondevice3" (Neuron DRA docs) or
"neuron-device-3" (aws-observability/helm-charts PR #356 parses `neuron-device-(\\d+)`); the trailing
number is taken as neuron-monitor's `neuron_device_index`, which Container Insights publishes as the
NeuronDevice dimension (amazon-contributing/opentelemetry-collector-contrib,
receiver/awscontainerinsightreceiver/internal/neuron/neuron_monitor_scraper_config.go relabels
neuron_device_index to NeuronDevice and neuroncore to NeuronCore).

Telemetry: with DRA, Container Insights attributes Neuron metrics to nodes only: it maps a device
to its pod by the device plugin's resource names (aws.amazon.com/neuroncore, neurondevice, neuron),
which DRA allocations lack (amazon-contributing/opentelemetry-collector-contrib@f1178c1:
receiver/awscontainerinsightreceiver/internal/neuron/pod_attribute_decorator.go; read from the
code, not observed). Its node-level metrics node_neuroncore_utilization (percent, 0-100) and
node_neuroncore_memory_usage_total (bytes, per core) carry the dimensions {ClusterName,
InstanceType, InstanceId, NodeName, NeuronDevice, NeuronCore} in namespace ContainerInsights
(aws/amazon-cloudwatch-agent@ab55b8d:translator/translate/otel/exporter/awsemf/, kubernetes.go
getAwsNeuronMetricDeclarations and awsemf_default_kubernetes.yaml; percent:
plugins/processors/awsneuron/README.md). The driver lists those series for the variant's node,
keeps the variant's devices, and reads them for the case's window with GetMetricData: utilization
is the mean over the variant's cores, device memory used the sum over them, per period. Container
Insights collects every 60 s and CloudWatch ingests with a delay, so the read is retried for a
bounded time.
"""
from __future__ import annotations

import json
import math
import os
import re
import ssl
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_HOST, SERVICE_PORT = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
"""Where kubelet tells every container the API server is (client-go rest.InClusterConfig reads the
same two variables, and fails without them)."""
NEURON_DRIVER = "neuron.aws.com"
NAMESPACE = "ContainerInsights"
UTILIZATION = "node_neuroncore_utilization"
MEMORY = "node_neuroncore_memory_usage_total"
PERIOD_S = 60
MAX_QUERIES_PER_CALL = 500  # GetMetricData limit on MetricDataQueries


class KubernetesApi:
    def __init__(self, base_url: str, token: str | Callable[[], str], context: ssl.SSLContext | None = None,
                 timeout_s: float = 10):
        """`token`: the bearer token, or what reads it before each request (a bound token rotates)."""
        self.base_url = base_url.rstrip("/")
        self._token = token if callable(token) else (lambda: token)
        self._context = context
        self._timeout_s = timeout_s

    @classmethod
    def in_cluster(cls) -> "KubernetesApi":
        """As client-go's rest.InClusterConfig: the API server at KUBERNETES_SERVICE_HOST and _PORT
        (an IPv6 address in brackets), trusted through the cluster's CA only, with the service
        account's token read from its file for every request: kubelet rotates a projected bound
        token (refreshed before 80% of its lifetime, one hour by default; Kubernetes docs,
        "Service account token volume projection"), and a study runs for hours."""
        host, port = os.environ.get(SERVICE_HOST), os.environ.get(SERVICE_PORT)
        if not host or not port:
            raise RuntimeError(f"not in a cluster: {SERVICE_HOST} and {SERVICE_PORT} must be set (kubelet sets them)")
        token_file = SERVICE_ACCOUNT_DIR / "token"
        return cls(f"https://{f'[{host}]' if ':' in host else host}:{port}", lambda: token_file.read_text().strip(),
                   ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt")))

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token()}", **({"Content-Type": content_type} if content_type else {})}

    def get(self, path: str) -> dict[str, Any]:
        return self._send(urllib.request.Request(self.base_url + path, headers=self._headers()))

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386), which the API server takes for any resource."""
        return self._send(urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), method="PATCH",
                                                 headers=self._headers("application/merge-patch+json")))

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", path, body)

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A replace: the API server refuses it (409) unless metadata.resourceVersion is current."""
        return self._json("PUT", path, body)

    def _json(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send(urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), method=method,
                                                 headers=self._headers("application/json")))

    def _send(self, request: urllib.request.Request) -> dict[str, Any]:
        with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._context) as response:
            return json.loads(response.read())


def device_index(name: str) -> str | None:
    match = re.search(r"(\d+)$", name)
    return match[1] if match else None


def list_pods(api: KubernetesApi, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
    """The namespace's pods whose labels match `selector` (a list request with a labelSelector)."""
    query = urllib.parse.urlencode({"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))})
    return api.get(f"/api/v1/namespaces/{namespace}/pods?{query}")["items"]


def locate(api: KubernetesApi, namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    """The variant's running pod, its node and its Neuron devices; {"error": ...} if unknown."""
    try:
        pods = list_pods(api, namespace, selector)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")]
        if len(running) != 1:
            return {"error": f"{len(running)} running pods match {selector}"}
        pod = running[0]
        devices = []
        for status in (pod["status"].get("resourceClaimStatuses") or []):
            if not status.get("resourceClaimName"):
                continue
            claim = api.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{status['resourceClaimName']}")
            allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            devices += [{"pool": r["pool"], "device": r["device"]} for r in allocation.get("results") or []
                        if r.get("driver") == NEURON_DRIVER]
    except (OSError, ValueError, KeyError) as error:
        return {"error": f"Kubernetes API: {type(error).__name__}: {error}"}
    indices = sorted({i for i in (device_index(d["device"]) for d in devices) if i is not None}, key=int)
    if not indices:
        return {"error": f"pod {pod['metadata']['name']} holds no {NEURON_DRIVER} device"}
    return {"pod": pod["metadata"]["name"], "node": pod["spec"]["nodeName"], "devices": devices, "neuronDevices": indices}


def locate_variant(api: KubernetesApi, namespace: str, servers: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the variant's pods run (its run config's "servers"): one pod's placement as `locate`
    gives it; for a variant of several pods (a distributed variant's target and draft, each on a
    device group of its own), each pod's under its part: {"servers": {part: placement}}."""
    if len(servers) == 1:
        return locate(api, namespace, servers[0]["podSelector"])
    return {"servers": {server["part"]: locate(api, namespace, server["podSelector"]) for server in servers}}


def _series(cloudwatch: Any, metric: str, cluster: str, node: str, devices: set[str]) -> list[list[dict[str, str]]]:
    """Dimension sets of `metric` for the node's cores on `devices` (ListMetrics returns every
    dimension set that contains the filter's dimensions), each once."""
    found: dict[frozenset, list[dict[str, str]]] = {}
    for page in cloudwatch.get_paginator("list_metrics").paginate(
            Namespace=NAMESPACE, MetricName=metric,
            Dimensions=[{"Name": "ClusterName", "Value": cluster}, {"Name": "NodeName", "Value": node}]):
        for entry in page["Metrics"]:
            dims = {d["Name"]: d["Value"] for d in entry["Dimensions"]}
            if dims.get("NeuronDevice") in devices and "NeuronCore" in dims:
                found[frozenset(dims.items())] = entry["Dimensions"]
    return list(found.values())


def _read(cloudwatch: Any, metric: str, series: list[list[dict[str, str]]], start: datetime, end: datetime) -> dict[float, list[float]]:
    """Per-period averages of each series, grouped by timestamp (epoch seconds)."""
    points: dict[float, list[float]] = {}
    for offset in range(0, len(series), MAX_QUERIES_PER_CALL):
        queries = [{"Id": f"m{offset + i}", "ReturnData": True,
                    "MetricStat": {"Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dims},
                                   "Period": PERIOD_S, "Stat": "Average"}}
                   for i, dims in enumerate(series[offset:offset + MAX_QUERIES_PER_CALL])]
        for page in cloudwatch.get_paginator("get_metric_data").paginate(
                MetricDataQueries=queries, StartTime=start, EndTime=end):
            for result in page["MetricDataResults"]:
                for stamp, value in zip(result["Timestamps"], result["Values"]):
                    points.setdefault(stamp.timestamp(), []).append(value)
    return points


def collect(cloudwatch: Any, cluster: str, placement: dict[str, Any], start: float, end: float, *,
            max_wait_s: float = 300, poll_s: float = 30, sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """Neuron utilization and device memory of the variant's devices between `start` and `end`
    (epoch seconds); status "ok", "partial" (the window's last period never arrived) or
    "unavailable" with a reason. A variant of several pods (locate_variant): each pod's devices
    under its part, {"status": ..., "servers": {part: ...}}, "partial" when the parts differ."""
    if "servers" in placement:
        parts = {part: collect(cloudwatch, cluster, where, start, end, max_wait_s=max_wait_s, poll_s=poll_s, sleep=sleep, clock=clock)
                 for part, where in placement["servers"].items()}
        statuses = {data["status"] for data in parts.values()}
        return {"status": statuses.pop() if len(statuses) == 1 else "partial", "servers": parts}
    if "error" in placement:
        return {"status": "unavailable", "reason": f"variant not located: {placement['error']}"}
    devices = set(placement["neuronDevices"])
    series = {m: _series(cloudwatch, m, cluster, placement["node"], devices) for m in (UTILIZATION, MEMORY)}
    if not series[UTILIZATION] and not series[MEMORY]:
        return {"status": "unavailable", "reason": f"no {NAMESPACE} Neuron metrics for node {placement['node']} devices "
                f"{sorted(devices, key=int)} (is the CloudWatch Observability add-on with Neuron monitoring installed?)"}
    first = math.floor(start / PERIOD_S) * PERIOD_S
    last_needed = math.floor(end / PERIOD_S) * PERIOD_S - PERIOD_S
    window = (datetime.fromtimestamp(first, timezone.utc), datetime.fromtimestamp(end + PERIOD_S, timezone.utc))
    deadline = clock() + max_wait_s
    while True:
        data = {m: _read(cloudwatch, m, s, *window) for m, s in series.items()}
        stamps = [t for points in data.values() for t in points if t <= end]
        if (stamps and max(stamps) >= last_needed) or clock() >= deadline:
            break
        sleep(poll_s)
    utilization = [[t, sum(v) / len(v)] for t, v in sorted(data[UTILIZATION].items()) if first <= t <= end]
    memory = [[t, sum(v)] for t, v in sorted(data[MEMORY].items()) if first <= t <= end]
    complete = bool(stamps) and max(stamps) >= last_needed
    return {
        "status": "ok" if complete else "partial", "node": placement["node"], "neuronDevices": sorted(devices, key=int),
        "cores": len(series[UTILIZATION]), "periodSeconds": PERIOD_S,
        "utilizationPercent": utilization, "memoryUsedBytes": memory,
    }
