"""nxdi-legacy: vLLM 0.9.1 (the Neuron fork, V0) with NxD Inference, the seeds' engine and the only
one that runs plain draft-model (fused) speculation. NxD Inference is in maintenance since Neuron
2.30 and its support on Trn2/Trn3 ends with Neuron 2.34 (Neuron announcement
`announce-eos-nxdi-nxd-core-inference`, 2026-10-16)."""
from __future__ import annotations

from ..versions import ENGINE_IMAGES
from .base import EngineInfo

NAME = "nxdi-legacy"

ENGINE = EngineInfo(
    name=NAME,
    image=ENGINE_IMAGES[NAME].version,
    methods=("draft_model", "eagle"),
    neuron_config_fields="nxdi-0.6.10598-neuron-config-fields.json",
    support="maintenance since Neuron 2.30; end of support on Trn2/Trn3 with Neuron 2.34",
    # From the image whose engine was read (docs/engines.md) to the last release that supports
    # NxD Inference on Trn2: "Starting with Neuron Release 2.34, Neuron will end support for the
    # NxD Inference library ... on Trn2 and Trn3 instances" (Neuron announcement
    # announce-eos-nxdi-nxd-core-inference, 2026-10-16). Frozen on purpose: migrate to vllm-neuron.
    sdks=((2, 26), (2, 33)),
    program_keys=frozenset({"tp_degree", "batch_size", "seq_len", "max_length", "speculation_length", "enable_fused_speculation",
                            "enable_eagle_speculation", "save_sharded_checkpoint", "logical_nc_config", "logical_neuron_cores",
                            "quantized_mlp_kernel_enabled", "quantization_type", "rmsnorm_quantize_kernel_enabled",
                            "modules_to_not_convert", "draft_model_modules_to_not_convert"}),
)
