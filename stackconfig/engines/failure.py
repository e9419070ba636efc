"""How an engine's restated behaviour (stackconfig/semantics.py) reports a server that would fail:
where the behaviour is written (Source, or for this repository's own servers the Signature of what
they print), on which start, and what fails (EngineFailure)."""
from __future__ import annotations

import re
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


@dataclass(frozen=True)
class Signature:
    """What one of this repository's own servers (distributed/) prints when it fails: its words as
    a template whose {fields} stand for the values of one run (a number, an address, an error), and
    the file and function that print it. `matches` finds it in a log or an error message."""

    template: str
    path: str
    function: str

    def format(self, **values: object) -> str:
        return self.template.format(**values)

    def pattern(self) -> re.Pattern[str]:
        return re.compile("".join(".+?" if re.fullmatch(r"\{\w+\}", part) else re.escape(part)
                                  for part in re.split(r"(\{\w+\})", self.template) if part))

    def matches(self, text: str) -> bool:
        return self.pattern().search(text) is not None

    def __str__(self) -> str:
        return f"{self.path} {self.function}"


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
    source: Source | Signature
