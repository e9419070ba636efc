"""How a config object is read: the _Section reader, which records a problem instead of raising,
the error that names every problem at once, and the value rules more than one section shares
(DNS-label names, pinned images).
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Callable, Mapping

from ..catalog import ModelInfo

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")


class ConfigError(ValueError):
    """Invalid stack configuration. `problems` maps each offending key to what is allowed."""

    def __init__(self, stack: str, problems: list[tuple[str, str]]):
        self.stack = stack
        self.problems = problems
        lines = [f"  - {key}: {message}" for key, message in problems]
        super().__init__(
            f"Stack '{stack}' has {len(problems)} configuration problem(s):\n" + "\n".join(lines)
        )


_MISSING = object()


class _Section:
    """Reads one config object, recording problems instead of raising."""

    def __init__(self, path: str, raw: Any, problems: list[tuple[str, str]], allowed: set[str]):
        self.path = path
        self.problems = problems
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            problems.append((path, f"must be an object with keys {sorted(allowed)}, got {type(raw).__name__}"))
            raw = {}
        self.raw = raw
        for key in sorted(set(raw) - allowed, key=str):
            near = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            problems.append((self.key(key), f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}"))

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, message: str) -> None:
        self.problems.append((self.key(name), message))

    def _get(self, name: str, default: Any, kind: type | tuple, kind_name: str, check: Callable[[Any], str | None] | None):
        value = self.raw.get(name, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                self.problem(name, f"is required ({kind_name})")
                return None
            return default
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            self.problem(name, f"must be {kind_name}, got {value!r}")
            return None
        if check is not None:
            message = check(value)
            if message:
                self.problem(name, message)
                return None
        return value

    def integer(self, name: str, default: Any = _MISSING, low: int | None = None, high: int | None = None, allowed: tuple[int, ...] | None = None):
        def check(value: int) -> str | None:
            if allowed is not None and value not in allowed:
                return f"{value} is not one of {', '.join(map(str, allowed))}"
            if low is not None and value < low or high is not None and value > high:
                bounds = f"{low}..{high}" if high is not None else f">= {low}"
                return f"{value} is outside {bounds}"
            return None

        return self._get(name, default, int, "an integer", check)

    def string(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None, pattern: re.Pattern | None = None,
               hint: str = "", check: Callable[[str], str | None] | None = None):
        extra = check

        def check(value: str) -> str | None:
            if choices is not None and value not in choices:
                return f"{value!r} is not one of {', '.join(choices)}"
            if pattern is not None and not pattern.match(value):
                return f"{value!r} is not valid{': ' + hint if hint else ''}"
            return extra(value) if extra else None

        return self._get(name, default, str, "a string", check)

    def boolean(self, name: str, default: Any = _MISSING):
        return self._get(name, default, bool, "true or false", None)

    def listing(self, name: str, default: Any = _MISSING):
        return self._get(name, default, list, "a list", None)

    def mapping(self, name: str, default: Any = _MISSING):
        return self._get(name, default, dict, "an object", None)

    def model(self, name: str, models: Mapping[str, ModelInfo], default: Any = _MISSING):
        return self._get(
            name, default, str, "a Hugging Face model id",
            lambda v: None if v in models else (f"{v!r} is not a known model: declare it under `models` "
                                                f"(docs/configuration.md, 'Models'); known: {', '.join(sorted(models))}"),
        )


def _raise_if(stack: str, problems: list[tuple[str, str]]) -> None:
    if problems:
        raise ConfigError(stack, problems)


_IMAGE = re.compile(r"^(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
                    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")


def _pinned_image(value: str) -> str | None:
    """An image reference with a tag other than `latest`, or a digest: docs/security.md
    promises every image is pinned (a moving tag would change what a stack runs without a diff)."""
    match = _IMAGE.match(value)
    if not match:
        return f"{value!r} is not an image reference (registry/repository:tag)"
    if not match["digest"] and (not match["tag"] or match["tag"] == "latest"):
        return f"{value!r} is not pinned: give a version tag (not latest) or a @sha256 digest"
    return None
