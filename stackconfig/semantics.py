"""What each engine does with the settings this program renders, at the version it pins.

A key list (stackconfig/data/*-fields.json) proves a key exists, not what the engine does with its
value. Each engine's module (stackconfig/engines/<engine>.py) restates, as small functions, the
parts of its engine's own code that the rendered settings reach, each beside the file and lines it
restates; this module runs a variant's rendered server configuration through its engine's: the first start, which compiles, and, for NxD Inference, the
second start, which loads the compiled artifacts restored from the model store (the path this
product is built around: components/pairing/scripts/serve.sh). Validation (stackconfig/parse/)
refuses a stack whose servers would fail here, naming the config key to change;
tests/test_engine_semantics.py runs every stack through it and shows that each check fires.

Versions read (docs/engines.md says more, and lists what could not be read):
- NxD Inference v0.6.10598, the version the legacy image installs (its Dockerfile pins
  0.6.10598+a59fdc00; the tag is the Neuron 2.26.0 release commit).
- The vLLM Neuron fork: the legacy image clones its branch 2.26.1, which could not be read; its newest
  readable release branch, neuron-2.24-vllm-v0.7.2 at 490ab20f (2025-06-20), stands in for the loader
  and runners, its main at dd417b31 (2025-06-24, vLLM 0.9.1, the image's version) for vLLM's flags
  (docs/engines.md, "Release branch and main of the fork", lists where the two differ).
- The vLLM Neuron plugin 0.24.0.1.1.0 (Neuron 2.32.0): its source at that release could not be
  read; the plugin documentation shipped with Neuron 2.32.0 is the authority for it.
"""
from __future__ import annotations

from typing import Any

from .engines import ENGINES
from .engines.failure import EngineFailure
from .model import Variant
from .server import arguments


def engine_failures(variant: Variant, args: list[str] | None = None) -> list[EngineFailure]:
    """Every way the variant's server would fail, on the first start and on a restart from the
    model store, given its `vllm serve` arguments (by default those the program renders)."""
    return ENGINES[variant.engine].failures(variant, arguments(variant) if args is None else args)


def serves_greedily(variant: Variant, request: dict[str, Any]) -> bool:
    """Whether the server decodes greedily for requests carrying these sampling parameters (its engine's rule)."""
    return ENGINES[variant.engine].serves_greedily(variant, request)
