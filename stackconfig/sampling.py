"""The sampling parameters a stack may send with every benchmark request (`benchmark.samplingParams`,
LLMPerf's --additional-sampling-params), each with the range the server accepts.

Both engines serve vLLM's OpenAI API, which turns these request fields into a SamplingParams and
refuses the request when one is out of range (vllm-project/vllm vllm/sampling_params.py
SamplingParams._verify_args, stored copy at 00388f6): checked here, a bad value fails the plan instead
of every request of a deployed benchmark. vLLM's server ignores a field it does not know (with a
warning in its log), so an unknown key is refused too: a typo would otherwise benchmark the server's
defaults under the name of the setting the stack meant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

INT64 = (-(2 ** 63), 2 ** 63 - 1)
"""vLLM's OpenAI request models bound `seed` to torch.long (vllm/entrypoints/openai/protocol.py,
ChatCompletionRequest.seed: ge=_LONG_INFO.min, le=_LONG_INFO.max)."""


@dataclass(frozen=True)
class Rule:
    """What one sampling parameter accepts: a finite number (or an integer) within bounds, true or
    false, or stop strings."""

    kind: str
    """"number", "integer", "boolean" or "strings" (one non-empty string, or a list of them)."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    """The low bound itself is outside the range (top_p > 0)."""

    def describe(self) -> str:
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "strings":
            return "a non-empty string or a list of them"
        noun = "a number" if self.kind == "number" else "an integer"
        if self.low is not None and self.high is not None:
            return f"{noun} in {'(' if self.low_open else '['}{_figure(self.low)}, {_figure(self.high)}]"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {_figure(self.low)}"
        return noun

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` (None when it is accepted)."""
        wrong = f"must be {self.describe()}, got {value!r}"
        if self.kind == "boolean":
            return None if isinstance(value, bool) else wrong
        if self.kind == "strings":
            strings = [value] if isinstance(value, str) else value
            ok = isinstance(strings, list) and bool(strings) and all(isinstance(s, str) and s for s in strings)
            return None if ok else wrong
        # YAML reads `true` as a bool, which Python counts as an int: never a number here.
        if isinstance(value, bool) or not isinstance(value, int if self.kind == "integer" else (int, float)):
            return wrong
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        above = self.high is not None and value > self.high
        return wrong if below or above else None


def _figure(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


SAMPLING_PARAMS: dict[str, Rule] = {
    # Greedy at 0. vLLM refuses a negative temperature in every release, and above 2 in its current
    # one ("temperature must be in [0, 2]"), the OpenAI API's own range.
    "temperature": Rule("number", 0, 2),
    "top_p": Rule("number", 0, 1, low_open=True),  # "top_p must be in (0, 1]"
    # "top_k must be 0 (disable), or at least 1", with -1 "quietly" accepted as disabled; an integer.
    "top_k": Rule("integer", -1),
    "min_p": Rule("number", 0, 1),  # "min_p must be in [0, 1]"
    "presence_penalty": Rule("number", -2, 2),  # "presence_penalty must be in [-2, 2]"
    "frequency_penalty": Rule("number", -2, 2),  # "frequency_penalty must be in [-2, 2]"
    "repetition_penalty": Rule("number", 0, None, low_open=True),  # "must be greater than zero"
    "seed": Rule("integer", *INT64),
    # "min_tokens must be greater than or equal to 0", and at most max_tokens, which the benchmark
    # sets to outputTokens (stackconfig/parse/benchmark.py checks that bound).
    "min_tokens": Rule("integer", 0),
    "ignore_eos": Rule("boolean"),
    "stop": Rule("strings"),  # "stop cannot contain an empty string"
}
"""Every key `benchmark.samplingParams` may hold, with vLLM's range for it (the quoted messages are
SamplingParams._verify_args's)."""
