"""The study's tuner against a fake Kubernetes API (RBAC from the stack's own Role) and stand-in
vLLM servers on 127.0.0.1, with the study's results in (moto) S3: sequential scaling that never
runs more than a baseline and one SD configuration, a failed configuration recorded, and a killed
run resumed without redoing finished work."""
import json
import threading
import time
from pathlib import Path

import boto3
import kubernetes_validate
import pytest
from moto import mock_aws

from benchmark import driver, tuner
from benchmark.lease import Lease, micro_time
from benchmark.telemetry import KubernetesApi
from components.pairing.benchmark import run_config
from components.pairing.benchmark_access import tuner_rules
from components.pairing.vllm_variant import labels, workload_name
from offline.stacks import load_stack

from .fake_kubernetes import TOKEN, FakeKubernetes
from .fake_vllm import FakeVllm, Speculation
from .test_benchmark_driver import one_request_runner, quiet_hooks

COMPILE_ERROR = "neuronx-cc: ERROR: compilation failed for the speculation model"


def study_spec(mode="sequential", windows=(5, 15), repeats=2):
    """The Qwen3 study stack, made small: two windows of each draft, two test cases, two repeats."""
    stack = "qwen3-32b-study"
    raw = load_stack(stack).config
    study = {**raw["sd-trn2:study"], "mode": mode, "windows": list(windows), "repeats": repeats}
    benchmark = {**raw["sd-trn2:benchmark"], "requestsPerTestCase": 1,
                 "testCases": {"counting": "counting numbers from 1 ", "meaning-of-life": "I believe the meaning of life is"}}
    return load_stack(stack, {"sd-trn2:study": study, "sd-trn2:benchmark": benchmark}).spec()


class Cluster:
    """Stand-in servers for every variant, the fake API in front of them, S3 behind the tuner."""

    def __init__(self, spec, failing=()):
        self.spec = spec
        self.fakes = {workload_name(v): FakeVllm(step_s=0.0005, speculation=Speculation(v.num_speculative_tokens, (2, 1)))
                      if v.is_speculative else FakeVllm(step_s=0.001) for v in spec.variants}
        self.failing = {workload_name(spec.variant(name)): COMPILE_ERROR for name in failing}

    def __enter__(self):
        for fake in self.fakes.values():
            fake.__enter__()
        # A Deployment per server of each variant (a vLLM variant's one, a distributed variant's target and draft).
        endpoints = {v.name: self.fakes[workload_name(v, v.endpoint_server)].url for v in self.spec.variants}
        self.config = run_config(self.spec, endpoints)
        servers = [workload_name(v, s) for v in self.spec.tuned_servers for s in v.servers]
        self.api = FakeKubernetes(self.spec.namespace, tuner_rules(servers), self.fakes,
                                  {workload_name(v, s): labels(v, s) for v in self.spec.variants for s in v.servers}, self.failing)
        self.api.__enter__()
        self.mock = mock_aws()
        self.mock.start()
        self.s3 = boto3.client("s3", region_name="us-east-2")
        self.s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        return self

    def __exit__(self, *exc):
        self.mock.stop()
        self.api.__exit__(*exc)
        for fake in self.fakes.values():
            fake.__exit__(*exc)

    def run(self, results_dir: Path, llmperf: Path, runner, refused: tuple[str, ...] = (), study_id: str | None = None,
            **hook_changes):
        """One pod of the study: its own (empty) results folder, the stack's S3 prefix; uploads of
        the keys ending in `refused` fail (as S3 would refuse them, every retry). Another
        `study_id` is another Job's study (`make benchmark`). `hook_changes` replace the driver's
        other hooks (e.g. `committed`)."""
        hooks = quiet_hooks(runner=runner, poll_s=0, upload=RefusingMirror(self.s3, "models", self.spec.results_prefix, results_dir,
                                                                           refused),
                            healthy=driver.http_healthy, **hook_changes)
        hooks.uploaded = hooks.upload.exists
        wiring = tuner.production_tuner(self.config, None, hooks)  # outside a cluster: no scaler yet
        wiring.scaler = tuner.KubernetesScaler(KubernetesApi(self.api.address, TOKEN), self.spec.namespace)
        # As production_tuner wires it, with seconds where the pod has minutes.
        wiring.lease = Lease(wiring.scaler.api, self.spec.namespace, f"{study_id or self.config['study']['id']} (pod {results_dir.name})",
                             duration_s=2, renew_s=0.2, poll_s=0.05)
        return tuner.run_study(self.config, results_dir, llmperf, hooks, wiring, study_id)

    def stored(self, key: str) -> dict:
        return json.loads(self.s3.get_object(Bucket="models", Key=self.spec.results_prefix + key)["Body"].read())


class RefusingMirror(driver.S3Mirror):
    def __init__(self, client, bucket, prefix, results_dir, refused: tuple[str, ...]):
        super().__init__(client, bucket, prefix, results_dir)
        self.refused = refused

    def __call__(self, path: Path) -> None:
        if self.key(path).endswith(self.refused):
            raise ConnectionError(f"upload of {self.key(path)} refused")
        super().__call__(path)


def workload_name_to_variant(name: str) -> str:
    return name.removeprefix("vllm-")


def test_sequential_study_serves_a_baseline_and_one_sd_at_a_time_records_failure_and_resumes(tmp_path, llmperf):
    spec = study_spec()
    assert spec.tuned_servers == spec.variants and spec.pairs_fit_together and spec.node_count == 1
    # Repeats interleave: repeat 1 of every configuration, each block the baseline and the
    # configuration per test case. Killed at the third case of the fourth block: repeat 1 of
    # qwen3-0-6b-k5 and qwen3-1-7b-k5 measured, qwen3-0-6b-k15 recorded failed (nothing measured
    # beside it), qwen3-1-7b-k15 half measured.
    calls, killed_after = [], 10
    inner = one_request_runner(calls)

    def killing_runner(*args):
        if len(calls) == killed_after:
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return inner(*args)

    with Cluster(spec, failing=["qwen3-0-6b-k15"]) as cluster:
        first = cluster.run(tmp_path / "pod-1", llmperf, killing_runner)
        assert (first["status"], first["reason"]) == ("failed", "Terminated: received signal 15 (Job deadline or pod deletion)")
        # A stopped study leaves no server running.
        assert cluster.api.history[-1] == frozenset()
        assert len(first["cases"]) == killed_after
        stored = cluster.stored(f"{cluster.config['study']['id']}/study.json")
        assert len(stored["cases"]) == killed_after and stored["status"] == "failed"

        resumed_at = len(cluster.api.history)
        second = cluster.run(tmp_path / "pod-2", llmperf, inner)
        # What the first pod saw fail is not started again; the rest of the repeat and repeat 2 run.
        assert cluster.api.history[resumed_at:resumed_at + 2] == [{"vllm-base"}, {"vllm-base", "vllm-qwen3-1-7b-k15"}]
        assert "vllm-qwen3-0-6b-k15" not in set().union(*cluster.api.history[resumed_at:])

        study = cluster.config["study"]
        sd = [v.name for v in spec.variants if v.is_speculative]
        # Never more than the baseline and one SD configuration up, in either pod's life.
        for up in cluster.api.history:
            assert len(up) <= 2 and sum(spec.variant(workload_name_to_variant(n)).is_speculative for n in up) <= 1, up
        assert cluster.api.forbidden == [] and all(f.refused == 0 for f in cluster.fakes.values())
        # Each SD configuration was scaled up beside the baseline, and down again.
        ups = [set(u) for u in cluster.api.history]
        for name in sd:
            if name != "qwen3-0-6b-k15":
                assert {"vllm-base", f"vllm-{name}"} in ups
        assert cluster.api.history[-1] == frozenset()
        # The failed configuration: recorded with the reason its pod gave, and the study went on.
        outcome = second["configurations"]["qwen3-0-6b-k15"]
        assert outcome["status"] == "failed" and COMPILE_ERROR in outcome["reason"] and "exited 1 (Error) 2 times" in outcome["reason"]
        assert [c for c, o in second["configurations"].items() if o["status"] != "done"] == ["qwen3-0-6b-k15"]
        assert (second["status"], second["reason"]) == ("incomplete", "failed configurations: qwen3-0-6b-k15")
        # Resumed: every (repeat, configuration, test case) measured exactly once across both pods,
        # and the baseline once beside each, in its block.
        measured = [(c["repeat"], c["variant"], c["testCase"], c["beside"]) for c in second["cases"]]
        measured_sd = [v.name for v in spec.variants if v.is_speculative and v.name != "qwen3-0-6b-k15"]
        expected = {(r, name, t, None) for r in (1, 2) for name in measured_sd for t in spec.benchmark.test_cases} | {
            (r, "base", t, name) for r in (1, 2) for name in measured_sd for t in spec.benchmark.test_cases}
        assert sorted(measured, key=str) == sorted(expected, key=str) and len(measured) == len(set(measured))
        # In order: repeat 1 of every configuration before repeat 2 of any; within a block, the
        # baseline then the configuration, per test case.
        assert [c["repeat"] for c in second["cases"]] == sorted(c["repeat"] for c in second["cases"])
        assert [(c["variant"], c["beside"]) for c in second["cases"][:2]] == [("base", "qwen3-0-6b-k5"), ("qwen3-0-6b-k5", None)]
        assert len(calls) == len(expected)  # LLMPerf ran once per case: nothing redone after the kill
        assert cluster.stored(f"{study['id']}/study.json") == second
        # The cases' folders are where the report reads them (benchmark/results.py).
        key = f"{study['id']}/repeat-2/qwen3-1-7b-k5/counting/case.json"
        assert cluster.stored(key)["variant"] == "qwen3-1-7b-k5"
        assert cluster.stored(f"{study['id']}/repeat-2/beside-qwen3-1-7b-k5/base/counting/case.json")["variant"] == "base"
        # Progress: i of N, what the study's record carries.
        assert second["progress"]["done"] == second["progress"]["total"] == len(expected) + 2 * 2 * 2  # the failed one's cases
        assert second["progress"]["etaSeconds"] == 0
        # Scaled through the subresource, as the tuner's field manager (docs/facts.md "Tuning study").
        patches = [r for r in cluster.api.requests if r[0] == "PATCH"]
        assert all(p[1].endswith("/scale?fieldManager=sd-trn2-tuner") for p in patches)


def test_one_server_at_a_time_when_a_pair_does_not_fit(tmp_path, llmperf):
    """Whole-node servers (the 405B stack's shape): the baseline is scaled down before each SD."""
    stack = "qwen3-32b-study"
    raw = load_stack(stack).config
    spec = load_stack(stack, {
        "sd-trn2:serving": {**raw["sd-trn2:serving"], "devicesPerVariant": 16},
        "sd-trn2:study": {**raw["sd-trn2:study"], "windows": [7], "drafts": ["Qwen/Qwen3-1.7B"], "repeats": 1},
        "sd-trn2:modelRevisions": {m: c for m, c in raw["sd-trn2:modelRevisions"].items() if m != "Qwen/Qwen3-0.6B"},
        "sd-trn2:benchmark": {**raw["sd-trn2:benchmark"], "requestsPerTestCase": 1, "testCases": {"sonnets": None}},
    }).spec()
    assert not spec.pairs_fit_together and spec.node_count == 1 and spec.parallel_node_count == 2
    with Cluster(spec) as cluster:
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
    assert record["status"] == "complete"
    assert [sorted(u) for u in cluster.api.history] == [["vllm-base"], [], ["vllm-qwen3-1-7b-k7"], []]


def test_a_role_without_the_servers_names_cannot_scale_them(tmp_path, llmperf):
    """The fake API enforces the rules it is given: the tuner fails, saying so, with a Role that
    names other servers (what a stale resourceNames list would do)."""
    spec = study_spec(windows=(5,), repeats=1)
    with Cluster(spec) as cluster:
        cluster.api.rules = tuner_rules(["vllm-other"])
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
    assert record["status"] == "failed" and "HTTP Error 403" in record["reason"]
    assert cluster.api.forbidden and cluster.api.history == []


def test_the_fake_pods_are_pods(tmp_path):
    """What the tuner reads failure from, in the Pod schema's own field names."""
    spec = study_spec(windows=(5,), repeats=1)
    fake = FakeKubernetes(spec.namespace, [], {"vllm-base": FakeVllm(step_s=0)}, {"vllm-base": labels(spec.variant("base"))},
                          {"vllm-base": COMPILE_ERROR})
    fake.replicas["vllm-base"] = 1
    (pod,) = fake.pods({"sd-trn2/variant": "base"})
    kubernetes_validate.validate(pod, "1.34", strict=True)
    assert COMPILE_ERROR in tuner.pod_failure([pod])


@pytest.mark.parametrize("status, failure", [
    ({"phase": "Pending"}, None),
    ({"phase": "Running", "containerStatuses": [{"name": "vllm", "restartCount": 1,
                                                 "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}, None),
    ({"phase": "Running", "containerStatuses": [{"name": "vllm", "restartCount": 3,
                                                 "lastState": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}, None),
    # Exited twice before, running again now (loading, or a passing health blip): not failed.
    ({"phase": "Running", "containerStatuses": [{"name": "vllm", "restartCount": 2, "state": {"running": {}},
                                                 "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}, None),
    ({"phase": "Pending", "containerStatuses": [{"name": "vllm", "restartCount": 0,
                                                 "state": {"waiting": {"reason": "InvalidImageName", "message": "bad ref"}}}]},
     "container vllm of pod p cannot start: InvalidImageName: bad ref"),
    ({"phase": "Pending", "initContainerStatuses": [{"name": "publisher", "restartCount": 2,
                                                     "lastState": {"terminated": {"exitCode": 2, "reason": "Error", "message": "boom\n"}}}]},
     "container publisher of pod p exited 2 (Error) 2 times; last: boom"),
])
def test_what_counts_as_a_failed_server(status, failure):
    assert tuner.pod_failure([{"metadata": {"name": "p"}, "status": status}]) == failure


def test_a_server_that_never_serves_fails_after_its_budget():
    spec = study_spec(windows=(5,), repeats=1)
    config = run_config(spec, {v.name: "http://vllm" for v in spec.variants})
    now = [0.0]
    hooks = quiet_hooks(healthy=lambda url: False, poll_s=60, sleep=lambda s: now.__setitem__(0, now[0] + s))
    wiring = tuner.TunerHooks(scaler=tuner.NoCluster(), clock=lambda: now[0])
    variant = config["variants"][1]
    failure = tuner.Tuner(config, Path("/nonexistent"), Path("/nonexistent"), hooks, wiring).serving_failure(variant)
    budget = variant["startupBudgetSeconds"] + tuner.START_MARGIN_S
    assert failure == f"not healthy after {budget} s (its startup budget and {tuner.START_MARGIN_S} s)"
    assert now[0] == pytest.approx(budget, abs=60)


@pytest.mark.parametrize("status, code", [("complete", 0), ("incomplete", 0), ("failed", 1), ("running", 1)])
def test_the_pod_resumes_within_its_job_and_retries_only_what_can_change(tmp_path, monkeypatch, status, code):
    """The folder is the configuration's id and the Job's name: pods of one Job resume one study,
    another Job starts a new one. A finished study (even with failed configurations) exits 0, so
    the Job does not start a pod that would change nothing."""
    spec = study_spec(windows=(5,), repeats=1)
    config = run_config(spec, {v.name: "http://vllm" for v in spec.variants})
    (tmp_path / "run-config.json").write_text(json.dumps(config))
    seen = []
    monkeypatch.setattr(driver, "production_hooks", lambda config, args: quiet_hooks())
    monkeypatch.setattr(tuner, "production_tuner", lambda config, args, hooks: tuner.TunerHooks(scaler=tuner.NoCluster()))
    monkeypatch.setattr(tuner, "run_study", lambda *args: seen.append(args[-1]) or {"status": status, "reason": None})
    monkeypatch.setenv("JOB_NAME", "llmperf-1a2b3c4d")
    argv = ["--config", str(tmp_path / "run-config.json"), "--results-dir", str(tmp_path), "--generator-dir", str(tmp_path)]
    assert tuner.main(argv) == code
    assert seen == [f"{config['study']['id']}-llmperf-1a2b3c4d"]
    assert tuner.study_folder(config, None) == config["study"]["id"]


def test_a_failed_baseline_is_not_kept_up_beside_the_sd_configurations(tmp_path, llmperf):
    spec = study_spec(windows=(5,), repeats=1)
    with Cluster(spec, failing=["base"]) as cluster:
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
    assert record["configurations"]["base"]["status"] == "failed"
    assert all(o["status"] == "done" for n, o in record["configurations"].items() if n != "base")
    # Scaled up once, in the first block: once it failed, it never ran beside an SD configuration again.
    started = [r for r in cluster.api.requests if r[0] == "PATCH" and "/vllm-base/" in r[1] and r[2]["spec"]["replicas"]]
    assert len(started) == 1
    assert all("vllm-base" not in up for up in cluster.api.history[cluster.api.history.index(frozenset({"vllm-qwen3-0-6b-k5"})):])


def test_leftovers_of_a_killed_pod_are_scaled_down_and_evicted_pods_are_not_waited_for(tmp_path, llmperf):
    """A pod SIGKILLed after recording the last outcome left a server asking for a replica; an
    eviction left a Failed pod listed. The next pod finds nothing to measure, scales the leftover
    down, and never waits on, or fails a server for, the evicted pod."""
    spec = study_spec(windows=(5,), repeats=1)
    with Cluster(spec) as cluster:
        first = cluster.run(tmp_path / "pod-1", llmperf, one_request_runner([]))
        assert first["status"] == "complete"
        cluster.api.scale("vllm-qwen3-1-7b-k5", 1)   # as if the kill came before the last scale-down
        cluster.api.evict("vllm-base")
        second = cluster.run(tmp_path / "pod-2", llmperf, lambda *a: pytest.fail("nothing is left to measure"))
    assert second["status"] == "complete" and cluster.api.replicas["vllm-qwen3-1-7b-k5"] == 0
    assert cluster.api.history[-1] == frozenset()


def test_an_evicted_pod_does_not_block_the_next_configuration(tmp_path, llmperf):
    spec = study_spec(windows=(5,), repeats=1)
    with Cluster(spec) as cluster:
        cluster.api.evict("vllm-qwen3-0-6b-k5")
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
    assert record["status"] == "complete"


def test_api_blips_are_retried_and_refusals_are_not():
    import urllib.error

    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise urllib.error.URLError("connection refused")
        if len(calls) == 2:
            raise urllib.error.HTTPError("https://api/x", 503, "Service Unavailable", {}, None)
        return {"ok": True}

    assert tuner.retried(flaky, sleep=sleeps.append) == {"ok": True} and sleeps == [2, 4]

    def forbidden():
        calls.append(1)
        raise urllib.error.HTTPError("https://api/x", 403, "Forbidden", {}, None)

    calls.clear()
    with pytest.raises(urllib.error.HTTPError):
        tuner.retried(forbidden, sleep=sleeps.append)
    assert len(calls) == 1


def test_a_case_whose_upload_failed_is_measured_again_on_resume(tmp_path, llmperf):
    """The first pod records a case in study.json, but its requests never reach S3, and the pod is
    killed; the next pod measures that case again (and nothing else twice), so the report does not
    silently lack a repeat."""
    spec = study_spec(windows=(5,), repeats=1)
    calls = []
    inner = one_request_runner(calls)
    lost = "repeat-1/beside-qwen3-0-6b-k5/base/counting/requests.jsonl"

    def killing_runner(*args):
        if len(calls) == 3:
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return inner(*args)

    with Cluster(spec) as cluster:
        study_id = cluster.config["study"]["id"]
        first = cluster.run(tmp_path / "pod-1", llmperf, killing_runner, refused=(lost,))
        assert first["status"] == "failed" and len(first["cases"]) == 3
        assert ("base", "counting") in {(c["variant"], c["testCase"]) for c in cluster.stored(f"{study_id}/study.json")["cases"]}
        second = cluster.run(tmp_path / "pod-2", llmperf, inner)
        assert second["status"] == "complete"
        kept = cluster.s3.get_object(Bucket="models", Key=f"{spec.results_prefix}{study_id}/{lost}")["Body"].read()
        assert kept.strip()
    measured = [(c["repeat"], c["variant"], c["testCase"], c["beside"]) for c in second["cases"]]
    sd = [v.name for v in spec.variants if v.is_speculative]
    expected = {(1, n, t, None) for n in sd for t in spec.benchmark.test_cases} | {
        (1, "base", t, n) for n in sd for t in spec.benchmark.test_cases}
    assert sorted(measured, key=str) == sorted(expected, key=str)
    # LLMPerf ran for the two stored cases once, for the lost one twice, for the rest once.
    assert len(calls) == len(expected) + 1
    assert all(set(c["files"]) >= {"case.json", "requests.jsonl", "specdecode.json"} for c in second["cases"])


def test_two_tuners_on_one_cluster_take_turns(tmp_path, llmperf, capsys):
    """A second study Job (`make benchmark` beside a running study) waits for the first tuner's
    lease: it scales nothing while the first measures, so no case is measured with its server
    scaled away under it, and it starts once the first lets go."""
    spec = study_spec(windows=(5,), repeats=1)
    first_measuring, calls = threading.Event(), []
    inner = one_request_runner(calls)

    def slow_runner(*args):
        first_measuring.set()
        time.sleep(0.3)  # the second tuner arrives meanwhile
        return inner(*args)

    with Cluster(spec) as cluster:
        study_id = cluster.config["study"]["id"]
        first: dict = {}
        thread = threading.Thread(target=lambda: first.update(cluster.run(tmp_path / "pod-a", llmperf, slow_runner,
                                                                          study_id=f"{study_id}-job-a")))
        thread.start()
        assert first_measuring.wait(60)
        second = cluster.run(tmp_path / "pod-b", llmperf, one_request_runner([]), study_id=f"{study_id}-job-b")
        thread.join(60)
    assert first["status"] == second["status"] == "complete"
    assert f"waiting for the study running in this namespace to end ({study_id}-job-a (pod pod-a) holds lease llmperf-tuner" \
        in capsys.readouterr().out
    # Every request reached a server that was up; never more than a baseline and one SD configuration.
    assert all(f.refused == 0 for f in cluster.fakes.values())
    for up in cluster.api.history:
        assert len(up) <= 2 and sum(spec.variant(workload_name_to_variant(n)).is_speculative for n in up) <= 1, up
    # The first held the lease throughout, let go, then the second took it.
    holders = [h for i, h in enumerate(cluster.api.lease_holders) if i == 0 or h != cluster.api.lease_holders[i - 1]]
    assert holders == [f"{study_id}-job-a (pod pod-a)", "", f"{study_id}-job-b (pod pod-b)", ""]
    assert cluster.api.forbidden == []


def test_a_killed_tuners_lease_lapses(tmp_path, llmperf, capsys):
    """A tuner SIGKILLed holding the lease never let go; the next one waits until the lease's
    duration has passed since its last renewal, then takes it over."""
    spec = study_spec(windows=(5,), repeats=1)
    with Cluster(spec) as cluster:
        renewed = time.time() - 1
        cluster.api.leases["llmperf-tuner"] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "llmperf-tuner", "namespace": spec.namespace, "resourceVersion": "1"},
            "spec": {"holderIdentity": "study-killed (pod gone)", "leaseDurationSeconds": 2, "acquireTime": micro_time(renewed),
                     "renewTime": micro_time(renewed), "leaseTransitions": 0}}
        started = time.time()
        record = cluster.run(tmp_path / "pod", llmperf, one_request_runner([]))
        assert record["status"] == "complete"
        assert "study-killed (pod gone) holds lease llmperf-tuner" in capsys.readouterr().out
        # It waited for the lapse (about a second), no longer.
        first_scale = next(i for i, r in enumerate(cluster.api.requests) if r[0] == "PATCH")
        assert any(r[0] == "PUT" for r in cluster.api.requests[:first_scale])
        assert time.time() - started >= 0.9
        assert cluster.api.leases["llmperf-tuner"]["spec"]["leaseTransitions"] == 1


def test_load_is_a_third_axis_paired_at_each_level_and_resumed_by_level(tmp_path, llmperf):
    """benchmark.concurrency a list beside a study: every configuration at every level, each case
    of it right after the baseline's at the same level in its block, in the level's own folder; a
    pod killed mid-block resumes level by level, measuring nothing twice and no level for another."""
    stack = "qwen3-32b-study"
    raw = load_stack(stack).config
    spec = load_stack(stack, {
        "sd-trn2:study": {**raw["sd-trn2:study"], "windows": [5], "drafts": ["Qwen/Qwen3-1.7B"], "repeats": 2},
        "sd-trn2:modelRevisions": {m: c for m, c in raw["sd-trn2:modelRevisions"].items() if m != "Qwen/Qwen3-0.6B"},
        "sd-trn2:benchmark": {**raw["sd-trn2:benchmark"], "requestsPerTestCase": 1, "concurrency": [1, 4],
                              "testCases": {"counting": "counting numbers from 1 ", "sonnets": None}},
    }).spec()
    calls = []
    inner = one_request_runner(calls)

    def killing_runner(*args):
        if len(calls) == 3:  # repeat 1, counting: base and SD at concurrency 1, base at concurrency 4
            raise driver.Terminated("received signal 15 (Job deadline or pod deletion)")
        return inner(*args)

    with Cluster(spec) as cluster:
        study_id = cluster.config["study"]["id"]
        first = cluster.run(tmp_path / "pod-1", llmperf, killing_runner)
        assert first["status"] == "failed" and len(first["cases"]) == 3
        second = cluster.run(tmp_path / "pod-2", llmperf, inner)
        assert second["status"] == "complete"
        assert cluster.stored(f"{study_id}/repeat-2/beside-qwen3-1-7b-k5/base/sonnets/concurrency-4/case.json")["load"] == {
            "concurrency": 4}
    levels, tests = ("concurrency-1", "concurrency-4"), ("counting", "sonnets")
    measured = [(c["repeat"], c["variant"], c["testCase"], c["beside"], driver.at(c).removeprefix(" at ")) for c in second["cases"]]
    expected = [(r, server, t, beside, level) for r in (1, 2) for t in tests for level in levels
                for server, beside in (("base", "qwen3-1-7b-k5"), ("qwen3-1-7b-k5", None))]
    assert measured == expected  # in order: per test case and level, the baseline then the configuration
    # Nothing redone after the kill: the generator ran once per case, at the case's own level.
    assert len(calls) == len(expected)
    ran = [argv[argv.index("--num-concurrent-requests") + 1] for argv, *_ in calls]
    assert ran == [level.removeprefix("concurrency-") for *_, level in expected]
    assert second["progress"]["done"] == second["progress"]["total"] == 2 * 2 * 2 * 2  # repeats x servers x cases x levels
    # The plan's estimate counts the same cases (stackconfig/timeline.py).
    from stackconfig.timeline import study_modes
    assert f"{second['progress']['total']} cases (" in next(e for e in study_modes(spec) if e.mode == "sequential").terms
