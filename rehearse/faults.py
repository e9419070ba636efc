"""Faults on demand (`FAULTS=a,b`): what each does to the rehearsal and the outcome it must end in.

A fault hits the stack's first speculative (SD) variant (a study's: the first configuration it
measures), or what it names (every pod, the target's preparation, the study's tuner, the target
server of a distributed variant). The
rehearsal checks each chosen fault's outcome after the run (rehearse/outcomes.py) and exits 1 when
one did not happen as documented (docs/rehearsal.md, "Faults").
"""
from __future__ import annotations

from dataclasses import dataclass

PUBLISHER_POLL_S = 30
"""The publisher's poll (modelstore/publish.py --poll-seconds default; the pod does not set it)."""
HEALTH_POLL_SLOW_S = 240
"""healthy-before-compile-complete: serve.sh's health poll, far beyond the publisher's 30 s: the
first poll fails (vLLM is loading), the next comes 240 s later, long after the publisher (every
30 s) has seen /health answer; so the publisher sees a healthy server with an incomplete compile."""
EVICTING_LIMIT = "4Mi"
"""emptydir-over-limit: below the stand-in target's weights (~5 MiB) that serve.sh copies in."""


@dataclass(frozen=True)
class Fault:
    name: str
    does: str
    outcome: str


FAULTS = {f.name: f for f in (
    Fault("healthy-before-compile-complete",
          "serve.sh polls /health three times slower than the publisher (HEALTH_POLL_SECONDS), so the publisher finds the "
          "SD server healthy while the compile directory is not marked complete yet",
          "the SD variant's compiled set is still committed exactly once and copied in place (commit.json written once, "
          "complete.json present, one staging set), and the benchmark measures it only after the commit"),
    Fault("server-crash",
          "the SD server's container is killed (SIGKILL) while the first of its cases has requests running",
          "the container is restarted by kubelet and loads the committed set from the store; the crashed case is recorded "
          "with its failed requests (run status incomplete, that case short), and every later case is measured after the "
          "server is healthy again"),
    Fault("s3-5xx",
          "every pod reaches S3 through a proxy that answers 503 SlowDown to 3 requests in a row out of every 20",
          "every write is retried and lands: the run completes, each compiled set is committed exactly once, and the proxy "
          "reports how many requests it failed"),
    Fault("emptydir-over-limit",
          "the SD server's first pod gets a node-cache emptyDir limit below the weights it copies",
          "that pod is evicted with kubelet's reason (Usage of EmptyDir volume \"node-cache\" exceeds the limit ...); the "
          "Deployment's replacement pod (the rendered limit) serves, and the run completes"),
    Fault("compile-fails",
          "the SD server's compile fails every time (the engine exits 1 before writing anything)",
          "the container restarts with back-off; nothing is staged or committed for the SD variant; the benchmark never "
          "measures it: once the container has failed twice (and the driver is waiting), the rehearsal ends the benchmark Job "
          "as its deadline would, "
          "and the run is recorded failed"),
    Fault("prep-killed-mid-upload",
          "the target's preparation pod is killed (SIGKILL) while one of its uploads is in flight (its first pod reaches S3 "
          "through a proxy that holds the first upload of a weights file until the kill)",
          "the Job starts another pod, which finishes the set (what landed is kept, being write-once); the manifest is "
          "written once every file is in the store, the .complete marker once, after it; the servers wait for the marker, "
          "so nothing half-published is read, and the run completes"),
    Fault("tuner-killed",
          "a study's tuner is killed (SIGKILL) while a case of the SD configuration has requests running",
          "the Job starts another tuner pod, which waits for the killed one's lease to lapse (benchmark/lease.py "
          "DURATION_S), resumes the study from study.json and measures the killed case again; every case of the study is "
          "recorded exactly once and the study completes"),
    Fault("two-tuners",
          "a second tuner pod of the study's Job starts while the first measures (as when the Job controller replaces a "
          "pod on a node it lost touch with, while that pod still runs)",
          "the second waits for the first's lease and scales nothing meanwhile: no case is measured while its server is "
          "scaled down; once the first lets go the second resumes the same study, finds every case recorded and ends; "
          "the study completes with every case once"),
    Fault("target-restart",
          "the distributed variant's target server is killed (SIGKILL) while its draft has a request running (the target "
          "restarted mid-request: its sessions are lost with it)",
          "the draft fails that request cleanly and counts it (an error in the stream or 503; its log names the request, "
          "distributed_requests_total{outcome=\"failed\"} counts it) and is never restarted itself; kubelet restarts the "
          "target, which loads its committed set; the run is recorded incomplete (that case short) and every later case of "
          "the variant is measured once the draft is healthy again"),
)}
STUDY_FAULTS = ("tuner-killed", "two-tuners")
"""Faults of a study's tuner: a pairing stack has none (exit 2)."""
DISTRIBUTED_FAULTS = ("target-restart",)
"""Faults of a distributed variant's servers: a stack without one has none (exit 2)."""
UPLOAD_HOLD_S = 60
"""prep-killed-mid-upload: how long the proxy holds the upload (the kill comes within a second)."""


class FaultError(ValueError):
    """An unknown fault name; the message lists the known ones."""


def parse_faults(text: str | None) -> tuple[str, ...]:
    """"a,b" -> ("a", "b"): each known, none twice."""
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise FaultError(f"unknown fault(s) {', '.join(unknown)}; faults: {', '.join(FAULTS)}")
    if len(set(names)) != len(names):
        raise FaultError(f"a fault named twice in {text!r}")
    return names
