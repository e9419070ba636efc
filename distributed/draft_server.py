"""The draft server: an OpenAI-compatible endpoint that drafts locally and verifies on the target.

    python -m distributed.draft_server --model DIR --target HOST:PORT [--gamma 4] [--port 8000]
        [--max-concurrency 2] [--rpc-timeout-s 10]

Serves POST /v1/completions and /v1/chat/completions (streamed as vLLM streams them: SSE chunks,
for chat a role chunk first, one content chunk per speculation step, finish_reason on the last,
then a usage chunk with `"choices": []` when stream_options.include_usage is set, then
`data: [DONE]`; vllm-project/vllm@003fe59 vllm/entrypoints/openai/serving_chat.py
chat_completion_stream_generator), GET /health (200 while the target answers), /v1/models and
/metrics (metrics.py). It prints `listening on HOST:PORT` when it serves.

Failure handling: every call to the target has a deadline (--rpc-timeout-s). A request the target
fails before the first token gets HTTP 503; one it fails mid-stream (restarted, unreachable, past
the deadline) gets an in-stream error chunk `{"error": {...}}` and `[DONE]`, is counted in
distributed_requests_total{outcome="failed"}, and the next request is served as usual (the gRPC
channel reconnects). Beyond --max-concurrency requests at once the server answers 429 at once
instead of queueing.
"""
from __future__ import annotations

import json
import logging
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

from .backend import Draft, UnknownSession, VerifyError
from .config import ConfigError, DraftSettings, check_pairing, draft_settings, exit_on_error
from .metrics import Metrics
from .sampling import Sampling
from .speculate import Step, speculate
from .target_client import RemoteTarget, TargetFailed

log = logging.getLogger(__name__)
ROUTES = {"/v1/completions": "text_completion", "/v1/chat/completions": "chat.completion.chunk"}


class BadRequest(Exception):
    pass


@dataclass(frozen=True)
class Request:
    kind: str
    prompt_ids: list[int]
    max_tokens: int
    sampling: Sampling
    stream: bool
    include_usage: bool
    model: str


def parse_request(path: str, body: Any, tokenizer, max_context: int, gamma: int, model: str) -> Request:
    """The request's fields, checked as the OpenAI API defines them (temperature defaults to 1)."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if path == "/v1/chat/completions":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages: a non-empty list of {role, content}")
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer.encode(text, add_special_tokens=False)
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise BadRequest("prompt: a non-empty string")
        prompt_ids = tokenizer.encode(prompt)
    room = max_context - len(prompt_ids) - gamma
    if room < 1:
        raise BadRequest(f"the prompt has {len(prompt_ids)} tokens; with gamma {gamma} the context limit {max_context} "
                         "leaves no room to generate")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", room))
    temperature, top_p, seed = body.get("temperature", 1.0), body.get("top_p", 1.0), body.get("seed")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens: a positive integer")
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise BadRequest("temperature: a number >= 0")
    if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise BadRequest("top_p: a number in (0, 1]")
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise BadRequest("seed: a non-negative integer")
    if body.get("n", 1) != 1:
        raise BadRequest("n: only 1 is served")
    if body.get("model", model) != model:
        raise BadRequest(f"model: this server serves {model!r}")
    return Request(ROUTES[path], prompt_ids, max_tokens, Sampling(float(temperature), float(top_p), seed),
                   bool(body.get("stream")), bool((body.get("stream_options") or {}).get("include_usage")), model)


class Detokenizer:
    """The text each step adds; a step that ends inside a multi-byte character waits for the rest."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.tokens: list[int] = []
        self.sent = 0

    def add(self, tokens: list[int], final: bool) -> str:
        self.tokens += tokens
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.endswith("\ufffd") and not final:
            return ""
        delta, self.sent = text[self.sent:], len(text)
        return delta


class Slot:
    """One of the server's --max-concurrency places, held by one request. It is freed before the
    request's last bytes are written: a client that sends its next request as soon as it has read
    `[DONE]` (LLMPerf at full concurrency) must find it free."""

    def __init__(self, slots: threading.BoundedSemaphore, metrics: Metrics):
        self.slots, self.metrics, self.held = slots, metrics, True
        with metrics.lock:
            metrics.running += 1

    def free(self) -> None:
        if self.held:
            self.held = False
            with self.metrics.lock:
                self.metrics.running -= 1
            self.slots.release()


class DraftServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, settings: DraftSettings, draft: Draft, tokenizer, target: RemoteTarget, max_context: int):
        super().__init__((settings.host, settings.port), _Handler)
        self.settings = settings
        self.draft = draft
        self.tokenizer = tokenizer
        self.target = target
        self.max_context = max_context
        self.slots = threading.BoundedSemaphore(settings.max_concurrency)
        self.metrics = Metrics(settings.served_model_name, settings.gamma)

    def steps(self, request: Request) -> Iterator[Step]:
        session = uuid.uuid4().hex
        for step in speculate(self.draft.session(), self.target, session, request.prompt_ids, max_new_tokens=request.max_tokens,
                              gamma=self.settings.gamma, sampling=request.sampling, max_context=self.max_context,
                              eos_token_id=self.tokenizer.eos_token_id):
            self.metrics.step(step.drafted, step.accepted)
            yield step


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DraftServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._reply(200, self.server.metrics.text().encode(), "text/plain; version=0.0.4")
        elif self.path == "/health":
            try:
                self.server.target.describe(timeout_s=min(2.0, self.server.settings.rpc_timeout_s))
                self._reply(200, b"", "text/plain")
            except TargetFailed as error:
                self._error(503, f"the target does not answer: {error}")
        elif self.path == "/v1/models":
            name = self.server.settings.served_model_name
            self._json(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "distributed",
                                                         "max_model_len": self.server.max_context}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path not in ROUTES:
            self._error(404, f"no route {self.path}")
            return
        server = self.server
        try:
            request = parse_request(self.path, json.loads(raw or b"null"), server.tokenizer, server.max_context,
                                    server.settings.gamma, server.settings.served_model_name)
        except (ValueError, BadRequest) as error:
            server.metrics.count("invalid")
            self._error(400, str(error))
            return
        if not server.slots.acquire(blocking=False):
            server.metrics.count("rejected")
            self._error(429, f"the server is serving {server.settings.max_concurrency} requests, its limit; retry later",
                        headers={"Retry-After": "1"})
            return
        slot = Slot(server.slots, server.metrics)
        try:
            self._serve(request, slot)
        finally:
            slot.free()

    def _serve(self, request: Request, slot: Slot) -> None:
        metrics, steps = self.server.metrics, self.server.steps(request)
        identifier, created = f"{'chatcmpl' if request.kind.startswith('chat') else 'cmpl'}-{uuid.uuid4().hex}", int(time.time())
        base = {"id": identifier, "object": request.kind, "created": created, "model": request.model}
        detokenizer, emitted, finish, started = Detokenizer(self.server.tokenizer), 0, None, False
        try:
            for step in steps:
                emitted += len(step.tokens)
                finish = step.finish_reason
                delta = detokenizer.add(step.tokens, final=finish is not None)
                if not request.stream:
                    continue
                if not started:
                    self._start_stream()
                    started = True
                    if request.kind.startswith("chat"):
                        self._event({**base, "choices": [self._choice(request, "", None, role=True)]})
                if delta or finish:
                    self._event({**base, "choices": [self._choice(request, delta, finish)]})
        except (TargetFailed, UnknownSession, VerifyError) as error:
            code = error.code if isinstance(error, TargetFailed) else type(error).__name__
            metrics.count("failed", code)
            log.warning("request %s failed: %s", identifier, error)
            message = f"the target failed this request: {error}"
            slot.free()
            if started:
                self._event({"error": {"object": "error", "message": message, "type": "ServiceUnavailableError",
                                       "param": None, "code": 503}})
                self._end_stream()
            else:
                self._error(503, message)
            return
        except (BrokenPipeError, ConnectionResetError):
            steps.close()  # the client left: stop drafting and free the target's session
            metrics.count("abandoned")
            return
        metrics.count("ok")
        slot.free()
        usage = {"prompt_tokens": len(request.prompt_ids), "completion_tokens": emitted,
                 "total_tokens": len(request.prompt_ids) + emitted}
        if not request.stream:
            text = self.server.tokenizer.decode(detokenizer.tokens, skip_special_tokens=True)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                      if request.kind.startswith("chat") else {"index": 0, "text": text, "finish_reason": finish})
            kind = "chat.completion" if request.kind.startswith("chat") else "text_completion"
            self._json(200, {**base, "object": kind, "choices": [choice], "usage": usage})
            return
        if request.include_usage:
            self._event({**base, "choices": [], "usage": usage})
        self._end_stream()

    @staticmethod
    def _choice(request: Request, text: str, finish: str | None, role: bool = False) -> dict[str, Any]:
        if request.kind.startswith("chat"):
            delta = {"role": "assistant", "content": ""} if role else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, data: dict[str, Any]) -> None:
        self._chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

    def _end_stream(self) -> None:
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._reply(status, json.dumps(body).encode(), "application/json", headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        """vLLM's error body (vllm/entrypoints/openai/protocol.py ErrorResponse)."""
        kinds = {400: "BadRequestError", 404: "NotFoundError", 429: "TooManyRequestsError", 503: "ServiceUnavailableError"}
        self._json(status, {"object": "error", "message": message, "type": kinds.get(status, "InternalServerError"),
                            "param": None, "code": status}, headers)

    def _reply(self, status: int, content: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(content)


def build_draft(settings: DraftSettings, max_context: int):
    if settings.backend == "neuron":
        from .neuron import NeuronDraft  # NxD Inference exists only on a Neuron instance
        return NeuronDraft.compile_or_load(settings, max_context)
    from .cpu import CpuDraft
    return CpuDraft.from_directory(settings.model, max_context=max_context)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = draft_settings(argv)
    except ConfigError as error:
        exit_on_error(error)
    target = RemoteTarget(settings.target, timeout_s=settings.rpc_timeout_s)
    try:
        described = target.describe(wait=True, timeout_s=settings.target_wait_s)
    except TargetFailed as error:
        raise SystemExit(f"the target at {settings.target} did not answer within {settings.target_wait_s} s: {error}") from error
    draft, tokenizer = build_draft(settings, described.max_context)
    try:
        check_pairing(settings, draft.description(), described)
    except ConfigError as error:
        exit_on_error(error)
    server = DraftServer(settings, draft, tokenizer, target, described.max_context)
    print(f"listening on {settings.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
