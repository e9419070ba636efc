"""The CPU backend: PyTorch + transformers, one DynamicCache per session.

The target scores the new tokens and the gamma drafts in one forward over the session's cache,
applies the acceptance rule, and crops the cache back to the accepted length
(transformers.DynamicCache.crop with a negative count removes that many trailing positions,
transformers 5.23 cache_utils.py DynamicLayer.crop). The draft keeps its own cache and crops it to
the prefix its next context shares with what it drafted.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, PreTrainedModel

from .backend import Description, UnknownSession, Verdict, VerifyError, check_request, reusable_prefix
from .sampling import Sampling, accept, distribution, draw, generator


def tokenizer_sha256(tokenizer) -> str:
    """Identifies a vocabulary: two tokenizers with the same token-to-id map give the same ids."""
    return hashlib.sha256(json.dumps(tokenizer.get_vocab(), sort_keys=True).encode()).hexdigest()


def load(directory: Path) -> tuple[PreTrainedModel, object]:
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(directory)


class _Model:
    """A causal LM that counts its forward passes; one forward at a time (as one device runs one
    graph at a time), which also keeps CPU use to one core's worth per server."""

    def __init__(self, model: PreTrainedModel):
        self.model = model
        self.forward_passes = 0
        self.lock = threading.Lock()

    @torch.inference_mode()
    def logits(self, tokens: list[int], cache: DynamicCache) -> torch.Tensor:
        """Logits at every position of `tokens` (rows), appended to `cache`."""
        with self.lock:
            self.forward_passes += 1
            return self.model(input_ids=torch.tensor([tokens]), past_key_values=cache, use_cache=True).logits[0]


def crop(cache: DynamicCache, length: int) -> None:
    """Keep the first `length` positions of the cache."""
    excess = cache.get_seq_length() - length
    if excess > 0:
        cache.crop(-excess)


@dataclass
class _TargetSession:
    cache: DynamicCache
    generator: torch.Generator
    used: float = field(default_factory=time.monotonic)


class CpuTarget:
    """Target: verify gamma drafts with one forward over gamma + 1 positions."""

    def __init__(self, model: PreTrainedModel, *, name: str, tokenizer_sha256: str, speculation_length: int,
                 max_context: int, max_sessions: int = 8, session_idle_s: float = 300.0):
        self.model = _Model(model)
        self.desc = Description(model=name, tokenizer_sha256=tokenizer_sha256, speculation_length=speculation_length,
                                max_context=max_context, vocab_size=model.config.vocab_size)
        self.max_sessions = max_sessions
        self.session_idle_s = session_idle_s
        self.sessions: dict[str, _TargetSession] = {}
        self.sessions_lock = threading.Lock()

    @classmethod
    def from_directory(cls, directory: Path, **settings) -> CpuTarget:
        model, tokenizer = load(directory)
        return cls(model, name=directory.name, tokenizer_sha256=tokenizer_sha256(tokenizer), **settings)

    @property
    def forward_passes(self) -> int:
        return self.model.forward_passes

    def describe(self) -> Description:
        return self.desc

    def session_length(self, session: str) -> int | None:
        found = self.sessions.get(session)
        return found.cache.get_seq_length() if found else None

    def _session(self, session: str, cached_length: int, sampling: Sampling) -> _TargetSession:
        with self.sessions_lock:
            found = self.sessions.get(session)
            if found is None:
                if cached_length:
                    raise UnknownSession("session", f"{session!r} is not held here (the target restarted, or the session "
                                                    f"was released or evicted); its cached_length {cached_length} is lost")
                now = time.monotonic()
                for idle in [s for s, held in self.sessions.items() if now - held.used > self.session_idle_s]:
                    del self.sessions[idle]
                if len(self.sessions) >= self.max_sessions:
                    raise VerifyError("max_sessions", f"all {self.max_sessions} sessions are in use")
                found = self.sessions[session] = _TargetSession(DynamicCache(), generator(sampling, "target"))
            found.used = time.monotonic()
            return found

    def verify(self, session: str, cached_length: int, new_tokens: list[int], drafts: list[int],
               draft_probs: torch.Tensor | None, sampling: Sampling) -> Verdict:
        check_request(self.desc, cached_length, new_tokens, drafts, draft_probs, sampling)
        held = self._session(session, cached_length, sampling)
        if held.cache.get_seq_length() != cached_length:
            raise VerifyError("cached_length", f"the target holds {held.cache.get_seq_length()} tokens of {session!r}, "
                                               f"not {cached_length}")
        logits = self.model.logits(new_tokens + drafts, held.cache)
        # Row j scores the token after input j: the first draft follows the last new token.
        p = distribution(logits[len(new_tokens) - 1:], sampling)
        accepted, next_token = accept(p, drafts, draft_probs, sampling, held.generator)
        kept = cached_length + len(new_tokens) + accepted
        crop(held.cache, kept)
        return Verdict(accepted, next_token, kept)

    def release(self, session: str) -> None:
        with self.sessions_lock:
            self.sessions.pop(session, None)


class _CpuDraftSession:
    def __init__(self, model: _Model):
        self.model = model
        self.cache = DynamicCache()
        self.cached: list[int] = []
        """The tokens whose keys and values the cache holds."""

    def propose(self, context: list[int], gamma: int, sampling: Sampling,
                generator: torch.Generator) -> tuple[list[int], torch.Tensor | None]:
        shared = reusable_prefix(self.cached, context)
        crop(self.cache, shared)  # roll back what the target rejected
        pending, drafts, rows = context[shared:], [], []
        for _ in range(gamma):
            probs = distribution(self.model.logits(pending, self.cache)[-1], sampling)
            token = int(probs.argmax()) if sampling.greedy else draw(probs, generator)
            drafts.append(token)
            rows.append(probs)
            pending = [token]
        self.cached = context + drafts[:-1]
        return drafts, None if sampling.greedy else torch.stack(rows)


class CpuDraft:
    def __init__(self, model: PreTrainedModel, *, name: str, tokenizer_sha256: str, max_context: int):
        self.model = _Model(model)
        self.desc = Description(model=name, tokenizer_sha256=tokenizer_sha256, speculation_length=0,
                                max_context=max_context, vocab_size=model.config.vocab_size)

    @classmethod
    def from_directory(cls, directory: Path, *, max_context: int) -> tuple[CpuDraft, object]:
        model, tokenizer = load(directory)
        return cls(model, name=directory.name, tokenizer_sha256=tokenizer_sha256(tokenizer), max_context=max_context), tokenizer

    @property
    def forward_passes(self) -> int:
        return self.model.forward_passes

    def description(self) -> Description:
        return self.desc

    def session(self) -> _CpuDraftSession:
        return _CpuDraftSession(self.model)
