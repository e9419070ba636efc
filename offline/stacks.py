"""Load a stack file the way the Pulumi CLI would hand it to the program, and run the program."""
from __future__ import annotations

import copy
import functools
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackconfig import HUGGING_FACE_TOKEN_KEY, PlatformSpec, StackSpec, parse_stack_config
from stackconfig.parse import gated_models
from stackconfig.source import StackFiles

from .engine import Recording, StackOutputs, run_program

ROOT = Path(__file__).resolve().parent.parent
FILES = StackFiles(ROOT)
PROJECT = FILES.project
STACKS_DIR = FILES.directory
OFFLINE_TOKEN_PLACEHOLDER = "hf_offline_plan_placeholder"


def stack_names() -> list[str]:
    return FILES.names()


@dataclass
class StackInput:
    """A stack's config as "namespace:key" -> value, plus what the offline run substituted."""

    stack: str
    config: dict[str, Any]
    secret_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def project_values(self) -> dict[str, Any]:
        prefix = f"{PROJECT}:"
        return {k[len(prefix):]: v for k, v in self.config.items() if k.startswith(prefix)}

    def spec(self) -> StackSpec | PlatformSpec:
        return parse_stack_config(PROJECT, self.stack, self.config, read_stack=FILES.config)


def load_stack(stack: str, overrides: dict[str, Any] | None = None) -> StackInput:
    """Read stacks/Pulumi.<stack>.yaml. `overrides` replaces top-level keys (None removes one).

    Encrypted values cannot be read without the stack's secrets provider, and a gated model's
    token is usually not committed; the offline run uses a placeholder secret for the Hugging
    Face token and records a note saying so. The program itself always requires the token.
    """
    config = copy.deepcopy(FILES.config(stack))
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    token_key = f"{PROJECT}:{HUGGING_FACE_TOKEN_KEY}"
    stack_input = StackInput(stack=stack, config=config)
    encrypted = [k for k, v in config.items() if v is None and k not in (overrides or {})]
    for key in encrypted:
        config[key] = OFFLINE_TOKEN_PLACEHOLDER if key == token_key else "[encrypted]"
        stack_input.secret_keys.append(key)
        stack_input.notes.append(f"{key} is encrypted in the stack file; the offline plan uses a placeholder")
    if token_key not in config and gated_models(PROJECT, config):
        config[token_key] = OFFLINE_TOKEN_PLACEHOLDER
        stack_input.secret_keys.append(token_key)
        stack_input.notes.append(
            f"{HUGGING_FACE_TOKEN_KEY} is not set; the offline plan uses a placeholder secret. "
            f"`pulumi up` needs it for gated models: pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_..."
        )
    return stack_input


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
        lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"),
        references=references,
        preview=preview,
    )


@functools.lru_cache(maxsize=None)
def _platform_outputs(stack: str) -> StackOutputs:
    """A platform stack's outputs as a deployed one would hold them (its offline plan's)."""
    recording = run_stack(load_stack(stack))
    return StackOutputs(recording.raw_outputs, recording.secret_output_names)
