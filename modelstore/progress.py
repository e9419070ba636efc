"""Progress and throughput lines for long transfers: a log line every `every` seconds and one at the
end, each with the bytes done, the share of the total, the rate reached so far and, while some
remains, the time left at that rate."""
from __future__ import annotations

import threading
import time
from typing import Callable


def human(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


class Progress:
    """Thread-safe byte counter for one step (download, rescale, upload, copy)."""

    def __init__(self, step: str, total: int, say: Callable[[str], None] = print, every: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.step, self.total, self.say, self.every, self.clock = step, total, say, every, clock
        self.done = 0
        self.started = self.last = clock()
        self.lock = threading.Lock()

    def add(self, count: int) -> None:
        with self.lock:
            self.done += count
            now = self.clock()
            if now - self.last >= self.every:
                self.last = now
                self.say(self.line(now))

    def line(self, now: float) -> str:
        seconds = max(now - self.started, 1e-9)
        share = f" of {human(self.total)} ({100 * self.done / self.total:.0f}%)" if self.total else ""
        rate = self.done / seconds
        left = f", ETA {(self.total - self.done) / rate:.0f} s" if rate and self.done < self.total else ""
        return f"{self.step}: {human(self.done)}{share} in {seconds:.0f} s, {human(rate)}/s{left}"

    def finish(self) -> float:
        """Say the final line; return the rate reached, in bytes per second."""
        now = self.clock()
        self.say(self.line(now))
        return self.done / max(now - self.started, 1e-9)
