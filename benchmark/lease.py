"""One tuner per study stack: a Kubernetes Lease (coordination.k8s.io/v1), the usual
leader-election lock, held by the tuner while it scales and measures.

The lease has an owner (spec.holderIdentity: the study and the pod), a heartbeat (spec.renewTime,
renewed every RENEW_S) and an expiry (leaseDurationSeconds after the last renewal), so the lease
of a tuner killed without a chance to let go (SIGKILL, a lost node) lapses by itself. A tuner
takes the lease when there is none (create), when it lapsed, or when it was released, each
through the API server's optimistic concurrency (a replace carrying the resourceVersion it read:
of two tuners racing for it, one gets 409 Conflict and reads again). It lets go on its way out as
client-go's leader election does: no holder, a one-second duration, renewed now
(kubernetes/client-go tools/leaderelection/leaderelection.go, release). No role here may delete.

A tuner that finds the lease held waits, saying by whom, until it is released or lapses; one
that cannot renew (another took it after a long API outage) stops before its next case and never
scales the servers the other now measures. `make benchmark` reads the same lease and refuses
while a study runs (tools/rerun_benchmark.py).
"""
from __future__ import annotations

import threading
import time
import urllib.error
from datetime import datetime, timezone
from typing import Any, Callable

NAME = "llmperf-tuner"
DURATION_S = 120
"""A killed tuner's servers wait this long for the next one; a live tuner renews well within it."""
RENEW_S = DURATION_S / 4
WAIT_POLL_S = 60.0


class LeaseLost(RuntimeError):
    """Another tuner holds the lease this one held: it must touch nothing more."""


def micro_time(epoch_s: float) -> str:
    """Kubernetes MicroTime, RFC 3339 with microseconds (Lease spec.renewTime, spec.acquireTime)."""
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(micro: str) -> float:
    return datetime.strptime(micro, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def holder(lease: dict[str, Any] | None, now: float) -> str | None:
    """Who holds `lease` at `now`: None when there is no lease, it was released (no holder), or it
    lapsed (its last renewal is more than leaseDurationSeconds old)."""
    spec = (lease or {}).get("spec") or {}
    if not spec.get("holderIdentity") or not spec.get("renewTime"):
        return None
    return spec["holderIdentity"] if epoch(spec["renewTime"]) + spec.get("leaseDurationSeconds", 0) > now else None


def path(namespace: str, name: str | None = None) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases" + (f"/{name}" if name else "")


class Lease:
    def __init__(self, api: Any, namespace: str, identity: str, duration_s: int = DURATION_S, renew_s: float = RENEW_S,
                 poll_s: float = WAIT_POLL_S, wall: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        self.api, self.namespace, self.identity = api, namespace, identity
        self.duration_s, self.renew_s, self.poll_s, self.wall, self.sleep = duration_s, renew_s, poll_s, wall, sleep
        self.lost: str | None = None
        """Set by the heartbeat when another tuner holds the lease."""
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def read(self) -> dict[str, Any] | None:
        try:
            return self.api.get(path(self.namespace, NAME))
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def acquire(self) -> None:
        """Take the lease, waiting while another tuner holds it; then keep it renewed."""
        while (other := self._try_take()) is not None:
            if other:
                print(f"waiting for the study running in this namespace to end ({other} holds lease {NAME}, "
                      f"renewed every {self.renew_s:.0f} s, lapsing {self.duration_s} s after its last renewal)", flush=True)
            self.sleep(self.poll_s)
        print(f"holding lease {NAME} as {self.identity}", flush=True)
        self._heartbeat = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)
        self._heartbeat.start()

    def _try_take(self) -> str | None:
        """None once taken; else who holds it ("" when another tuner won a race: read again)."""
        now = self.wall()
        current = self.read()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s,
                "acquireTime": micro_time(now), "renewTime": micro_time(now)}
        try:
            if current is None:
                self.api.post(path(self.namespace), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                     "metadata": {"name": NAME, "namespace": self.namespace},
                                                     "spec": {**spec, "leaseTransitions": 0}})
                return None
            other = holder(current, now)
            if other and other != self.identity:
                return other
            transitions = (current["spec"].get("leaseTransitions") or 0) + (other != self.identity)
            self.api.put(path(self.namespace, NAME), {**current, "spec": {**spec, "leaseTransitions": transitions}})
            return None
        except urllib.error.HTTPError as error:
            if error.code == 409:  # created or taken by another tuner since it was read
                return ""
            raise

    def renew(self) -> None:
        """Renew the lease; even one that lapsed during an API outage, if nobody took it meanwhile
        (the replace carries the resourceVersion read: a tuner taking it first wins)."""
        current = self.read()
        if ((current or {}).get("spec") or {}).get("holderIdentity") != self.identity:
            raise LeaseLost(f"lease {NAME} is no longer held by {self.identity} "
                            f"(now: {((current or {}).get('spec') or {}).get('holderIdentity') or 'nobody'})")
        self.api.put(path(self.namespace, NAME), {**current, "spec": {**current["spec"], "renewTime": micro_time(self.wall())}})

    def _beat(self) -> None:
        while not self._stop.wait(self.renew_s):
            try:
                self.renew()
            except LeaseLost as error:
                self.lost = str(error)
                return
            except Exception as error:  # an API blip: the next beat tries again, well before the lease lapses
                print(f"WARNING: could not renew lease {NAME}: {error}", flush=True)

    def check(self) -> None:
        """Raise if another tuner took the lease (before anything touches the servers)."""
        if self.lost:
            raise LeaseLost(self.lost)

    def release(self) -> None:
        """Let go (if still held), so the next tuner need not wait for the lease to lapse."""
        self._stop.set()
        if self._heartbeat:
            self._heartbeat.join()
        if self.lost:
            return
        current = self.read()
        if current is None or holder(current, self.wall()) != self.identity:
            return
        now = micro_time(self.wall())
        self.api.put(path(self.namespace, NAME), {**current, "spec": {**current["spec"], "holderIdentity": "",
                                                                      "leaseDurationSeconds": 1, "renewTime": now,
                                                                      "acquireTime": now}})
        print(f"released lease {NAME}", flush=True)
