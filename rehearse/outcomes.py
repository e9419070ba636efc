"""What a rehearsal must have ended in, checked from what it left (the bucket, the timeline, the
pods' logs): the models prepared, each compiled set committed exactly once and copied in place, no
variant measured before its set was committed, the run's status, and each chosen fault's documented
outcome (rehearse/faults.py). Each check: {"check", "ok", "detail"}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from modelstore.layout import COMMIT_FILE, COMPLETE_FILE, STAGING_ROOT, WEIGHTS_MARKER

from .faults import EVICTING_LIMIT, PUBLISHER_POLL_S
from .kubelet import EMPTYDIR_EVICTION


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": bool(ok), "detail": detail}


def latest_run(bucket_dir: Path, results_prefix: str) -> dict[str, Any] | None:
    records = sorted((bucket_dir / results_prefix).glob("*/run.json"))
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
    for variant in spec.variants:
        artifact = variant.artifact_path
        commits = writes.get(f"{artifact}/{COMMIT_FILE}", 0)
        staged = sorted(p.parent.name for p in (bucket / STAGING_ROOT / artifact).glob("*/manifest.json"))
        complete = (bucket / artifact / COMPLETE_FILE).exists()
        if "compile-fails" in faults and variant.name == rehearsal.sd.name:
            checks.append(_check(f"nothing published for {variant.name} (compile-fails)", commits == 0 and not staged and not complete,
                                 f"commit.json written {commits} time(s), staging sets {staged}, complete.json {complete}"))
            continue
        detail = f"commit.json written {commits} time(s), complete.json {'present' if complete else 'missing'}, staging sets {staged}"
        if "compile-fails" in faults:  # the run ends when SD has failed, maybe before this server was ever healthy
            checks.append(_check(f"{variant.name}'s compiled set committed at most once", commits <= 1, detail))
        else:
            checks.append(_check(f"{variant.name}'s compiled set committed once and in place", commits == 1 and complete and len(staged) == 1,
                                 detail))
        if commits:
            committed_at[variant.name] = rehearsal.s3.head_object(Bucket=rehearsal.bucket, Key=f"{artifact}/{COMMIT_FILE}")[
                "LastModified"].timestamp()
    run = latest_run(bucket, spec.results_prefix)
    cases = _cases(bucket, spec.results_prefix)
    early = [f"{c['variant']}/{c['testCase']}" for c in cases if c["startedAt"] < committed_at.get(c["variant"], float("inf"))]
    checks.append(_check("no variant measured before its compiled set was committed", not early,
                         f"{len(cases)} case(s) measured; before the commit: {early or 'none'}"))
    status = run.get("status") if run else None
    expected = "failed" if "compile-fails" in faults else "incomplete" if "server-crash" in faults else "complete"
    checks.append(_check(f"benchmark run {expected}", status == expected,
                         f"run.json status {status}{': ' + str(run.get('reason')) if run and run.get('reason') else ''}"))
    checks += [fault_check(rehearsal, f, cases) for f in faults]
    return checks


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
    raise ValueError(fault)


def _failed(rehearsal: Any, case: dict[str, Any]) -> bool:
    run = latest_run(rehearsal.out / "bucket", rehearsal.spec.results_prefix) or {}
    return any(c["variant"] == case["variant"] and c["testCase"] == case["testCase"] and (c["failed"] or c["short"])
               for c in run.get("cases", []))
