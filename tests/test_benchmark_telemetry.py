"""benchmark.telemetry: the variant's pod and devices from a Kubernetes API on 127.0.0.1 (objects
checked against the 1.34 schemas), and its Neuron metrics from moto's CloudWatch."""
import io
import json
import ssl
import threading
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import kubernetes_validate
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
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


def test_device_index_is_the_trailing_number_of_the_dra_device_name():
    assert telemetry.device_index("neurondevice3") == "3"
    assert telemetry.device_index("neuron-device-12") == "12"
    assert telemetry.device_index("neurondevice") is None  # no number: no NeuronDevice dimension to match


class Spy:
    """Stands in for urllib.request.urlopen and keeps what each read asked for."""

    def __init__(self, body: bytes = b'{"kind": "PodList", "items": []}'):
        self.body, self.calls = body, []

    def __call__(self, request, **kwargs):
        self.calls.append((request.full_url, dict(request.header_items()), kwargs))
        return io.BytesIO(self.body)


def test_a_read_sends_the_token_and_is_bounded_in_time(monkeypatch):
    spy = Spy()
    monkeypatch.setattr(urllib.request, "urlopen", spy)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # A base URL with a path (an API proxy) keeps all of it but the trailing slash.
    proxied = telemetry.KubernetesApi("http://127.0.0.1:8001/clusters/TRN2-X/", "tok", context)
    assert proxied.get("/api/v1/namespaces/inference/pods") == {"kind": "PodList", "items": []}
    telemetry.KubernetesApi("http://127.0.0.1:8001", "tok", timeout_s=2.5).get("/apis")
    assert spy.calls == [
        ("http://127.0.0.1:8001/clusters/TRN2-X/api/v1/namespaces/inference/pods", {"Authorization": "Bearer tok"},
         {"timeout": 10, "context": context}),
        ("http://127.0.0.1:8001/apis", {"Authorization": "Bearer tok"}, {"timeout": 2.5, "context": None}),
    ]


def self_signed_ca(common_name: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def test_in_cluster_the_api_is_reached_with_the_service_accounts_token_and_ca(monkeypatch, tmp_path):
    """Where kubelet says the API server is (KUBERNETES_SERVICE_HOST/PORT, an IPv6 one in
    brackets), trusted through the cluster's CA only, with the token read again for each request:
    kubelet rotates a bound token, and a study outlives one."""
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.sa\n")
    (tmp_path / "ca.crt").write_bytes(self_signed_ca("kubernetes"))
    monkeypatch.setattr(telemetry, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    spy = Spy()
    monkeypatch.setattr(urllib.request, "urlopen", spy)
    api = telemetry.KubernetesApi.in_cluster()
    api.get("/api/v1/namespaces/inference/pods")
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.rotated\n")
    api.get("/api/v1/namespaces/inference/pods")
    [(url, headers, kwargs), (_, rotated, _)] = spy.calls
    assert (url, headers, kwargs["timeout"]) == ("https://10.100.0.1:443/api/v1/namespaces/inference/pods",
                                                 {"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.sa"}, 10)
    assert rotated == {"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.rotated"}
    context = kwargs["context"]
    # The server is trusted through the cluster's CA only, and its name is checked.
    assert [dict(field[0] for field in ca["subject"]) for ca in context.get_ca_certs()] == [{"commonName": "kubernetes"}]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1")
    assert telemetry.KubernetesApi.in_cluster().base_url == "https://[fd00:10:96::1]:443"
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    with pytest.raises(RuntimeError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"):
        telemetry.KubernetesApi.in_cluster()


def test_a_terminating_pod_is_not_the_variants_pod(kubernetes):
    leaving = pod("vllm-sd-0")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-20T09:00:00Z"
    fake = kubernetes([leaving, pod("vllm-sd-1")], {"vllm-sd-0-neuron-x7k2p": claim(["neurondevice3"])})
    assert telemetry.locate(fake.api(), "inference", SELECTOR)["pod"] == "vllm-sd-1"


def test_devices_come_from_every_allocated_claim_in_numeric_order(kubernetes):
    holder = pod("vllm-sd-0")
    holder["spec"]["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": "neuron-8-devices"} for n in ("scratch", "neuron", "more")]
    holder["status"]["resourceClaimStatuses"] = [  # a claim the pod did not need has no ResourceClaim
        {"name": "scratch"}, {"name": "neuron", "resourceClaimName": "vllm-sd-0-neuron-a"},
        {"name": "more", "resourceClaimName": "vllm-sd-0-more-b"}]
    fake = kubernetes([holder], {"vllm-sd-0-neuron-a": claim(["neurondevice10", "neurondevice9"]),
                                 "vllm-sd-0-more-b": claim(["neurondevice11", "neurondevice"])})
    placement = telemetry.locate(fake.api(), "inference", SELECTOR)
    assert placement == {"pod": "vllm-sd-0", "node": "ip-10-64-1-17.us-east-2.compute.internal", "neuronDevices": ["9", "10", "11"],
                         "devices": [{"pool": "ip-10-64-1-17", "device": d}
                                     for d in ("neurondevice10", "neurondevice9", "neurondevice11", "neurondevice")]}
    assert fake.paths[1:] == ["/apis/resource.k8s.io/v1/namespaces/inference/resourceclaims/vllm-sd-0-neuron-a",
                              "/apis/resource.k8s.io/v1/namespaces/inference/resourceclaims/vllm-sd-0-more-b"]


B = T0 - 20  # a minute boundary: CloudWatch's 60 s periods start on one


def put_points(cloudwatch, device: str, points: dict[float, tuple[float, float]], *, cores: int = 2,
               node: str = "ip-10-64-1-17", namespace: str = "ContainerInsights", metrics=(telemetry.UTILIZATION, telemetry.MEMORY),
               extra: dict | None = None):
    """`points`: period start -> (value of the first metric, of the second) for the device's first core;
    core c adds c to each."""
    for core in range(cores):
        dims = [{"Name": "ClusterName", "Value": "sd-test"}, {"Name": "InstanceType", "Value": "trn2.48xlarge"},
                {"Name": "InstanceId", "Value": "i-0abc"}, {"Name": "NodeName", "Value": node},
                {"Name": "NeuronDevice", "Value": device}, {"Name": "NeuronCore", "Value": str(int(device) * 4 + core)}]
        dims += [{"Name": k, "Value": v} for k, v in (extra or {}).items()]
        cloudwatch.put_metric_data(Namespace=namespace, MetricData=[
            {"MetricName": name, "Dimensions": dims, "Timestamp": datetime.fromtimestamp(t, timezone.utc), "Value": value[j] + core}
            for t, value in points.items() for j, name in enumerate(metrics)])


@pytest.fixture
def cloudwatch(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-2")


def requests_of(client, operation: str) -> list[dict]:
    sent = []
    client.meta.events.register(f"provide-client-params.cloudwatch.{operation}", lambda params, **_: sent.append(dict(params)))
    return sent


def never_sleep(seconds):
    pytest.fail(f"slept {seconds} s though the data was there")


def test_the_whole_reading_of_two_devices_and_what_is_asked_of_cloudwatch(cloudwatch):
    put_points(cloudwatch, "9", {B: (40, 1e9), B + 60: (50, 2e9), B + 120: (60, 3e9)})
    put_points(cloudwatch, "10", {B: (20, 5e9), B + 60: (30, 6e9), B + 120: (40, 7e9)})
    # Same names and node, not the variant's series: another namespace, a pod-level metric.
    put_points(cloudwatch, "9", {B: (99, 9e9)}, cores=1, namespace="CWAgent", extra={"Source": "neuron-monitor"})
    put_points(cloudwatch, "9", {B: (99, 9e9)}, cores=1, metrics=("pod_neuroncore_utilization",), extra={"PodName": "vllm-sd-0"})
    gets = requests_of(cloudwatch, "GetMetricData")
    placement = {**PLACEMENT, "neuronDevices": ["10", "9"]}
    data = telemetry.collect(cloudwatch, "sd-test", placement, T0, T1, sleep=never_sleep)
    # Per period: the mean over the 4 cores (40, 41, 20, 21 at B), the sum of their memory.
    assert data == {"status": "ok", "node": "ip-10-64-1-17", "neuronDevices": ["9", "10"], "cores": 4, "periodSeconds": 60,
                    "utilizationPercent": [[B, 30.5], [B + 60, 40.5], [B + 120, 50.5]],
                    "memoryUsedBytes": [[B, 12e9 + 2], [B + 60, 16e9 + 2], [B + 120, 20e9 + 2]]}
    assert [(g["StartTime"], g["EndTime"]) for g in gets] == [(datetime.fromtimestamp(B, timezone.utc),
                                                              datetime.fromtimestamp(T1 + 60, timezone.utc))] * 2
    for request, metric in zip(gets, (telemetry.UTILIZATION, telemetry.MEMORY)):
        queries = request["MetricDataQueries"]
        assert [q["Id"] for q in queries] == ["m0", "m1", "m2", "m3"]  # unique, a lowercase letter first (the API's rule)
        assert {(q["MetricStat"]["Metric"]["Namespace"], q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Period"],
                 q["MetricStat"]["Stat"], q["ReturnData"]) for q in queries} == {("ContainerInsights", metric, 60, "Average", True)}


def test_no_metrics_for_the_devices_says_which_devices_were_looked_for(cloudwatch):
    placement = {**PLACEMENT, "neuronDevices": ["10", "9"]}
    assert telemetry.collect(cloudwatch, "sd-test", placement, T0, T1, sleep=never_sleep) == {
        "status": "unavailable", "reason": "no ContainerInsights Neuron metrics for node ip-10-64-1-17 devices ['9', '10'] "
                                           "(is the CloudWatch Observability add-on with Neuron monitoring installed?)"}


def test_utilization_alone_is_still_read(cloudwatch):
    put_points(cloudwatch, "8", {B: (40, 0), B + 60: (50, 0), B + 120: (60, 0)}, metrics=(telemetry.UTILIZATION,))
    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, T0, T1, sleep=never_sleep)
    assert (data["status"], data["cores"], data["utilizationPercent"], data["memoryUsedBytes"]) == (
        "ok", 2, [[B, 40.5], [B + 60, 50.5], [B + 120, 60.5]], [])


def test_by_default_a_late_period_is_polled_for_every_30_s_for_5_minutes(cloudwatch):
    put_points(cloudwatch, "8", {B: (40, 1e9)})
    clock, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        clock[0] += seconds

    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, T0, T1, sleep=sleep, clock=lambda: clock[0])
    assert data["status"] == "partial" and sleeps == [30] * 10


def test_a_case_ending_on_a_minute_boundary_includes_the_period_that_starts_there(cloudwatch):
    # Periods cover [t, t + 60); a case's periods are those covering any instant of [start, end].
    put_points(cloudwatch, "8", {B: (10, 1e9), B + 60: (20, 2e9), B + 120: (30, 3e9), B + 180: (40, 4e9)})
    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, B + 30, B + 120, sleep=never_sleep)
    assert data["status"] == "ok"
    assert data["utilizationPercent"] == [[B, 10.5], [B + 60, 20.5], [B + 120, 30.5]]
    assert data["memoryUsedBytes"] == [[B, 2e9 + 1], [B + 60, 4e9 + 1], [B + 120, 6e9 + 1]]


def test_the_period_before_the_last_is_enough_to_be_complete(cloudwatch):
    # The case ends 30 s into B + 120: the data is complete once the period B + 60 is there.
    put_points(cloudwatch, "8", {B: (10, 1e9), B + 60: (20, 2e9)})
    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, B + 30, B + 150, sleep=never_sleep)
    assert (data["status"], data["utilizationPercent"]) == ("ok", [[B, 10.5], [B + 60, 20.5]])


def test_a_period_at_the_cases_end_shows_ingestion_has_passed_a_missed_one(cloudwatch):
    # Container Insights missed the scrape of B + 60; the point at B + 120 (the case's end) is newer.
    put_points(cloudwatch, "8", {B: (10, 1e9), B + 120: (30, 3e9)})
    data = telemetry.collect(cloudwatch, "sd-test", PLACEMENT, B + 30, B + 120, sleep=never_sleep)
    assert (data["status"], data["utilizationPercent"]) == ("ok", [[B, 10.5], [B + 120, 30.5]])


def test_a_distributed_variants_telemetry_covers_its_target_and_its_draft_each_labelled(kubernetes, cloudwatch, tmp_path):
    """Both device groups of the seed 002 stack's distributed variant: located from the run
    config's servers, read, published under Server target / draft, drawn apart on the dashboard and
    reported in a row each."""
    from benchmark import publish
    from components.pairing.benchmark import run_config
    from components.pairing.dashboard import dashboard_body
    from offline.stacks import load_stack
    from reporting.analysis import telemetry_figures

    spec = load_stack("llama3.1-8b-distributed").spec()
    config = run_config(spec, {v.name: f"http://{v.name}" for v in spec.variants})
    variant = next(v for v in config["variants"] if v["name"] == "distributed")
    pods, claims = [], {}
    for server, device in zip(variant["servers"], ("neurondevice3", "neurondevice4")):
        made = pod(f"{server['deployment']}-0", claim=f"{server['deployment']}-0-neuron")
        made["metadata"]["labels"] = server["podSelector"]
        pods.append(made)
        claims[f"{server['deployment']}-0-neuron"] = {**claim([device]), "metadata": {"name": f"{server['deployment']}-0-neuron",
                                                                                      "namespace": "inference"}}
    fake = kubernetes(pods, claims)
    placement = telemetry.locate_variant(fake.api(), "inference", variant["servers"])
    assert {part: where["neuronDevices"] for part, where in placement["servers"].items()} == {"target": ["3"], "draft": ["4"]}
    node = "ip-10-64-1-17.us-east-2.compute.internal"
    put_points(cloudwatch, "3", {B: (80, 9e9), B + 60: (82, 9e9), B + 120: (84, 9e9)}, node=node)
    put_points(cloudwatch, "4", {B: (20, 2e9), B + 60: (22, 2e9), B + 120: (24, 2e9)}, node=node)
    data = telemetry.collect(cloudwatch, "sd-test", placement, T0, T1, sleep=never_sleep)
    assert data["status"] == "ok"
    assert {part: d["utilizationPercent"][0] for part, d in data["servers"].items()} == {"target": [B, 80.5], "draft": [B, 20.5]}
    published = publish.telemetry_metric_data("distributed", "sonnets", data)
    labelled = {(d["MetricName"], tuple((x["Name"], x["Value"]) for x in d["Dimensions"]), d["Values"][0]) for d in published}
    assert ("NeuronCoreUtilization", (("Variant", "distributed"), ("TestCase", "sonnets"), ("Server", "target")), 80.5) in labelled
    assert ("NeuronCoreUtilization", (("Variant", "distributed"), ("TestCase", "sonnets"), ("Server", "draft")), 20.5) in labelled
    # The dashboard draws each pod's series under the dimensions they are published with.
    widgets = dashboard_body(spec, "us-east-2")["widgets"]
    neuron = next(w for w in widgets if w["type"] == "metric" and "NeuronCoreUtilization" in w["properties"]["title"])
    lines = {tuple(m[2:-1]): m[-1]["label"] for m in neuron["properties"]["metrics"]}
    test_case = next(iter(spec.benchmark.test_cases))
    for part in ("target", "draft"):
        assert lines[("Variant", "distributed", "TestCase", test_case, "Server", part)] == f"distributed (sd) {part}"
    assert ("Variant", "base", "TestCase", test_case) in lines
    # The report: a row per pod.
    case = type("Case", (), {"telemetry": data})()
    figures = telemetry_figures(case)
    assert figures["servers"]["target"]["neuron_devices"] == ["3"] and figures["servers"]["draft"]["utilization_mean_pct"] == 22.5
