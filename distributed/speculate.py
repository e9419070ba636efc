"""The speculation loop: draft gamma tokens, verify them with the target, emit what it accepts.

Each step is one target call (one round trip when the target is remote) and emits 1 to gamma + 1
tokens: the accepted drafts and the target's own next token. The target keeps the context in its
KV cache, so a step sends only what it does not hold: the prompt on the first step, then the one
token the previous step's target chose.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .backend import DraftSession, Target
from .sampling import Sampling, generator


@dataclass(frozen=True)
class Step:
    tokens: list[int]
    """What this step emits (cut at the end of the request)."""
    drafted: int
    accepted: int
    finish_reason: str | None
    """None while the request goes on; "stop" at the end-of-sequence token, "length" at max_tokens or
    the context limit (the OpenAI API's values)."""


def speculate(draft: DraftSession, target: Target, session: str, prompt: list[int], *, max_new_tokens: int,
              gamma: int, sampling: Sampling, max_context: int, eos_token_id: int | None = None) -> Iterator[Step]:
    """Yields one Step per target call until the request ends; releases the target's session at the
    end, also when the caller stops early or a call fails."""
    draws = generator(sampling, "draft")
    context, new, cached, emitted = list(prompt), list(prompt), 0, 0
    try:
        while True:
            drafts, draft_probs = draft.propose(context, gamma, sampling, draws)
            verdict = target.verify(session, cached, new, drafts, draft_probs, sampling)
            tokens = drafts[:verdict.accepted] + [verdict.next_token]
            finish = None
            if eos_token_id in tokens:
                tokens, finish = tokens[:tokens.index(eos_token_id) + 1], "stop"
            if emitted + len(tokens) >= max_new_tokens:
                tokens, finish = tokens[:max_new_tokens - emitted], finish or "length"
            context += tokens
            emitted += len(tokens)
            # The next step sends the one token the target has not cached and drafts gamma more.
            if finish is None and len(context) + gamma > max_context:
                finish = "length"
            yield Step(tokens, gamma, verdict.accepted, finish)
            if finish:
                return
            cached, new = verdict.cached_length, [verdict.next_token]
    finally:
        target.release(session)
