"""What the Pulumi engine hands the program: the stack's config entries and its secrets."""
from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config


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
