"""Python's cyclic garbage collector, kept off what a short process builds to keep: the Pulumi
SDKs' modules (tens of thousands of typing objects) and a plan's resources. Each collection walks
every object it tracks and here finds nearly nothing to free; it was a third of a plan's CPU time,
a fifth of it the collection Python runs at exit. Reference counting still frees whatever is not
in a cycle."""
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
    """The collector off inside; then every object alive is moved out of its reach for the rest of
    the process (gc.freeze), before it is back on (its first pass would walk them all). For what
    lives until the process ends (imported modules), or is left to the end of a process that ends
    soon (a plan, once written: `make plan-all` keeps ~6 MB more per stack)."""
    with collector_paused():
        yield
        gc.freeze()
