"""distributed/: the target server and the draft server as real processes on 127.0.0.1.

The gRPC round trip, the OpenAI-compatible stream (read through the benchmark's own measuring
proxy and acceptance parser), refusals at start (exit 2 naming the key), a target killed and
restarted mid-request, a target that stops answering (the RPC deadline), and backpressure.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

from benchmark.acceptance import parse_counters
from benchmark.proxy import MeasuringProxy, read_records
from distributed import draft_server
from distributed.backend import UnknownSession, VerifyError
from distributed.config import ConfigError, draft_settings, target_settings
from distributed.cpu import CpuTarget, load
from distributed.sampling import Sampling
from distributed.target_client import RemoteTarget
from stackconfig.source import PROJECT_DIR
from tests.distributed_models import write_models

SPECULATION_LENGTH, GAMMA, MAX_CONTEXT, RPC_TIMEOUT_S = 5, 4, 512, 3.0
pytestmark = pytest.mark.waits  # on servers starting (torch in each), an RPC deadline, a target restarted
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_DIR)}


class Process:
    """A server started with `python -m`, waited for until it prints `listening on HOST:PORT`."""

    def __init__(self, module: str, *args: str, wait_s: float = 120):
        self.popen = subprocess.Popen([sys.executable, "-m", module, *args], cwd=PROJECT_DIR, env=ENV,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + wait_s
        line = ""
        while time.monotonic() < deadline and not line.startswith("listening on "):
            line = self.popen.stdout.readline()
            if not line and self.popen.poll() is not None:
                raise AssertionError(f"{module} exited {self.popen.returncode}: {self.popen.stderr.read()[-3000:]}")
        self.address = line.removeprefix("listening on ").strip()
        self.port = int(self.address.rpartition(":")[2])

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGCONT)
            self.popen.kill()
        self.popen.wait(10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Servers:
    """The target (answering /health on its own port, as in the pod) and the draft in front of it,
    started once for the module: each start of a server costs a Python that imports torch."""

    def __init__(self, models: dict[str, Path]):
        self.models = models
        self.health_port = free_port()
        self.target = self.start_target("0")
        self.draft = Process("distributed.draft_server", "--model", str(models["draft"]), "--target", self.target.address,
                             "--gamma", str(GAMMA), "--port", "0", "--max-concurrency", "1",
                             "--rpc-timeout-s", str(RPC_TIMEOUT_S), "--served-model-name", "tiny")
        self.url = f"http://{self.draft.address}"

    def start_target(self, port: str) -> Process:
        return Process("distributed.target_server", "--model", str(self.models["target"]), "--port", port,
                       "--speculation-length", str(SPECULATION_LENGTH), "--max-context", str(MAX_CONTEXT),
                       "--health-port", str(self.health_port))

    def restart_target(self) -> None:
        self.target.stop()
        self.target = self.start_target(str(self.target.port))

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            return response.read().decode()

    def failed(self) -> float:
        return sum(float(line.split()[-1]) for line in self.metrics().splitlines()
                   if line.startswith('distributed_requests_total{outcome="failed"}'))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    return write_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def servers(models):
    started = Servers(models)
    yield started
    started.draft.stop()
    started.target.stop()


def post(url: str, path: str, body: dict, timeout: float = 60) -> http.client.HTTPResponse:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    return connection.getresponse()


def events(response: http.client.HTTPResponse):
    """The stream's data payloads, parsed (the terminal [DONE] as the string)."""
    while line := response.readline():
        if line.startswith(b"data: "):
            payload = line[len(b"data: "):].strip()
            yield payload.decode() if payload == b"[DONE]" else json.loads(payload)


def target_alone(models, prompt_ids: list[int], tokens: int) -> tuple[str, int, str]:
    """What the target alone writes with transformers' generate on the same files: the text, the
    number of tokens, and why it ended (it stops at the end-of-sequence token, as the server does)."""
    model, tokenizer = load(models["target"])
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=tokens, do_sample=False, pad_token_id=0,
                         attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long))[0, len(prompt_ids):]
    finish = "stop" if out[-1] == tokenizer.eos_token_id else "length"
    return tokenizer.decode(out, skip_special_tokens=True), len(out), finish


def chat_prompt_ids(models, messages) -> list[int]:
    tokenizer = load(models["target"])[1]
    return tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                            add_special_tokens=False)


def test_the_grpc_round_trip_verifies_as_the_target_does_in_process(servers, models):
    remote = RemoteTarget(servers.target.address, timeout_s=RPC_TIMEOUT_S)
    local = CpuTarget.from_directory(models["target"], speculation_length=SPECULATION_LENGTH, max_context=MAX_CONTEXT)
    assert remote.describe() == local.describe()
    prompt, drafts = [3, 50, 7, 90, 11], [4, 8, 15, 16]
    sampled = Sampling(temperature=0.9, seed=5)
    probs = torch.softmax(torch.randn(GAMMA, local.describe().vocab_size, generator=torch.Generator().manual_seed(0)), -1)
    for sampling, draft_probs in ((Sampling(), None), (sampled, probs)):
        here = local.verify("a", 0, prompt, drafts, draft_probs, sampling)
        there = remote.verify("a", 0, prompt, drafts, draft_probs, sampling)
        assert there == here
        follow = remote.verify("a", there.cached_length, [there.next_token], drafts, draft_probs, sampling)
        assert follow == local.verify("a", here.cached_length, [here.next_token], drafts, draft_probs, sampling)
        remote.release("a")
        local.release("a")
    with pytest.raises(VerifyError) as too_many:
        remote.verify("b", 0, prompt, drafts + [23], None, Sampling())
    assert too_many.value.key == "gamma"
    with pytest.raises(UnknownSession) as lost:
        remote.verify("never-started", 9, [1], drafts, None, Sampling())
    assert lost.value.key == "session"
    remote.close()


def test_completions_stream_the_targets_greedy_output(servers, models):
    prompt = "Shall I compare thee"
    response = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 40, "temperature": 0,
                                                     "stream": True})
    chunks = list(events(response))
    assert response.status == 200 and chunks[-1] == "[DONE]"
    assert all(c["object"] == "text_completion" for c in chunks[:-1])
    text, _, finish = target_alone(models, load(models["target"])[1].encode(prompt), 40)
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == text
    assert chunks[-2]["choices"][0]["finish_reason"] == finish


def test_the_benchmark_proxy_and_acceptance_parser_read_the_chat_stream(servers, models, tmp_path):
    """What LLMPerf sends (chat, streamed) through the project's measuring proxy, and the acceptance
    counters as benchmark/acceptance.py parses them."""
    before = parse_counters(servers.metrics())
    messages = [{"role": "user", "content": "Shall I compare thee"}]
    with MeasuringProxy(servers.url + "/v1", tmp_path / "requests.jsonl", timeout_s=60) as proxy:
        response = post(proxy.base_url.removesuffix("/v1"), "/v1/chat/completions",
                        {"model": "tiny", "messages": messages, "max_tokens": 40, "temperature": 0, "stream": True})
        chunks = list(events(response))
    assert response.status == 200 and chunks[-1] == "[DONE]"
    text, tokens, finish = target_alone(models, chat_prompt_ids(models, messages), 40)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]) == text
    [record] = read_records(tmp_path / "requests.jsonl")
    assert (record["status"], record["error"], record["completion_tokens"], record["finish_reason"]) == (200, None, tokens, finish)
    after = parse_counters(servers.metrics())
    drafts = after["drafts"] - before["drafts"]
    # One target step per chunk; a step whose text ends inside a character sends none.
    assert record["content_chunks"] <= drafts <= tokens
    assert after["draft_tokens"] - before["draft_tokens"] == GAMMA * drafts
    assert 0 <= after["accepted"] - before["accepted"] < GAMMA * drafts  # an unrelated draft is often wrong
    assert sorted(after["per_position"]) == [str(i) for i in range(GAMMA)]


def test_chat_streams_a_role_chunk_then_content_then_usage(servers):
    response = post(servers.url, "/v1/chat/completions",
                    {"model": "tiny", "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 12,
                     "temperature": 0.9, "seed": 3, "stream": True, "stream_options": {"include_usage": True}})
    chunks = list(events(response))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1] == "[DONE]"
    usage = chunks[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    assert all(c["object"] == "chat.completion.chunk" for c in chunks[:-1])
    with urllib.request.urlopen(servers.url + "/health", timeout=10) as health:
        assert health.status == 200


def test_a_request_without_stream_gets_one_json_answer_with_the_same_text(servers, models):
    prompt = "the cat sat"
    response = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 10, "temperature": 0})
    answer = json.loads(response.read())
    text, tokens, finish = target_alone(models, load(models["target"])[1].encode(prompt), 10)
    assert (answer["object"], answer["choices"][0]["text"], answer["choices"][0]["finish_reason"]) == ("text_completion", text, finish)
    assert answer["usage"]["completion_tokens"] == tokens


def test_bad_requests_are_refused_naming_the_field(servers):
    response = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": 0})
    assert response.status == 400 and "max_tokens" in json.loads(response.read())["message"]


def test_the_draft_refuses_to_start_against_a_target_it_cannot_pair_with(servers, models, capsys):
    """The draft server's own entry point (in this process, to save a second start of torch),
    against the running target: a gamma its speculation length cannot verify and another tokenizer."""
    with pytest.raises(SystemExit) as refused:
        draft_server.main(["--model", str(models["other-tokenizer"]), "--target", servers.target.address,
                           "--gamma", str(SPECULATION_LENGTH), "--port", "0"])
    assert refused.value.code == 2
    stderr = capsys.readouterr().err
    assert "--gamma: 5" in stderr and "--model: the draft's tokenizer" in stderr


def test_the_target_answers_health_over_http_once_it_serves(servers, models):
    """The pod's probes, serve.sh and the publisher ask a server's /health over HTTP
    (components/pairing/distributed_variant.py): the target answers it on --health-port (the
    module's target, started with one: Process returns once it prints that it listens)."""
    health = servers.health_port
    with urllib.request.urlopen(f"http://127.0.0.1:{health}/health", timeout=10) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{health}/v1/models", timeout=10)
    assert missing.value.code == 404
    with pytest.raises(ConfigError) as refused:
        target_settings(["--model", str(models["target"]), "--port", "7000", "--health-port", "7000"])
    assert sorted(refused.value.errors) == ["--health-port"]


def test_bad_settings_are_refused_naming_every_key(models):
    with pytest.raises(ConfigError) as refused:
        draft_settings(["--model", str(models["draft"]), "--target", "nowhere", "--gamma", "0", "--rpc-timeout-s", "0"])
    assert sorted(refused.value.errors) == ["--gamma", "--rpc-timeout-s", "--target"]


def test_a_full_server_answers_429_at_once(servers):
    first = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "count", "max_tokens": 300, "temperature": 0,
                                                  "stream": True})
    stream = events(first)
    next(stream)
    os.kill(servers.target.popen.pid, signal.SIGSTOP)  # the first request now waits on the target
    try:
        started = time.monotonic()
        second = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": 4})
        assert second.status == 429 and second.getheader("Retry-After") == "1"
        assert time.monotonic() - started < RPC_TIMEOUT_S
    finally:
        os.kill(servers.target.popen.pid, signal.SIGCONT)
    assert list(stream)[-1] == "[DONE]"


def test_a_target_that_stops_answering_fails_the_request_at_the_rpc_deadline(servers):
    os.kill(servers.target.popen.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        response = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "a", "max_tokens": 4, "stream": True})
        waited = time.monotonic() - started
    finally:
        os.kill(servers.target.popen.pid, signal.SIGCONT)
    body = response.read()
    assert response.status == 503 and b"DEADLINE_EXCEEDED" in body, (response.status, body)
    assert RPC_TIMEOUT_S <= waited < RPC_TIMEOUT_S + 5, waited


def test_a_target_killed_mid_request_fails_that_request_and_the_next_is_served(servers):
    failed_before = servers.failed()
    response = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "The history of AI", "max_tokens": 300,
                                                     "temperature": 0, "stream": True})
    stream = events(response)
    first = next(stream)
    assert first["choices"][0]["finish_reason"] is None
    os.kill(servers.target.popen.pid, signal.SIGSTOP)  # frozen mid-request: it cannot finish the 300 tokens
    servers.restart_target()  # SIGKILL, then a new target on the same port, which holds no sessions
    rest = list(stream)
    assert rest[-1] == "[DONE]"
    error = rest[-2]["error"]
    assert error["code"] == 503 and "target" in error["message"]
    assert servers.failed() == failed_before + 1
    again = post(servers.url, "/v1/completions", {"model": "tiny", "prompt": "The history of AI", "max_tokens": 8,
                                                  "temperature": 0, "stream": True})
    chunks = list(events(again))
    assert again.status == 200 and chunks[-1] == "[DONE]" and "error" not in chunks[-2]
