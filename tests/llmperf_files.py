"""Build results directories in LLMPerf's own file format, for the benchmark tests."""
from __future__ import annotations

import json
from pathlib import Path

SHAPE = {"inputTokens": 128, "outputTokens": 512, "concurrency": 1, "requestsPerTestCase": 10,
         "requestTimeoutSeconds": 1200, "temperature": 0}
VARIANTS = [
    {"name": "base", "role": "baseline", "baseline": None, "target": "Qwen/Qwen3-32B", "draft": None, "numSpeculativeTokens": None},
    {"name": "sd", "role": "sd", "baseline": "base", "target": "Qwen/Qwen3-32B", "draft": "Qwen/Qwen3-0.6B", "numSpeculativeTokens": 7},
]


def request(ttft: float, e2e: float, output_tokens: int, input_tokens: int = 128, throughput: float | None = None,
            itl: float | None = None, error: str | None = None) -> dict:
    """One entry of LLMPerf's *_individual_responses.json."""
    if error:
        return {"error_code": 500, "error_msg": error, "ttft_s": 0, "end_to_end_latency_s": 0,
                "inter_token_latency_s": 0, "request_output_throughput_token_per_s": 0,
                "number_input_tokens": input_tokens, "number_output_tokens": 0, "number_total_tokens": input_tokens}
    return {
        "error_code": None, "error_msg": "",
        "ttft_s": ttft, "end_to_end_latency_s": e2e,
        "inter_token_latency_s": itl if itl is not None else (e2e - ttft) / max(1, output_tokens - 1),
        "request_output_throughput_token_per_s": throughput if throughput is not None else output_tokens / e2e,
        "number_input_tokens": input_tokens, "number_output_tokens": output_tokens,
        "number_total_tokens": input_tokens + output_tokens,
    }


def write_case(results_dir: Path, run_id: str, variant: str, test_case: str, requests: list[dict]) -> Path:
    folder = results_dir / run_id / variant / test_case
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"Qwen-Qwen3-32B_{SHAPE['inputTokens']}_{SHAPE['outputTokens']}"
    (folder / f"{stem}_individual_responses.json").write_text(json.dumps(requests))
    ok = [r for r in requests if not r["error_msg"]]
    (folder / f"{stem}_summary.json").write_text(json.dumps({
        "results_num_completed_requests": len(ok),
        "results_number_errors": len(requests) - len(ok),
        "results_ttft_s_quantiles_p50": sorted(r["ttft_s"] for r in ok)[len(ok) // 2] if ok else None,
    }))
    return folder


def write_run(results_dir: Path, run_id: str, test_cases: dict, variants: list[dict] = VARIANTS,
              finished: str = "2026-11-20T10:00:00Z") -> None:
    (results_dir / run_id).mkdir(parents=True, exist_ok=True)
    (results_dir / run_id / "run.json").write_text(json.dumps({
        "runId": run_id, "stack": "qwen3-32b-qwen3-0.6b", "startedAt": "2026-11-20T09:00:00Z", "finishedAt": finished,
        "shape": SHAPE, "testCases": test_cases,
        "variants": [{**v, "endpoint": f"http://vllm-{v['name']}.inference.svc.cluster.local:8000/v1"} for v in variants],
    }))
