"""The sample report of docs/report.md: a SYNTHETIC run shaped after the blog's findings (seed 003), written
in the driver's results layout and rendered by the real report code. Not a measurement.

    python -m tools.sample_report [--out build/sample-results] [--png docs/sample-report.png]

Structured prompt: SD at ~15 ms per token against ~45 ms, about 5.9 tokens per target step;
open-ended prompt: no gain, about 1.4 tokens per step (seed 003, its results); one failed request.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
from pathlib import Path

from reporting.report import write_report
from stackconfig.catalog import INSTANCE_SHAPES

RUN_ID = "20261120T090000Z-synthetic"
START = 1_795_000_000.0
CASES = {"repeat-line-50-times": "Repeat the next line exactly 50 times", "meaning-of-life": "I believe the meaning of life is"}
SHAPE = {"inputTokens": 64, "outputTokens": 600, "concurrency": 4, "requestsPerTestCase": 20, "requestTimeoutSeconds": 3600,
         "samplingParams": {"temperature": 0}}
VARIANT = {"target": "Qwen/Qwen3-32B", "servedModelName": "Qwen/Qwen3-32B", "quantization": "none", "devices": 8,
           # Half a node's catalog price, as components/pairing/benchmark.py variant_config computes it.
           "costPerHourUsd": INSTANCE_SHAPES["trn2.48xlarge"].approx_hourly_usd * 8 / 16, "targetParamsBillion": 32.8}
VARIANTS = [{**VARIANT, "name": "base", "role": "baseline", "baseline": None, "draft": None, "numSpeculativeTokens": None,
             "draftParamsBillion": None},
            {**VARIANT, "name": "sd", "role": "sd", "baseline": "base", "draft": "Qwen/Qwen3-1.7B", "numSpeculativeTokens": 7,
             "draftParamsBillion": 1.7}]
# (variant, case) -> TPOT s, tokens per target step, acceptance rate, NeuronCore utilization %, device memory GiB
PROFILE = {("base", "repeat-line-50-times"): (0.045, 1.0, None, 34.0, 71.0),
           ("sd", "repeat-line-50-times"): (0.015, 5.9, 0.79, 57.0, 78.5),
           ("base", "meaning-of-life"): (0.045, 1.0, None, 33.0, 71.0),
           ("sd", "meaning-of-life"): (0.044, 1.4, 0.12, 41.0, 78.5)}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_case(root: Path, variant: str, case: str, rng: random.Random) -> None:
    tpot, per_step, rate, utilization, memory = PROFILE[(variant, case)]
    folder = root / RUN_ID / variant / case
    folder.mkdir(parents=True)
    records, clock = [], START
    for i in range(20 + (variant == "sd" and case == "meaning-of-life")):
        if variant == "sd" and case == "meaning-of-life" and i == 7:
            records.append({"start": clock, "ttft_s": None, "e2e_s": 0.02, "status": 500, "error": "HTTP 500: synthetic",
                            "content_chunks": 0, "prompt_tokens": None, "completion_tokens": None, "request_sha256": digest(f"p{i}"),
                            "response_sha256": None})
            continue
        ttft, step = 0.049 * rng.uniform(0.95, 1.1), tpot * rng.uniform(0.97, 1.05)
        records.append({"start": clock, "ttft_s": ttft, "e2e_s": ttft + 599 * step, "status": 200, "error": None,
                        "content_chunks": 1 + round(599 / per_step), "prompt_tokens": 81, "completion_tokens": 600,
                        "finish_reason": "length", "request_sha256": digest(f"p{i % 20}"), "response_sha256": digest(f"a{i % 20}")})
        clock += (ttft + 599 * step) / 4
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    end = max(r["start"] + r["e2e_s"] for r in records)
    failed = sum(r["error"] is not None for r in records)
    (folder / "case.json").write_text(json.dumps({"testCase": case, "variant": variant, "asked": 20, "concurrency": 4, "exitCode": 0,
                                                  "llmperfError": "ZeroDivisionError: division by zero" if failed else None,
                                                  "threadDeaths": failed, "startedAt": START, "finishedAt": end, "placement": {}}))
    chunk_itl = (0.049 + 599 * tpot) / (2 + round(599 / per_step))
    (folder / "Qwen-Qwen3-32B_64_600_summary.json").write_text(json.dumps({
        "results_num_completed_requests": 20, "results_inter_token_latency_s_quantiles_p50": chunk_itl,
        "results_number_output_tokens_quantiles_p50": 673.0}))
    if rate is not None:
        drafts = 20 * round(599 / per_step)
        accepted = drafts * (per_step - 1)
        (folder / "specdecode.json").write_text(json.dumps({"before": {"drafts": 0, "draft_tokens": 0, "accepted": 0},
                                                            "after": {"drafts": drafts, "draft_tokens": 7 * drafts, "accepted": accepted}}))
    periods = [START + 60 * i for i in range(int((end - START) // 60) + 1)]
    (folder / "telemetry.json").write_text(json.dumps({
        "status": "ok", "node": "ip-10-64-12-7", "neuronDevices": ["0", "1", "2", "3", "4", "5", "6", "7"] if variant == "base"
        else ["8", "9", "10", "11", "12", "13", "14", "15"], "cores": 32,
        "utilizationPercent": [[t, utilization * rng.uniform(0.9, 1.1)] for t in periods],
        "memoryUsedBytes": [[t, memory * 2**30] for t in periods]}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("build/sample-results"))
    parser.add_argument("--png", type=Path, help="copy report.png here (docs/report.md's docs/sample-report.png)")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    rng = random.Random(7)
    for case in CASES:
        for variant in ("base", "sd"):
            write_case(args.out, variant, case, rng)
    (args.out / RUN_ID / "run.json").write_text(json.dumps({
        "runId": RUN_ID, "stack": "qwen3-32b-qwen3-1.7b (SYNTHETIC)", "status": "complete", "reason": None,
        "startedAt": "2026-11-20T09:00:00Z", "finishedAt": "2026-11-20T09:40:00Z", "shape": SHAPE, "testCases": CASES,
        "seed": "003", "llmperfCommit": "f1d6bed47e4501b0e371082b41601b59ab55269f", "cases": [],
        "variants": [{**v, "endpoint": f"http://vllm-{v['name']}.inference.svc.cluster.local:8000/v1"} for v in VARIANTS]}))
    write_report(args.out)
    if args.png:
        shutil.copyfile(args.out / "report.png", args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
