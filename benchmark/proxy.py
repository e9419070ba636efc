"""A measuring proxy between LLMPerf and one vLLM server: every request LLMPerf sends is recorded.

The driver starts one per (test case, variant) on 127.0.0.1 in the pod and points LLMPerf's
OPENAI_API_BASE at it. Why a proxy rather than patching LLMPerf (docs/facts.md "LLMPerf, measured";
ray-project/llmperf@f1d6bed:token_benchmark_ray.py get_token_throughput_latencies and
src/llmperf/ray_clients/openai_chat_completions_client.py llm_request; Neuron's patch,
aws-neuron/aws-neuron-sdk@81ce03a:src/benchmark/helper_scripts/neuron_perf.patch):
- LLMPerf counts output tokens by re-tokenising the text with a Llama-2 tokenizer (+1 for BOS)
  whatever model is served; the server knows the real count. The proxy asks vLLM for it by adding
  `"stream_options": {"include_usage": true}` and reads the final usage chunk (`choices: []`;
  vllm-project/vllm@003fe59:vllm/entrypoints/openai/serving_chat.py chat_completion_stream_generator).
- A failed request kills LLMPerf's worker thread (ZeroDivisionError) before it is recorded, and
  LLMPerf exits 1 with no files when all fail. The proxy records every request, failed or not,
  including the up to concurrency-1 extra requests LLMPerf discards.
- Neuron's own LLMPerf patch (NxD Inference "LLM Inference benchmarking guide",
  llm_perf_patch_changes) changes the ITL arithmetic (TTFT out of the sum, per token) and adds
  --tokenizer, but keeps that failure handling and never reads server usage; and applying any patch needs LLMPerf's code as
  context, which this repository may not carry. LLMPerf itself therefore runs unmodified.

The usage-only chunk is not passed on: unmodified LLMPerf indexes `choices[0]` of every chunk
(llm_request at f1d6bed) and would fail every request on it (observed running f1d6bed against a
test server). Everything else is forwarded as it arrives, one SSE line per HTTP chunk, so
LLMPerf's own timings stay meaningful for reference.

Per request the proxy writes one JSON line: wall-clock start, TTFT and end-to-end time measured
here (the same pod as LLMPerf, so network to the server is included as LLMPerf would see it),
the number of streamed chunks that carried content, the server's prompt/completion token counts,
HTTP status or error, finish reason, and sha256 digests of the request (minus the model name) and
of the concatenated output text, for the lossless check.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

RECORDS_FILE = "requests.jsonl"
# Request fields that differ between variants without changing what is asked: the served model
# name (the 405B stack serves an FP8 checkpoint under its own name) and what the proxy adds.
NOT_PART_OF_THE_QUESTION = ("model", "stream_options")


def request_digest(body: dict[str, Any]) -> str:
    """Identifies a prompt and its sampling settings across variants (LLMPerf rebuilds the same
    prompts for every run: it seeds its sampler with 11111, ray-project/llmperf@f1d6bed:
    token_benchmark_ray.py get_token_throughput_latencies)."""
    question = {k: v for k, v in body.items() if k not in NOT_PART_OF_THE_QUESTION}
    return hashlib.sha256(json.dumps(question, sort_keys=True).encode()).hexdigest()


def json_object(raw: bytes) -> dict[str, Any] | None:
    """The JSON object `raw` holds; None if it is not JSON or not an object."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def with_usage(body: dict[str, Any]) -> dict[str, Any]:
    """The request as forwarded: streaming requests ask vLLM for the final usage chunk."""
    if not body.get("stream"):
        return body
    return {**body, "stream_options": {**(body.get("stream_options") or {}), "include_usage": True}}


class Exchange:
    """What the proxy learns about one request while forwarding it."""

    def __init__(self, body: dict[str, Any] | None, started_wall: float, started: float):
        self.started = started
        self.record: dict[str, Any] = {
            "start": started_wall, "ttft_s": None, "e2e_s": None, "status": None, "error": None,
            "content_chunks": 0, "prompt_tokens": None, "completion_tokens": None, "finish_reason": None,
            "done": False, "max_tokens": (body or {}).get("max_tokens"),
            "request_sha256": request_digest(body) if body is not None else None, "response_sha256": None,
        }
        self._text = hashlib.sha256()

    def fail(self, message: str) -> None:
        self.record["error"] = self.record["error"] or message

    def observe(self, line: bytes, now: float) -> bool:
        """Account for one SSE line from the server; False if it must not reach LLMPerf."""
        text = line.strip()
        if not text.startswith(b"data:"):
            return True
        payload = text[len(b"data:"):].strip()
        if payload == b"[DONE]":
            self.record["done"] = True
            return True
        try:
            data = json.loads(payload)
        except ValueError:
            self.fail(f"unparseable stream line: {payload[:200]!r}")
            return True
        if not isinstance(data, dict):
            return True
        if isinstance(data.get("error"), dict):
            self.fail(f"in-stream error {data['error'].get('code')}: {data['error'].get('message')}")
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.record["prompt_tokens"] = usage.get("prompt_tokens")
            self.record["completion_tokens"] = usage.get("completion_tokens")
        choices = data.get("choices")
        if choices == [] and usage is not None:
            return False  # the usage-only chunk LLMPerf cannot parse
        if isinstance(choices, list) and choices:
            choice = choices[0]
            # A chat completion's text is in its delta, a (text) completion's in `text`
            # (vLLM's serving_chat.py and serving_completion.py stream generators).
            content = (choice.get("delta") or {}).get("content") or choice.get("text")
            if content:
                if self.record["ttft_s"] is None:
                    self.record["ttft_s"] = now - self.started
                self.record["content_chunks"] += 1
                self._text.update(content.encode())
            if choice.get("finish_reason"):
                self.record["finish_reason"] = choice["finish_reason"]
        return True

    def finish(self, now: float) -> dict[str, Any]:
        self.record["e2e_s"] = now - self.started
        if self.record["status"] == 200 and self.record["error"] is None:
            self.record["response_sha256"] = self._text.hexdigest()
        return self.record


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so every record is written before the driver reads them.
    daemon_threads = False

    def __init__(self, upstream: urllib.parse.SplitResult, records: BinaryIO, timeout_s: float, fills: dict[str, Any]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.records = records
        self.timeout_s = timeout_s
        self.fills = fills
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.records.write((json.dumps(record, sort_keys=True) + "\n").encode())
            self.records.flush()

    def connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.upstream.scheme == "https" else http.client.HTTPConnection
        return kind(self.upstream.hostname, self.upstream.port, timeout=self.timeout_s)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """One line per request would drown the pod log; the records file has every request."""

    def do_POST(self) -> None:
        started_wall, started = time.time(), time.monotonic()
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json_object(raw)  # None: not a request the proxy can read, forwarded as sent
        if body is not None and self.server.fills:
            body = {**self.server.fills, **body}
        exchange = Exchange(body, started_wall, started)
        try:
            self._forward(exchange, raw if body is None else json.dumps(with_usage(body)).encode())
        finally:
            self.server.write(exchange.finish(time.monotonic()))
            self.close_connection = True

    def _forward(self, exchange: Exchange, payload: bytes) -> None:
        connection = self.server.connect()
        try:
            headers = {"Content-Type": "application/json", "Accept": self.headers.get("Accept", "*/*")}
            if authorization := self.headers.get("Authorization"):
                headers["Authorization"] = authorization
            try:
                connection.request("POST", self.path, body=payload, headers=headers)
                response = connection.getresponse()
            except OSError as error:
                exchange.fail(f"server unreachable: {error}")
                self._reply(502, json.dumps({"object": "error", "message": str(error), "code": 502}).encode(),
                            "application/json")
                return
            exchange.record["status"] = response.status
            if response.status != 200 or "text/event-stream" not in response.getheader("Content-Type", ""):
                content = response.read()
                if response.status != 200:
                    exchange.fail(f"HTTP {response.status}: {content[:300].decode(errors='replace')}")
                self._reply(response.status, content, response.getheader("Content-Type", "application/json"))
                return
            self._stream(exchange, response)
        finally:
            connection.close()

    def _reply(self, status: int, content: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(content)

    def _stream(self, exchange: Exchange, response: http.client.HTTPResponse) -> None:
        self.send_response(200)
        # Present: _forward streams only answers whose Content-Type names text/event-stream.
        self.send_header("Content-Type", response.getheader("Content-Type"))
        # Chunked, one SSE line per chunk: the client's `requests` yields each as it arrives
        # (a close-delimited body would be read to the end first).
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        while True:
            try:
                line = response.readline()
            except (OSError, http.client.HTTPException) as error:
                # Leave the chunked body unterminated, so the client sees a broken stream too.
                exchange.fail(f"server stream broke: {type(error).__name__}: {error}")
                return
            if not line:
                break
            if exchange.observe(line, time.monotonic()) and not self._send_chunk(exchange, line):
                return
        self._send_chunk(exchange, b"")

    def _send_chunk(self, exchange: Exchange, data: bytes) -> bool:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            return True
        except OSError as error:
            exchange.fail(f"client disconnected: {error}")
            return False


class MeasuringProxy:
    """Context manager: a proxy to `upstream` (e.g. http://vllm-sd:8000/v1) on 127.0.0.1, recording
    to `records` (JSON lines); `base_url` is what LLMPerf's OPENAI_API_BASE should be. `fills` are
    request fields added where a request lacks them: the run's sampling parameters, for a load
    generator that cannot send them (benchmark/loadgen: inference-perf's request body has no
    sampling fields, inference_perf/apis/chat.py and completion.py to_request_body at 0.7.0)."""

    def __init__(self, upstream: str, records: Path, timeout_s: float, fills: dict[str, Any] | None = None):
        self._upstream = urllib.parse.urlsplit(upstream)
        self._records_path = records
        self._timeout_s = timeout_s
        self._fills = fills or {}

    def __enter__(self) -> "MeasuringProxy":
        self._records = self._records_path.open("ab")
        self._server = _Server(self._upstream, self._records, self._timeout_s, self._fills)
        # A short poll keeps shutdown (once per test case) prompt; the loop is idle otherwise.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="measuring-proxy",
                                        daemon=True)
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._upstream.path.rstrip('/')}"

    def __exit__(self, exc_type: type | None, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()
        if exc_type is None:
            self._server.server_close()  # joins the handler threads: every record is written
            self._records.close()
        else:
            # Interrupted (e.g. SIGTERM at the Job's deadline): close the listening socket without
            # waiting for requests still in flight; the run has seconds left to save what it has.
            self._server.socket.close()


def read_records(path: Path) -> list[dict[str, Any]]:
    """The proxy's records, oldest first ([] if none were written)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
