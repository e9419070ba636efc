"""vllm-neuron: the vLLM Neuron plugin (vllm-project/vllm-neuron, Beta), the supported path; it
speculates with EAGLE3 heads (and DFlash), not with plain draft models (Neuron SDK 2.32.0
vllm-neuron/docs/getting-started/migration-nxdi-to-vllm-neuron.md: "Vanilla draft-model
speculative decoding is not supported; migrate to an EAGLE3 draft")."""
from __future__ import annotations

from ..versions import ENGINE_IMAGES
from .base import EngineInfo

NAME = "vllm-neuron"

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
)
