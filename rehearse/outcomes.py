"""What a rehearsal must have ended in, checked from what it left (the bucket, the timeline, the
pods' logs): the models prepared, each compiled set committed exactly once and copied in place, no
variant measured before its set was committed, the run's status, and each chosen fault's documented
outcome (rehearse/faults.py). Each check: {"check", "ok", "detail"}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmark.results import RUN_FILE, STUDY_FILE
from modelstore.layout import COMMIT_FILE, COMPLETE_FILE, FILES_DIR, MANIFEST_FILE, STAGING_ROOT, WEIGHTS_MARKER
from stackconfig.engines.distributed import SIGNATURES

from .faults import EVICTING_LIMIT, PUBLISHER_POLL_S
from .kubelet import EMPTYDIR_EVICTION

SECOND_TUNER = "{job} (second)"
"""The controller of the second tuner's pods (fault two-tuners)."""
LEASE_WAIT = "waiting for the study running in this namespace to end"
"""What a tuner says while another holds the lease (benchmark/lease.py Lease.acquire)."""


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": bool(ok), "detail": detail}


def latest_run(bucket_dir: Path, results_prefix: str, record: str = RUN_FILE) -> dict[str, Any] | None:
    """The run's run.json (a study's study.json)."""
    records = sorted((bucket_dir / results_prefix).glob(f"*/{record}"))
    return json.loads(records[-1].read_text()) if records else None


def check(rehearsal: Any) -> list[dict[str, Any]]:
    spec, faults, out = rehearsal.spec, rehearsal.faults, rehearsal.out
    bucket = out / "bucket"
    writes = rehearsal.watch.writes if hasattr(rehearsal, "watch") else {}
    checks = []
    for model in spec.prepared_models:
        checks.append(_check(f"prepared {model.model}", (bucket / model.prefix / WEIGHTS_MARKER).exists(),
                             f"s3://.../{model.prefix}{WEIGHTS_MARKER}"))
    committed_at: dict[str, float] = {}
    tuned = rehearsal.shape.get("configurations")
    served = [v for v in spec.variants if tuned is None or v.name in tuned or any(v.name == spec.variant(t).baseline for t in tuned)]
    for variant in served:
        for server in variant.servers:  # each pod of a variant publishes its own set (a distributed target's, its draft's)
            artifact, name = variant.server_artifact_path(server), variant.name + (f"/{server.part}" if server.part else "")
            commits = writes.get(f"{artifact}/{COMMIT_FILE}", 0)
            staged = sorted(p.parent.name for p in (bucket / STAGING_ROOT / artifact).glob("*/manifest.json"))
            complete = (bucket / artifact / COMPLETE_FILE).exists()
            if "compile-fails" in faults and variant.name == rehearsal.sd.name:
                checks.append(_check(f"nothing published for {name} (compile-fails)", commits == 0 and not staged and not complete,
                                     f"commit.json written {commits} time(s), staging sets {staged}, complete.json {complete}"))
                continue
            detail = f"commit.json written {commits} time(s), complete.json {'present' if complete else 'missing'}, staging sets {staged}"
            if "compile-fails" in faults:  # the run ends when SD has failed, maybe before this server was ever healthy
                checks.append(_check(f"{name}'s compiled set committed at most once", commits <= 1, detail))
            else:
                checks.append(_check(f"{name}'s compiled set committed once and in place", commits == 1 and complete and len(staged) == 1,
                                     detail))
            if commits:  # a variant is measured once every one of its sets is committed
                committed_at[variant.name] = max(committed_at.get(variant.name, 0.0), rehearsal.s3.head_object(
                    Bucket=rehearsal.bucket, Key=f"{artifact}/{COMMIT_FILE}")["LastModified"].timestamp())
    run = latest_run(bucket, spec.results_prefix, STUDY_FILE if spec.study else RUN_FILE)
    cases = _cases(bucket, spec.results_prefix)
    early = [f"{c['variant']}/{c['testCase']}" for c in cases if c["startedAt"] < committed_at.get(c["variant"], float("inf"))]
    checks.append(_check("no variant measured before its compiled set was committed", not early,
                         f"{len(cases)} case(s) measured; before the commit: {early or 'none'}"))
    status = run.get("status") if run else None
    expected = "failed" if "compile-fails" in faults else "incomplete" if {"server-crash", "target-restart"} & set(faults) else "complete"
    checks.append(_check(f"{'study' if spec.study else 'benchmark run'} {expected}", status == expected,
                         f"{STUDY_FILE if spec.study else RUN_FILE} status {status}"
                         f"{': ' + str(run.get('reason')) if run and run.get('reason') else ''}"))
    if spec.study and spec.tuned_servers:
        checks.append(scaled_one_at_a_time(rehearsal))
    checks += [fault_check(rehearsal, f, cases) for f in faults]
    return checks


def scaled_one_at_a_time(rehearsal: Any) -> dict[str, Any]:
    """Sequential study: never more than the baseline and one configuration up (what the tuner
    asked of the API), every configuration scaled up once and down again."""
    history = rehearsal.kubernetes_history
    speculative = {f"vllm-{v.name}" for v in rehearsal.spec.variants if v.is_speculative}
    crowded = [sorted(up) for up in history if len(up & speculative) > 1]
    up = [sorted(u) for u in history]
    return _check("study servers scaled one configuration at a time", bool(history) and not crowded and history[-1] == frozenset(),
                  f"{len(history)} scale request(s); up after each: {up}; more than one configuration up: {crowded or 'never'}")


def _cases(bucket: Path, results_prefix: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((bucket / results_prefix).glob("**/case.json"))]


def fault_check(rehearsal: Any, fault: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    timeline, sd = rehearsal.timeline, rehearsal.sd.name
    sd_cases = [c for c in cases if c["variant"] == sd]
    if fault == "healthy-before-compile-complete":
        healthy = [e["t"] for e in timeline.of("health", f"vllm-{sd}") if e["detail"] == "healthy"]
        complete = [e["t"] for e in timeline.of("marker") if e["subject"].startswith(f"vllm-{sd}-")
                    and e["detail"].startswith("node-cache/compiled/") and e["detail"].endswith("/.complete")]
        # The publisher polls every 30 s: a server healthy longer than that before the marker was
        # seen healthy by the publisher with the compile incomplete.
        bit = bool(healthy and complete) and complete[0] - healthy[0] > PUBLISHER_POLL_S
        return _check("fault healthy-before-compile-complete: published once all the same", bit and bool(sd_cases),
                      f"{sd} healthy at {healthy[:1]} s, its compile marked complete at {complete[:1]} s "
                      f"({'the publisher saw it healthy first' if bit else 'the fault did not bite'}); "
                      f"{len(sd_cases)} {sd} case(s) measured after the commit")
    if fault == "server-crash":
        restarts = [e for e in timeline.of("container-start") if e["subject"].startswith(f"vllm-{sd}-") and e["subject"].endswith("/vllm")
                    and e["restarts"] > 0]
        crashed = [c for c in sd_cases if c.get("exitCode") is not None]
        short = [f"{c['testCase']}" for c in crashed if _failed(rehearsal, c)]
        return _check("fault server-crash: restarted, the case recorded failed, later cases measured",
                      bool(timeline.of("fault", "server-crash")) and bool(restarts) and bool(short) and len(sd_cases) == len(rehearsal.shape["testCases"]),
                      f"restarts {len(restarts)}; {sd} cases with failed requests: {short or 'none'}; {len(sd_cases)} {sd} case(s) measured")
    if fault == "s3-5xx":
        proxy = rehearsal.proxy
        return _check("fault s3-5xx: every write retried and landed", proxy.failed > 0,
                      f"{proxy.failed} of {proxy.count} request(s) through the proxy answered 503 SlowDown")
    if fault == "emptydir-over-limit":
        evicted = [e for e in timeline.of("pod-evicted") if e["subject"].startswith(f"vllm-{sd}-")]
        reason = EMPTYDIR_EVICTION.format(volume="node-cache", limit=EVICTING_LIMIT)
        return _check("fault emptydir-over-limit: evicted with the reason, replaced, measured",
                      len(evicted) == 1 and evicted[0]["detail"] == reason and bool(sd_cases),
                      f"evictions: {[e['detail'] for e in evicted]}; {len(sd_cases)} {sd} case(s) measured")
    if fault == "compile-fails":
        exits = [e for e in timeline.of("container-exit") if e["subject"].startswith(f"vllm-{sd}-") and e["subject"].endswith("/vllm")]
        return _check("fault compile-fails: never measured, run failed", len(exits) >= 2 and not sd_cases,
                      f"{len(exits)} exit(s) of {sd}'s server; {len(sd_cases)} {sd} case(s) measured")
    if fault == "prep-killed-mid-upload":
        return preparation_killed(rehearsal)
    if fault == "tuner-killed":
        return tuner_killed(rehearsal)
    if fault == "target-restart":
        return target_restarted(rehearsal, cases)
    if fault == "two-tuners":
        return two_tuners(rehearsal, cases)
    raise ValueError(fault)


def server_log(rehearsal: Any, controller: Any) -> str:
    """Every log of the server container of a controller's pods."""
    logs = [rehearsal.out / "pods" / p.name / "logs" / f"{p.containers[0].name}.log" for p in controller.pods]
    return "".join(log.read_text(errors="replace") for log in logs if log.exists())


def target_restarted(rehearsal: Any, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The distributed target killed mid-request: the draft failed that request in its own words
    (stackconfig/engines/distributed.py SIGNATURES) and counted it, kept running; the target came
    back; the case is short and every case of the variant was measured."""
    variant = rehearsal.distributed.name
    draft, target = rehearsal.distributed_server("draft"), rehearsal.distributed_server("target")
    restarts = [e for e in rehearsal.timeline.of("container-start") if e["subject"].startswith(f"{target.workload.name}-")
                and e["subject"].endswith(f"/{target.pods[0].containers[0].name}") and e["restarts"] > 0] if target.pods else []
    draft_exits = [e for e in rehearsal.timeline.of("container-exit") if e["subject"].startswith(f"{draft.workload.name}-")
                   and e["subject"].endswith(f"/{draft.pods[0].containers[0].name}")] if draft.pods else []
    logged = [line for line in server_log(rehearsal, draft).splitlines() if SIGNATURES["request-failed"].matches(line)]
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in getattr(rehearsal, "draft_metrics", "").splitlines()
                  if line.startswith('distributed_requests_total{outcome="failed"}'))
    measured = [c for c in cases if c["variant"] == variant]
    short = [c["testCase"] for c in measured if _failed(rehearsal, c)]
    ok = "target-restart" in rehearsal.killed and bool(restarts) and not draft_exits and bool(logged) and counted >= 1 \
        and bool(short) and len(measured) == len(rehearsal.shape["testCases"])
    return _check("fault target-restart: the draft failed the request cleanly and counted it, the target came back", ok,
                  f"killed: {'target-restart' in rehearsal.killed}; target restarts {len(restarts)}; draft exits {len(draft_exits)}; "
                  f"the draft logged {len(logged)} failed request(s) ({logged[0].split(': ', 1)[-1][:160] if logged else 'none'}) "
                  f"and counted {counted:g}; {variant} cases with failed requests: {short or 'none'}; {len(measured)} {variant} "
                  "case(s) measured")


def preparation_killed(rehearsal: Any) -> dict[str, Any]:
    """Killed mid-upload, retried by its Job; the manifest lists every file as the store holds
    it, and the marker was written once, after the manifest."""
    timeline, bucket = rehearsal.timeline, rehearsal.out / "bucket"
    victim = getattr(rehearsal, "prep_victim", "")
    prefix = next(m.prefix for m in rehearsal.spec.prepared_models if m.model == rehearsal.spec.serving.target)
    manifest_path = bucket / prefix / MANIFEST_FILE
    files = json.loads(manifest_path.read_text())["files"] if manifest_path.exists() else []
    wrong = [f["path"] for f in files if not (bucket / prefix / FILES_DIR / f["path"]).is_file()
             or (bucket / prefix / FILES_DIR / f["path"]).stat().st_size != f["size"]]
    # The listing that first showed each (two writes within one 0.5 s poll are not ordered).
    first = {name: next((e["poll"] for e in timeline.of("store-write", prefix + name)), None) for name in (MANIFEST_FILE, WEIGHTS_MARKER)}
    markers = rehearsal.watch.writes.get(prefix + WEIGHTS_MARKER, 0)
    ordered = None not in first.values() and first[WEIGHTS_MARKER] >= first[MANIFEST_FILE]
    retries = timeline.of("job-retry", victim)
    ok = "prep-killed-mid-upload" in rehearsal.killed and bool(retries) and bool(files) and not wrong and markers == 1 and ordered
    return _check("fault prep-killed-mid-upload: retried; the marker once, after a complete manifest", ok,
                  f"killed: {'prep-killed-mid-upload' in rehearsal.killed}; {victim} retried {len(retries)} time(s); manifest lists "
                  f"{len(files)} file(s), missing or of another size in the store: {wrong or 'none'}; marker written {markers} time(s), "
                  f"first listed by poll {first[WEIGHTS_MARKER]}, the manifest by poll {first[MANIFEST_FILE]}")


def tuner_logs(rehearsal: Any, second: bool = False) -> list[str]:
    """The tuner logs of the benchmark Job's pods, in the order they started; `second`: of the
    second tuner's pods only (fault two-tuners)."""
    pods = [p for n, c in rehearsal.controllers.items() if c.workload.name == rehearsal.benchmark
            and (not second or n == SECOND_TUNER.format(job=rehearsal.benchmark)) for p in c.pods]
    return [(rehearsal.out / "pods" / p.name / "logs" / f"{p.containers[0].name}.log").read_text(errors="replace")
            if (rehearsal.out / "pods" / p.name / "logs" / f"{p.containers[0].name}.log").exists() else "" for p in pods]


def each_case_once(rehearsal: Any) -> tuple[bool, str]:
    study = latest_run(rehearsal.out / "bucket", rehearsal.spec.results_prefix, STUDY_FILE) or {"cases": []}
    keys = [(c["repeat"], c["variant"], c["testCase"], c.get("beside")) for c in study["cases"]]
    return len(keys) == len(set(keys)) and bool(keys), f"{len(keys)} case(s) recorded, {len(keys) - len(set(keys))} twice"


def tuner_killed(rehearsal: Any) -> dict[str, Any]:
    """Killed mid-case; the Job's next pod waited for the lease to lapse, resumed, and measured
    every case once (the killed one again)."""
    logs = tuner_logs(rehearsal)
    later = logs[1:]
    waited = any(LEASE_WAIT in log for log in later)
    resumed = any("resuming study" in log for log in later)
    once, detail = each_case_once(rehearsal)
    ok = "tuner-killed" in rehearsal.killed and waited and resumed and once
    return _check("fault tuner-killed: the next pod waited for the lease to lapse, resumed, redid the case", ok,
                  f"{len(logs)} tuner pod(s); a later one waited for the lease: {waited}, resumed: {resumed}; {detail}")


def two_tuners(rehearsal: Any, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The second tuner waited; no case (case.json: when it started and finished) was measured
    while its server was scaled down."""
    logs = tuner_logs(rehearsal, second=True)
    waited = bool(logs) and LEASE_WAIT in logs[0]
    downs = [e for e in rehearsal.timeline.of("scale") if e["replicas"] == 0]
    under = [f"{c['variant']}/{c['testCase']}" for c in cases for e in downs
             if e["subject"] == f"vllm-{c['variant']}" and c["startedAt"] <= e["wall"] <= c["finishedAt"]]
    once, detail = each_case_once(rehearsal)
    ok = "two-tuners" in rehearsal.killed and waited and not under and once
    return _check("fault two-tuners: the second waited, no server scaled away under a case", ok,
                  f"the second tuner's pods: {len(logs)}; it waited for the lease: {waited}; cases measured while their server was "
                  f"scaled down: {under or 'none'}; {detail}")


def _failed(rehearsal: Any, case: dict[str, Any]) -> bool:
    run = latest_run(rehearsal.out / "bucket", rehearsal.spec.results_prefix) or {}
    return any(c["variant"] == case["variant"] and c["testCase"] == case["testCase"] and (c["failed"] or c["short"])
               for c in run.get("cases", []))
