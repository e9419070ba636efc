"""Python's cyclic garbage collector, kept off what a plan builds: the Pulumi SDKs' modules (tens of
thousands of typing objects) and the plan's resources. Each collection walks every object it tracks
and here finds nearly nothing to free; it was a third of a plan's CPU time, a fifth of it the
collection Python runs at exit. Reference counting still frees whatever is not in a cycle."""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside, back on after (unless it was off before: nesting is safe); the
    cycles made inside wait for the first collection after."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


@contextlib.contextmanager
def paused_then_frozen() -> Iterator[None]:
    """The collector off inside; then every object alive, the modules imported before included, is
    moved out of its reach for the rest of the process (gc.freeze), before it is back on (its first
    pass, and the one at exit, would walk them all). For a process that ends soon after: a plan,
    once written (`make plan-all`, nine plans in one process, peaks ~60 MB higher)."""
    with collector_paused():
        yield
        gc.freeze()
