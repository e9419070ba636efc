"""The distributed engine's failure signatures (stackconfig/engines/distributed.py SIGNATURES) are
the servers' own words: each test makes distributed/ print one for real and matches it, so a
reworded message fails here. failures() reports what the servers refuse at start in those words.
"""
from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from distributed import draft_server, pod
from distributed.backend import Description, UnknownSession
from distributed.config import ConfigError, check_pairing, draft_settings, target_settings
from distributed.sampling import Sampling
from distributed.target_client import RemoteTarget
from distributed.tiny import build_tokenizer
from stackconfig.engines.distributed import INVALID_SETTINGS, SIGNATURES, failures, speculation_length
from stackconfig.source import load_stack
from tests.distributed_models import draft, target, unrelated_model

DESCRIPTION = Description(model="target", tokenizer_sha256="a" * 64, speculation_length=5, max_context=128, vocab_size=320)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refused(call) -> str:
    with pytest.raises(ConfigError) as error:
        call()
    return str(error.value)


def draft_args(model: Path, *more: str) -> list[str]:
    return ["--model", str(model), "--target", f"127.0.0.1:{closed_port()}", *more]


def test_gamma_above_the_speculation_length(tmp_path):
    printed = refused(lambda: check_pairing(draft_settings(draft_args(tmp_path, "--gamma", "5")), DESCRIPTION, DESCRIPTION))
    assert printed.startswith(INVALID_SETTINGS) and SIGNATURES["gamma-above-speculation-length"].matches(printed)
    assert not SIGNATURES["tokenizer-mismatch"].matches(printed)


def test_tokenizer_and_vocabulary_mismatch(tmp_path):
    settings = draft_settings(draft_args(tmp_path))
    other_tokenizer = replace(DESCRIPTION, tokenizer_sha256="b" * 64)
    assert SIGNATURES["tokenizer-mismatch"].matches(refused(lambda: check_pairing(settings, other_tokenizer, DESCRIPTION)))
    smaller = replace(DESCRIPTION, vocab_size=300)
    assert SIGNATURES["vocabulary-mismatch"].matches(refused(lambda: check_pairing(settings, smaller, DESCRIPTION)))


def test_a_context_within_the_speculation_length(tmp_path):
    printed = refused(lambda: target_settings(["--model", str(tmp_path), "--speculation-length", "5", "--max-context", "5"]))
    assert SIGNATURES["context-within-speculation-length"].matches(printed)


def test_a_target_the_draft_cannot_reach_at_start(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        draft_server.main(draft_args(tmp_path, "--target-wait-s", "0.5"))
    assert SIGNATURES["target-unreachable"].matches(str(exit_.value.code)), exit_.value.code


def test_a_request_the_target_fails_is_logged_by_the_draft(tmp_path, caplog):
    """A draft server whose target is gone: the request gets 503 and the draft logs it."""
    tokenizer = build_tokenizer()
    settings = draft_settings(draft_args(tmp_path, "--port", "0", "--rpc-timeout-s", "0.5", "--served-model-name", "tiny"))
    server = draft_server.DraftServer(settings, draft(unrelated_model()), tokenizer, RemoteTarget(settings.target, timeout_s=0.5), 128)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        with caplog.at_level(logging.WARNING, logger="distributed.draft_server"):
            connection.request("POST", "/v1/completions", body=json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 4,
                                                                            "stream": True}))
            response = connection.getresponse()
            response.read()
    finally:
        server.shutdown()
    logged = [r.getMessage() for r in caplog.records]
    assert response.status == 503 and any(SIGNATURES["request-failed"].matches(m) and SIGNATURES["target-failed"].matches(m)
                                          for m in logged), logged


def test_a_session_a_restarted_target_lost():
    with pytest.raises(UnknownSession) as lost:
        target().verify("gone", 3, [1], [2, 3], None, Sampling(0.0, 1.0, None))
    assert SIGNATURES["session-lost"].matches(str(lost.value)), lost.value


def test_the_pods_lock_not_installed(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "pip").chmod(0o755)
    result = subprocess.run(["bash", "-c", pod.install_script()], capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 2 and SIGNATURES["lock-not-installed"].matches(result.stderr), result.stderr


def test_a_reworded_message_would_not_match():
    """The matching is strict enough to catch a rewording: the words around the values count."""
    signature = SIGNATURES["gamma-above-speculation-length"]
    printed = signature.format(gamma=5, length=5, most=4)
    assert signature.matches(printed) and not signature.matches(printed.replace("positions per forward", "positions per step"))


def test_failures_are_what_the_servers_print_at_start(tmp_path):
    variant = load_stack("llama3.1-8b-distributed").spec().variant("distributed")
    assert failures(variant, []) == []
    gamma = variant.num_speculative_tokens
    length = speculation_length(replace(variant, speculation_length=gamma))  # compiled for one position too few
    (failure,) = failures(replace(variant, speculation_length=gamma), [])
    printed = refused(lambda: check_pairing(draft_settings(draft_args(tmp_path, "--gamma", str(gamma))), DESCRIPTION,
                                            replace(DESCRIPTION, speculation_length=length)))
    assert failure.setting == "speculation_length" and failure.error == printed
    short = replace(variant, serving=replace(variant.serving, max_model_len=length))
    (failure,) = failures(short, [])
    printed = refused(lambda: target_settings(["--model", str(tmp_path), "--speculation-length", str(length),
                                               "--max-context", str(length)]))
    assert failure.error == printed and str(failure.source) == "distributed/config.py target_settings"


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
