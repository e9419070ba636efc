"""benchmark.proxy against a streaming test server on 127.0.0.1, with `requests` as the client
(what LLMPerf's OpenAI client uses: ray-project/llmperf@f1d6bed:
src/llmperf/ray_clients/openai_chat_completions_client.py llm_request)."""
import json
import socket
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
    assert record["ttft_s"] == pytest.approx(0.05, abs=0.02)
    assert record["e2e_s"] - record["ttft_s"] == pytest.approx(sent.last_content - sent.first_content, abs=0.01)
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
