"""benchmark.telemetry: the variant's pod and devices from a Kubernetes API on 127.0.0.1 (objects
checked against the 1.34 schemas), and its Neuron metrics from moto's CloudWatch."""
import json
import threading
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import kubernetes_validate
import pytest
from moto import mock_aws

from benchmark import telemetry

TOKEN = "service-account-token"
SELECTOR = {"app.kubernetes.io/name": "vllm", "sd-trn2/variant": "sd"}


def pod(name: str, phase: str = "Running", claim: str | None = "vllm-sd-0-neuron-x7k2p") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "inference", "labels": SELECTOR},
            "spec": {"nodeName": "ip-10-64-1-17.us-east-2.compute.internal", "containers": [{"name": "vllm", "image": "i"}],
                     "resourceClaims": [{"name": "neuron", "resourceClaimTemplateName": "neuron-8-devices"}]},
            "status": {"phase": phase, "resourceClaimStatuses": [{"name": "neuron", "resourceClaimName": claim}] if claim else []}}


def claim(devices: list[str], driver: str = "neuron.aws.com") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "vllm-sd-0-neuron-x7k2p", "namespace": "inference"},
            "spec": {"devices": {"requests": [{"name": "neurons", "exactly": {"deviceClassName": "neuron.aws.com", "count": len(devices)}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "neurons", "driver": driver, "pool": "ip-10-64-1-17", "device": d} for d in devices]}}}}


class FakeKubernetes:
    """Answers the two reads the driver makes, only with the right bearer token."""

    def __init__(self, pods: list[dict], claims: dict[str, dict]):
        for obj in pods + list(claims.values()):
            kubernetes_validate.validate(obj, "1.34.0", strict=True)  # fixture field names are the API's
        self.pods, self.claims, self.paths = pods, claims, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.paths.append(self.path)
                url = urllib.parse.urlsplit(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.reply(403, {"kind": "Status", "code": 403})
                if url.path == "/api/v1/namespaces/inference/pods":
                    wanted = dict(p.split("=") for p in urllib.parse.parse_qs(url.query)["labelSelector"][0].split(","))
                    return self.reply(200, {"kind": "PodList", "items": [p for p in fake.pods
                                                                         if wanted.items() <= p["metadata"]["labels"].items()]})
                name = url.path.rsplit("/", 1)[-1]
                if url.path.startswith("/apis/resource.k8s.io/v1/namespaces/inference/resourceclaims/") and name in fake.claims:
                    return self.reply(200, fake.claims[name])
                return self.reply(404, {"kind": "Status", "code": 404})

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def api(self, token: str = TOKEN) -> telemetry.KubernetesApi:
        return telemetry.KubernetesApi(f"http://127.0.0.1:{self.server.server_address[1]}", token, timeout_s=5)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def kubernetes():
    made = []

    def make(pods, claims):
        made.append(FakeKubernetes(pods, claims))
        return made[-1]

    yield make
    for fake in made:
        fake.close()


def test_the_variants_node_and_devices_come_from_its_pod_and_claim(kubernetes):
    fake = kubernetes([pod("vllm-sd-0", phase="Pending"), pod("vllm-sd-1")],
                      {"vllm-sd-0-neuron-x7k2p": claim(["neurondevice9", "neurondevice8"])})
    placement = telemetry.locate(fake.api(), "inference", SELECTOR)
    assert placement == {"pod": "vllm-sd-1", "node": "ip-10-64-1-17.us-east-2.compute.internal", "neuronDevices": ["8", "9"],
                         "devices": [{"pool": "ip-10-64-1-17", "device": "neurondevice9"}, {"pool": "ip-10-64-1-17", "device": "neurondevice8"}]}
    assert fake.paths[0] == "/api/v1/namespaces/inference/pods?labelSelector=app.kubernetes.io%2Fname%3Dvllm%2Csd-trn2%2Fvariant%3Dsd"


def test_what_cannot_be_located_is_said_not_raised(kubernetes):
    fake = kubernetes([pod("vllm-sd-0")], {"vllm-sd-0-neuron-x7k2p": claim(["gpu0"], driver="gpu.example.com")})
    assert telemetry.locate(fake.api(), "inference", SELECTOR) == {"error": "pod vllm-sd-0 holds no neuron.aws.com device"}
    assert telemetry.locate(fake.api("expired"), "inference", SELECTOR)["error"].startswith("Kubernetes API: HTTPError: HTTP Error 403")
    none = kubernetes([pod("vllm-sd-0", phase="Pending")], {})
    assert telemetry.locate(none.api(), "inference", SELECTOR)["error"] == f"0 running pods match {SELECTOR}"


T0 = 1_795_000_040.0  # a case from 20 s past a minute to ...
T1 = T0 + 150         # ... 2.5 minutes later: periods at T0-20, +60, +120 (the last one covers T1)
PLACEMENT = {"pod": "vllm-sd-1", "node": "ip-10-64-1-17", "neuronDevices": ["8", "9"], "devices": []}


def put_neuron_metrics(cloudwatch, node: str, device: str, utilization: float, memory: float, periods: int = 3):
    for core in range(4):
        dims = [{"Name": "ClusterName", "Value": "sd-test"}, {"Name": "InstanceType", "Value": "trn2.48xlarge"},
                {"Name": "InstanceId", "Value": "i-0abc"}, {"Name": "NodeName", "Value": node},
                {"Name": "NeuronDevice", "Value": device}, {"Name": "NeuronCore", "Value": str(int(device) * 4 + core)}]
        cloudwatch.put_metric_data(Namespace="ContainerInsights", MetricData=[
            {"MetricName": name, "Dimensions": dims, "Timestamp": datetime.fromtimestamp(T0 - 20 + 60 * i, timezone.utc),
             "Value": value + i, "Unit": unit}
            for i in range(periods)
            for name, value, unit in (("node_neuroncore_utilization", utilization + core, "Percent"),
                                      ("node_neuroncore_memory_usage_total", memory, "Bytes"))])


@mock_aws
def test_utilization_and_memory_of_the_variants_devices_only(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-2")
    put_neuron_metrics(cloudwatch, "ip-10-64-1-17", "8", utilization=40.0, memory=1e9)
    put_neuron_metrics(cloudwatch, "ip-10-64-1-17", "9", utilization=60.0, memory=2e9)
    put_neuron_metrics(cloudwatch, "ip-10-64-1-17", "3", utilization=99.0, memory=9e9)  # the other variant's device
    put_neuron_metrics(cloudwatch, "ip-10-64-9-99", "8", utilization=99.0, memory=9e9)  # another node
    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, T0, T1, sleep=lambda s: pytest.fail("data was there"))
    assert data["status"] == "ok" and data["cores"] == 8 and data["neuronDevices"] == ["8", "9"]
    # Per period: the mean over the 8 cores (40..43 and 60..63, +i per period), the sum of their memory.
    assert data["utilizationPercent"] == [[T0 - 20 + 60 * i, 51.5 + i] for i in range(3)]
    assert data["memoryUsedBytes"] == [[T0 - 20 + 60 * i, 4 * (1e9 + i) + 4 * (2e9 + i)] for i in range(3)]


@mock_aws
def test_a_late_period_is_waited_for_within_a_bound_and_missing_metrics_are_explained(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-2")
    missing = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, T0, T1)
    assert missing["status"] == "unavailable" and "CloudWatch Observability add-on" in missing["reason"]
    assert telemetry.collect(cloudwatch, "sd-test", {"error": "0 running pods"}, T0, T1) == {
        "status": "unavailable", "reason": "variant not located: 0 running pods"}
    put_neuron_metrics(cloudwatch, "ip-10-64-1-17", "8", utilization=40.0, memory=1e9, periods=1)  # ingestion lags
    clock, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        clock[0] += seconds

    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, T0, T1, max_wait_s=90, poll_s=30, sleep=sleep, clock=lambda: clock[0])
    assert data["status"] == "partial" and sleeps == [30, 30, 30] and len(data["utilizationPercent"]) == 1
