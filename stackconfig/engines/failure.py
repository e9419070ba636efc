"""How an engine's restated behaviour (stackconfig/semantics.py) reports a server that would fail:
where the behaviour is written (Source), on which start, and what fails (EngineFailure)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """Where a behaviour is written: repository, the ref this program pins, the commit read."""

    repository: str
    ref: str
    commit: str
    path: str
    lines: str

    def __str__(self) -> str:
        return f"{self.repository}@{self.ref} ({self.commit[:8]}) {self.path} L{self.lines}"


FIRST_START, RESTART = "first start", "restart from the model store"


@dataclass(frozen=True)
class EngineFailure:
    """What a server would do with a setting: fail to start, or fail on its first request."""

    start: str
    """FIRST_START (compiles) or RESTART (loads the artifacts restored from the model store)."""
    setting: str
    """The neuron config key at fault, or "" when no single key is."""
    error: str
    """What the engine raises, in its own words where it has them."""
    source: Source
