"""benchmark.proxy against a streaming test server on 127.0.0.1, with `requests` as the client
(what LLMPerf's OpenAI client uses: ray-project/llmperf@f1d6bed:
src/llmperf/ray_clients/openai_chat_completions_client.py llm_request)."""
import hashlib
import json
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from benchmark.proxy import MeasuringProxy, read_records, request_digest

from .fake_vllm import FakeVllm, Speculation


def chat(base_url: str, prompt: str, max_tokens: int = 12, model: str = "Qwen/Qwen3-32B"):
    """POST as LLMPerf does and read the stream line by line; returns (status, data lines, first
    content arrival, end) as seen by the client."""
    started = time.monotonic()
    body = {"model": model, "messages": [{"role": "system", "content": ""}, {"role": "user", "content": prompt}],
            "stream": True, "max_tokens": max_tokens, "temperature": 0}
    response = requests.post(f"{base_url}/chat/completions", json=body, stream=True, timeout=10,
                             headers={"Authorization": "Bearer not-used"})
    lines, first = [], None
    for line in response.iter_lines(chunk_size=None):
        if line:
            lines.append(line.decode())
            if first is None and '"content": "' in lines[-1] and '"content": ""' not in lines[-1]:
                first = time.monotonic() - started
    return response.status_code, lines, first, time.monotonic() - started


def test_streams_through_and_records_the_servers_own_token_count(tmp_path):
    speculation = Speculation(num_speculative_tokens=4, accepted=(3, 1, 4))
    with FakeVllm(step_s=0.02, prefill_s=0.05, speculation=speculation) as server, \
            MeasuringProxy(server.url, tmp_path / "requests.jsonl", timeout_s=10) as proxy:
        assert proxy.base_url.startswith("http://127.0.0.1:") and proxy.base_url.endswith("/v1")
        status, lines, first, end = chat(proxy.base_url, "Shall I compare thee", max_tokens=24)
    (record,) = read_records(tmp_path / "requests.jsonl")
    (sent,) = server.sent
    assert status == 200 and lines[-1] == "data: [DONE]"
    # LLMPerf indexes choices[0] of every chunk: the usage-only chunk must not reach it.
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert all(chunk["choices"] for chunk in chunks) and not any("usage" in chunk for chunk in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == sent.text
    # Streamed as it arrives, not buffered: the client saw content long before the end.
    assert first is not None and first < end - 0.1
    assert record["completion_tokens"] == sent.tokens == 24 and record["content_chunks"] == sent.content_chunks == 8
    assert record["prompt_tokens"] == len("Shall I compare thee".split()) + 9
    assert record["status"] == 200 and record["error"] is None and record["done"] and record["finish_reason"] == "length"
    # The proxy's clock starts before the server's and stops after it (5 ms for the server stamping
    # a chunk after sending it); a loaded machine may add delay, never remove it.
    server_ttft, server_e2e = sent.first_content - sent.received, sent.last_content - sent.received
    assert server_ttft >= 0.05 and server_ttft - 0.005 <= record["ttft_s"] <= server_ttft + 0.3
    assert server_e2e - 0.005 <= record["e2e_s"] <= server_e2e + 0.3
    assert record["max_tokens"] == 24 and record["response_sha256"] and record["request_sha256"]


def test_a_failed_request_is_passed_on_and_recorded(tmp_path):
    with FakeVllm(step_s=0.001, fail=frozenset({1})) as server, \
            MeasuringProxy(server.url, tmp_path / "requests.jsonl", timeout_s=10) as proxy:
        status, lines, _, _ = chat(proxy.base_url, "a")
        assert chat(proxy.base_url, "b")[0] == 200
    assert status == 500 and json.loads(lines[0])["code"] == 500
    failed, ok = read_records(tmp_path / "requests.jsonl")
    assert failed["status"] == 500 and failed["error"].startswith("HTTP 500: ") and "injected failure" in failed["error"]
    assert failed["response_sha256"] is None and failed["completion_tokens"] is None
    assert ok["status"] == 200 and ok["error"] is None


def test_an_unreachable_server_is_a_recorded_502(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with MeasuringProxy(f"http://127.0.0.1:{port}/v1", tmp_path / "requests.jsonl", timeout_s=2) as proxy:
        status = chat(proxy.base_url, "a")[0]
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert status == 502 and record["error"].startswith("server unreachable")


def test_every_concurrent_request_is_recorded(tmp_path):
    with FakeVllm(step_s=0.005) as server, MeasuringProxy(server.url, tmp_path / "requests.jsonl", timeout_s=10) as proxy:
        with ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(lambda i: chat(proxy.base_url, f"prompt {i}")[0], range(12)))
    records = read_records(tmp_path / "requests.jsonl")
    assert statuses == [200] * 12 and len(records) == len(server.sent) == 12
    assert sorted(r["completion_tokens"] for r in records) == [12] * 12


def test_the_request_digest_ignores_the_model_name_only():
    body = {"model": "meta-llama/Llama-3.1-405B-Instruct", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
    assert request_digest(body) == request_digest({**body, "model": "meta-llama/Llama-3.1-405B-Instruct-FP8"})
    assert request_digest(body) != request_digest({**body, "max_tokens": 6})
    assert request_digest(body) != request_digest({**body, "messages": [{"role": "user", "content": "y"}]})


# --- Unit level: what the proxy computes from a request body and from each SSE line. ---------

from benchmark.proxy import Exchange, _Server, json_object, with_usage  # noqa: E402


def test_only_a_json_object_is_a_request_the_proxy_reads():
    assert json_object(b'{"stream": true, "max_tokens": 3}') == {"stream": True, "max_tokens": 3}
    assert [json_object(raw) for raw in (b"", b"not json", b'["stream", true]', b'"text"', b"null")] == [None] * 5


def test_the_request_digest_is_the_sha256_of_the_sorted_question():
    body = {"stream": True, "model": "m", "stream_options": {"include_usage": True}, "max_tokens": 5}
    assert request_digest(body) == hashlib.sha256(b'{"max_tokens": 5, "stream": true}').hexdigest()
    assert request_digest({"messages": [], "model": "m"}) == hashlib.sha256(b'{"messages": []}').hexdigest()


def test_only_streaming_requests_ask_for_usage():
    plain = {"model": "m", "max_tokens": 3}
    assert with_usage(plain) is plain and with_usage({**plain, "stream": False}) == {**plain, "stream": False}
    assert with_usage({"stream": True}) == {"stream": True, "stream_options": {"include_usage": True}}
    assert with_usage({"stream": True, "stream_options": None}) == {"stream": True, "stream_options": {"include_usage": True}}
    kept = {"stream": True, "stream_options": {"continuous_usage_stats": False, "include_usage": False}}
    assert with_usage(kept) == {"stream": True, "stream_options": {"continuous_usage_stats": False, "include_usage": True}}
    assert kept["stream_options"]["include_usage"] is False  # the client's body is not changed


def test_a_new_exchange_records_nothing_measured_yet():
    body = {"model": "m", "max_tokens": 7}
    assert Exchange(body, 1_795_000_000.5, 10.0).record == {
        "start": 1_795_000_000.5, "ttft_s": None, "e2e_s": None, "status": None, "error": None, "content_chunks": 0,
        "prompt_tokens": None, "completion_tokens": None, "finish_reason": None, "done": False, "max_tokens": 7,
        "request_sha256": request_digest(body), "response_sha256": None}
    unparsed = Exchange(None, 1.0, 2.0).record
    assert unparsed["max_tokens"] is None and unparsed["request_sha256"] is None


def chunk_line(**data) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n"


def test_an_exchange_measures_content_tokens_and_the_answer():
    exchange = Exchange({"max_tokens": 3}, 100.0, 10.0)
    role = chunk_line(choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    assert exchange.observe(role, 10.1) is True
    assert exchange.observe(b"\n", 10.15) is True and exchange.observe(b": keep-alive\n", 10.16) is True
    assert exchange.observe(chunk_line(choices=[{"delta": None}]), 10.17) is True
    assert exchange.record["ttft_s"] is None and exchange.record["content_chunks"] == 0
    assert exchange.observe(chunk_line(choices=[{"delta": {"content": "Sh"}, "finish_reason": None}]), 10.25)
    assert exchange.observe(chunk_line(choices=[{"delta": {"content": "all I"}, "finish_reason": "length"}]), 10.5)
    # vLLM's continuous usage stats ride on content chunks: counted, and passed on.
    with_stats = chunk_line(choices=[{"delta": {"content": "!"}}], usage={"prompt_tokens": 9, "completion_tokens": 2})
    assert exchange.observe(with_stats, 10.75) is True
    usage = chunk_line(choices=[], usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    assert exchange.observe(usage, 10.8) is False
    assert exchange.observe(b"data:[DONE]\r\n", 10.9) is True
    exchange.record["status"] = 200
    record = exchange.finish(11.0)
    assert record is exchange.record and record == {
        "start": 100.0, "ttft_s": pytest.approx(0.25), "e2e_s": pytest.approx(1.0), "status": 200, "error": None,
        "content_chunks": 3, "prompt_tokens": 12, "completion_tokens": 3, "finish_reason": "length", "done": True,
        "max_tokens": 3, "request_sha256": request_digest({"max_tokens": 3}),
        "response_sha256": hashlib.sha256(b"Shall I!").hexdigest()}


def test_lines_an_exchange_cannot_use_are_passed_on_and_failures_keep_the_first_message():
    exchange = Exchange({}, 0.0, 0.0)
    assert exchange.observe(b"data: [1, 2]\n", 1.0) is True
    assert exchange.observe(b'data: {"choices": []}\n', 1.0) is True  # no usage: not the usage chunk
    assert exchange.observe(b'data: {"usage": null, "choices": []}\n', 1.0) is True
    assert exchange.observe(b'data: {"error": "text, not an object"}\n', 1.0) is True
    assert exchange.record["error"] is None and exchange.record["prompt_tokens"] is None
    assert exchange.observe(b'data: {"usage": 5, "choices": []}\n', 1.0) is False
    assert exchange.record["prompt_tokens"] is None
    long = b"x" * 300
    assert exchange.observe(b"data: " + long + b"\n", 1.0) is True
    assert exchange.record["error"] == f"unparseable stream line: {long[:200]!r}"
    exchange.fail("second")
    assert exchange.record["error"] == f"unparseable stream line: {long[:200]!r}"
    other = Exchange({}, 0.0, 0.0)
    assert other.observe(b'data: {"error": {"code": 400, "message": "too long", "object": "error"}}\n', 1.0) is True
    assert other.record["error"] == "in-stream error 400: too long"
    other.record["status"] = 200
    assert other.finish(2.5)["response_sha256"] is None and other.record["e2e_s"] == 2.5
    failed = Exchange({}, 0.0, 1.0)
    failed.record["status"] = 500
    assert failed.finish(1.5)["response_sha256"] is None and failed.record["e2e_s"] == 0.5


def test_the_records_file_gets_one_sorted_json_line_per_request_and_upstream_connections_time_out():
    import http.client
    import io
    import urllib.parse
    records = io.BytesIO()
    server = _Server(urllib.parse.urlsplit("https://vllm-sd:8443/v1"), records, 7.5, {})
    try:
        assert server.server_address[0] == "127.0.0.1" and server.server_address[1] > 0
        server.write({"b": 1, "a": None})
        server.write({"c": "x"})
        assert records.getvalue() == b'{"a": null, "b": 1}\n{"c": "x"}\n'
        secure = server.connect()
        assert type(secure) is http.client.HTTPSConnection
        assert (secure.host, secure.port, secure.timeout) == ("vllm-sd", 8443, 7.5)
        server.upstream = urllib.parse.urlsplit("http://vllm-base:8000/v1")
        plain = server.connect()
        assert type(plain) is http.client.HTTPConnection
        assert (plain.host, plain.port, plain.timeout) == ("vllm-base", 8000, 7.5)
    finally:
        server.server_close()


def test_read_records_skips_blank_lines_and_a_missing_file(tmp_path):
    assert read_records(tmp_path / "none.jsonl") == []
    (tmp_path / "r.jsonl").write_text('{"a": 1}\n\n  \n{"a": 2}\n')
    assert read_records(tmp_path / "r.jsonl") == [{"a": 1}, {"a": 2}]


# --- Wire level: a scripted upstream and a raw client see exactly what the proxy sends. -------

class Upstream:
    """A one-connection-at-a-time HTTP server on 127.0.0.1 that records each request (request line,
    headers, body) and answers with `script(connection, request)`, which writes raw bytes."""

    def __init__(self, script):
        self.script = script
        self.requests: list[dict] = []
        self.arrived = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                reader = connection.makefile("rb")
                request_line = reader.readline().decode().rstrip("\r\n")
                headers = {}
                while (line := reader.readline().decode().rstrip("\r\n")):
                    name, value = line.split(":", 1)
                    headers[name] = value.strip()
                body = reader.read(int(headers.get("Content-Length", 0)))
                request = {"line": request_line, "headers": headers, "body": body}
                self.requests.append(request)
                self.arrived.set()
                try:
                    self.script(connection, request)
                except OSError:
                    pass
                reader.close()  # the socket closes only once its file is closed too

    def close(self) -> None:
        self.listener.close()


def raw_exchange(port: int, request: bytes, reset_after: bytes | None = None) -> bytes:
    """Send raw request bytes to the proxy, read its answer to the end. With `reset_after`, reset
    the connection once those bytes have arrived (a client that goes away mid-stream)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(request)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
            if reset_after is not None and reset_after in received:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
        return received


def post(path: str, body: bytes, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def split_response(raw: bytes) -> tuple[list[str], bytes]:
    """(status line and headers other than the varying Server and Date, body) as sent."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return [line for line in lines if not line.startswith(("Server: ", "Date: "))], body


def through_proxy(tmp_path, script, request: bytes) -> tuple[Upstream, bytes]:
    """Send raw `request` bytes through a proxy in front of an Upstream answering with `script`;
    the upstream (what it received) and the raw answer the client got."""
    upstream = Upstream(script)
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", tmp_path / "requests.jsonl", 10) as proxy:
            return upstream, raw_exchange(proxy._server.server_address[1], request)
    finally:
        upstream.close()


def answer(status: str, body: bytes, content_type: str | None = "application/json"):
    def script(connection, request):
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        connection.sendall(head.encode() + b"\r\n" + body)
    return script


def sse(*lines: bytes, hold: threading.Event | None = None, end: bool = True):
    """A chunked event stream, one line per chunk; waits for `hold` after the first line."""
    def script(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
        for index, line in enumerate(lines):
            connection.sendall(b"%x\r\n%s\r\n" % (len(line), line))
            if index == 0 and hold is not None:
                hold.wait(5)
                time.sleep(0.02)
        if end:
            connection.sendall(b"0\r\n\r\n")
    return script


CHAT = {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": "Shall I"}], "stream": True,
        "max_tokens": 2}


def test_the_request_is_forwarded_with_usage_and_the_stream_passed_on_line_by_line(tmp_path):
    role = chunk_line(choices=[{"delta": {"role": "assistant", "content": ""}}])
    first = chunk_line(choices=[{"delta": {"content": "Sh"}}])
    last = chunk_line(choices=[{"delta": {"content": "all"}, "finish_reason": "length"}])
    usage = chunk_line(choices=[], usage={"prompt_tokens": 10, "completion_tokens": 2})
    upstream = Upstream(sse(role, b"\n", first, b"\n", last, b"\n", usage, b"\n", b"data: [DONE]\n", b"\n"))
    body = json.dumps(CHAT).encode()
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1/", tmp_path / "requests.jsonl", 10) as proxy:
            assert proxy.base_url == f"http://127.0.0.1:{proxy._server.server_address[1]}/v1"
            raw = raw_exchange(proxy._server.server_address[1],
                               post("/v1/chat/completions", body, Authorization="Bearer k", Accept="text/event-stream"))
    finally:
        upstream.close()
    (forwarded,) = upstream.requests
    assert forwarded["line"] == "POST /v1/chat/completions HTTP/1.1"
    assert forwarded["body"] == json.dumps({**CHAT, "stream_options": {"include_usage": True}}).encode()
    assert {k: v for k, v in forwarded["headers"].items() if k not in ("Host", "Accept-Encoding")} == {
        "Content-Length": str(len(forwarded["body"])), "Content-Type": "application/json",
        "Accept": "text/event-stream", "Authorization": "Bearer k"}
    headers, sent = split_response(raw)
    assert headers == ["HTTP/1.1 200 OK", "Content-Type: text/event-stream; charset=utf-8",
                       "Transfer-Encoding: chunked", "Connection: close"]
    passed = (role, b"\n", first, b"\n", last, b"\n", b"\n", b"data: [DONE]\n", b"\n", b"")
    assert sent == b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in passed)
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["status"] == 200 and record["error"] is None and record["done"] is True
    assert (record["content_chunks"], record["prompt_tokens"], record["completion_tokens"]) == (2, 10, 2)
    assert record["response_sha256"] == hashlib.sha256(b"Shall").hexdigest()
    assert record["request_sha256"] == request_digest(CHAT) and record["max_tokens"] == 2


def test_an_upstream_error_is_passed_on_verbatim_and_its_start_recorded(tmp_path):
    text = b'{"object": "error", "message": "' + b"\xff" + b"m" * 400 + b'", "code": 400}'
    upstream = Upstream(answer("400 Bad Request", text, content_type=None))
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}", tmp_path / "requests.jsonl", 10) as proxy:
            assert proxy.base_url == f"http://127.0.0.1:{proxy._server.server_address[1]}"
            raw = raw_exchange(proxy._server.server_address[1], post("/v1/completions", b"not json"))
    finally:
        upstream.close()
    (forwarded,) = upstream.requests
    assert forwarded["body"] == b"not json" and forwarded["headers"]["Accept"] == "*/*"
    assert "Authorization" not in forwarded["headers"]
    headers, sent = split_response(raw)
    assert headers == ["HTTP/1.1 400 Bad Request", "Content-Type: application/json",
                       f"Content-Length: {len(text)}", "Connection: close"]
    assert sent == text
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["error"] == "HTTP 400: " + text[:300].decode(errors="replace")
    assert record["status"] == 400 and record["request_sha256"] is None and record["response_sha256"] is None


def test_a_non_streaming_answer_is_passed_on_with_its_content_type(tmp_path):
    text = b'{"choices": [{"message": {"content": "hi"}}]}'
    upstream, raw = through_proxy(tmp_path, answer("200 OK", text, content_type="application/json; charset=utf-8"),
                                  post("/v1/chat/completions", b'{"max_tokens": 4}'))
    assert upstream.requests[0]["body"] == b'{"max_tokens": 4}'
    headers, sent = split_response(raw)
    assert headers == ["HTTP/1.1 200 OK", "Content-Type: application/json; charset=utf-8",
                       f"Content-Length: {len(text)}", "Connection: close"] and sent == text
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["status"] == 200 and record["error"] is None and record["max_tokens"] == 4
    assert record["response_sha256"] == hashlib.sha256(b"").hexdigest() and record["content_chunks"] == 0


def test_a_200_without_a_content_type_is_passed_on_as_json(tmp_path):
    _, raw = through_proxy(tmp_path, answer("200 OK", b"{}", content_type=None), post("/v1/models", b"{}"))
    assert split_response(raw) == (["HTTP/1.1 200 OK", "Content-Type: application/json", "Content-Length: 2",
                                     "Connection: close"], b"{}")


def test_an_unreachable_server_gets_the_client_a_502_naming_the_error(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with MeasuringProxy(f"http://127.0.0.1:{port}/v1", tmp_path / "requests.jsonl", timeout_s=2) as proxy:
        raw = raw_exchange(proxy._server.server_address[1], post("/v1/chat/completions", b"{}"))
    (record,) = read_records(tmp_path / "requests.jsonl")
    headers, sent = split_response(raw)
    message = record["error"].removeprefix("server unreachable: ")
    assert "Connection refused" in message and record["error"] == f"server unreachable: {message}"
    assert sent == json.dumps({"object": "error", "message": message, "code": 502}).encode()
    assert headers == ["HTTP/1.1 502 Bad Gateway", "Content-Type: application/json", f"Content-Length: {len(sent)}",
                       "Connection: close"]
    assert record["status"] is None and record["response_sha256"] is None


def test_a_broken_server_stream_leaves_the_client_stream_unterminated(tmp_path):
    first = chunk_line(choices=[{"delta": {"content": "Sh"}}])

    def script(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                           + b"%x\r\n%s\r\n" % (len(first), first) + b"40\r\ndata: {")

    _, raw = through_proxy(tmp_path, script, post("/v1/chat/completions", json.dumps(CHAT).encode()))
    headers, sent = split_response(raw)
    assert headers[0] == "HTTP/1.1 200 OK" and sent == b"%x\r\n%s\r\n" % (len(first), first)
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["error"].startswith("server stream broke: IncompleteRead: IncompleteRead(")
    assert record["content_chunks"] == 1 and record["done"] is False and record["response_sha256"] is None


def test_a_client_that_goes_away_mid_stream_is_recorded_and_the_stream_dropped(tmp_path):
    hold = threading.Event()
    first = chunk_line(choices=[{"delta": {"content": "Sh"}}])
    rest = [chunk_line(choices=[{"delta": {"content": "x"}}])] * 3 + [b"data: [DONE]\n"]
    upstream = Upstream(sse(first, *rest, hold=hold))
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", tmp_path / "requests.jsonl", 10) as proxy:
            port = proxy._server.server_address[1]
            raw = raw_exchange(port, post("/v1/chat/completions", json.dumps(CHAT).encode()), reset_after=b'"Sh"')
            hold.set()
    finally:
        upstream.close()
    assert b'"Sh"' in raw and b'"x"' not in raw
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["error"].startswith("client disconnected: ")
    assert record["done"] is False and record["response_sha256"] is None


# --- Lifecycle: what the driver relies on when it opens and closes a proxy per test case. -----

def test_closing_waits_for_requests_in_flight_and_appends_to_earlier_records(tmp_path):
    records = tmp_path / "requests.jsonl"
    records.write_text('{"earlier": true}\n')
    hold = threading.Event()
    upstream = Upstream(sse(chunk_line(choices=[{"delta": {"content": "a"}}]), b"data: [DONE]\n", hold=hold))
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", records, 10) as proxy:
            port = proxy._server.server_address[1]
            (thread,) = [t for t in threading.enumerate() if t.name == "measuring-proxy"]
            assert thread.daemon  # a stuck proxy cannot keep the benchmark process alive
            client = threading.Thread(target=raw_exchange, args=(port, post("/v1/chat/completions", b"{}")))
            client.start()
            assert upstream.arrived.wait(5)
            threading.Timer(0.05, hold.set).start()
        # The request was still streaming when the block ended: its record is written by now.
        assert [r.get("earlier") or r["done"] for r in read_records(records)] == [True, True]
        assert proxy._records.closed and not thread.is_alive()
        client.join(5)
    finally:
        upstream.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_an_interrupted_proxy_stops_listening_at_once_and_still_records_what_finishes(tmp_path):
    records = tmp_path / "requests.jsonl"
    hold = threading.Event()
    upstream = Upstream(sse(chunk_line(choices=[{"delta": {"content": "a"}}]), b"data: [DONE]\n", hold=hold))
    release = threading.Timer(0.3, hold.set)  # frees the request even if closing wrongly waits for it
    try:
        with pytest.raises(KeyboardInterrupt):
            with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", records, 10) as proxy:
                port = proxy._server.server_address[1]
                client = threading.Thread(target=raw_exchange, args=(port, post("/v1/chat/completions", b"{}")))
                client.start()
                assert upstream.arrived.wait(5)
                release.start()
                interrupted = time.monotonic()
                raise KeyboardInterrupt
        assert time.monotonic() - interrupted < 0.2 and not hold.is_set()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1)
        hold.set()
        client.join(5)
        for _ in range(100):
            if read_records(records):
                break
            time.sleep(0.01)
        (record,) = read_records(records)
        assert record["done"] is True and not proxy._records.closed
    finally:
        release.cancel()
        upstream.close()


def test_closing_an_idle_proxy_is_prompt(tmp_path):
    with MeasuringProxy("http://127.0.0.1:9/v1", tmp_path / "requests.jsonl", 1):
        time.sleep(0.06)
        closing = time.monotonic()
    assert time.monotonic() - closing < 0.25  # the serve loop polls every 0.05 s


def test_one_request_per_connection_even_when_the_client_pipelines(tmp_path):
    upstream = Upstream(answer("200 OK", b"{}"))
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", tmp_path / "requests.jsonl", 10) as proxy:
            with socket.create_connection(("127.0.0.1", proxy._server.server_address[1]), timeout=5) as client:
                client.sendall(post("/v1/a", b"{}") + post("/v1/b", b"{}"))
                client.shutdown(socket.SHUT_WR)
                received = b""
                while chunk := client.recv(65536):
                    received += chunk
    finally:
        upstream.close()
    assert received.count(b"HTTP/1.1 200 OK") == 1 and [r["line"] for r in upstream.requests] == ["POST /v1/a HTTP/1.1"]
    assert len(read_records(tmp_path / "requests.jsonl")) == 1


def test_a_request_without_a_content_length_is_forwarded_empty(tmp_path):
    upstream, raw = through_proxy(tmp_path, answer("400 Bad Request", b"{}"), b"POST /v1/x HTTP/1.1\r\nHost: h\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400 ") and upstream.requests[0]["body"] == b""
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["error"] == "HTTP 400: {}" and record["request_sha256"] is None


def test_a_json_body_that_is_not_an_object_is_forwarded_as_sent(tmp_path):
    error = b'{"object": "error", "message": "Input should be a valid dictionary", "code": 400}'
    upstream, raw = through_proxy(tmp_path, answer("400 Bad Request", error),
                                  post("/v1/chat/completions", b'["stream", true]'))
    assert upstream.requests[0]["body"] == b'["stream", true]'
    assert split_response(raw)[1] == error
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["status"] == 400 and record["request_sha256"] is None and record["max_tokens"] is None


def test_a_client_gone_before_the_stream_ends_is_recorded(tmp_path):
    hold = threading.Event()
    upstream = Upstream(sse(b"data: [DONE]\n", hold=hold))  # the end of the stream comes after the reset
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", tmp_path / "requests.jsonl", 10) as proxy:
            raw_exchange(proxy._server.server_address[1], post("/v1/chat/completions", json.dumps(CHAT).encode()),
                         reset_after=b"[DONE]")
            hold.set()
    finally:
        upstream.close()
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["done"] is True and record["error"].startswith("client disconnected: ")


def test_a_server_that_does_not_answer_in_time_is_a_recorded_502(tmp_path):
    hold = threading.Event()
    upstream = Upstream(lambda connection, request: hold.wait(2))
    try:
        with MeasuringProxy(f"http://127.0.0.1:{upstream.port}/v1", tmp_path / "requests.jsonl", timeout_s=0.1) as proxy:
            asked = time.monotonic()
            raw = raw_exchange(proxy._server.server_address[1], post("/v1/chat/completions", b"{}"))
            waited = time.monotonic() - asked
            hold.set()
    finally:
        hold.set()
        upstream.close()
    assert raw.startswith(b"HTTP/1.1 502 Bad Gateway\r\n") and waited < 1
    (record,) = read_records(tmp_path / "requests.jsonl")
    assert record["error"] == "server unreachable: timed out"
