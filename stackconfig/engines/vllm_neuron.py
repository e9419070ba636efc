"""vllm-neuron: the vLLM Neuron plugin (vllm-project/vllm-neuron, Beta), the supported path; it
speculates with EAGLE3 heads (and DFlash), not with plain draft models (Neuron SDK 2.32.0
vllm-neuron/docs/getting-started/migration-nxdi-to-vllm-neuron.md: "Vanilla draft-model
speculative decoding is not supported; migrate to an EAGLE3 draft")."""
from __future__ import annotations

from typing import Any

from ..versions import ENGINE_IMAGES
from .base import EngineInfo, Variant, powers_of_two_up_to

NAME = "vllm-neuron"


def neuron_config(variant: Variant) -> dict[str, Any]:
    """--additional-config's neuron_config: the plugin's buckets, ending at the limits."""
    return {
        "num_seqs_buckets": powers_of_two_up_to(variant.serving.max_num_seqs),
        "num_batched_tokens_buckets": powers_of_two_up_to(variant.max_num_batched_tokens, start=128),
        # Sampling on the device, greedy: speculation needs on-device sampling (Neuron 2.32
        # vllm-neuron features-guide.md L596-603), and an empty mapping has no documented
        # meaning (stackconfig/semantics.py plugin_failures). Every variant, so baseline
        # and SD decode alike; validation keeps the benchmark's requests greedy to match.
        "on_device_sampling_config": {"all_greedy": True},
        **variant.serving.neuron_config,
        **variant.neuron_config_extra,
    }


def speculative_config(variant: Variant, config: dict[str, Any]) -> dict[str, Any]:
    # The plugin's keys: method, model, num_speculative_tokens (Neuron 2.32
    # vllm-neuron/docs/design/speculation/speculative_decoding_design.md).
    return {"method": variant.speculation_method, **config}


ENGINE = EngineInfo(
    name=NAME,
    image=ENGINE_IMAGES[NAME].version,
    methods=("eagle3", "dflash"),
    neuron_config_fields="vllm-neuron-0.24-neuron-config-fields.json",
    support="Beta; the supported serving path on Trn2/Trn3",
    # The release whose documentation the checks restate (docs/engines.md); a newer image is
    # the user's to pin (serving.image).
    sdks=((2, 32), None),
    program_keys=frozenset({"num_seqs_buckets", "num_batched_tokens_buckets", "on_device_sampling_config"}),
    neuron_config=neuron_config,
    speculative_config=speculative_config,
    prefill_budget=True,
)
