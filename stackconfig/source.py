"""Read the project's config from the Pulumi runtime as plain data."""
from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config


def project_config(project: str) -> dict[str, Any]:
    """Every "<project>:<key>" config entry, values decoded from the engine's JSON strings.

    pulumi.Config can only fetch keys it is asked for; listing them all is what lets the parser
    reject unknown (typically misspelled) keys. The engine hands the program its config through
    set_all_config (PULUMI_CONFIG for older hosts), so both places are read.
    """
    entries = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{project}:"
    raw: dict[str, Any] = {}
    for key, value in entries.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if isinstance(value, str):
            try:
                value = json.loads(value) if value[:1] in "[{" else value
            except json.JSONDecodeError:
                pass
        raw[name] = value
    return raw


def hugging_face_token(project: str, key: str) -> pulumi.Output[str] | None:
    """The token as a Pulumi secret, or None when the stack does not set it."""
    return pulumi.Config(project).get_secret(key)
