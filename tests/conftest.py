"""Fixtures that run the real program under the recording engine, once per stack."""
from __future__ import annotations

import functools

import pytest

from offline.engine import Recording
from offline.stacks import load_stack, run_stack, stack_names
from stackconfig import PlatformSpec


def _kind(stack: str) -> str:
    spec = load_stack(stack).spec()
    if isinstance(spec, PlatformSpec):
        return "platform"
    return "shared" if spec.shared else "standalone"


KINDS = {stack: _kind(stack) for stack in stack_names()}
STANDALONE = sorted(s for s, k in KINDS.items() if k == "standalone")
"""Pairings that are their own platform: one program builds the whole deployment."""
SHARED = sorted(s for s, k in KINDS.items() if k == "shared")
PLATFORMS = sorted(s for s, k in KINDS.items() if k == "platform")
STACKS = STANDALONE


@functools.lru_cache(maxsize=None)
def recorded(stack: str) -> Recording:
    return run_stack(load_stack(stack))


@pytest.fixture(params=STACKS)
def stack(request) -> str:
    return request.param


@pytest.fixture
def recording(stack) -> Recording:
    return recorded(stack)


@pytest.fixture
def spec(stack):
    return load_stack(stack).spec()
