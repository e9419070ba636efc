"""The load generators the benchmark pod can drive, one module each, behind a registry keyed by the
generator's name (benchmark.loadGenerator). Adding a generator is its module and its lock (a file
in benchmark/), then one entry here; a name missing from GENERATORS is refused by validation, by key."""
from __future__ import annotations

from . import inference_perf, llmperf
from .base import LOAD_KINDS, Case, Invocation, Level, LoadGenerator

GENERATORS: dict[str, LoadGenerator] = {generator.name: generator for generator in (llmperf.GENERATOR, inference_perf.GENERATOR)}
DEFAULT_GENERATOR = llmperf.NAME
"""The generator of a stack that names none, and of a run recorded before runs named theirs."""


def generator(name: str | None) -> LoadGenerator:
    """The registered generator `name` names (None: the default)."""
    return GENERATORS[name or DEFAULT_GENERATOR]


__all__ = ["DEFAULT_GENERATOR", "GENERATORS", "LOAD_KINDS", "Case", "Invocation", "Level", "LoadGenerator", "generator"]
