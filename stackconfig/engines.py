"""The two serving engines a variant can run on, and what each one accepts.

- nxdi-legacy: vLLM 0.9.1 (the Neuron fork, V0) with NxD Inference, the seeds' engine and the
  only one that runs plain draft-model (fused) speculation. NxD Inference is in maintenance
  since Neuron 2.30 and its support on Trn2/Trn3 ends with Neuron 2.34 (Neuron announcement
  `announce-eos-nxdi-nxd-core-inference`, 2026-10-16).
- vllm-neuron: the vLLM Neuron plugin (vllm-project/vllm-neuron, Beta), the supported path; it
  speculates with EAGLE3 heads (and DFlash), not with plain draft models (Neuron SDK 2.32.0
  vllm-neuron/docs/getting-started/migration-nxdi-to-vllm-neuron.md: "Vanilla draft-model
  speculative decoding is not supported; migrate to an EAGLE3 draft").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from .versions import ENGINE_IMAGES

Engine = Literal["nxdi-legacy", "vllm-neuron"]
DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class EngineInfo:
    image: str
    """The default image, pinned (a stack may pin another with serving.image / variants[].image)."""
    methods: tuple[str, ...]
    """vLLM speculative_config methods this engine runs, by the kind of draft they need."""
    neuron_config_fields: str
    """File in stackconfig/data listing the neuron config keys the engine defines."""
    support: str
    sdks: tuple[tuple[int, int], tuple[int, int] | None]
    """The Neuron SDK releases (major, minor) whose images this engine accepts, oldest and newest
    (None: no newest): the image tag names its SDK (image_sdk)."""


ENGINES: dict[str, EngineInfo] = {
    "nxdi-legacy": EngineInfo(
        image=ENGINE_IMAGES["nxdi-legacy"].version,
        methods=("draft_model", "eagle"),
        neuron_config_fields="nxdi-0.6.10598-neuron-config-fields.json",
        support="maintenance since Neuron 2.30; end of support on Trn2/Trn3 with Neuron 2.34",
        # From the image whose engine was read (docs/engines.md) to the last release that supports
        # NxD Inference on Trn2: "Starting with Neuron Release 2.34, Neuron will end support for the
        # NxD Inference library ... on Trn2 and Trn3 instances" (Neuron announcement
        # announce-eos-nxdi-nxd-core-inference, 2026-10-16). Frozen on purpose: migrate to vllm-neuron.
        sdks=((2, 26), (2, 33)),
    ),
    "vllm-neuron": EngineInfo(
        image=ENGINE_IMAGES["vllm-neuron"].version,
        methods=("eagle3", "dflash"),
        neuron_config_fields="vllm-neuron-0.24-neuron-config-fields.json",
        support="Beta; the supported serving path on Trn2/Trn3",
        # The release whose documentation the checks restate (docs/engines.md); a newer image is
        # the user's to pin (serving.image).
        sdks=((2, 32), None),
    ),
}

_IMAGE_SDK = re.compile(r"(?:^|-)sdk(\d+)\.(\d+)(?:\.\d+)?(?:-|$)")


def image_sdk(image: str) -> tuple[int, int] | None:
    """The Neuron SDK release an image's tag names, as the Neuron DLC tags do
    (`...-neuronx-py313-sdk2.32.0-ubuntu24.04`); None when the tag names none."""
    tag = image.split("@")[0].rsplit("/", 1)[-1]
    match = _IMAGE_SDK.search(tag.partition(":")[2])
    return (int(match[1]), int(match[2])) if match else None


PLUGIN_FAMILIES_WITHOUT_RECIPE: dict[str, tuple[int, int]] = {"qwen3": (2, 32)}
"""Model families the plugin's documentation gives no text-generation recipe for, up to and
including this SDK. Neuron 2.32.0 (vllm-neuron/docs/model-recipes/index.md at aws-neuron-sdk
v2.32.0) has recipes for Llama 3, GPT-OSS, Qwen3-VL and Qwen3-Embedding only. The plugin's own
Qwen3 text recipe (vllm-project/vllm-neuron docs/model-recipes/qwen3.md, dated 2026-07-23: dense
Qwen3 up to 32B, BF16, EAGLE3) is in no release whose image this program could confirm."""


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

# Keys the program sets itself, from typed config, in each engine's neuron config.
PROGRAM_NEURON_CONFIG_KEYS = {
    "nxdi-legacy": {"tp_degree", "batch_size", "seq_len", "max_length", "speculation_length", "enable_fused_speculation",
                    "enable_eagle_speculation", "save_sharded_checkpoint", "logical_nc_config", "logical_neuron_cores",
                    "quantized_mlp_kernel_enabled", "quantization_type", "rmsnorm_quantize_kernel_enabled",
                    "modules_to_not_convert", "draft_model_modules_to_not_convert"},
    "vllm-neuron": {"num_seqs_buckets", "num_batched_tokens_buckets", "on_device_sampling_config"},
}


@cache
def neuron_config_fields(engine: str) -> frozenset[str]:
    """The neuron config keys an engine defines (derived lists with their sources inside)."""
    document = json.loads((DATA / ENGINES[engine].neuron_config_fields).read_text())
    return frozenset(document["fields"])


def powers_of_two_up_to(limit: int, start: int = 1) -> list[int]:
    """Buckets as the plugin's defaults build them (powers of 2 from `start`), ending exactly at
    `limit`, because the largest bucket must equal the limit (reference-configuration.md)."""
    buckets, size = [], start
    while size < limit:
        buckets.append(size)
        size *= 2
    return buckets + [limit]
