"""Run a tuning study: every configuration of the stack, each test case, repeated, through the
driver's measuring proxy; in sequential mode one SD configuration up at a time; resumable.

    python -m benchmark.tuner --config run-config.json --results-dir /results \
        --generator-dir /opt/work/llmperf [--namespace NS] [--bucket B --prefix results/<pairing>/]

The run config's "study" (components/pairing/benchmark.py study_config) says how:
- mode "sequential" (`scales`): the servers are created at zero replicas and only the tuner sets
  their count, through the Deployment's scale subresource (its Role allows nothing else:
  components/pairing/benchmark_access.py tuner_rules). A variant of several pods (a distributed
  variant's target and draft: its "servers") is scaled, waited for and failed as one. The baseline stays up beside one SD
  configuration when the pair fits the nodes (`pairsFitTogether`), else one server runs at a time.
  Before a server is scaled up, every other one that must not run beside it is scaled down and its
  pods are gone.
- mode "parallel": every server is up from `pulumi up`; nothing is scaled.
The design (blocks): repeat 1 of every configuration, then repeat 2, ...; in each configuration's
block, per test case and load level (benchmark.concurrency or rate a list: load is the study's third
axis), the baseline (where the pair fits, or in parallel mode) and then the configuration at that
level, so each speedup is a ratio of two measurements minutes apart at one load (reporting/study.py);
where the pair does not fit, each repeat starts with the baselines alone. One tuner at a time: it
holds the namespace's lease while it runs (benchmark/lease.py).
Before a server is measured: wait until it serves and its compiled set is published
(benchmark/driver.py not_ready), or until its pods show it failed (a container that exited non-zero
RESTARTS_TO_FAIL times, a pod phase Failed, a container that cannot be created) or its startup
budget ran out: then it is recorded "failed" with the reason, never started again, and the study
goes on. Cases go to <study>/repeat-<r>/<variant>/<test case>/, the baseline's of a block to
<study>/repeat-<r>/beside-<configuration>/<baseline>/<test case>/, each level of several in a folder
of its own below that (<level>/, driver.run_case); the server is
checked before each case, so a restart mid-study is waited for. Each case's log line, and
study.json, say case i of N, the time this pod has run and the ETA at its pace.

Resume: study.json (the configurations' outcomes and every finished case, with its load level and
the files it wrote) is uploaded after each case; a resumed pod counts a recorded case as done only when all
those files are in S3 (an upload that failed before the pod was killed leaves it to be redone).
The study's folder is named by the run config's fingerprint and the Job's name
(study-<fingerprint>-<job>), so a new pod of the same Job (the Job starts one when a pod is killed
or evicted) reads it back and skips what it holds: finished cases and configurations are never
run twice; a changed study, or another Job (`make benchmark`), starts afresh. On the way out,
whatever the tuner scaled up is scaled down: a stopped study leaves no server running. The exit
code is 0 once the study has an outcome (complete, or incomplete with failed configurations
recorded: a retry would change nothing), 1 when it stopped before (the Job then starts a pod that
resumes it).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import traceback
import urllib.error
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import driver, lease, telemetry
from .driver import Hooks
from .proxy import RECORDS_FILE
from .results import CASE_FILE, STUDY_FILE, TELEMETRY_FILE, case_dir, run_levels, study_run_id

REQUIRED_FILES = (CASE_FILE, RECORDS_FILE)
"""What a case recorded before the tuner listed its files must have in the store to count as done."""
LATER_FILES = (TELEMETRY_FILE, driver.TELEMETRY_PUBLISHED_FILE, driver.PUBLISHED_FILE)
"""Files of a case folder written after the case (in the background), or markers of publishing:
not part of the measurement a resumed study checks for."""
RESTARTS_TO_FAIL = 2
"""A server whose container exited non-zero this many times has failed (a compile error, a
refused setting): it would only fail again. One restart may be a transient error."""
UNRECOVERABLE_WAITING = ("CreateContainerConfigError", "CreateContainerError", "InvalidImageName", "ErrImageNeverPull")
"""Container waiting reasons that no amount of waiting resolves (kubelet's; Kubernetes docs,
"Pod Lifecycle", container states)."""
START_MARGIN_S = 1800
"""Beyond a server's startup budget (its startup probe's), for scheduling and the copy from the store."""
SCALED_DOWN_WAIT_S = 600
FIELD_MANAGER = "sd-trn2-tuner"
"""The field manager the scale patches are recorded under: `pulumi up` then leaves the replica
count alone (ignoreChanges drops a field another manager owns from its server-side apply:
pulumi-kubernetes provider/pkg/await/await.go handleSSAIgnoreFields; docs/facts.md "Tuning study")."""


class KubernetesScaler:
    """The servers' replica counts and pods, through the Kubernetes API (in-cluster, the pod's
    token). `may_scale` False (parallel mode): pods are read, never scaled."""

    def __init__(self, api: Any, namespace: str, may_scale: bool = True):
        self.api, self.namespace, self.may_scale = api, namespace, may_scale

    def scale(self, deployment: str, replicas: int) -> None:
        if not self.may_scale:
            raise RuntimeError(f"a parallel study scales nothing (asked to scale {deployment} to {replicas})")
        path = (f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{deployment}/scale?"
                + urllib.parse.urlencode({"fieldManager": FIELD_MANAGER}))
        retried(lambda: self.api.patch(path, {"spec": {"replicas": replicas}}))

    def replicas(self, deployment: str) -> int:
        """The count the Deployment asks for, whatever its pods are doing (scale subresource, GET)."""
        scale = retried(lambda: self.api.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{deployment}/scale"))
        return int((scale.get("spec") or {}).get("replicas") or 0)

    def pods(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        """The server's pods that hold or may hold its devices: an evicted or finished pod (phase
        Failed or Succeeded) stays listed until it is garbage-collected, holds nothing, and the
        Deployment has replaced it, so it is left out."""
        items = retried(lambda: telemetry.list_pods(self.api, self.namespace, selector))
        return [p for p in items if (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")]


API_ATTEMPTS = 5


def retried(call: Callable[[], Any], attempts: int = API_ATTEMPTS, sleep: Callable[[float], None] = time.sleep) -> Any:
    """A Kubernetes API call, tried again on a dropped connection or a 429/5xx answer (a control
    plane upgrade, throttling), so a long study does not end on one blip. Other answers (403, 404)
    are the program's error, raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except urllib.error.HTTPError as error:
            if error.code != 429 and error.code < 500 or attempt == attempts:
                raise
        except OSError:
            if attempt == attempts:
                raise
        sleep(min(60, 2 ** attempt))


class NoCluster:
    """Outside a cluster (a local run against servers it cannot see): nothing to scale or read."""

    def scale(self, deployment: str, replicas: int) -> None:
        raise RuntimeError(f"not running in a Kubernetes cluster: cannot scale {deployment}")

    def replicas(self, deployment: str) -> int:
        return 0

    def pods(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        return []


@dataclass
class TunerHooks:
    scaler: Any
    recall: Callable[[Path], bytes | None] = lambda path: None
    """A file of the results folder as the store holds it (production: S3), None if absent."""
    clock: Callable[[], float] = time.monotonic
    lease: Any = None
    """One tuner per study stack (benchmark/lease.py Lease); None outside a cluster."""


def pod_failure(pods: list[dict[str, Any]]) -> str | None:
    """Why a server's pods show it cannot serve, or None while it may still start. Fields as the
    Pod schema has them: status.{init,}containerStatuses[].{name, restartCount,
    state.waiting.reason, lastState.terminated.{exitCode, reason, message}}. An evicted pod is
    not a failed server: the Deployment replaces it (KubernetesScaler.pods leaves it out)."""
    for pod in pods:
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in UNRECOVERABLE_WAITING:
                return f"container {container['name']} of pod {name} cannot start: {waiting['reason']}: {waiting.get('message')}"
            ended = (container.get("lastState") or {}).get("terminated") or {}
            running = "running" in (container.get("state") or {})  # restarted, and now up again: give it its time
            if not running and container.get("restartCount", 0) >= RESTARTS_TO_FAIL and ended.get("exitCode"):
                return (f"container {container['name']} of pod {name} exited {ended['exitCode']} ({ended.get('reason')}) "
                        f"{container['restartCount']} times; last: {(ended.get('message') or '').strip()[-400:]}")
    return None


@dataclass(frozen=True)
class Block:
    """One configuration's turn in one repeat: its servers up, every test case measured, the
    baseline (when it is measured here) and the configuration back to back per test case."""

    repeat: int
    variant: dict
    baseline: dict | None
    """The baseline measured beside the configuration, in this block."""

    def servers(self) -> list[dict]:
        return [s for s in (self.baseline, self.variant) if s]

    def beside(self, server: dict) -> str | None:
        """Where the baseline's cases of this block go (repeat-<r>/beside-<configuration>/)."""
        return self.variant["name"] if server is self.baseline else None


def blocks(variants: list[dict], study: dict) -> list[Block]:
    """The study's design: repeats interleaved across configurations (repeat 1 of every
    configuration, then repeat 2, ...), so drift over the hours of a study, and each server's
    restarts, fall on every configuration alike; and the baseline measured inside every
    configuration's block, next to it, so each speedup is a paired ratio (reporting/study.py).
    Where a pair does not fit the nodes, each repeat starts with the baselines alone, and its
    configurations are paired with that."""
    beside = study["pairsFitTogether"] or not study["scales"]
    by_name = {v["name"]: v for v in variants}
    roots = [] if beside else [v for v in variants if not v.get("baseline")]
    compared = [v for v in variants if v.get("baseline")]
    return [Block(r, v, by_name[v["baseline"]] if beside and v in compared else None)
            for r in range(1, study["repeats"] + 1) for v in roots + compared]


def case_key(repeat: int, variant: str, test_case: str, beside: str | None, level: str | None) -> tuple:
    """A case's place in the study; `level` its level's folder (None in a study of one level), so a
    resumed study never counts one level's case as another's."""
    return repeat, variant, test_case, beside, level


def new_record(config: dict, study_id: str) -> dict[str, Any]:
    return {**driver.run_record(config, study_id), "study": {**config["study"], "id": study_id,
                                                              "configuration": config["study"]["id"]},
            "configurations": {v["name"]: {"status": "pending", "reason": None} for v in config["variants"]}}


class Tuner:
    def __init__(self, config: dict, results_dir: Path, generator_dir: Path, hooks: Hooks, tuner: TunerHooks,
                 study_id: str | None = None):
        self.config, self.results_dir, self.generator_dir, self.hooks, self.tuner = config, results_dir, generator_dir, hooks, tuner
        self.study = config["study"]
        self.study_id = study_id or self.study["id"]
        """The study's folder: the configuration's id, and the Job's name in the pod (study_folder)."""
        self.by_name = {v["name"]: v for v in config["variants"]}
        self.up: list[str] = []
        """What the tuner has scaled up, in order."""

    @property
    def study_dir(self) -> Path:
        return self.results_dir / self.study_id

    def recorded(self) -> dict[str, Any]:
        """The study as a previous pod left it in the store, or a new record."""
        stored = self.tuner.recall(self.study_dir / STUDY_FILE)
        if stored is None:
            return new_record(self.config, self.study_id)
        record = json.loads(stored)
        # A case counts as done only once every file it wrote is in the store: one whose upload
        # failed before the pod was killed is measured again, and its configuration with it.
        stored_cases = [c for c in record["cases"] if self.in_store(c)]
        for lost in (c for c in record["cases"] if c not in stored_cases):
            print(f"repeat {lost['repeat']} {lost['testCase']}/{lost['variant']}{driver.at(lost)}: recorded, but its files are not all in the "
                  "store: measuring it again", flush=True)
            if record["configurations"][lost["variant"]]["status"] == "done":
                record["configurations"][lost["variant"]].update(status="pending", reason=None)
        record["cases"] = stored_cases
        print(f"resuming study {self.study_id}: {len(record['cases'])} case(s) and "
              f"{sum(c['status'] in ('done', 'failed') for c in record['configurations'].values())} configuration(s) "
              "already recorded", flush=True)
        record.update(status="running", reason=None, finishedAt=None)
        return record

    def case_folder(self, repeat: int, variant: str, test_case: str, beside: str | None = None, level: str | None = None) -> Path:
        return case_dir(self.results_dir, study_run_id(self.study_id, repeat, beside), variant, test_case, level)

    def in_store(self, case: dict[str, Any]) -> bool:
        folder = self.case_folder(case["repeat"], case["variant"], case["testCase"], case.get("beside"), driver.case_level(case))
        return all(self.hooks.uploaded(folder / name) for name in case.get("files") or REQUIRED_FILES)

    def set_up(self, names: list[str]) -> None:
        """Scale down what must not run beside `names` and wait for its pods to go, then scale up
        what is missing. Parallel mode: nothing to do."""
        if not self.study["scales"]:
            return
        # What this pod scaled up, and whatever a killed one left asking for a replica.
        for name in [n for n in self.by_name if n not in names]:
            if name in self.up or self.asks_for_replicas(name):
                self.scale(name, 0)
        deadline = self.tuner.clock() + SCALED_DOWN_WAIT_S
        for name in [n for n in self.by_name if n not in names]:
            while self.pods(name):
                if self.tuner.clock() >= deadline:
                    raise TimeoutError(f"the pods of {name} are still there {SCALED_DOWN_WAIT_S} s after it was scaled down")
                self.hooks.sleep(self.hooks.poll_s)
        for name in [n for n in names if n not in self.up]:
            self.scale(name, 1)

    def asks_for_replicas(self, name: str) -> bool:
        return any(self.tuner.scaler.replicas(server["deployment"]) for server in self.by_name[name]["servers"])

    def pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of every server of the variant."""
        return [pod for server in self.by_name[name]["servers"] for pod in self.tuner.scaler.pods(server["podSelector"])]

    def scale(self, name: str, replicas: int) -> None:
        self.check_lease()
        for server in self.by_name[name]["servers"]:
            print(f"scaling {server['deployment']} to {replicas}", flush=True)
            self.tuner.scaler.scale(server["deployment"], replicas)
        if replicas:
            self.up.append(name)
        elif name in self.up:
            self.up.remove(name)

    def serving_failure(self, variant: dict) -> str | None:
        """Wait until the variant serves; None, or why it never will."""
        deadline = self.tuner.clock() + variant.get("startupBudgetSeconds", 0) + START_MARGIN_S
        while why := driver.not_ready(variant, self.hooks.healthy, self.hooks.committed):
            failure = pod_failure(self.pods(variant["name"]))
            if failure:
                return failure
            if self.tuner.clock() >= deadline:
                return f"{why} after {variant.get('startupBudgetSeconds', 0) + START_MARGIN_S} s (its startup budget and {START_MARGIN_S} s)"
            print(f"waiting for {variant['name']} ({why})", flush=True)
            self.hooks.sleep(self.hooks.poll_s)
        return None

    def check_lease(self) -> None:
        if self.tuner.lease:
            self.tuner.lease.check()

    def run(self) -> dict[str, Any]:
        if self.tuner.lease:
            self.tuner.lease.acquire()  # before anything is read or scaled: one tuner at a time
        record = self.recorded()
        self.study_dir.mkdir(parents=True, exist_ok=True)
        self.hooks.save(self.study_dir / STUDY_FILE, record)
        background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry")
        done = {case_key(c["repeat"], c["variant"], c["testCase"], c.get("beside"), driver.case_level(c)) for c in record["cases"]}
        design = blocks(self.config["variants"], self.study)
        # Cases recorded before, or never to be measured (a failed server's), count as done as their blocks come.
        progress = driver.Progress(sum(len(b.servers()) for b in design) * len(self.config["testCases"]) * len(run_levels(self.config)),
                                   clock=self.tuner.clock)
        try:
            with driver.run_generator(self.config).prompts(self.generator_dir) as use_prompt:
                for block in design:
                    self.measure(block, record, done, progress, use_prompt, background)
            for outcome in record["configurations"].values():
                if outcome["status"] != "failed":
                    outcome["status"] = "done"
            failed = [n for n, c in record["configurations"].items() if c["status"] == "failed"]
            short = [f"repeat {c['repeat']} {c['testCase']}/{c['variant']}{driver.at(c)}" for c in record["cases"] if c["short"]]
            problems = ([f"failed configurations: {', '.join(failed)}"] if failed else []) + (
                [f"short cases: {', '.join(short)}"] if short else [])
            record["status"], record["reason"] = ("incomplete", "; ".join(problems)) if problems else ("complete", None)
        except Exception as error:  # Terminated included: the study resumes from what is recorded
            traceback.print_exc()
            record["status"], record["reason"] = "failed", f"{type(error).__name__}: {error}"
        finally:
            # First, while the pod surely has the time: a SIGTERM during telemetry's wait below
            # must not leave servers running.
            self.scale_everything_down()
            background.shutdown(wait=record["status"] != "failed", cancel_futures=record["status"] == "failed")
        try:
            driver.close_record(record, self.hooks, self.study_dir / STUDY_FILE)
        finally:
            if self.tuner.lease:
                try:
                    self.tuner.lease.release()
                except Exception as error:  # it lapses by itself
                    print(f"WARNING: could not release lease {lease.NAME}: {error}", flush=True)
        return record

    def measure(self, block: Block, record: dict, done: set, progress: "driver.Progress",
                use_prompt: Callable[[str | None], None], background: ThreadPoolExecutor) -> None:
        """Every test case and level of one block not yet recorded, the baseline and then the configuration;
        a server that does not serve is recorded failed (with why) and not started again, not
        even as a baseline beside another."""
        outcomes = record["configurations"]
        servers = [s for s in block.servers() if outcomes[s["name"]]["status"] != "failed"]
        levels = run_levels(self.config)
        # Per test case and level, the baseline and then the configuration: each pair at one load.
        missing = [(t, level, s) for t in self.config["testCases"] for level in levels for s in servers
                   if case_key(block.repeat, s["name"], t, block.beside(s), driver.level_folder(self.config, level)) not in done]
        cases = len(block.servers()) * len(self.config["testCases"]) * len(levels)
        if block.variant not in servers:  # failed: nothing to measure, nor to measure the baseline beside
            progress.skip(cases)
            return
        progress.skip(cases - len(missing))
        if not missing:
            return
        self.set_up([s["name"] for s in servers])
        for test_case, level, server in missing:
            where = driver.level_folder(self.config, level)
            if outcomes[block.variant["name"]]["status"] == "failed" or outcomes[server["name"]]["status"] == "failed":
                progress.skip(1)  # nothing to pair with, or nothing to measure
                continue
            self.check_lease()  # another tuner may now hold the servers: measure nothing more
            # The configuration first: a baseline is not measured beside one that never serves.
            failures = {s["name"]: self.serving_failure(s) for s in sorted(servers, key=lambda s: s is not block.variant)
                        if outcomes[s["name"]]["status"] != "failed"}  # a server that restarted is waited for
            for name, failure in failures.items():
                if failure:
                    measured = any(c["variant"] == name for c in record["cases"])
                    reason = f"stopped serving at repeat {block.repeat}, {test_case}{driver.at_level(where)}: {failure}" if measured else failure
                    outcomes[name].update(status="failed", reason=reason)
                    print(f"{name}: failed: {reason}", flush=True)
                    self.hooks.save(self.study_dir / STUDY_FILE, record)
            if any(failures.values()):
                progress.skip(1)
                continue
            use_prompt(self.config["testCases"][test_case])
            beside = block.beside(server)
            print(f"{progress.next()}: repeat {block.repeat}, {server['name']}{driver.at_level(where)}"
                  + (f" (beside {beside})" if beside else ""), flush=True)
            case = driver.run_case(self.config, server, test_case, level, self.results_dir,
                                   study_run_id(self.study_id, block.repeat, beside), self.generator_dir, self.hooks, background)
            # What resuming checks is in the store (telemetry and markers come later, or not at all).
            files = sorted(p.name for p in self.case_folder(block.repeat, server["name"], test_case, beside, where).iterdir()
                           if p.is_file() and p.name not in LATER_FILES)
            record["cases"].append({**case, "repeat": block.repeat, "beside": beside, "files": files})
            done.add(case_key(block.repeat, server["name"], test_case, beside, where))
            record["progress"] = progress.done()
            self.hooks.save(self.study_dir / STUDY_FILE, record)

    def scale_everything_down(self) -> None:
        """Every server this pod, or a killed one before it, left asking for a replica; none once
        another tuner holds the lease (they are its servers now)."""
        if not self.study["scales"]:
            return
        if self.tuner.lease and self.tuner.lease.lost:
            print(f"not scaling anything down: {self.tuner.lease.lost}", flush=True)
            return
        for name in self.by_name:
            try:
                if name in self.up or self.asks_for_replicas(name):
                    self.scale(name, 0)
            except Exception as error:  # on the way out: say so, and go on with the others
                print(f"WARNING: could not scale {name} down: {error}", flush=True)


def run_study(config: dict, results_dir: Path, generator_dir: Path, hooks: Hooks, tuner: TunerHooks,
              study_id: str | None = None) -> dict[str, Any]:
    return Tuner(config, results_dir, generator_dir, hooks, tuner, study_id).run()


def study_folder(config: dict, job_name: str | None) -> str:
    """study-<configuration fingerprint>-<job>: the pods of one Job share it (and resume it)."""
    return f"{config['study']['id']}-{job_name}" if job_name else config["study"]["id"]


FINISHED = ("complete", "incomplete")
"""Outcomes a new pod would not change: the Job should not start one."""


def production_tuner(config: dict, args: argparse.Namespace, hooks: Hooks) -> TunerHooks:
    """The pod's wiring: the in-cluster Kubernetes API, and the study's results in S3."""
    scaler: Any = NoCluster()
    if telemetry.SERVICE_ACCOUNT_DIR.exists():
        scaler = KubernetesScaler(telemetry.KubernetesApi.in_cluster(),
                                  (telemetry.SERVICE_ACCOUNT_DIR / "namespace").read_text().strip(),
                                  may_scale=config["study"]["scales"])
    wiring = TunerHooks(scaler=scaler)
    if isinstance(scaler, KubernetesScaler):
        wiring.lease = lease.Lease(scaler.api, scaler.namespace, f"{study_folder(config, os.environ.get('JOB_NAME'))} "
                                                                  f"(pod {socket.gethostname()})")
    if isinstance(hooks.upload, driver.S3Mirror):
        mirror = hooks.upload

        def recall(path: Path) -> bytes | None:
            if not mirror.exists(path):
                return None
            return mirror.client.get_object(Bucket=mirror.bucket, Key=mirror.key(path))["Body"].read()
        wiring.recall = recall
    return wiring


def main(argv: list[str] | None = None) -> int:
    args = driver.pod_arguments(__doc__, argv, "study")
    driver.stop_on_sigterm()
    config = json.loads(args.config.read_text())
    hooks = driver.production_hooks(config, args)
    study_id = study_folder(config, os.environ.get("JOB_NAME"))
    record = run_study(config, args.results_dir, args.generator_dir, hooks, production_tuner(config, args, hooks), study_id)
    where = f"s3://{args.bucket}/{args.prefix}{study_id}/" if args.bucket else str(args.results_dir / study_id)
    print(f"study {study_id}: {record['status']}{': ' + record['reason'] if record['reason'] else ''}; results in {where}",
          flush=True)
    return 0 if record["status"] in FINISHED and not hooks.upload_errors else 1


if __name__ == "__main__":
    sys.exit(main())
