"""The project's stack files, read as the Pulumi CLI hands them to the program, without Pulumi:
for the offline plan, the tests and the operator tools (the program itself gets its config from the
engine: components/runtime.py)."""
from __future__ import annotations

import argparse
import copy
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .model import PlatformSpec, StackSpec
from .parse import HUGGING_FACE_TOKEN_KEY, ConfigError, gated_models, parse_stack_config

PROJECT_DIR = Path(__file__).resolve().parent.parent
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""What Pulumi accepts as a stack name: "stack names are limited to 100 characters and may only
contain alphanumeric, hyphens, underscores, or periods" (pulumi/pulumi pkg/backend/diy,
ParseReference)."""


def stack_name_problem(stack: str) -> str | None:
    """What makes `stack` no stack name (None when it is one). Checked before any path is built from
    a name: files, plan folders and reports are named after stacks, and a name of dots only
    ("..") would name a parent directory, though Pulumi's pattern allows it."""
    if not stack:
        return "set STACK=<name> (--stack)"
    if not STACK_NAME.fullmatch(stack) or not stack.strip("."):
        return (f"{stack[:120]!r}{'...' if len(stack) > 120 else ''} is not a stack name (at most 100 letters, digits, "
                f"'-', '_', '.', and not dots alone)")
    return None


def stack_argument(text: str) -> str:
    """The argparse `type` of every command's --stack: a bad name fails the command line (exit 2)
    before the command builds anything from it."""
    problem = stack_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{problem}; stacks: {', '.join(stack_names())}")
    return text


class StackFiles:
    """The project's stack files (Pulumi.yaml `stackConfigDir`), read as the Pulumi CLI would:
    "namespace:key" -> value. Encrypted values ({secure: ...}) cannot be decrypted here and come
    back as None; the program only reads a platform's plain settings this way."""

    def __init__(self, project_dir: Path):
        project = _read_yaml(project_dir / "Pulumi.yaml")
        self.project: str = project["name"]
        self.directory = project_dir / project.get("stackConfigDir", ".")

    def path(self, stack: str) -> Path:
        """The stack's file. A name is what Pulumi allows in one (stack_name_problem), so it can
        only name a file of this directory."""
        problem = stack_name_problem(stack)
        if problem:
            raise FileNotFoundError(f"{problem}; stacks: {', '.join(self.names())}")
        return self.directory / f"Pulumi.{stack}.yaml"

    def names(self) -> list[str]:
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in self.directory.glob("Pulumi.*.yaml"))

    def config(self, stack: str) -> dict[str, Any]:
        path = self.path(stack)
        if not path.exists():
            near = difflib.get_close_matches(stack, self.names(), n=1)
            raise FileNotFoundError(f"no stack file {path.name} in {self.directory.name}/"
                                    f"{f' (did you mean {near[0]}?)' if near else ''}; stacks: {', '.join(self.names())}")
        document = _read_yaml(path, stack)
        if document is None:
            return {}
        if not isinstance(document, dict):
            raise ConfigError(stack, [(path.name, f"must be a mapping with a `config:` key, got a {type(document).__name__}")])
        config = document.get("config") or {}
        if not isinstance(config, dict):
            raise ConfigError(stack, [(f"{path.name} config", f"must map \"namespace:key\" to values, got a {type(config).__name__}")])
        return {str(k): (None if isinstance(v, dict) and set(v) == {"secure"} else v) for k, v in config.items()}


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping. PyYAML keeps the last silently (a stack
    once planned 16 devices where its author had first written 8); the Pulumi CLI's Go YAML reader
    refuses the file."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (lines {seen[key]} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


NESTING_LIMIT = 100
"""Deeper than any stack file nests (a variant's neuron config is four levels down); where the
loader runs out of stack, the key is looked for past this depth."""


def _key_of_deep_nesting(text: str, limit: int = NESTING_LIMIT) -> str:
    """The keys leading to where `text` first nests deeper than `limit` ("config.sd-trn2:variants[1]
    .neuronConfig"; list indexes only before a key), read from YAML's event stream, which, unlike its
    loader, does not recurse."""
    levels: list[list] = []  # per open collection: [is a mapping, its current key or index, expecting a key]

    def value_done() -> None:
        if levels and levels[-1][0]:
            levels[-1][2] = True
        elif levels:
            levels[-1][1] += 1

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        top = levels[-1] if levels else None
        if isinstance(event, yaml.ScalarEvent) and top and top[0] and top[2]:
            top[1], top[2] = event.value, False
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(levels) >= limit:
                break
            if top and top[0] and top[2]:  # a collection as a key: no name to give it
                top[1], top[2] = "?", False
            mapping = isinstance(event, yaml.MappingStartEvent)
            levels.append([mapping, None if mapping else 0, True])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            levels.pop()
            value_done()
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            value_done()
    parts = [f".{level[1]}" if level[0] else f"[{level[1]}]" for level in levels if level[1] is not None]
    while parts and parts[-1].startswith("["):
        parts.pop()
    return "".join(parts).lstrip(".")


def _read_yaml(path: Path, stack: str | None = None) -> Any:
    name = stack or path.stem
    try:
        text = path.read_bytes().decode("utf-8")
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as error:
        raise ConfigError(name, [(path.name, f"is not UTF-8 text: byte 0x{error.object[error.start]:02x} at offset {error.start}")]) from None
    except RecursionError:
        key = _key_of_deep_nesting(text)
        raise ConfigError(name, [(f"{path.name} {key}".strip(), f"is nested too deeply to be a stack file (more than "
                                                                 f"{NESTING_LIMIT} levels deep)")]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(name, [(path.name, f"is not valid YAML{where}: {problem}")]) from None


FILES = StackFiles(PROJECT_DIR)
PROJECT = FILES.project
STACKS_DIR = FILES.directory
OFFLINE_TOKEN_PLACEHOLDER = "hf_offline_plan_placeholder"


def stack_names() -> list[str]:
    return FILES.names()


@dataclass
class StackInput:
    """A stack's config as "namespace:key" -> value, plus what was substituted for secrets it cannot read."""

    stack: str
    config: dict[str, Any]
    secret_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def project_values(self) -> dict[str, Any]:
        prefix = f"{PROJECT}:"
        return {k[len(prefix):]: v for k, v in self.config.items() if k.startswith(prefix)}

    def spec(self) -> StackSpec | PlatformSpec:
        return parse_stack_config(PROJECT, self.stack, self.config, read_stack=FILES.config,
                                  is_secret=lambda key: key in self.secret_keys)


def load_stack(stack: str, overrides: dict[str, Any] | None = None) -> StackInput:
    """Read stacks/Pulumi.<stack>.yaml. `overrides` replaces top-level keys (None removes one).

    Encrypted values cannot be read without the stack's secrets provider, and a gated model's
    token is usually not committed; the offline plan (and a tool that only needs the spec) uses a
    placeholder secret for the Hugging Face token and records a note saying so. The program itself
    always requires the token.
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
