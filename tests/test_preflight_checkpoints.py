"""Preflight's checkpoint sizes: each prepared model's safetensors as the hub lists them at the
stack's revision, against the size every disk, transfer and cost figure was derived from. The FP8
405B was once sized at 377 GiB for a ~454 GiB checkpoint; this check says so before `pulumi up`."""
from __future__ import annotations

import pytest

from modelstore.hub import RemoteFile
from offline.stacks import load_stack
from rehearse.hub import LocalHub, Repository
from stackconfig.store import HUB_SHARD_BYTES, SAFETENSORS_HEADER_BYTES
from tools.preflight import hub

QWEN, LLAMA_405B = "qwen3-32b-qwen3-1.7b", "llama3.1-405b-llama3.2-1b"


def prepared(stack: str, model: str):
    return next(m for m in load_stack(stack).spec().prepared_models if m.model == model)


def shards(total: int, count: int, header: int = 200_000) -> tuple[RemoteFile, ...]:
    """`count` safetensors files holding `total` tensor bytes, each with a JSON header, and a config."""
    sizes = [total // count + (1 if i < total % count else 0) for i in range(count)]
    return (*(RemoteFile(f"model-{i + 1:05d}-of-{count:05d}.safetensors", size + header, f"{i:040x}", f"{i:064x}")
              for i, size in enumerate(sizes)), RemoteFile("config.json", 900, "c" * 40, None))


FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"


def test_a_checkpoint_of_the_recorded_size_passes_headers_included():
    model = prepared(LLAMA_405B, FP8)
    status, finding = hub.compare_checkpoint(model, shards(model.checkpoint_bytes, 109))
    assert status == "PASS" and "453.8 GiB as recorded" in finding


def test_a_checkpoint_larger_than_recorded_fails_naming_both_sizes():
    """The old formula's mistake, seen from the hub's side: 1 byte per parameter recorded, the
    checkpoint listed at its real size."""
    model = prepared(LLAMA_405B, FP8)
    real = model.checkpoint_bytes + 109 * SAFETENSORS_HEADER_BYTES + 1  # beyond what headers explain
    status, finding = hub.compare_checkpoint(model, shards(real, 109, header=0))
    assert status == "FAIL" and f"{model.checkpoint_bytes / 2**30:,.1f} GiB" in finding and FP8 in finding


def test_a_shard_above_what_a_preparation_stream_holds_fails_naming_the_file():
    model = prepared(LLAMA_405B, FP8)
    files = (*shards(model.checkpoint_bytes - HUB_SHARD_BYTES - 10**9, 100),
             RemoteFile("model-huge.safetensors", HUB_SHARD_BYTES + SAFETENSORS_HEADER_BYTES + 1, "d" * 40, "d" * 64))
    status, finding = hub.compare_checkpoint(model, files)
    assert status == "FAIL" and "model-huge.safetensors" in finding and "would refuse" in finding


def test_a_checkpoint_much_smaller_than_recorded_warns():
    model = prepared(LLAMA_405B, FP8)
    status, finding = hub.compare_checkpoint(model, shards(int(model.checkpoint_bytes * 0.9), 100))
    assert status == "WARN" and "larger than needed" in finding


@pytest.fixture
def hub_of(monkeypatch):
    def start(repos: dict[str, Repository]) -> LocalHub:
        fake = LocalHub(repos).__enter__()
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        started.append(fake)
        return fake
    started: list[LocalHub] = []
    yield start
    for fake in started:
        fake.__exit__(None, None, None)


def test_the_check_asks_the_hub_at_each_models_pinned_revision(hub_of):
    """Through a stand-in hub: metadata only (no file is downloaded), at the commit the stack pins.
    The stand-in's files are a few bytes, far below the recorded sizes: a WARN per model."""
    spec = load_stack(QWEN).spec()
    repos = {m.model: Repository({"model.safetensors": b"x" * 64, "config.json": b"{}"}, commit=m.revision)
             for m in spec.prepared_models}
    fake = hub_of(repos)

    def no_token():
        raise AssertionError("no model of this stack is gated: the token is not read")

    result = hub.check_checkpoints(spec, no_token)
    assert result.status == "WARN" and result.found.count("larger than needed") == 2
    for m in spec.prepared_models:
        assert repos[m.model].requests == [f"/api/models/{m.model}/revision/{m.revision}"]
    assert fake.cdn_requests == []


def test_gated_models_without_a_token_are_not_asked_for(hub_of):
    spec = load_stack(LLAMA_405B).spec()
    repos = {m.model: Repository({"model.safetensors": b"x"}) for m in spec.prepared_models}
    hub_of(repos)
    result = hub.check_checkpoints(spec, lambda: hub.Token(None, "HF_TOKEN is not set"))
    assert result.status == "WARN" and "could not verify: HF_TOKEN is not set" in result.found
    assert all(not r.requests for r in repos.values())


def test_a_token_the_hub_refuses_is_could_not_verify_and_never_printed(hub_of):
    spec = load_stack(LLAMA_405B).spec()
    repos = {m.model: Repository({"model.safetensors": b"x"}, commit=m.revision if len(m.revision) == 40 else
                               "0123456789abcdef0123456789abcdef01234567", token="hf_the_right_one")
             for m in spec.prepared_models}
    hub_of(repos)
    result = hub.check_checkpoints(spec, lambda: hub.Token("hf_a_wrong_one", "HF_TOKEN"))
    assert result.status == "WARN" and "HTTP 401" in result.found
    assert "hf_a_wrong_one" not in result.line() and "hf_the_right_one" not in result.line()
