"""Every process the rehearsal starts, by its own id, and the timeline of what happened.

Each process starts in a session of its own, so its id is also its process group's: stopping it
(SIGTERM, then SIGKILL after its grace period) reaches what it started (a shell's children, vLLM's
engine core) and nothing else. `stop_all` runs on exit and on Ctrl-C (rehearse/cli.py): a
rehearsal leaves nothing running.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, TextIO


class Timeline:
    """Events, one JSON line each, with seconds since the rehearsal started: pods started and
    stopped, containers exited and restarted, objects written to the store, health, cases."""

    def __init__(self, path: Path, echo: TextIO | None = None):
        self.path, self.echo = path, echo
        path.parent.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        path.write_text("")

    def event(self, kind: str, subject: str, detail: str = "", **fields: Any) -> dict[str, Any]:
        entry = {"t": round(time.monotonic() - self.started, 2), "kind": kind, "subject": subject, "detail": detail, **fields}
        with self.lock:
            self.events.append(entry)
            with self.path.open("a") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")
            if self.echo is not None:
                print(f"[{entry['t']:8.1f}s] {kind:<18} {subject}{': ' + detail if detail else ''}", file=self.echo, flush=True)
        return entry

    def of(self, kind: str, subject: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["kind"] == kind and (subject is None or e["subject"] == subject)]


PR_SET_CHILD_SUBREAPER = 36
"""prctl(2): orphaned descendants are reparented to this process instead of init."""


def become_subreaper() -> bool:
    """Adopt what the pods' processes leave behind when their parent exits first (serve.sh's
    background vLLM when serve.sh is stopped), so the rehearsal reaps them and their CPU time is
    counted in its own (Linux only; elsewhere False and nothing changes)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def adopted(groups: set[int]) -> list[int]:
    """This process's children in one of `groups` that it did not start itself: orphans of the
    processes it started, adopted as their subreaper (/proc/<pid>/stat: state, ppid, pgrp)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in groups:
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone, or not ours to read
            if int(fields[1]) == me and int(fields[2]) in groups:
                found.append(int(entry.name))
    return found


class Supervisor:
    """Starts processes and stops each by its own id (its process group)."""

    def __init__(self, adopt_orphans: bool = False):
        """`adopt_orphans`: become this process's subreaper (the CLI; not a test's process, whose
        other children are none of the rehearsal's business)."""
        self.lock = threading.Lock()
        self.running: dict[int, tuple[str, subprocess.Popen]] = {}
        self.started: set[int] = set()
        self.subreaper = adopt_orphans and become_subreaper()

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        with self.lock:
            self.running[process.pid] = (name, process)
            self.started.add(process.pid)
        return process

    def forget(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.running.pop(process.pid, None)

    def stop(self, process: subprocess.Popen, grace_s: float) -> int:
        """SIGTERM to the process's group, SIGKILL after `grace_s`; its exit code."""
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Whatever the process left in its group (a shell's background server) goes with it.
        _signal_group(process.pid, signal.SIGKILL)
        code = process.wait()
        self.forget(process)
        return code

    def stop_all(self, grace_s: float = 10) -> list[str]:
        """Stop every process still running, newest first; their names."""
        with self.lock:
            running = sorted(self.running.items(), reverse=True)
        for _, (_, process) in running:
            self.stop(process, grace_s)
        self.reap_orphans(grace_s)
        return [name for _, (name, _) in running]

    def reap_orphans(self, grace_s: float) -> None:
        """What the pods left behind and this process adopted, only from the groups it started:
        killed if still running (their groups were stopped already), then reaped."""
        for pid in adopted(self.started) if self.subreaper else []:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass  # already reaped


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone
