"""How many draft tokens the target accepts: from the server's counters, from the stream, and the
speedup that acceptance allows (Leviathan et al.).

Counters: vLLM exposes vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens and
_num_accepted_tokens_per_pos{position} on /metrics (with the `_total` suffix Prometheus adds), one
series per engine and model. Acceptance rate = accepted / draft tokens; mean acceptance length =
1 + accepted / drafts; per position = accepted_per_pos[i] / drafts (docs/facts.md "Serving engines on Trainium2";
vllm-project/vllm vllm/v1/spec_decode/metrics.py, SpecDecodingProm). The legacy V0 engine has the
draft- and accepted-token counters but no drafts counter, and on Neuron probably never fills them
(docs/facts.md "vLLM on Neuron"); what is missing is reported as such.

Stream: each streamed chunk after the first is taken to be one target step (the first carries the
prefill's single token), so tokens per step = (completion tokens - 1) / (content chunks - 1),
summed over requests. That is an implied figure: it assumes one chunk per step.

Theory (docs/facts.md "Speculative decoding theory"; arXiv 2211.17192): with acceptance rate a and k
draft tokens per step, expected tokens per target step = (1 - a^(k+1)) / (1 - a); with a draft
that costs c of a target step, the walltime speedup = (1 - a^(k+1)) / ((1 - a)(k c + 1)).
"""
from __future__ import annotations

import re
import urllib.request
from typing import Any

from .results import CaseResult, RequestResult

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_POSITION = re.compile(r'position="(\d+)"')


def metrics_url(endpoint: str) -> str:
    """vLLM serves /metrics beside /v1 (http://host:8000/v1 -> http://host:8000/metrics)."""
    return endpoint.rstrip("/").removesuffix("/v1") + "/metrics"


def scrape(endpoint: str, timeout_s: float = 10) -> str:
    with urllib.request.urlopen(metrics_url(endpoint), timeout=timeout_s) as response:
        return response.read().decode()


def parse_counters(text: str) -> dict[str, Any]:
    """The speculative-decoding counters in a Prometheus text page, summed over their label sets;
    a counter the page does not have is absent from the result."""
    found: dict[str, Any] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, value = match["name"], float(match["value"])
        for key, counter in COUNTERS.items():
            if name == counter:
                found[key] = found.get(key, 0.0) + value
        if name == PER_POSITION:
            position = _POSITION.search(match["labels"] or "")
            if position:
                per_position = found.setdefault("per_position", {})
                per_position[position[1]] = per_position.get(position[1], 0.0) + value
    return found


def counter_deltas(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the case added to each counter both scrapes have."""
    deltas: dict[str, Any] = {key: after[key] - before[key] for key in COUNTERS if key in before and key in after}
    if "per_position" in before and "per_position" in after:
        deltas["per_position"] = {p: after["per_position"][p] - before["per_position"].get(p, 0.0)
                                  for p in sorted(after["per_position"], key=int)}
    return deltas


def from_counters(deltas: dict[str, Any]) -> dict[str, Any]:
    """Acceptance rate, mean acceptance length and per-position acceptance, each None with a reason
    when the server does not expose what it needs."""
    figures: dict[str, Any] = {"acceptance_rate": None, "mean_acceptance_length": None, "per_position": None,
                               "drafts": deltas.get("drafts"), "draft_tokens": deltas.get("draft_tokens"),
                               "accepted_tokens": deltas.get("accepted")}
    if "draft_tokens" not in deltas or "accepted" not in deltas:
        return {**figures, "note": "not exposed by this server"}
    if not deltas["draft_tokens"]:
        return {**figures, "note": "the server counted no draft tokens during this case"}
    figures["acceptance_rate"] = deltas["accepted"] / deltas["draft_tokens"]
    if deltas.get("drafts"):
        figures["mean_acceptance_length"] = 1 + deltas["accepted"] / deltas["drafts"]
        if "per_position" in deltas:
            figures["per_position"] = [v / deltas["drafts"] for v in deltas["per_position"].values()]
    return {**figures, "note": None}


def expected_tokens_per_step(a: float, k: int) -> float:
    """Leviathan et al.: 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a)."""
    return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


def implied_acceptance(tokens_per_step: float, k: int) -> float:
    """The acceptance rate a for which expected_tokens_per_step(a, k) == tokens_per_step, by
    bisection (the function rises monotonically from 1 at a = 0 to k + 1 at a = 1)."""
    if tokens_per_step <= 1:
        return 0.0
    if tokens_per_step >= k + 1:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if expected_tokens_per_step(middle, k) < tokens_per_step else (low, middle)
    return (low + high) / 2


def leviathan_speedup(a: float, k: int, cost_ratio: float) -> float:
    """The walltime improvement factor for acceptance a, window k and draft/target cost ratio c."""
    return expected_tokens_per_step(a, k) / (k * cost_ratio + 1)


def tokens_per_step(completion_tokens: list[int], content_chunks: list[int]) -> float | None:
    """Implied tokens per target step over a set of requests (see module docstring)."""
    steps = sum(chunks - 1 for chunks in content_chunks)
    return sum(tokens - 1 for tokens in completion_tokens) / steps if steps > 0 else None


def acceptance_figures(case: CaseResult, k: int | None, ok: list[RequestResult]) -> dict[str, Any]:
    """Tokens per target step (implied, every variant: ~1 for a baseline), the acceptance rate it
    implies for an SD variant, and the server's counters where it exposes them."""
    counted = [r for r in ok if r.output_tokens is not None]
    per_step = tokens_per_step([r.output_tokens for r in counted], [r.content_chunks for r in counted])
    figures: dict[str, Any] = {"tokens_per_step_implied": per_step, "acceptance_rate_implied": None}
    if k and per_step is not None:
        figures["acceptance_rate_implied"] = implied_acceptance(per_step, k)
    specdecode = case.specdecode or {}
    if "before" in specdecode and "after" in specdecode:
        counters = from_counters(counter_deltas(specdecode["before"], specdecode["after"]))
    else:
        counters = {"acceptance_rate": None, "note": specdecode.get("error", "not scraped")}
    figures["counters"] = counters
    return figures
