"""Read the stack's config from the Pulumi runtime as plain data."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import config as runtime_config

from .parse import ConfigError


def stack_config() -> dict[str, Any]:
    """Every "<namespace>:<key>" config entry of the stack, values decoded from the engine's JSON.

    pulumi.Config can only fetch keys it is asked for; listing them all is what lets the parser
    reject unknown (typically misspelled) keys and namespaces. The engine hands the program its
    config through set_all_config (PULUMI_CONFIG for older hosts), so both places are read.
    """
    entries = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    decoded: dict[str, Any] = {}
    for key, value in entries.items():
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        decoded[key] = value
    return decoded


def hugging_face_token(project: str, key: str) -> pulumi.Output[str] | None:
    """The token as a Pulumi secret, or None when the stack does not set it."""
    return pulumi.Config(project).get_secret(key)


class StackFiles:
    """The project's stack files (Pulumi.yaml `stackConfigDir`), read as the Pulumi CLI would:
    "namespace:key" -> value. Encrypted values ({secure: ...}) cannot be decrypted here and come
    back as None; the program only reads a platform's plain settings this way."""

    def __init__(self, project_dir: Path):
        project = _read_yaml(project_dir / "Pulumi.yaml")
        self.project: str = project["name"]
        self.directory = project_dir / project.get("stackConfigDir", ".")

    def path(self, stack: str) -> Path:
        return self.directory / f"Pulumi.{stack}.yaml"

    def names(self) -> list[str]:
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in self.directory.glob("Pulumi.*.yaml"))

    def config(self, stack: str) -> dict[str, Any]:
        path = self.path(stack)
        if not path.exists():
            raise FileNotFoundError(f"no stack file {path.name} in {self.directory.name}/; stacks: {', '.join(self.names())}")
        document = _read_yaml(path, stack)
        if document is None:
            return {}
        if not isinstance(document, dict):
            raise ConfigError(stack, [(path.name, f"must be a mapping with a `config:` key, got a {type(document).__name__}")])
        config = document.get("config") or {}
        if not isinstance(config, dict):
            raise ConfigError(stack, [(f"{path.name} config", f"must map \"namespace:key\" to values, got a {type(config).__name__}")])
        return {str(k): (None if isinstance(v, dict) and set(v) == {"secure"} else v) for k, v in config.items()}


def _read_yaml(path: Path, stack: str | None = None) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(stack or path.stem, [(path.name, f"is not valid YAML{where}: {problem}")]) from None
