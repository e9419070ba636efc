"""The benchmark component: IAM scope, Job/CronJob spec, code shipped by ConfigMap, dashboard."""
import json
import subprocess
import sys

import pytest

from benchmark import pod as benchmark_pod
from benchmark import publish
from benchmark.loadgen import GENERATORS, Level
from benchmark.pod import DEPS_MOUNT, PACKAGE_DIR, POD_MODULES, config_map_key
from benchmark.publish import DIMENSIONS, UNITS
from offline.stacks import load_stack, run_stack

from .helpers import assert_least_privilege, role_documents, trust_condition


def test_runner_role_grows_only_by_what_the_pod_reads(recording, spec):
    trust, policy = role_documents(recording, "benchmark-runner")
    assert f"system:serviceaccount:{spec.namespace}:llmperf" in trust_condition(trust).values()
    assert assert_least_privilege(policy) == 5
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    metrics = by_sid["PublishBenchmarkMetrics"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": spec.benchmark.metrics_namespace}}
    # GetMetricData and ListMetrics support no resource-level permissions: "*", read only.
    assert by_sid["ReadNeuronTelemetry"] == {"Sid": "ReadNeuronTelemetry", "Effect": "Allow", "Resource": "*",
                                             "Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"]}
    bucket_arn = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
    assert by_sid["WriteBenchmarkResults"]["Resource"] == f"{bucket_arn}/results/{spec.name}/*"
    # A study's tuner reads back what it recorded, to resume (benchmark/tuner.py); a plain run never reads.
    reads = ["s3:GetObject"] if spec.study else []
    assert sorted(by_sid["WriteBenchmarkResults"]["Action"]) == ["s3:AbortMultipartUpload", *reads, "s3:PutObject"]
    assert by_sid["TokenizerCache"]["Resource"] == f"{bucket_arn}/cache/{spec.name}/tokenizers/*"
    assert sorted(by_sid["TokenizerCache"]["Action"]) == ["s3:GetObject", "s3:PutObject"]
    listing = by_sid["ListTokenizerCacheAndCommits"]
    assert (listing["Action"], listing["Resource"]) == ("s3:ListBucket", bucket_arn)
    # Its tokenizer cache, and each variant's commit key exactly (benchmark/driver.py listed).
    commits = sorted({f"{v.artifact_path}/commit.json" for v in spec.variants})
    resume = [f"results/{spec.name}/*"] if spec.study else []
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"cache/{spec.name}/tokenizers/*", *commits, *resume]}}
    account = recording.one("kubernetes:core/v1:ServiceAccount", "benchmark-sa").inputs
    role = recording.one("aws:iam/role:Role", "benchmark-runner")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == role.outputs["arn"]


def test_the_pod_may_read_its_variants_pods_and_claims_only(recording, spec):
    role = recording.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "benchmark-placement").inputs
    assert role["metadata"]["namespace"] == spec.namespace
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                             {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}]
    binding = recording.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "benchmark-placement").inputs
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "llmperf", "namespace": spec.namespace}]
    job = recording.one("kubernetes:batch/v1:Job", "benchmark-run")
    assert recording.depends_on(job, recording.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "benchmark-placement"))


def test_code_lock_manifest_and_run_config_are_shipped_by_config_map(recording, spec):
    data = recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    # The lock of the stack's load generator (benchmark/loadgen/): LLMPerf's, or inference-perf's.
    for module in POD_MODULES + (GENERATORS[spec.benchmark.load_generator].lock,):
        assert data[config_map_key(module)] == (PACKAGE_DIR / module).read_text()
    # benchmark/ is exactly the pod's code: every module in it is shipped, and nothing else is.
    assert {key for key in data if key.endswith(".py")} == {
        config_map_key(path.relative_to(PACKAGE_DIR).as_posix()) for path in PACKAGE_DIR.rglob("*.py")}
    assert {"driver.py", "tuner.py", "podsetup.py", "__init__.py", "loadgen/llmperf.py", "loadgen/inference_perf.py"} <= set(POD_MODULES)
    commit = spec.benchmark.llmperf_commit
    assert data[f"llmperf-{commit}.manifest"] == (PACKAGE_DIR / "llmperf" / f"{commit}.manifest").read_text()
    config = json.loads(data["run-config.json"])
    assert config["stack"] == spec.stack and config["clusterName"] == spec.cluster_name and config["llmperfCommit"] == commit
    assert config["shape"]["inputTokens"] == spec.benchmark.input_tokens
    assert config["shape"]["samplingParams"] == spec.benchmark.sampling_params and config["seed"] == spec.benchmark.seed
    assert config["testCases"] == spec.benchmark.test_cases
    endpoints = recording.stack_outputs["endpoints"]
    assert {v["name"]: v["endpoint"] for v in config["variants"]} == endpoints
    deployments = {d.inputs["metadata"]["name"]: d.inputs for d in recording.of_type("kubernetes:apps/v1:Deployment")}
    for variant in config["variants"]:
        # The selector finds exactly the pod serving the variant's endpoint (a vLLM server, or a
        # distributed variant's draft), which the tuner scales.
        assert variant["podSelector"] == deployments[variant["deployment"]]["spec"]["selector"]["matchLabels"]
        # The variant's share of its node's price: trn2.48xlarge at the catalog's approximate
        # $35.76/h (stackconfig/catalog.py), by the devices of its servers.
        servers = spec.variant(variant["name"]).servers
        assert variant["costPerHourUsd"] == pytest.approx(35.76 * sum(s.devices for s in servers) / 16)
        assert variant["targetParamsBillion"] > 0
    sd = next(v for v in config["variants"] if v["role"] == "sd")
    assert sd["baseline"] and sd["draft"] and sd["numSpeculativeTokens"] and 0 < sd["draftParamsBillion"] < sd["targetParamsBillion"]


@pytest.mark.parametrize("stack, decoding", [
    # Seed 001 sent {}: the legacy baseline follows the request (the model's generation defaults),
    # fused speculation is compiled greedy; the report flags the pair (docs/engines.md).
    ("qwen3-32b-qwen3-0.6b", {"base": "sampled", "sd": "greedy"}),
    ("llama3.1-405b-llama3.2-1b", {"base-bf16": "greedy", "fp8": "greedy", "sd-fp8": "greedy"}),
    ("llama3.1-8b-instruct-eagle3", {"base": "greedy", "eagle3": "greedy"}),
])
def test_the_run_config_says_how_each_server_decodes_the_benchmarks_requests(stack, decoding):
    from .conftest import recorded

    data = recorded(stack).one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    assert {v["name"]: v["decoding"] for v in json.loads(data["run-config.json"])["variants"]} == decoding


def test_the_pod_modules_need_nothing_from_the_operator_side(tmp_path):
    """Only the shipped files: importing the driver or the tuner must not reach reporting/ or
    stackconfig."""
    (tmp_path / "benchmark" / "loadgen").mkdir(parents=True)
    for module in POD_MODULES:
        (tmp_path / "benchmark" / module).write_text((PACKAGE_DIR / module).read_text())
    code = "import benchmark.driver, benchmark.podsetup, benchmark.telemetry, benchmark.tuner, sys; print(sorted(m for m in sys.modules if m.startswith(('benchmark', 'reporting', 'stackconfig', 'matplotlib'))))"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin"})
    assert result.returncode == 0, result.stderr
    assert "benchmark.tuner" in result.stdout
    assert "stackconfig" not in result.stdout and "matplotlib" not in result.stdout and "reporting" not in result.stdout


def test_job_installs_verified_dependencies_then_runs_offline(recording, spec):
    job = recording.one("kubernetes:batch/v1:Job", "benchmark-run").inputs
    cron = recording.one("kubernetes:batch/v1:CronJob").inputs
    assert job["metadata"]["name"].startswith("llmperf-") and len(job["metadata"]["name"]) == len("llmperf-") + 8
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert cron["spec"]["suspend"] is True and cron["spec"]["jobTemplate"]["spec"] == job["spec"]
    # An hours-long run that failed is looked at, not silently repeated; a study's tuner resumes
    # where a killed pod stopped, so its Job starts a new pod.
    assert job["spec"]["backoffLimit"] == (3 if spec.study else 0)
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "llmperf" and pod["nodeSelector"] == {"sd-trn2/node-role": "system"}
    assert pod["terminationGracePeriodSeconds"] >= 30
    (container,) = pod["containers"]
    # The stack's load generator's image, lock and setup (benchmark/loadgen/): LLMPerf's Python 3.11
    # and requirements-pod.lock, or inference-perf's 3.12 and its own lock.
    generator = GENERATORS[spec.benchmark.load_generator]
    assert container["image"] == spec.benchmark.image == generator.image
    lines = container["command"][-1].splitlines()
    assert lines[0] == "set -euo pipefail"
    pip = next(line for line in lines if line.startswith("pip install"))
    assert f"--require-hashes --no-deps --target /opt/deps -r benchmark/{generator.lock}" in pip and "FATAL" in pip
    setup = " ".join(generator.setup_flags(spec.benchmark.llmperf_commit, DEPS_MOUNT))
    assert f"python -m benchmark.podsetup {setup} " in container["command"][-1]
    # A study's tuner drives the same driver (benchmark/tuner.py).
    entry = f"exec python -m benchmark.{'tuner' if spec.study else 'driver'} "
    assert "export HF_HOME=/opt/work/hf HF_HUB_OFFLINE=1" in lines and lines[-1].startswith(entry)
    env = {e["name"]: e for e in container["env"]}
    assert env["METRICS_NAMESPACE"]["value"] == spec.benchmark.metrics_namespace and env["RESULTS_PREFIX"]["value"] == f"results/{spec.name}/"
    assert "HF_TOKEN" not in env  # a file where it is needed: tests/test_serving.py
    assert ("HF_TOKEN_PATH" in env) == spec.requires_hugging_face_token
    # The driver and LLMPerf run without the token's path.
    assert lines.index("unset HF_TOKEN_PATH") < lines.index(next(line for line in lines if line.startswith(entry)))
    # Restricted: a user with no account on a read-only root, writing only to its emptyDirs.
    assert container["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in ("/opt/deps", "/opt/work", "/tmp", "/results", "/dev/shm"):
        assert "emptyDir" in volumes[mounts[path]["name"]], path
    assert env["PYTHONPATH"]["value"] == "/opt/deps:/opt/benchmark" and env["HOME"]["value"] == "/tmp"
    paths = {i["path"] for i in pod["volumes"][0]["configMap"]["items"]}
    assert paths == {f"benchmark/{m}" for m in POD_MODULES + (generator.lock,)} | {
        "run-config.json", f"benchmark/llmperf/{spec.benchmark.llmperf_commit}.manifest"}


def test_a_new_benchmark_configuration_is_a_new_job():
    first = run_stack(load_stack("qwen3-32b-qwen3-1.7b")).one("kubernetes:batch/v1:Job", "benchmark-run").inputs["metadata"]["name"]
    again = run_stack(load_stack("qwen3-32b-qwen3-1.7b")).one("kubernetes:batch/v1:Job", "benchmark-run").inputs["metadata"]["name"]
    changed = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:benchmark": {
        "inputTokens": 64, "outputTokens": 600, "concurrency": 4, "requestsPerTestCase": 30}}))
    assert first == again != changed.one("kubernetes:batch/v1:Job", "benchmark-run").inputs["metadata"]["name"]


def test_dashboard_queries_exactly_what_is_published(recording, spec):
    body = json.loads(recording.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardBody"])
    widgets = [w for w in body["widgets"] if w["type"] == "metric"]
    # Eight per test case, and a study's view one more (components/pairing/dashboard.py study_widgets).
    assert len(widgets) == (9 if spec.study else 8) * len(spec.benchmark.test_cases)
    seen = set()
    for widget in widgets:
        for metric in widget["properties"]["metrics"]:
            if "expression" in metric[0]:
                continue  # metric math over the queried series (test_the_study_view_divides_...)
            namespace, name, *rest = metric
            dims = dict(zip(rest[0:-1:2], rest[1:-1:2]))
            assert namespace == spec.benchmark.metrics_namespace and name in UNITS
            assert tuple(dims) == DIMENSIONS
            seen.add((dims["TestCase"], dims["Variant"], name, widget["properties"]["stat"]))
        assert widget["properties"]["region"] == spec.region
    # The pod publishes each (variant, test case) under the run config's dimension values: the
    # dashboard queries exactly those.
    run_config = json.loads(recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]["run-config.json"])
    # A sweep publishes each level under a TestCase value of its own (benchmark/pod.py test_case_value).
    loads = [Level.from_dict(load) for load in run_config["loads"]]
    folders = [benchmark_pod.level_folder(loads, level) for level in loads]
    published = set()
    for test_case in spec.benchmark.test_cases:
        for variant in run_config["variants"]:
            for folder in folders:
                dimensions = publish.dimension_values(run_config, variant["name"], test_case, folder)
                for datum in publish.telemetry_metric_data(*dimensions, {"utilizationPercent": [[0.0, 1.0]]}):
                    published.add((datum["Dimensions"][1]["Value"], datum["Dimensions"][0]["Value"]))
    assert {(case, variant) for case, variant, _, _ in seen} == published
    for test_case, case_value in spec.metric_dimensions["TestCase"].items():
        for variant in spec.variants:
            variant_value = spec.metric_dimensions["Variant"][variant.name]
            for name, stat in (("TimePerOutputToken", "p50"), ("OutputTokens", "p50"), ("AcceptanceRate", "Average"),
                               ("NeuronCoreUtilization", "Average"), ("NeuronMemoryUsed", "Maximum")):
                for folder in folders:
                    assert (benchmark_pod.test_case_value(case_value, folder), variant_value, name, stat) in seen
    # Each test case's Neuron widgets sit right under its latency widgets.
    for test_case in spec.benchmark.test_cases:
        rows = sorted({w["y"] for w in widgets if w["properties"]["title"].startswith(f"{test_case}: ")
                       and "TPOT speedup" not in w["properties"]["title"]})  # the study's view is below them all
        assert len(rows) == 2 and rows[1] - rows[0] == 6
    outputs = recording.stack_outputs
    assert outputs["dashboardUrl"].endswith(recording.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardName"])
    assert outputs["resultsPrefix"] == f"s3://{outputs['modelBucket']}/results/{spec.name}/"


def test_benchmark_runs_after_and_is_deleted_before_the_servers(recording):
    job = recording.one("kubernetes:batch/v1:Job", "benchmark-run")
    for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
        assert recording.depends_on(job, deployment)


def test_the_sample_stack_publishes_under_the_samples_own_dimension_values():
    """Seed 000's pod writes `PROMPT_DIM=$(echo "$PROMPT" | tr ' ' '_')` as TestCase, __SHAKESPEARE__
    for the sonnets, and Variant SD / Base, under the namespace Qwen/LLMPerf: run here through bash."""
    from .conftest import recorded

    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    data = recorded(spec.stack).one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    dimensions = json.loads(data["run-config.json"])["dimensions"]
    assert dimensions["Variant"] == {"base": "Base", "sd": "SD"}
    for case, prompt in spec.benchmark.test_cases.items():
        written = subprocess.run(["bash", "-c", 'PROMPT_DIM=$(echo "$1" | tr " " "_"); printf %s "$PROMPT_DIM"', "-",
                                  "__SHAKESPEARE__" if prompt is None else prompt], capture_output=True, text=True, check=True).stdout
        assert dimensions["TestCase"][case] == written
    body = json.loads(recorded(spec.stack).one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardBody"])
    assert ["Qwen/LLMPerf", "TTFT", "Variant", "SD", "TestCase", "counting_numbers_from_1_"] in [
        m[:6] for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]]


def test_the_study_view_divides_each_baseline_by_its_configuration():
    import re

    from components.pairing.dashboard import study_widgets

    spec = load_stack("qwen3-32b-study").spec()
    header, *per_case = study_widgets(spec, spec.region, top=500)
    assert header["type"] == "text" and header["y"] == 500 and len(per_case) == len(spec.benchmark.test_cases)
    for widget in per_case:
        metrics = widget["properties"]["metrics"]
        series = {m[-1]["id"]: m for m in metrics if "expression" not in m[0]}
        expressions = [m[0] for m in metrics if "expression" in m[0]]
        assert all(re.match(r"^[a-z][a-zA-Z0-9_]*$", i) for i in [*series, *(e["id"] for e in expressions)])
        assert all(m[1] == "TimePerOutputToken" and m[-1]["visible"] is False for m in series.values())
        by_label = {e["label"]: e["expression"] for e in expressions}
        assert sorted(by_label) == sorted(v.name for v in spec.variants if v.is_speculative)
        for name, expression in by_label.items():
            numerator, denominator = expression.split(" / ")
            assert series[numerator][3] == spec.variant(name).baseline and series[denominator][3] == name
        assert widget["properties"]["stat"] == "p50" and widget["properties"]["setPeriodToTimeRange"] is True


def test_a_study_at_several_load_levels_has_a_view_per_test_case_and_level():
    """Each level is published under its own TestCase value (benchmark/publish.py): the study's
    view queries that one, never pooling levels."""
    from components.pairing.dashboard import study_widgets

    raw = load_stack("qwen3-32b-study").config
    spec = load_stack("qwen3-32b-study", {"sd-trn2:benchmark": {**raw["sd-trn2:benchmark"], "concurrency": [1, 4]}}).spec()
    _, *per_case = study_widgets(spec, spec.region, top=500)
    expected = [(t, f"{spec.metric_dimensions['TestCase'][t]}/concurrency-{c}") for t in spec.benchmark.test_cases for c in (1, 4)]
    assert [(w["properties"]["title"].split(" at ")[0], {m[5] for m in w["properties"]["metrics"] if "expression" not in m[0]})
            for w in per_case] == [(t, {value}) for t, value in expected]
    assert per_case[1]["properties"]["title"].startswith(f"{expected[1][0]} at concurrency 4: ")


def test_the_run_config_is_strict_json():
    """NaN and Infinity are no JSON (RFC 8259, section 6), yet json.dumps writes them by default: a
    value validation missed must fail the plan, never reach the pod as `NaN`."""
    from dataclasses import replace

    from components.pairing.benchmark import run_config, run_config_json

    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    endpoints = {v.name: "http://vllm" for v in spec.variants}

    def refuse(constant: str):
        raise AssertionError(f"{constant} in run-config.json")

    assert json.loads(run_config_json(run_config(spec, endpoints)), parse_constant=refuse)["stack"] == spec.stack
    for value in (float("nan"), float("inf")):
        unchecked = replace(spec, benchmark=replace(spec.benchmark, sampling_params={"temperature": value}))
        with pytest.raises(ValueError, match="not JSON compliant"):
            run_config_json(run_config(unchecked, endpoints))
