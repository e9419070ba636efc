"""OpenAI-compatible streaming test servers on 127.0.0.1 that remember exactly what they sent.

They stream chat completions the way vLLM's OpenAI server does (vllm-project/vllm@003fe59:
vllm/entrypoints/openai/serving_chat.py chat_completion_stream_generator):
a role chunk with empty content, then content chunks, the last carrying finish_reason, then, when
the request asks for `stream_options.include_usage`, a chunk with `"choices": []` and `usage`, then
`data: [DONE]`. Completions (/v1/completions, inference-perf's path) stream the same way with the
text in `choices[0].text` and no role chunk (vllm/entrypoints/openai/serving_completion.py
completion_stream_generator). The first content chunk holds the prefill's one token; every later chunk is one
target step: one token for a baseline, 1 + accepted draft tokens for speculative decoding, with
the acceptance pattern given. `/metrics` exposes vLLM's speculative-decoding counters
(docs/facts.md "Serving engines on Trainium2", acceptance counters) consistent with what was streamed. Chosen
requests (by arrival order) fail with HTTP 500 as vLLM's error response.

Text is a function of the prompt, so a baseline and an SD server answer a prompt identically, as
greedy speculative decoding must; `diverge` makes chosen requests answer differently.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .local_server import LocalServer

# Token pieces that a word-level count does not map one-to-one (e.g. " sum" + "mer" + "'s").
PIECES = (" Sh", "all", " I", " com", "pare", " thee", " to", " a", " sum", "mer", "'s", " day", "?", " Thou",
          " art", " more", " love", "ly", " and", " more", " tem", "per", "ate", ":")


@dataclass(frozen=True)
class Speculation:
    num_speculative_tokens: int
    accepted: tuple[int, ...]
    """Draft tokens the target accepts at each step, cycled."""


@dataclass
class Sent:
    """The truth about one request, as the server saw and sent it."""

    arrival: int
    status: int
    tokens: int = 0
    content_chunks: int = 0
    received: float = 0.0
    received_wall: float = 0.0
    first_content: float | None = None
    last_content: float | None = None
    finished: float | None = None
    steps: list[int] = field(default_factory=list)
    """Tokens per content chunk; after the first, one chunk per target step."""
    text: str = ""
    request: dict = field(default_factory=dict)
    """The request body as it arrived."""

    @property
    def time_per_output_token_s(self) -> float:
        return (self.last_content - self.first_content) / (self.tokens - 1)


@dataclass
class Counters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)


class FakeVllm(LocalServer):
    def __init__(self, *, step_s: float, prefill_s: float = 0.005, speculation: Speculation | None = None,
                 fail: frozenset[int] = frozenset(), diverge: frozenset[int] = frozenset(), model: str = "Qwen/Qwen3-32B"):
        self.step_s = step_s
        self.prefill_s = prefill_s
        self.speculation = speculation
        self.fail = fail
        self.diverge = diverge
        self.model = model
        self.sent: list[Sent] = []
        self.counters = Counters(per_position=[0] * (speculation.num_speculative_tokens if speculation else 0))
        self.lock = threading.Lock()
        self.up = True
        """False: a server that is not running (scaled to zero, or still loading): /health and
        requests answer 503."""
        self.refused = 0
        """Requests that arrived while it was down."""

    @property
    def url(self) -> str:
        return f"{self.address}/v1"

    def arrive(self) -> Sent:
        with self.lock:
            sent = Sent(arrival=len(self.sent) + 1, status=200, received=time.monotonic(), received_wall=time.time())
            if sent.arrival in self.fail:
                sent.status = 500
            self.sent.append(sent)
            return sent

    def step_sizes(self, tokens: int) -> list[int]:
        """Tokens per content chunk: the prefill's token, then one target step per chunk."""
        sizes, remaining, step = [1], tokens - 1, 0
        while remaining > 0:
            accepted = self.speculation.accepted[step % len(self.speculation.accepted)] if self.speculation else 0
            size = min(accepted + 1, remaining)
            if self.speculation:
                with self.lock:
                    self.counters.drafts += 1
                    self.counters.draft_tokens += self.speculation.num_speculative_tokens
                    self.counters.accepted += size - 1
                    for position in range(size - 1):
                        self.counters.per_position[position] += 1
            sizes.append(size)
            remaining -= size
            step += 1
        return sizes

    def metrics(self) -> str:
        labels = f'engine="0",model_name="{self.model}"'
        lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                 "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} 0.0"]
        if self.speculation:
            c = self.counters
            for name, value in (("num_drafts", c.drafts), ("num_draft_tokens", c.draft_tokens),
                                ("num_accepted_tokens", c.accepted)):
                lines += [f"# TYPE vllm:spec_decode_{name} counter", f"vllm:spec_decode_{name}_total{{{labels}}} {float(value)}",
                          f"vllm:spec_decode_{name}_created{{{labels}}} 1.7e+09"]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(v)}'
                      for i, v in enumerate(c.per_position)]
        return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeVllm

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = self.fake.metrics().encode() if self.path == "/metrics" else b"{}"
        self.send_response(503 if not self.fake.up else 200 if self.path in ("/metrics", "/health") else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if not self.fake.up:
            self.fake.refused += 1
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        try:
            self.answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a test stopping the benchmark): nothing to send to

    def answer(self, request: dict) -> None:
        sent = self.fake.arrive()
        sent.request = request
        if sent.status != 200:
            error = json.dumps({"object": "error", "message": "injected failure", "type": "InternalServerError",
                                "param": None, "code": 500}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        chat = self.path != "/v1/completions"
        prompt = request["messages"][-1]["content"] if chat else request["prompt"]
        salt = "diverged" if sent.arrival in self.fake.diverge else ""
        start = int(hashlib.sha256((prompt + salt).encode()).hexdigest(), 16) % len(PIECES)
        pieces = [PIECES[(start + i) % len(PIECES)] for i in range(request["max_tokens"])]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk" if chat else "text_completion", "created": 0,
                "model": request["model"]}
        if chat:
            self.event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                             "finish_reason": None}]})
        time.sleep(self.fake.prefill_s)
        sizes = sent.steps = self.fake.step_sizes(len(pieces))
        position, decode_start = 0, time.monotonic()
        for index, size in enumerate(sizes):
            if index:
                # Steps on a schedule from the first (a late wake-up is not carried into every later
                # step), so a loaded machine moves the pace as little as it can: the two load
                # generators, measured minutes apart, meet the same server.
                time.sleep(max(0.0, decode_start + index * self.fake.step_s - time.monotonic()))
            text = "".join(pieces[position:position + size])
            position += size
            last = index == len(sizes) - 1
            said = {"delta": {"content": text}} if chat else {"text": text}
            self.event({**base, "choices": [{"index": 0, **said, "logprobs": None, "finish_reason": "length" if last else None}]})
            now = time.monotonic()
            sent.first_content = sent.first_content or now
            sent.last_content = now
            sent.content_chunks += 1
            sent.tokens += size
            sent.text += text
        if (request.get("stream_options") or {}).get("include_usage"):
            self.event({**base, "choices": [], "usage": {"prompt_tokens": len(prompt.split()) + 9,
                                                         "total_tokens": len(prompt.split()) + 9 + sent.tokens,
                                                         "completion_tokens": sent.tokens}})
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")
        sent.finished = time.monotonic()

    def event(self, data: dict) -> None:
        self.chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


FakeVllm.handler = _Handler
