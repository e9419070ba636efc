"""The results layout and LLMPerf's files, read into per-request figures.

Layout: DIR/<run-id>/run.json and DIR/<run-id>/<variant>/<test-case>/ holding LLMPerf's
*_summary.json and *_individual_responses.json.

Time per output token is computed per request as (end-to-end - TTFT) / (output tokens - 1).
LLMPerf's own inter-token latency divides by streamed chunks, and a speculative-decoding server
streams several tokens per chunk, so that figure is biased against SD (FACTS.md, LLMPerf).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"


@dataclass(frozen=True)
class RequestResult:
    ttft_s: float | None
    inter_token_latency_s: float | None
    end_to_end_s: float | None
    output_throughput: float | None
    input_tokens: int | None
    output_tokens: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return not self.error and self.end_to_end_s is not None and self.ttft_s is not None

    @property
    def time_per_output_token_s(self) -> float | None:
        if not self.ok or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.end_to_end_s - self.ttft_s) / (self.output_tokens - 1)

    @classmethod
    def from_llmperf(cls, record: dict[str, Any]) -> "RequestResult":
        code, message = record.get("error_code"), record.get("error_msg")
        error = None
        if code not in (None, "", 0) or message:
            error = f"{code or ''} {message or ''}".strip()

        def number(key: str) -> float | None:
            value = record.get(key)
            return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

        tokens = number("number_output_tokens")
        inputs = number("number_input_tokens")
        return cls(
            ttft_s=number("ttft_s"),
            inter_token_latency_s=number("inter_token_latency_s"),
            end_to_end_s=number("end_to_end_latency_s"),
            output_throughput=number("request_output_throughput_token_per_s"),
            input_tokens=int(inputs) if inputs is not None else None,
            output_tokens=int(tokens) if tokens is not None else None,
            error=error,
        )


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def load_requests(case_dir: Path) -> list[RequestResult]:
    """Every request LLMPerf recorded in one variant/test-case folder ([] if none ran)."""
    results: list[RequestResult] = []
    for path in sorted(case_dir.glob("*_individual_responses.json")):
        results += [RequestResult.from_llmperf(r) for r in json.loads(path.read_text())]
    return results


def list_runs(results_dir: Path) -> list[str]:
    """Run ids in DIR, oldest first (run ids start with a UTC timestamp)."""
    return sorted(p.parent.name for p in results_dir.glob(f"*/{RUN_FILE}"))


def load_run(results_dir: Path, run_id: str) -> dict[str, Any]:
    return json.loads((results_dir / run_id / RUN_FILE).read_text())


def case_dir(results_dir: Path, run_id: str, variant: str, test_case: str) -> Path:
    return results_dir / run_id / variant / test_case
