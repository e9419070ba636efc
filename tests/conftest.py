"""Fixtures that run the real program under the recording engine, once per stack."""
from __future__ import annotations

import functools

import pytest

from offline.engine import Recording
from offline.stacks import load_stack, run_stack, stack_names

STACKS = stack_names()


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
