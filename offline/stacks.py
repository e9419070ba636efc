"""Run the program on a stack file (read by stackconfig/source.py) the way `pulumi up` would."""
from __future__ import annotations

import functools
import runpy

from stackconfig import StackSpec
from stackconfig.source import PROJECT, PROJECT_DIR, StackInput, load_stack, stack_argument, stack_names

from .engine import Recording, StackOutputs, run_program

__all__ = ["load_stack", "run_stack", "stack_argument", "stack_names"]


def run_stack(stack_input: StackInput, preview: bool = False) -> Recording:
    """Run __main__.py exactly as `pulumi up` (or `pulumi preview`) would, against the recording
    engine. A shared pairing's StackReference reads the outputs of its platform's offline plan."""
    spec = stack_input.spec()
    references = {}
    if isinstance(spec, StackSpec) and spec.shared:
        platform_stack = spec.platform_reference.rsplit("/", 1)[-1]
        references[spec.platform_reference] = _platform_outputs(platform_stack)
    return run_program(
        PROJECT,
        stack_input.stack,
        stack_input.config,
        stack_input.secret_keys,
        lambda: runpy.run_path(str(PROJECT_DIR / "__main__.py"), run_name="__main__"),
        references=references,
        preview=preview,
    )


@functools.lru_cache(maxsize=None)
def _platform_outputs(stack: str) -> StackOutputs:
    """A platform stack's outputs as a deployed one would hold them (its offline plan's)."""
    recording = run_stack(load_stack(stack))
    return StackOutputs(recording.raw_outputs, recording.secret_output_names)
