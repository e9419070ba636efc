"""Config dicts for the stackconfig tests, and parse_stack_config called on them directly (no
stack files, no Pulumi engine): fast enough for the mutation run (`make mutate`)."""
from __future__ import annotations

import copy
import re

import pytest

from stackconfig import ConfigError, parse_stack_config
from stackconfig.source import PROJECT

REGION = "us-east-2"

SMALL = {
    "serving": {"target": "Qwen/Qwen3-32B", "devicesPerVariant": 8, "maxNumSeqs": 4, "maxModelLen": 1024},
    "variants": [{"name": "base", "role": "baseline"},
                 {"name": "sd", "role": "sd", "draft": "Qwen/Qwen3-1.7B", "numSpeculativeTokens": 7}],
    "benchmark": {"inputTokens": 40, "outputTokens": 64},
}
"""A valid pairing with slack everywhere (short benchmark sequences, concurrency 1), so that one
edit breaks one rule only. nxdi-legacy, TP 32, a plain draft."""

PLUGIN = {
    "serving": {**SMALL["serving"], "engine": "vllm-neuron", "target": "meta-llama/Llama-3.1-8B-Instruct"},
    "variants": [{"name": "base", "role": "baseline"},
                 {"name": "sd", "role": "sd", "draft": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "numSpeculativeTokens": 3}],
    "benchmark": SMALL["benchmark"],
    "huggingFaceToken": "hf_x",
}
"""SMALL's shape on vllm-neuron, speculating with an EAGLE3 head (Llama 3.1 8B: the plugin of the
pinned image documents no Qwen3 text recipe)."""


def qualified(values: dict, region: str | None = REGION) -> dict:
    """Project values as Pulumi hands them to the program: namespaced, with the region."""
    return {**({"aws:region": region} if region else {}), **{f"{PROJECT}:{k}": v for k, v in values.items()}}


def parse(values: dict, stack: str = "test"):
    return parse_stack_config(PROJECT, stack, qualified(values))


def problem_list(values: dict, stack: str = "test", region: str | None = REGION) -> list[tuple[str, str]]:
    """Every (key, message) parsing reports, in order."""
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(PROJECT, stack, qualified(values, region))
    return caught.value.problems


def problems_for(values: dict, stack: str = "test") -> dict[str, str]:
    return dict(problem_list(values, stack))


def edited(base: dict, path: str, value) -> dict:
    """A deep copy of `base` with the dotted/indexed `path` set (None deletes)."""
    values = copy.deepcopy(base)
    node = values
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if value is None:
        node.pop(int(last) if last.isdigit() else last)
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return values


def with_edits(base: dict, edits: dict) -> dict:
    """`base` with every `path: value` of `edits` applied (see edited)."""
    for path, value in edits.items():
        base = edited(base, path, value)
    return base


def edits_id(value) -> str | None:
    """A short ASCII test id for a dict of edits (none for problem lists and base configs).
    mutmut passes node ids back to pytest, which cannot find ids holding escaped characters."""
    if not isinstance(value, dict) or "serving" in value and "variants" in value:
        return ""
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", "+".join(f"{k}={v}" for k, v in value.items()))[:60]
