"""The Neuron backend: NxD Inference 0.6.10598 on Trainium. NOT RUN HERE.

NxD Inference cannot be installed on this machine (it needs the Neuron SDK and a Neuron device),
so this module is written against its source at tag v0.6.10598 (the version the legacy image
installs: stackconfig/versions.py "nxdi-legacy"; commit e07f0567) and nothing in the test suite
executes it. It imports NxD Inference only when a backend is built, so the package imports without
it. Every NxD Inference call is marked `# NxDI: <key>` and listed with its file and line at the tag
in distributed/data/nxdi-0.6.10598-calls.json (tests/test_distributed_neuron.py keeps the two equal).

- Target: NeuronLlamaForCausalLM compiled with `speculation_length` = gamma + 1 and
  `enable_fused_speculation` off. NxD Inference then builds a context-encoding model and the
  non-fused speculation model (SPECULATION_MODEL_TAG) instead of a token-generation model, and
  routes a call of exactly `speculation_length` input tokens to it: one forward scores gamma + 1
  positions. Logits come back to the host (no on-device sampling) so the acceptance rule of
  sampling.py applies unchanged.
- Draft: the same class compiled as a plain decoder (speculation length 0: context encoding and
  token generation).
- Rollback: the device KV cache is written at the positions a call gives; after a rejection the
  next call's attention mask covers only the accepted positions and its writes start there,
  overwriting the rejected drafts. That is how NxD Inference's own assisted decoding continues
  after a partial match (hf_adapter.py, _standard_assisted_decoding).
- Both are compiled for batch 1: one session (request) at a time per server, so the draft server
  runs with --max-concurrency 1 on this backend.

NxD Inference reaches end of support on Trn2 (and Trn3) with Neuron 2.34 (Neuron docs,
announce-eos-nxdi-nxd-core-inference; docs/facts.md "Serving engines on Trainium2"). The engine that
carries on is the vLLM Neuron plugin (vllm-project/vllm-neuron), which speculates only with EAGLE3
heads (or dflash) inside the target's graph: no plain draft model and no verify-only entry point.
A distributed draft/target split after 2.34 therefore needs either this backend on an SDK up to
2.34 or a verify call built on the plugin's model runner (docs/distributed.md).
"""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import torch
from transformers import AutoTokenizer

from .backend import Description, UnknownSession, Verdict, VerifyError, check_request, reusable_prefix
from .cpu import tokenizer_sha256
from .sampling import Sampling, accept, distribution, draw, generator

NXDI_VERSION = "0.6.10598"
COMPILED_MODEL_FILE = "model.pt"
"""What compile() saves in the compiled directory (application_base.py COMPILED_MODEL_FILE_NAME)."""


def _nxdi() -> SimpleNamespace:
    try:
        from neuronx_distributed_inference.models.config import NeuronConfig  # NxDI: NeuronConfig
        from neuronx_distributed_inference.models.llama.modeling_llama import (  # NxDI: LlamaInferenceConfig
            LlamaInferenceConfig,
            NeuronLlamaForCausalLM,  # NxDI: NeuronLlamaForCausalLM
        )
        from neuronx_distributed_inference.utils.hf_adapter import load_pretrained_config  # NxDI: load_pretrained_config
    except ImportError as error:
        raise RuntimeError(f"the neuron backend needs NxD Inference {NXDI_VERSION} (the Neuron DLC); "
                           "it is not installed here") from error
    return SimpleNamespace(NeuronConfig=NeuronConfig, LlamaInferenceConfig=LlamaInferenceConfig,
                           NeuronLlamaForCausalLM=NeuronLlamaForCausalLM, load_pretrained_config=load_pretrained_config)


class _Compiled:
    """One Llama under NxD Inference: compiled into `compiled_dir` on the first start, loaded
    from there on every start."""

    def __init__(self, model_dir: Path, compiled_dir: Path, *, tp_degree: int, max_context: int, speculation_length: int):
        nxdi = _nxdi()
        neuron_config = nxdi.NeuronConfig(  # NxDI: NeuronConfig
            tp_degree=tp_degree, batch_size=1, seq_len=max_context, max_context_length=max_context,
            speculation_length=speculation_length,  # NxDI: speculation_length
            enable_fused_speculation=False,  # NxDI: enable_fused_speculation
            on_device_sampling_config=None,  # NxDI: on_device_sampling_config
            torch_dtype=torch.bfloat16)
        config = nxdi.LlamaInferenceConfig(neuron_config,  # NxDI: LlamaInferenceConfig
                                           load_config=nxdi.load_pretrained_config(str(model_dir)))  # NxDI: load_pretrained_config
        self.model = nxdi.NeuronLlamaForCausalLM(str(model_dir), config)  # NxDI: NeuronLlamaForCausalLM
        if not (compiled_dir / COMPILED_MODEL_FILE).exists():
            self.model.compile(str(compiled_dir) + "/")  # NxDI: compile
        self.model.load(str(compiled_dir) + "/")  # NxDI: load
        self.lock = threading.Lock()
        self.forward_passes = 0

    def logits(self, tokens: list[int], cached: int) -> torch.Tensor:
        """Logits for `tokens` placed after the `cached` positions the device cache holds. NxD
        Inference routes a call at position 0 to context encoding (logits of the last position
        only), a call of speculation_length tokens to the speculation model, one token to token
        generation (one row each position)."""
        with self.lock:
            self.forward_passes += 1
            positions = torch.arange(cached, cached + len(tokens))[None]
            visible = len(tokens) if cached == 0 else cached
            outputs = self.model(  # NxDI: forward
                input_ids=torch.tensor([tokens]), attention_mask=torch.ones(1, visible, dtype=torch.long),
                position_ids=positions, seq_ids=torch.tensor([0]))
            return outputs.logits[0].float()  # NxDI: logits


class _Held:
    """The one session a batch-1 model holds."""

    def __init__(self, session: str, sampling: Sampling):
        self.session = session
        self.length = 0
        self.generator = generator(sampling, "target")


class NeuronTarget:
    def __init__(self, model: _Compiled, description: Description):
        self.model = model
        self.desc = description
        self.held: _Held | None = None

    @classmethod
    def compile_or_load(cls, settings) -> NeuronTarget:
        model = _Compiled(settings.model, settings.compiled_dir, tp_degree=settings.tp_degree,
                          max_context=settings.max_context, speculation_length=settings.speculation_length)
        tokenizer = AutoTokenizer.from_pretrained(settings.model)
        return cls(model, Description(settings.model.name, tokenizer_sha256(tokenizer), settings.speculation_length,
                                      settings.max_context, model.model.config.vocab_size))  # NxDI: vocab_size

    def describe(self) -> Description:
        return self.desc

    def verify(self, session: str, cached_length: int, new_tokens: list[int], drafts: list[int],
               draft_probs: torch.Tensor | None, sampling: Sampling) -> Verdict:
        check_request(self.desc, cached_length, new_tokens, drafts, draft_probs, sampling)
        if cached_length == 0:
            if self.held is not None and self.held.session != session:
                raise VerifyError("max_sessions", "this target is compiled for batch 1 and holds another session")
            if len(new_tokens) < 2:
                raise VerifyError("new_tokens", "a session starts with at least 2 tokens (context encoding needs one "
                                                "before the token the drafts follow)")
            self.held = _Held(session, sampling)
            self.model.logits(new_tokens[:-1], 0)  # fills the cache; its logits are not needed
            self.held.length = len(new_tokens) - 1
        elif self.held is None or self.held.session != session or self.held.length != cached_length:
            raise UnknownSession("session", f"{session!r} with {cached_length} cached tokens is not held here")
        elif len(new_tokens) != 1:
            raise VerifyError("new_tokens", "after the first step, exactly the previous step's next token")
        gamma = len(drafts)
        # A shorter window is padded to the compiled length, as NxD Inference's assisted decoding pads it.
        window = [new_tokens[-1]] + drafts + [0] * (self.desc.speculation_length - gamma - 1)
        p = distribution(self.model.logits(window, self.held.length)[:gamma + 1], sampling)
        accepted, next_token = accept(p, drafts, draft_probs, sampling, self.held.generator)
        self.held.length = cached_length + len(new_tokens) + accepted
        return Verdict(accepted, next_token, self.held.length)

    def release(self, session: str) -> None:
        if self.held is not None and self.held.session == session:
            self.held = None
            self.model.model.reset()  # NxDI: reset


class _NeuronDraftSession:
    def __init__(self, model: _Compiled):
        self.model = model
        self.cached: list[int] = []

    def propose(self, context: list[int], gamma: int, sampling: Sampling,
                generator: torch.Generator) -> tuple[list[int], torch.Tensor | None]:
        shared = reusable_prefix(self.cached, context)
        if shared == 0:
            logits = self.model.logits(context, 0)[-1]
        else:
            for position in range(shared, len(context)):  # the token-generation model takes one token
                logits = self.model.logits([context[position]], position)[-1]
        drafts, rows = [], []
        for i in range(gamma):
            if i:
                logits = self.model.logits([drafts[-1]], len(context) + i - 1)[-1]
            probs = distribution(logits, sampling)
            drafts.append(int(probs.argmax()) if sampling.greedy else draw(probs, generator))
            rows.append(probs)
        self.cached = context + drafts[:-1]
        return drafts, None if sampling.greedy else torch.stack(rows)


class NeuronDraft:
    def __init__(self, model: _Compiled, description: Description):
        self.model = model
        self.desc = description

    @classmethod
    def compile_or_load(cls, settings, max_context: int):
        model = _Compiled(settings.model, settings.compiled_dir, tp_degree=settings.tp_degree, max_context=max_context,
                          speculation_length=0)
        tokenizer = AutoTokenizer.from_pretrained(settings.model)
        return cls(model, Description(settings.model.name, tokenizer_sha256(tokenizer), 0, max_context,
                                      model.model.config.vocab_size)), tokenizer  # NxDI: vocab_size

    def description(self) -> Description:
        return self.desc

    def session(self) -> _NeuronDraftSession:
        return _NeuronDraftSession(self.model)
