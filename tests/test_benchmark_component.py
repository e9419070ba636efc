"""The benchmark component: IAM scope, Job/CronJob spec, code shipped by ConfigMap, dashboard."""
import json

from benchmark.publish import DIMENSIONS, METRICS
from components.benchmark import PACKAGE_DIR, POD_MODULES
from offline.stacks import load_stack, run_stack

from .helpers import assert_least_privilege, role_documents, trust_condition


def test_runner_role_may_only_publish_its_namespace_and_write_results(recording, spec):
    trust, policy = role_documents(recording, "benchmark-runner")
    assert f"system:serviceaccount:{spec.namespace}:llmperf" in trust_condition(trust).values()
    assert assert_least_privilege(policy) == 2
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    metrics = by_sid["PublishBenchmarkMetrics"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": spec.benchmark.metrics_namespace}}
    bucket_arn = recording.one("aws:s3/bucket:Bucket").outputs["arn"]
    assert by_sid["WriteBenchmarkResults"]["Resource"] == f"{bucket_arn}/results/{spec.name}/*"
    assert sorted(by_sid["WriteBenchmarkResults"]["Action"]) == ["s3:AbortMultipartUpload", "s3:PutObject"]
    account = recording.one("kubernetes:core/v1:ServiceAccount").inputs
    role = recording.one("aws:iam/role:Role", "benchmark-runner")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == role.outputs["arn"]


def test_code_and_run_config_are_shipped_by_config_map(recording, spec):
    data = recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    for module in POD_MODULES:
        assert data[module] == (PACKAGE_DIR / module).read_text()
    config = json.loads(data["run-config.json"])
    assert config["stack"] == spec.stack
    assert config["shape"]["inputTokens"] == spec.benchmark.input_tokens and config["shape"]["temperature"] == 0
    assert config["testCases"] == spec.benchmark.test_cases
    endpoints = recording.stack_outputs["endpoints"]
    assert {v["name"]: v["endpoint"] for v in config["variants"]} == endpoints
    sd = next(v for v in config["variants"] if v["role"] == "sd")
    assert sd["baseline"] and sd["draft"] and sd["numSpeculativeTokens"]


def test_job_and_cronjob_template_share_one_spec(recording, spec):
    job = recording.one("kubernetes:batch/v1:Job").inputs
    cron = recording.one("kubernetes:batch/v1:CronJob").inputs
    assert job["metadata"]["name"].startswith("llmperf-") and len(job["metadata"]["name"]) == len("llmperf-") + 8
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert cron["spec"]["suspend"] is True and cron["spec"]["jobTemplate"]["spec"] == job["spec"]
    # An hours-long run that failed is looked at, not silently repeated.
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "llmperf" and pod["nodeSelector"] == {"sd-trn2/node-role": "system"}
    (container,) = pod["containers"]
    assert container["image"] == spec.benchmark.image and ":" in container["image"]
    script = container["command"][-1]
    assert f"llmperf/archive/{spec.benchmark.llmperf_commit}.tar.gz" in script and "boto3==" in script
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["METRICS_NAMESPACE"] == spec.benchmark.metrics_namespace and env["RESULTS_PREFIX"] == f"results/{spec.name}/"
    paths = {i["path"] for i in pod["volumes"][0]["configMap"]["items"]}
    assert {f"benchmark/{m}" for m in POD_MODULES} | {"run-config.json"} == paths


def test_a_new_benchmark_configuration_is_a_new_job():
    first = run_stack(load_stack("qwen3-32b-qwen3-1.7b")).one("kubernetes:batch/v1:Job").inputs["metadata"]["name"]
    again = run_stack(load_stack("qwen3-32b-qwen3-1.7b")).one("kubernetes:batch/v1:Job").inputs["metadata"]["name"]
    changed = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:benchmark": {
        "inputTokens": 64, "outputTokens": 600, "concurrency": 4, "requestsPerTestCase": 30}}))
    assert first == again != changed.one("kubernetes:batch/v1:Job").inputs["metadata"]["name"]


def test_dashboard_queries_exactly_what_is_published(recording, spec):
    body = json.loads(recording.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardBody"])
    widgets = [w for w in body["widgets"] if w["type"] == "metric"]
    assert len(widgets) >= len(spec.benchmark.test_cases)
    seen_cases, seen_variants = set(), set()
    for widget in widgets:
        for metric in widget["properties"]["metrics"]:
            namespace, name, *rest = metric
            dims = dict(zip(rest[0:-1:2], rest[1:-1:2]))
            assert namespace == spec.benchmark.metrics_namespace and name in METRICS
            assert tuple(dims) == DIMENSIONS
            seen_cases.add(dims["TestCase"])
            seen_variants.add(dims["Variant"])
        assert widget["properties"]["stat"] == "p50" and widget["properties"]["region"] == spec.region
    assert seen_cases == set(spec.benchmark.test_cases) and seen_variants == {v.name for v in spec.variants}
    outputs = recording.stack_outputs
    assert outputs["dashboardUrl"].endswith(recording.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardName"])
    assert outputs["resultsPrefix"] == f"s3://{outputs['modelBucket']}/results/{spec.name}/"


def test_benchmark_runs_after_and_is_deleted_before_the_servers(recording):
    job = recording.one("kubernetes:batch/v1:Job")
    for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
        assert recording.depends_on(job, deployment)
