"""The draft server's Prometheus counters, named as vLLM names its speculative-decoding ones so the
project's benchmark reads them unchanged (benchmark/acceptance.py COUNTERS and PER_POSITION; vLLM
V1 vllm/v1/spec_decode/metrics.py: drafts, draft tokens, accepted tokens, accepted per position,
exposed with `_total`). Failures and refusals are this server's own counters."""
from __future__ import annotations

import threading
from collections import Counter


class Metrics:
    def __init__(self, model: str, gamma: int):
        self.labels = f'engine="0",model_name="{model}"'
        self.gamma = gamma
        self.lock = threading.Lock()
        self.drafts = self.draft_tokens = self.accepted = self.running = 0
        self.per_position = [0] * gamma
        self.requests: Counter[str] = Counter()
        """By outcome: ok, failed (the target failed it), rejected (full: 429), invalid (400), abandoned (the
        client left mid-stream)."""
        self.target_failures: Counter[str] = Counter()
        """By gRPC status code."""

    def step(self, drafted: int, accepted: int) -> None:
        with self.lock:
            self.drafts += 1
            self.draft_tokens += drafted
            self.accepted += accepted
            for position in range(accepted):
                self.per_position[position] += 1

    def count(self, outcome: str, target_code: str | None = None) -> None:
        with self.lock:
            self.requests[outcome] += 1
            if target_code:
                self.target_failures[target_code] += 1

    def text(self) -> str:
        with self.lock:
            lines = ["# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{self.labels}}} {float(self.running)}"]
            for name, value in (("num_drafts", self.drafts), ("num_draft_tokens", self.draft_tokens),
                                ("num_accepted_tokens", self.accepted)):
                lines += [f"# TYPE vllm:spec_decode_{name} counter", f"vllm:spec_decode_{name}_total{{{self.labels}}} {float(value)}"]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{self.labels},position="{i}"}} {float(v)}'
                      for i, v in enumerate(self.per_position)]
            lines.append("# TYPE distributed_requests counter")
            lines += [f'distributed_requests_total{{outcome="{o}"}} {float(n)}' for o, n in sorted(self.requests.items())]
            lines.append("# TYPE distributed_target_failures counter")
            lines += [f'distributed_target_failures_total{{code="{c}"}} {float(n)}' for c, n in sorted(self.target_failures.items())]
            return "\n".join(lines) + "\n"
