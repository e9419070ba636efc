"""The serving engines a variant can run on, one module each, behind a registry keyed by the
engine's name (serving.engine, variants[].engine). Adding an engine is its module, its image pin
(stackconfig/versions.py ENGINE_IMAGES) and its neuron config fields file (stackconfig/data), then
one entry here; an engine missing from ENGINES is refused by validation, by key."""
from __future__ import annotations

from . import distributed, nxdi_legacy, vllm_neuron
from .base import (
    DATA,
    DFLASH_TENSOR_PARALLEL,
    KV_SEGMENT_SIZES,
    METHOD_DRAFT_KIND,
    PLACEMENTS,
    SINGLE_SHOT_PREFILL_MAX,
    EngineInfo,
    Server,
    Setting,
    fields_in,
    image_sdk,
    powers_of_two_up_to,
    sdk_text,
)

ENGINES: dict[str, EngineInfo] = {engine.name: engine for engine in (nxdi_legacy.ENGINE, vllm_neuron.ENGINE, distributed.ENGINE)}
DEFAULT_ENGINE = nxdi_legacy.NAME
"""The engine of a stack that names none (serving.engine), as the seeds ran."""


def neuron_config_fields(engine: str) -> frozenset[str]:
    """The neuron config keys a registered engine defines."""
    return fields_in(ENGINES[engine].neuron_config_fields)


__all__ = ["DATA", "DEFAULT_ENGINE", "DFLASH_TENSOR_PARALLEL", "ENGINES", "KV_SEGMENT_SIZES", "METHOD_DRAFT_KIND", "PLACEMENTS",
           "SINGLE_SHOT_PREFILL_MAX", "EngineInfo", "Server", "Setting", "image_sdk", "neuron_config_fields",
           "powers_of_two_up_to", "sdk_text"]
