"""Build results directories as the driver writes them, for the report/publish/tools tests.

Fixtures keep distinct quantities distinct: LLMPerf's inter-token latency (per chunk, TTFT
included) never equals TPOT, and LLMPerf's token counts (Llama-2 re-tokenisation + 1) never equal
the server's.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

SHAPE = {"inputTokens": 128, "outputTokens": 512, "concurrency": 1, "requestsPerTestCase": 10,
         "requestTimeoutSeconds": 1200, "samplingParams": {"temperature": 0}}
VARIANTS = [
    {"name": "base", "role": "baseline", "baseline": None, "target": "Qwen/Qwen3-32B", "draft": None,
     "numSpeculativeTokens": None, "targetParamsBillion": 32.8, "draftParamsBillion": None, "costPerHourUsd": 44.7,
     "devices": 16, "quantization": "none"},
    {"name": "sd", "role": "sd", "baseline": "base", "target": "Qwen/Qwen3-32B", "draft": "Qwen/Qwen3-0.6B",
     "numSpeculativeTokens": 7, "targetParamsBillion": 32.8, "draftParamsBillion": 0.6, "costPerHourUsd": 44.7,
     "devices": 16, "quantization": "none"},
]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def record(ttft: float, e2e: float, tokens: int, chunks: int | None = None, start: float = 1_795_000_000.0,
           prompt_tokens: int = 140, error: str | None = None, prompt: str = "p0", answer: str | None = None) -> dict:
    """One line of the proxy's requests.jsonl (benchmark/proxy.py)."""
    if error:
        return {"start": start, "ttft_s": None, "e2e_s": e2e, "status": 500, "error": error, "content_chunks": 0,
                "prompt_tokens": None, "completion_tokens": None, "finish_reason": None, "done": False,
                "max_tokens": 512, "request_sha256": digest(prompt), "response_sha256": None}
    return {"start": start, "ttft_s": ttft, "e2e_s": e2e, "status": 200, "error": None,
            "content_chunks": tokens if chunks is None else chunks, "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens, "finish_reason": "length", "done": True, "max_tokens": 512,
            "request_sha256": digest(prompt), "response_sha256": digest(answer if answer is not None else "answer to " + prompt)}


def write_case(results_dir: Path, run_id: str, variant: str, test_case: str, records: list[dict], *,
               asked: int | None = None, exit_code: int = 0, llmperf_error: str | None = None, thread_deaths: int = 0,
               summary: dict | None = None, specdecode: dict | None = None, telemetry: dict | None = None) -> Path:
    folder = results_dir / run_id / variant / test_case
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    starts = [r["start"] for r in records] or [1_795_000_000.0]
    ends = [r["start"] + (r["e2e_s"] or 0) for r in records] or starts
    (folder / "case.json").write_text(json.dumps({
        "testCase": test_case, "variant": variant, "asked": len(records) if asked is None else asked, "concurrency": 1,
        "exitCode": exit_code, "llmperfError": llmperf_error, "threadDeaths": thread_deaths,
        "startedAt": min(starts), "finishedAt": max(ends), "placement": {"error": "not located"}}))
    stem = f"Qwen-Qwen3-32B_{SHAPE['inputTokens']}_{SHAPE['outputTokens']}"
    if summary is not None:
        (folder / f"{stem}_summary.json").write_text(json.dumps(summary))
        (folder / f"{stem}_individual_responses.json").write_text(json.dumps([
            {"error_code": None, "error_msg": "", "inter_token_latency_s": summary.get("results_inter_token_latency_s_quantiles_p50", 0.05)}
            for r in records if not r["error"]]))
    for name, content in (("specdecode.json", specdecode), ("telemetry.json", telemetry)):
        if content is not None:
            (folder / name).write_text(json.dumps(content))
    return folder


def write_run(results_dir: Path, run_id: str, test_cases: dict, variants: list[dict] = VARIANTS, *,
              status: str = "complete", seed: str | None = None, shape: dict | None = None) -> None:
    (results_dir / run_id).mkdir(parents=True, exist_ok=True)
    (results_dir / run_id / "run.json").write_text(json.dumps({
        "runId": run_id, "stack": "qwen3-32b-qwen3-0.6b", "status": status, "reason": None,
        "startedAt": "2026-11-20T09:00:00Z", "finishedAt": None if status == "running" else "2026-11-20T10:00:00Z",
        "shape": shape or SHAPE, "testCases": test_cases, "seed": seed, "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f",
        "cases": [], "variants": [{**v, "endpoint": f"http://vllm-{v['name']}.inference.svc.cluster.local:8000/v1"} for v in variants],
    }))
