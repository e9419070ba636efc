"""What a backend provides: a target that verifies and a draft that proposes.

Both keep a KV cache per session (one request) across steps. The target's cache holds the
`cached_length` tokens both sides agree on; a verify call adds the context's new tokens and the
drafts, scores gamma + 1 positions in one forward, keeps the accepted drafts and drops the rest
(the rollback), and returns the next token, which is not yet cached: it is the next call's first
new token. The CPU backend (cpu.py) and the Neuron backend (neuron.py) implement this;
the gRPC client (target_client.py) implements Target too, so the speculation loop
(speculate.py) runs the same over a network or in one process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from .sampling import Sampling


@dataclass(frozen=True)
class Description:
    model: str
    tokenizer_sha256: str
    speculation_length: int
    """Positions one verification forward scores: gamma + 1 at most (on Neuron, the compiled shape)."""
    max_context: int
    """Tokens a session may hold (on Neuron, the compiled sequence length)."""
    vocab_size: int


@dataclass(frozen=True)
class Verdict:
    accepted: int
    next_token: int
    cached_length: int
    """What the target now holds for the session: the context before this call, its new tokens and
    the accepted drafts."""


class VerifyError(Exception):
    """A request the target refuses; `key` names what is wrong with it."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


class UnknownSession(VerifyError):
    """The target does not hold the session the caller says it does: it was restarted, or the
    session was released or evicted."""


def reusable_prefix(cached: list[int], context: list[int]) -> int:
    """How many leading tokens of `context` a draft's cache already holds: the common prefix, but
    never the whole context, whose last token must be run to give the next token's logits."""
    shared = 0
    while shared < min(len(cached), len(context) - 1) and cached[shared] == context[shared]:
        shared += 1
    return shared


def check_request(desc: Description, cached_length: int, new_tokens: list[int], drafts: list[int],
                  draft_probs: torch.Tensor | None, sampling: Sampling) -> None:
    """What every backend refuses, each naming the field at fault."""
    if not new_tokens:
        raise VerifyError("new_tokens", "at least one: the token the drafts follow")
    if not drafts or len(drafts) + 1 > desc.speculation_length:
        raise VerifyError("gamma", f"{len(drafts)} draft tokens; this target verifies 1 to {desc.speculation_length - 1} "
                                   f"(speculation_length {desc.speculation_length} = gamma + 1)")
    if cached_length + len(new_tokens) + len(drafts) > desc.max_context:
        raise VerifyError("max_context", f"{cached_length + len(new_tokens) + len(drafts)} tokens exceed {desc.max_context}")
    if any(not 0 <= t < desc.vocab_size for t in new_tokens + drafts):
        raise VerifyError("tokens", f"token ids must be in [0, {desc.vocab_size})")
    if not sampling.greedy and (draft_probs is None or tuple(draft_probs.shape) != (len(drafts), desc.vocab_size)):
        raise VerifyError("draft_probabilities", f"temperature > 0 needs gamma x vocab ({len(drafts)} x {desc.vocab_size}) "
                                                 "draft probabilities")
    if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
        raise VerifyError("sampling", "temperature >= 0 and 0 < top_p <= 1")


class Target(Protocol):
    def describe(self) -> Description: ...

    def verify(self, session: str, cached_length: int, new_tokens: list[int], drafts: list[int],
               draft_probs: torch.Tensor | None, sampling: Sampling) -> Verdict: ...

    def release(self, session: str) -> None: ...


class DraftSession(Protocol):
    def propose(self, context: list[int], gamma: int, sampling: Sampling,
                generator: torch.Generator) -> tuple[list[int], torch.Tensor | None]:
        """gamma tokens following `context`, and the distributions they were drawn from (gamma rows;
        None when greedy). The session keeps its cache for the prefix `context` shares with the
        previous call's."""
        ...


class Draft(Protocol):
    def description(self) -> Description: ...

    def session(self) -> DraftSession: ...
