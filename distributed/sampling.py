"""Sampling settings, the distribution both models sample from, and the acceptance rule.

Speculative sampling (Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; Chen et al. 2023,
arXiv 2302.01318, Algorithm 2): draft token x_i drawn from q_i is accepted with probability
min(1, p_i(x_i) / q_i(x_i)); at the first rejection the target's token is drawn from
norm(max(0, p_i - q_i)); when all gamma are accepted a bonus token is drawn from p_{gamma+1}. The
emitted tokens are then distributed exactly as the target's own samples. p and q are the
distributions after the same temperature and top-p, so the guarantee holds for the warped target.
Temperature 0 is greedy: a draft token is accepted while it equals the target's argmax, and the
target's argmax follows, so the output is the target's greedy output.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    """0 is greedy."""
    top_p: float = 1.0
    seed: int | None = None
    """Seeds the request's random generators (draft and target); None draws one."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def distribution(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Probabilities over the vocabulary (last dimension) after temperature and top-p; greedy gives
    the argmax as a one-hot row (what the greedy rule compares against)."""
    logits = logits.float()
    if sampling.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    probs = torch.softmax(logits / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        # Keep the smallest set of most likely tokens whose mass reaches top_p (Holtzman et al. 2019).
        ordered, order = probs.sort(dim=-1, descending=True)
        before = ordered.cumsum(-1) - ordered
        ordered = ordered.masked_fill(before >= sampling.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


ROLES = {"draft": 0, "target": 1}


def generator(sampling: Sampling, role: str) -> torch.Generator:
    """The random stream of one side of a request. Draft and target must not share a stream: if the
    target's acceptance uniform were the very number the draft drew its token with, acceptance and
    draft choice would be correlated and the output would no longer follow the target. A seeded
    request gives each side its own seed (2 * seed + role)."""
    made = torch.Generator()
    if sampling.seed is None:
        made.seed()
    else:
        made.manual_seed(2 * sampling.seed + ROLES[role])
    return made


def draw(probs: torch.Tensor, generator: torch.Generator) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def accept(p: torch.Tensor, drafts: list[int], q: torch.Tensor | None, sampling: Sampling,
           generator: torch.Generator) -> tuple[int, int]:
    """(accepted draft tokens, the target's next token) for gamma drafts.

    p: the target's distributions at the gamma + 1 positions the drafts and the bonus occupy
    (gamma + 1 rows); q: the draft's distributions the drafts were drawn from (gamma rows), None
    when greedy."""
    gamma = len(drafts)
    if sampling.greedy:
        choice = p.argmax(-1).tolist()
        accepted = 0
        while accepted < gamma and drafts[accepted] == choice[accepted]:
            accepted += 1
        return accepted, choice[accepted]
    assert q is not None and q.shape[0] == gamma, "temperature > 0 needs the draft's distributions"
    uniform = torch.rand(gamma, generator=generator)
    for i, token in enumerate(drafts):
        # Accept with probability min(1, p/q): u < p/q, written without dividing by q.
        if uniform[i] * q[i, token] < p[i, token]:
            continue
        residual = (p[i] - q[i]).clamp(min=0)
        # Rejection needs p(x) < q(x), so p != q and the residual has mass; float rounding aside.
        return i, draw(residual if residual.sum() > 0 else p[i], generator)
    return gamma, draw(p[gamma], generator)
