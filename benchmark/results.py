"""The results layout, and each (test case, variant) read back into per-request figures.

Layout: DIR/<run-id>/run.json and, per case, DIR/<run-id>/<variant>/<test-case>/ with:
- requests.jsonl: every request LLMPerf sent, as the measuring proxy saw it (benchmark/proxy.py);
- case.json: what was asked, LLMPerf's exit code and last error line, the variant's pod and devices;
- specdecode.json: the server's speculative-decoding counters before and after the case;
- telemetry.json: Neuron utilization and memory of the variant's devices (written later; a
  distributed variant's per pod, under servers.target and servers.draft);
- the load generator's own files (LLMPerf's *_summary.json and *_individual_responses.json,
  absent when it crashed; inference-perf's reports) and its stdout/stderr (llmperf.stdout.txt, ...).
A run of several load levels (a sweep) has one more folder per level under each test case:
DIR/<run-id>/<variant>/<test-case>/<level>/ (e.g. concurrency-4), and its run.json lists the levels.
A tuning study (benchmark/tuner.py) writes DIR/<study-id>/study.json, and each repeat's cases as a
run of its own, under DIR/<study-id>/repeat-<r>/ (study_run_id).

Figures come from the proxy's records: TTFT and end-to-end time measured in the pod, output and
input tokens as the server counted them (vLLM's usage chunk). Time per output token (TPOT) is
(end-to-end - TTFT) / (output tokens - 1) per request: per token, whatever the number of tokens per
streamed chunk (LLMPerf's inter-token latency is per chunk and includes TTFT: docs/facts.md "LLMPerf,
measured"). LLMPerf's summary is kept for reference only.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .loadgen import Level, generator
from .proxy import RECORDS_FILE, read_records

RUN_FILE = "run.json"
CASE_FILE = "case.json"
SPECDECODE_FILE = "specdecode.json"
TELEMETRY_FILE = "telemetry.json"
STUDY_FILE = "study.json"


def streams(folder: Path, output_name: str) -> tuple[Path, Path]:
    """Where a load generator's stdout and stderr are kept (benchmark/loadgen LoadGenerator.output_name)."""
    return folder / f"{output_name}.stdout.txt", folder / f"{output_name}.stderr.txt"


def run_levels(run: dict[str, Any]) -> list[Level]:
    """The load levels of a run (its run config or run.json): one, the shape's concurrency, for a
    run recorded before runs listed them."""
    loads = run.get("loads") or [{"concurrency": run["shape"]["concurrency"]}]
    return [Level.from_dict(load) for load in loads]


@dataclass(frozen=True)
class RequestResult:
    start: float
    """Wall-clock time (epoch seconds) the request reached the proxy."""
    ttft_s: float | None
    e2e_s: float | None
    output_tokens: int | None
    """The server's completion_tokens; None if it sent no usage."""
    input_tokens: int | None
    content_chunks: int
    error: str | None
    request_sha256: str | None
    response_sha256: str | None

    @property
    def ok(self) -> bool:
        """Answered in full. A reply without content (no TTFT) is still a completed request."""
        return self.error is None and self.e2e_s is not None

    @property
    def time_per_output_token_s(self) -> float | None:
        if not self.ok or self.ttft_s is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def output_throughput(self) -> float | None:
        """Output tokens per second of this request (LLMPerf's per-request definition: tokens / e2e)."""
        if not self.ok or self.output_tokens is None or not self.e2e_s:
            return None
        return self.output_tokens / self.e2e_s

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "RequestResult":
        error = record.get("error")
        if error is None and record.get("status") != 200:
            error = f"HTTP {record.get('status')}"
        return cls(start=record["start"], ttft_s=record.get("ttft_s") if error is None else None,
                   e2e_s=record.get("e2e_s"), output_tokens=record.get("completion_tokens"),
                   input_tokens=record.get("prompt_tokens"), content_chunks=record.get("content_chunks", 0),
                   error=error, request_sha256=record.get("request_sha256"),
                   response_sha256=record.get("response_sha256"))


@dataclass(frozen=True)
class CaseResult:
    variant: str
    test_case: str
    requests: list[RequestResult]
    case: dict[str, Any]
    """case.json ({} if the case never started)."""
    llmperf_summary: dict[str, Any] | None
    """The load generator's own summary (LLMPerf's *_summary.json), for reference."""
    llmperf_responses: list[dict[str, Any]]
    """LLMPerf's *_individual_responses.json: only the requests it recorded (for reference)."""
    specdecode: dict[str, Any] | None
    telemetry: dict[str, Any] | None

    @property
    def ok(self) -> list[RequestResult]:
        return [r for r in self.requests if r.ok]

    @property
    def asked(self) -> int | None:
        return self.case.get("asked")

    @property
    def failed(self) -> int:
        return len(self.requests) - len(self.ok)

    @property
    def short(self) -> bool:
        """Fewer completed requests than asked for (LLMPerf lost worker threads, or crashed)."""
        return self.asked is not None and len(self.ok) < self.asked


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's and pandas' default, as LLMPerf's summary uses);
    None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def read_json(path: Path) -> Any:
    """A JSON file, or None if it is absent."""
    return json.loads(path.read_text()) if path.exists() else None


def case_dir(results_dir: Path, run_id: str, variant: str, test_case: str, level: str | None = None) -> Path:
    """A case's folder; `level` is a sweep's level folder (Level.slug), None for a run of one level."""
    folder = results_dir / run_id / variant / test_case
    return folder / level if level else folder


def study_run_id(study_id: str, repeat: int, beside: str | None = None) -> str:
    """Where a study's repeat's cases are; `beside`: the baseline measured in that configuration's block."""
    return f"{study_id}/repeat-{repeat}" + (f"/beside-{beside}" if beside else "")


def load_case(results_dir: Path, run_id: str, variant: str, test_case: str, level: str | None = None) -> CaseResult:
    folder = case_dir(results_dir, run_id, variant, test_case, level)
    case = read_json(folder / CASE_FILE) or {}
    summary, responses = generator(case.get("generator")).own_results(folder)
    return CaseResult(
        variant=variant, test_case=test_case,
        requests=[RequestResult.from_record(r) for r in read_records(folder / RECORDS_FILE)],
        case=case, llmperf_summary=summary, llmperf_responses=responses,
        specdecode=read_json(folder / SPECDECODE_FILE),
        telemetry=read_json(folder / TELEMETRY_FILE),
    )


def list_runs(results_dir: Path) -> list[str]:
    """Run ids in DIR, oldest first (run ids start with a UTC timestamp)."""
    return sorted(p.parent.name for p in results_dir.glob(f"*/{RUN_FILE}"))


def load_run(results_dir: Path, run_id: str) -> dict[str, Any]:
    return json.loads((results_dir / run_id / RUN_FILE).read_text())
