"""A tuning study of a distributed pairing (docs/study.md, "A distributed pairing"): the grid sweeps
gamma, each configuration a target and a draft pod with the target compiled for the study's one
speculation length; the tuner scales both pods and measures once both serve."""
from __future__ import annotations

import pytest
import yaml

from components.pairing.benchmark import run_config
from components.pairing.vllm_variant import labels, workload_name
from offline.plan import study_lines
from offline.stacks import load_stack, run_stack
from rehearse.kubeapi import allowed

from .fake_vllm import FakeVllm, Speculation
from .helpers import plan_copy, project_copy
from .stackconfig_helpers import parse, problem_list
from .test_benchmark_driver import one_request_runner
from .test_tuner import Cluster

STACK = "llama3.1-8b-distributed-study"
TARGET, DRAFT = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"
PAIRING = {
    "serving": {"target": TARGET, "devicesPerVariant": 1, "logicalNeuronCores": 2, "maxNumSeqs": 1, "maxModelLen": 128},
    "variants": [{"name": "base", "role": "baseline"}],
    "benchmark": {"inputTokens": 48, "outputTokens": 64, "samplingParams": {"temperature": 0.9, "top_p": 1.0}},
    "huggingFaceToken": "hf_x",
}


def study(**settings) -> dict:
    return {**PAIRING, "study": {"engine": "distributed", "drafts": [DRAFT], **settings}}


# ---------------------------------------------------------------------------------------------
# Parsing


def test_the_study_sweeps_gamma_with_the_target_compiled_once_for_one_speculation_length():
    spec = load_stack(STACK).spec()
    sd = [v for v in spec.variants if v.is_speculative]
    assert [(v.name, v.engine, v.num_speculative_tokens) for v in sd] == [
        (f"llama-3-2-1b-g{gamma}", "distributed", gamma) for gamma in (1, 2, 3, 4)]
    # One speculation length for every target: the verify forward costs the same whatever gamma.
    assert {v.neuron_config["target"]["speculation_length"] for v in sd} == {5}
    assert [p.window for p in spec.study.grid] == [1, 2, 3, 4]
    # Each configuration is its own pair of pods, each on its own device group, all on one node.
    assert all([s.part for s in v.servers] == ["target", "draft"] for v in sd)
    assert spec.sequential_node_count == spec.parallel_node_count == 1 and spec.pairs_fit_together


def test_without_a_speculation_length_the_targets_score_the_largest_gamma_plus_one():
    spec = parse(study(windows=[2, 3]))
    assert {v.speculation_length for v in spec.variants if v.is_speculative} == {4}


@pytest.mark.parametrize(("windows", "length", "key", "message"), [
    ([2, 5], 5, "study.windows[1]", "gamma 5 is above the target's compiled speculation length 5 - 1"),
    ([0, 3], 5, "study.windows[0]", "0 is not a speculative window in 1..4"),
    ([3], 1, "study.speculationLength", "1 is outside 2..16"),
])
def test_a_gamma_outside_the_targets_speculation_length_is_refused_by_key(windows, length, key, message):
    problems = problem_list(study(windows=windows, speculationLength=length))
    assert [k for k, _ in problems] == [key], problems
    assert message in problems[0][1]


def test_engine_settings_of_another_engine_are_refused_by_key():
    problems = dict(problem_list({**PAIRING, "study": {"drafts": [DRAFT], "windows": [3], "speculationLength": 5}}))
    assert "study.speculationLength" in problems and "distributed" in problems["study.speculationLength"]


def test_the_command_line_exits_2_naming_the_gamma(tmp_path):
    project = project_copy(tmp_path / "project")
    path = project / "stacks" / f"Pulumi.{STACK}.yaml"
    config = yaml.safe_load(path.read_text())
    config["config"]["sd-trn2:study"]["windows"] = [4, 5]
    path.write_text(yaml.safe_dump(config))
    result = plan_copy(project, STACK, tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert "study.windows[1]" in result.stderr and "speculation length 5 - 1" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------
# What the plan gives the tuner


def tuned_deployments(spec) -> list[str]:
    return [f"vllm-{v.name}" for v in spec.variants if not v.is_speculative] + [
        f"vllm-{v.name}-{part}" for v in spec.variants if v.is_speculative for part in ("target", "draft")]


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_the_plan_has_a_pair_of_deployments_per_configuration_and_a_role_for_exactly_those(mode):
    raw = load_stack(STACK).config
    stack_input = load_stack(STACK, {"sd-trn2:study": {**raw["sd-trn2:study"], "mode": mode}})
    spec = stack_input.spec()
    recording = run_stack(stack_input)
    sequential = mode == "sequential"
    deployments = {d.inputs["metadata"]["name"]: d for d in recording.of_type("kubernetes:apps/v1:Deployment")
                   if d.inputs["metadata"]["name"].startswith("vllm-")}
    assert sorted(deployments) == sorted(tuned_deployments(spec))
    for deployment in deployments.values():
        # Created stopped, the count the tuner's (sequential); served from `pulumi up` on (parallel).
        assert deployment.inputs["spec"]["replicas"] == (0 if sequential else 1)
        assert deployment.ignore_changes == (["spec.replicas"] if sequential else [])
        assert ("pulumi.com/patchForce" in deployment.inputs["metadata"]["annotations"]) == (not sequential)
    (role,) = [r for r in recording.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
               if r.inputs["metadata"]["name"] == "llmperf-tuner"]
    scale = [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": tuned_deployments(spec),
              "verbs": ["get", "patch"]}]
    assert role.inputs["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["llmperf-tuner"], "verbs": ["get", "update"]},
        *(scale if sequential else []),
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    for name in deployments:
        assert allowed(role.inputs["rules"], "apps", "deployments/scale", "patch", name) == sequential
    # The run config names both pods of each configuration: what the tuner scales and waits for.
    config = run_config(spec, {v.name: f"http://{v.name}" for v in spec.variants})
    by_name = {v["name"]: v for v in config["variants"]}
    configuration = spec.variants[1]
    assert [s["deployment"] for s in by_name[configuration.name]["servers"]] == [
        f"vllm-{configuration.name}-target", f"vllm-{configuration.name}-draft"]
    assert [s["podSelector"] for s in by_name[configuration.name]["servers"]] == [labels(configuration, s) for s in configuration.servers]
    assert [s["commitKey"] for s in by_name[configuration.name]["servers"]] == [
        f"{configuration.server_artifact_path(s)}/commit.json" for s in configuration.servers]
    assert config["study"]["grid"][0] == {"variant": configuration.name, "draft": DRAFT, "window": 1}
    # The plan names what the tuner scales: both pods of each configuration.
    scaled = next(line for line in study_lines(spec) if "tuner scales" in line)
    assert scaled.split("tuner scales")[1].strip() == (", ".join(tuned_deployments(spec)) if sequential else "nothing: every server is up")


# ---------------------------------------------------------------------------------------------
# The tuner


def small_spec(windows=(2, 4)):
    raw = load_stack(STACK).config
    return load_stack(STACK, {"sd-trn2:study": {**raw["sd-trn2:study"], "windows": list(windows), "repeats": 1},
                              "sd-trn2:benchmark": {**raw["sd-trn2:benchmark"], "requestsPerTestCase": 1,
                                                    "testCases": {"counting": "counting numbers from 1 "}}}).spec()


class FakeDraft(FakeVllm):
    """The draft server: up (its /health 200) only while its own pod runs and its target answers
    (distributed/draft_server.py do_GET /health)."""

    def __init__(self, target: FakeVllm, **settings):
        self.target = target
        super().__init__(**settings)

    @property
    def up(self) -> bool:
        return self._up and self.target.up

    @up.setter
    def up(self, value: bool) -> None:
        self._up = value


class DistributedCluster(Cluster):
    """A stand-in server per Deployment (the target's answers /health only, as the real one does on
    its server port), the fake API in front, S3 behind the tuner."""

    def __init__(self, spec, failing=()):
        self.spec = spec
        self.fakes = {}
        for v in spec.variants:
            if v.is_speculative:
                target = self.fakes[workload_name(v, v.servers[0])] = FakeVllm(step_s=0.001)
                self.fakes[workload_name(v, v.endpoint_server)] = FakeDraft(
                    target, step_s=0.0005, speculation=Speculation(v.num_speculative_tokens, (2, 1)))
            else:
                self.fakes[workload_name(v)] = FakeVllm(step_s=0.001)
        self.failing = {name: "distributed.target_server: the Neuron backend could not load the compiled target"
                        for name in failing}


def test_the_tuner_scales_both_pods_of_a_configuration_beside_the_baseline(tmp_path, llmperf):
    spec = small_spec()
    with DistributedCluster(spec) as cluster:
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
    assert record["status"] == "complete", record["reason"]
    assert cluster.api.forbidden == []
    ups = [set(u) for u in cluster.api.history]
    for name in ("llama-3-2-1b-g2", "llama-3-2-1b-g4"):
        assert {"vllm-base", f"vllm-{name}-target", f"vllm-{name}-draft"} in ups
    # Never two configurations' pods at once, and nothing left running.
    for up in ups:
        assert len({n.removesuffix("-target").removesuffix("-draft") for n in up} - {"vllm-base"}) <= 1, up
    assert ups[-1] == set()
    measured = {(c["variant"], c["beside"]) for c in record["cases"]}
    assert measured == {("llama-3-2-1b-g2", None), ("base", "llama-3-2-1b-g2"), ("llama-3-2-1b-g4", None), ("base", "llama-3-2-1b-g4")}


def test_a_target_that_fails_fails_its_configuration_with_the_targets_reason(tmp_path, llmperf):
    spec = small_spec()
    calls: list = []
    with DistributedCluster(spec, failing=["vllm-llama-3-2-1b-g2-target"]) as cluster:
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner(calls))
    outcome = record["configurations"]["llama-3-2-1b-g2"]
    assert outcome["status"] == "failed" and "could not load the compiled target" in outcome["reason"]
    assert "vllm-llama-3-2-1b-g2-target" in outcome["reason"]
    assert {c["variant"] for c in record["cases"]} == {"base", "llama-3-2-1b-g4"}


def test_nothing_is_measured_until_the_targets_compiled_set_is_published_too(tmp_path, llmperf):
    """The draft's /health answers while its target does; the target's publisher may still be
    uploading its first compile from the node: the tuner waits for both sets."""
    spec = small_spec(windows=(3,))
    target_key = f"{spec.variants[1].server_artifact_path(spec.variants[1].servers[0])}/commit.json"
    events: list[str] = []
    asked = {"n": 0}

    def committed(key):
        if key == target_key:
            asked["n"] += 1
            events.append("target asked")
            return asked["n"] > 2
        return True

    inner = one_request_runner([])

    def runner(*args):
        events.append("measured")
        return inner(*args)

    with DistributedCluster(spec) as cluster:
        record = cluster.run(tmp_path / "pod", llmperf, runner, committed=committed)
    assert record["status"] == "complete", record["reason"]
    # Asked (and refused) twice before the configuration's first case.
    assert events[:3] == ["target asked"] * 3 and "measured" in events
