"""Load a stack file the way the Pulumi CLI would hand it to the program, and run the program."""
from __future__ import annotations

import copy
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from stackconfig import HUGGING_FACE_TOKEN_KEY, ConfigError, StackSpec, parse_stack_config

from .engine import Recording, run_program

ROOT = Path(__file__).resolve().parent.parent
PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"]
STACKS_DIR = ROOT / yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["stackConfigDir"]
OFFLINE_TOKEN_PLACEHOLDER = "hf_offline_plan_placeholder"


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


@dataclass
class StackInput:
    """A stack's config as "project:key" -> value, plus what the offline run substituted."""

    stack: str
    config: dict[str, Any]
    secret_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def project_values(self) -> dict[str, Any]:
        prefix = f"{PROJECT}:"
        return {k[len(prefix):]: v for k, v in self.config.items() if k.startswith(prefix)}

    def spec(self) -> StackSpec:
        return parse_stack_config(PROJECT, self.stack, self.config)


def stack_file_config(stack: str) -> dict[str, Any]:
    """stacks/Pulumi.<stack>.yaml's config as written: secrets still encrypted, nothing substituted."""
    path = STACKS_DIR / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path.relative_to(ROOT)}; stacks: {', '.join(stack_names())}")
    return copy.deepcopy((yaml.safe_load(path.read_text()) or {}).get("config") or {})


def load_stack(stack: str, overrides: dict[str, Any] | None = None) -> StackInput:
    """Read stacks/Pulumi.<stack>.yaml. `overrides` replaces top-level keys (None removes one).

    Encrypted values cannot be read without the stack's secrets provider, and a gated model's
    token is usually not committed; the offline run uses a placeholder secret for the Hugging
    Face token and records a note saying so. The program itself always requires the token.
    """
    config = stack_file_config(stack)
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    token_key = f"{PROJECT}:{HUGGING_FACE_TOKEN_KEY}"
    stack_input = StackInput(stack=stack, config=config)
    for key, value in list(config.items()):
        if isinstance(value, dict) and "secure" in value:
            config[key] = OFFLINE_TOKEN_PLACEHOLDER if key == token_key else "[encrypted]"
            stack_input.secret_keys.append(key)
            stack_input.notes.append(f"{key} is encrypted in the stack file; the offline plan uses a placeholder")
    if token_key not in config and _needs_token(stack, config):
        config[token_key] = OFFLINE_TOKEN_PLACEHOLDER
        stack_input.secret_keys.append(token_key)
        stack_input.notes.append(
            f"{HUGGING_FACE_TOKEN_KEY} is not set; the offline plan uses a placeholder secret. "
            f"`pulumi up` needs it for gated models: pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_..."
        )
    return stack_input


def _needs_token(stack: str, config: dict[str, Any]) -> bool:
    """Whether the stack serves a gated model (judged with a stand-in token, so that only
    genuine config problems remain for the real parse to report)."""
    try:
        return parse_stack_config(PROJECT, stack, {**config, f"{PROJECT}:{HUGGING_FACE_TOKEN_KEY}": "x"}).requires_hugging_face_token
    except ConfigError:
        return False


def run_stack(stack_input: StackInput) -> Recording:
    """Run __main__.py exactly as `pulumi up` would, against the recording engine."""
    return run_program(
        PROJECT,
        stack_input.stack,
        stack_input.config,
        stack_input.secret_keys,
        lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"),
    )
