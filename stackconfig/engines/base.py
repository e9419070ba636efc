"""What every serving engine is described by (EngineInfo), and the facts the engines share: the
SDK an image's tag names, speculation methods by draft kind, the plugin-style bucket rules. Each
engine is a module beside this one (nxdi_legacy.py, vllm_neuron.py); the registry
(stackconfig/engines/__init__.py ENGINES) is keyed by the engine's name.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Mapping

from .failure import EngineFailure

DATA = Path(__file__).parent.parent / "data"

Variant = Any
"""A typed variant (stackconfig/model.py Variant). The variant asks its engine for its settings, so
the engines stand below the typed model and take a variant by shape: importing it would close a
circle (model -> engines -> model)."""
Setting = Callable[[Variant], "str | None"]
"""One environment variable's value for a variant (None: not set for it)."""


PLACEMENTS = ("same-node", "separate-node")
"""variants[].placement, for engines whose variant runs more than one pod: all on one trn2 node
(each its own device group), or the draft on another node."""


@dataclass(frozen=True)
class Server:
    """One pod a variant runs, as its engine lays it out: one vLLM server, or (distributed) a target
    verification server and a draft server. The Pulumi side renders each as a Deployment and a
    Service (components/pairing/)."""

    part: str
    """"" for a variant served by one pod; else the pod's part ("target", "draft"), which names its
    workload and its compiled set (Variant.server_artifact_path)."""
    devices: int
    """Neuron devices it claims: its own device group (a ResourceClaimTemplate of this size)."""
    node: int
    """Servers of one variant with the same index share a node; different indexes, different nodes."""
    endpoint: bool
    """Whether it serves the variant's OpenAI-compatible endpoint, which the benchmark measures."""


def one_server(variant: Variant) -> tuple[Server, ...]:
    """A vLLM variant: one pod, the variant's devices, the endpoint."""
    return (Server("", variant.devices, 0, True),)


@dataclass(frozen=True)
class EngineInfo:
    name: str
    """The key of the registry and the value of serving.engine / variants[].engine."""
    image: str
    """The default image, pinned (a stack may pin another with serving.image / variants[].image)."""
    methods: tuple[str, ...]
    """vLLM speculative_config methods this engine runs, by the kind of draft they need."""
    neuron_config_fields: str
    """File in stackconfig/data (or an absolute path) listing the neuron config keys the engine defines."""
    support: str
    sdks: tuple[tuple[int, int], tuple[int, int] | None]
    """The Neuron SDK releases (major, minor) whose images this engine accepts, oldest and newest
    (None: no newest): the image tag names its SDK (image_sdk)."""
    program_keys: frozenset[str]
    """The neuron config keys the program sets itself, from typed config: refused in a stack's neuronConfig."""
    neuron_config: Callable[[Variant], dict[str, Any]]
    """What the engine compiles with, from the variant's typed config and its neuronConfig keys."""
    speculative_config: Callable[[Variant, dict[str, Any]], dict[str, Any]]
    """vLLM's --speculative-config for an SD variant, from the keys every engine takes (model,
    num_speculative_tokens)."""
    server_arguments: Callable[[Variant, list[str], list[str]], list[str]]
    """`vllm serve ...` for a variant, from the arguments every engine takes and its
    --speculative-config (empty for a baseline): stackconfig/server.py arguments."""
    environment: Mapping[str, Setting]
    """The variables the engine's server is given beside serve.sh's (stackconfig/server.py)."""
    failures: Callable[[Variant, list[str]], list[EngineFailure]]
    """Every way the variant's server would fail, given its `vllm serve` arguments: the engine's own
    code that the rendered settings reach, restated beside the file and lines it restates
    (stackconfig/semantics.py)."""
    serves_greedily: Callable[[Variant, dict[str, Any]], bool]
    """Whether the server decodes greedily for requests carrying these sampling parameters."""
    refused_neuron_config: Callable[[dict[str, Any]], dict[str, str]] = lambda config: {}
    """Values of its own neuron config keys the engine cannot serve, key -> why (a stack's neuronConfig)."""
    check_variant: Callable[[Variant], list[tuple[str, str]]] = lambda variant: []
    """Problems of a variant's rendered settings, (key under the variant, message): what the engine
    would assert on, caught by key before it is asked."""
    draft_max_model_len_refused: str = ""
    """Why a variant may not set draftMaxModelLen ("": the engine takes one)."""
    rescaled_fp8: bool = False
    """Whether it serves FP8 checkpoints rescaled for Neuron (quantization: fp8)."""
    beyond_newest: str = ""
    """Why an image newer than its newest SDK is refused, said after the span."""
    unserved_family: Callable[[Any, tuple[int, int]], str | None] = lambda target, sdk: None
    """Why an image of this SDK cannot serve the target (a catalog ModelInfo), or None."""
    greedy_only: str = ""
    """Why it decodes every request greedily whatever the request asks ("": it follows the request),
    so the benchmark must ask for temperature 0 to report what it measured."""
    saves_sharded_weights: bool = False
    """Whether the compiled set holds the sharded weights of every model compiled, beside the graphs."""
    prefill_budget: bool = False
    """Whether the engine takes --max-num-batched-tokens (serving.maxNumBatchedTokens), which then
    changes what it compiles."""
    servers: Callable[[Variant], tuple[Server, ...]] = one_server
    """The pods a variant runs, their device groups and how they share nodes."""
    compared_with: str = ""
    """The engine of the baseline its SD variants are compared with ("": its own)."""
    variant_keys: frozenset[str] = frozenset()
    """Keys under variants[] that only this engine reads (refused on the others' variants)."""
    program: str = "vllm"
    """What serve.sh runs with the server's arguments, once weights and compiled set are in place."""
    workload: str = "vllm"
    """Which Pulumi component renders its variants (components/pairing/serving.py WORKLOADS)."""


_IMAGE_SDK = re.compile(r"(?:^|-)sdk(\d+)\.(\d+)(?:\.\d+)?(?:-|$)")


def image_sdk(image: str) -> tuple[int, int] | None:
    """The Neuron SDK release an image's tag names, as the Neuron DLC tags do
    (`...-neuronx-py313-sdk2.32.0-ubuntu24.04`); None when the tag names none."""
    tag = image.split("@")[0].rsplit("/", 1)[-1]
    match = _IMAGE_SDK.search(tag.partition(":")[2])
    return (int(match[1]), int(match[2])) if match else None


def sdk_text(sdk: tuple[int, int]) -> str:
    return f"{sdk[0]}.{sdk[1]}"


# What each method needs from the draft (stackconfig/catalog.py ModelInfo.kind).
METHOD_DRAFT_KIND = {"draft_model": "model", "eagle": "eagle-head", "eagle3": "eagle3-head", "dflash": "dflash-head"}

# DFlash's documented limits (vllm-project/vllm-neuron main, docs/guides/features-guide.md;
# docs/facts.md "Serving engines on Trainium2"): TP 4 or 8, BF16 target/draft/KV cache, no chunked prefill, no
# async scheduling, no prefix caching.
DFLASH_TENSOR_PARALLEL = (4, 8)

# The plugin's segmented-prefill rule (vllm_neuron bucket utils, docs/facts.md "Serving engines on Trainium2"):
# single-shot prefill up to this length; beyond it max_num_batched_tokens must be one of the
# supported KV segment sizes.
SINGLE_SHOT_PREFILL_MAX = 16 * 1024
KV_SEGMENT_SIZES = (512, 1024, 2048, 4096, 8192)


@cache
def fields_in(file: str) -> frozenset[str]:
    """The neuron config keys a fields file lists (derived lists with their sources inside)."""
    return frozenset(json.loads((DATA / file).read_text())["fields"])


def powers_of_two_up_to(limit: int, start: int = 1) -> list[int]:
    """Buckets as the plugin's defaults build them (powers of 2 from `start`), ending exactly at
    `limit`, because the largest bucket must equal the limit (reference-configuration.md)."""
    buckets, size = [], start
    while size < limit:
        buckets.append(size)
        size *= 2
    return buckets + [limit]
