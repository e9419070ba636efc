"""Facts the config is checked against: the models this project knows and the trn2 shapes.

Model facts come from the Hugging Face model cards; instance facts from ../shared/FACTS.md
("Trainium2 arithmetic") and the EC2 trn2 instance page.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    """What validation needs to know about a Hugging Face model."""

    tokenizer_family: str
    """Draft and target must share a tokenizer: speculative decoding verifies token ids."""
    gated: bool
    """Gated repositories need a Hugging Face token to download."""
    params_billion: float
    checkpoint_dtype: str = "bf16"


MODELS: dict[str, ModelInfo] = {
    "Qwen/Qwen3-32B": ModelInfo("qwen3", gated=False, params_billion=32.8),
    "Qwen/Qwen3-1.7B": ModelInfo("qwen3", gated=False, params_billion=1.7),
    "Qwen/Qwen3-0.6B": ModelInfo("qwen3", gated=False, params_billion=0.6),
    # Llama 3.1 and 3.2 share the 128k-token Llama 3 tokenizer.
    "meta-llama/Llama-3.1-405B-Instruct": ModelInfo("llama3", gated=True, params_billion=405),
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ModelInfo(
        "llama3", gated=True, params_billion=405, checkpoint_dtype="fp8"
    ),
    "meta-llama/Llama-3.2-1B-Instruct": ModelInfo("llama3", gated=True, params_billion=1.2),
    "meta-llama/Llama-3.1-8B": ModelInfo("llama3", gated=True, params_billion=8.0),
    "meta-llama/Llama-3.2-1B": ModelInfo("llama3", gated=True, params_billion=1.2),
}


@dataclass(frozen=True)
class InstanceShape:
    """A Trainium2 instance type as the scheduler sees it."""

    neuron_devices: int
    vcpus: int
    memory_gib: int
    physical_cores_per_device: int = 8
    approx_hourly_usd: float | None = None
    """Approximate on-demand list price, for cost estimates in the plan summary only; check the
    EC2 pricing page (or `aws pricing get-products`) for your region before relying on it."""


INSTANCE_SHAPES: dict[str, InstanceShape] = {
    "trn2.48xlarge": InstanceShape(neuron_devices=16, vcpus=192, memory_gib=2048, approx_hourly_usd=44.70),
    "trn2.3xlarge": InstanceShape(neuron_devices=1, vcpus=12, memory_gib=128),
}

# The Neuron DRA driver exposes connected device groups of these sizes only
# (resource.aws.com/devicegroup{1,4,8,16}_id; FACTS.md "Neuron DRA driver").
DEVICE_GROUP_SIZES = (1, 4, 8, 16)
LOGICAL_NEURON_CORE_SIZES = (1, 2)
SPECULATIVE_TOKENS_RANGE = (1, 15)
MIN_KUBERNETES_VERSION = (1, 34)
CAPACITY_TYPES = ("on-demand", "reserved")

# The sample's eight LLMPerf test cases (FACTS.md, "LLMPerf"); slugs become the CloudWatch
# TestCase dimension. None keeps LLMPerf's own sonnet.txt (the "original sonnets" case).
DEFAULT_TEST_CASES: dict[str, str | None] = {
    "counting": "counting numbers from 1 ",
    "sonnets": None,
    "single-letter": "a",
    "hello-world": "hello world ",
    "cat-on-mat": "the cat sat on the mat. ",
    "json-fixed-keys": "Output valid JSON with fixed keys",
    "python-skeleton": "Write a simple Python function skeleton",
    "one-to-twenty": "List numbers from one to twenty",
}
