"""benchmark.loadGenerator, benchmark.concurrency and benchmark.rate: which load generator drives
the benchmark (benchmark/loadgen/, by name) and at which load levels. A level list is a load sweep:
every test case is measured at every level (benchmark/driver.py)."""
from __future__ import annotations

import math
from typing import Any, Protocol

from benchmark.loadgen import DEFAULT_GENERATOR, GENERATORS, LOAD_KINDS, Level

LOAD_KEYS = {"loadGenerator", *LOAD_KINDS}
__all__ = ["GENERATORS", "LOAD_KEYS", "parse_loads"]
DEFAULT_LOAD = (Level("concurrency", 1),)


class Section(Protocol):
    """The benchmark section as stackconfig/parse.py reads it: its raw mapping, and a problem by key."""

    raw: dict[str, Any]

    def problem(self, name: str, message: str) -> None: ...


def _level_problem(kind: str, value: Any) -> str | None:
    if kind == "concurrency":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if ok else f"{value!r} is not a positive integer (requests in flight)"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return None if ok else f"{value!r} is not a positive number (requests per second)"


def _levels(s: Section, kind: str) -> tuple[Level, ...] | None:
    """One level, or a sorted list of them; None (after saying why, by key) when invalid."""
    value = s.raw[kind]
    values = value if isinstance(value, list) else [value]
    if not values:
        s.problem(kind, "is an empty list: give one level, or several in ascending order (e.g. [1, 2, 4, 8])")
        return None
    problems = [p for v in values if (p := _level_problem(kind, v))]
    if problems:
        s.problem(kind, "; ".join(problems))
        return None
    if values != sorted(set(values)):
        s.problem(kind, f"{values} is not in ascending order without repeats (e.g. [1, 2, 4, 8])")
        return None
    return tuple(Level(kind, v) for v in values)


def parse_loads(s: Section, max_num_seqs: int | None, study: bool) -> tuple[str, tuple[Level, ...]]:
    """The generator's name and the load levels; the defaults where a problem was recorded."""
    name = s.raw.get("loadGenerator")
    if name is None:
        name = DEFAULT_GENERATOR
    elif name not in GENERATORS:
        s.problem("loadGenerator", f"{name!r} is not one of {', '.join(sorted(GENERATORS))}")
        name = DEFAULT_GENERATOR
    given = [kind for kind in LOAD_KINDS if s.raw.get(kind) is not None]
    if len(given) > 1:
        s.problem(given[-1], f"{' and '.join('benchmark.' + k for k in given)} are both given: a run holds a "
                             "concurrency or a request rate, not both")
        return name, DEFAULT_LOAD
    if not given:
        return name, DEFAULT_LOAD
    kind, = given
    levels = _levels(s, kind)
    if levels is None:
        return name, DEFAULT_LOAD
    if kind not in GENERATORS[name].load_kinds:
        able = " or ".join(sorted(n for n, g in GENERATORS.items() if kind in g.load_kinds))
        s.problem(kind, f"{GENERATORS[name].title} cannot hold a {kind}" + (f"; loadGenerator {able} can" if able else ""))
    if kind == "concurrency" and max_num_seqs and levels[-1].value > max_num_seqs:
        s.problem(kind, f"{levels[-1].value} exceeds serving.maxNumSeqs {max_num_seqs}; extra requests would queue and skew latency")
    if study and len(levels) > 1:
        s.problem(kind, f"{len(levels)} levels beside a study: a study measures each configuration against its baseline "
                        "at one load level (benchmark/tuner.py); give one")
    return name, levels
