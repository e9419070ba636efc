"""The two servers' settings, parsed once and validated; bad input exits 2 with one message naming
every bad key (the project's rule for configuration, docs/configuration.md, "What validation refuses").

Some checks need the other side: the draft server asks the target what it serves (Describe) and
refuses a gamma the target's speculation length cannot verify in one forward (gamma + 1 positions;
on Neuron that length is compiled into the graph) or a tokenizer that differs from the target's
(the same token ids would mean different text, and acceptance would compare unrelated tokens).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from .backend import Description

BACKENDS = ("cpu", "neuron")


class ConfigError(Exception):
    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("invalid settings: " + "; ".join(f"{key}: {message}" for key, message in errors.items()))


def exit_on_error(error: ConfigError) -> None:
    print(str(error), file=sys.stderr)
    raise SystemExit(2)


@dataclass(frozen=True)
class TargetSettings:
    model: Path
    backend: str
    host: str
    port: int
    speculation_length: int
    max_context: int
    max_sessions: int
    max_concurrent_rpcs: int
    compiled_dir: Path | None
    tp_degree: int
    health_port: int | None = None


@dataclass(frozen=True)
class DraftSettings:
    model: Path
    backend: str
    target: str
    gamma: int
    host: str
    port: int
    max_concurrency: int
    rpc_timeout_s: float
    target_wait_s: float
    served_model_name: str
    compiled_dir: Path | None
    tp_degree: int


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, required=True, help="a directory from_pretrained reads (model and tokenizer)")
    parser.add_argument("--backend", default="cpu", help=f"one of {', '.join(BACKENDS)} (neuron: not run here)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--compiled-dir", type=Path, help="neuron: where the compiled graphs are saved and loaded")
    parser.add_argument("--tp-degree", type=int, default=1, help="neuron: tensor parallel degree")


def _check_common(args: argparse.Namespace, errors: dict[str, str]) -> None:
    if args.backend not in BACKENDS:
        errors["--backend"] = f"{args.backend!r} is not one of {', '.join(BACKENDS)}"
    if not args.model.is_dir():
        errors["--model"] = f"{args.model} is not a directory"
    if not 0 <= args.port < 65536:
        errors["--port"] = f"{args.port} is not a port"
    if args.backend == "neuron" and args.compiled_dir is None:
        errors["--compiled-dir"] = "the neuron backend needs one"
    if args.tp_degree < 1:
        errors["--tp-degree"] = "at least 1"


def target_settings(argv: list[str] | None = None) -> TargetSettings:
    parser = argparse.ArgumentParser(prog="python -m distributed.target_server", description="the target verification server (gRPC)")
    _common(parser)
    parser.add_argument("--port", type=int, default=50051)
    parser.add_argument("--speculation-length", type=int, default=5,
                        help="positions one verify forward scores, gamma + 1 at most (seed 002: 5 for gamma 4)")
    parser.add_argument("--max-context", type=int, default=128, help="tokens a session may hold (seed 002: 128)")
    parser.add_argument("--max-sessions", type=int, default=4, help="requests whose KV caches the target holds at once")
    parser.add_argument("--max-concurrent-rpcs", type=int, default=8, help="beyond this gRPC answers RESOURCE_EXHAUSTED")
    parser.add_argument("--health-port", type=int, help="also answer HTTP GET /health here once serving (a pod's probes)")
    args = parser.parse_args(argv)
    errors: dict[str, str] = {}
    _check_common(args, errors)
    if args.speculation_length < 2:
        errors["--speculation-length"] = f"{args.speculation_length}: at least 2 (one draft token and the bonus position)"
    if args.max_context <= args.speculation_length:
        errors["--max-context"] = f"{args.max_context}: must exceed --speculation-length"
    for key in ("max_sessions", "max_concurrent_rpcs"):
        if getattr(args, key) < 1:
            errors["--" + key.replace("_", "-")] = "at least 1"
    if args.health_port is not None and (not 0 <= args.health_port < 65536 or args.health_port == args.port):
        errors["--health-port"] = f"{args.health_port} is not a port other than --port"
    if args.backend == "neuron" and args.max_sessions != 1:
        errors["--max-sessions"] = "1 on the neuron backend: its models are compiled for batch 1 (distributed/neuron.py)"
    if errors:
        raise ConfigError(errors)
    return TargetSettings(args.model, args.backend, args.host, args.port, args.speculation_length, args.max_context,
                          args.max_sessions, args.max_concurrent_rpcs, args.compiled_dir, args.tp_degree, args.health_port)


def draft_settings(argv: list[str] | None = None) -> DraftSettings:
    parser = argparse.ArgumentParser(prog="python -m distributed.draft_server",
                                     description="the draft server: OpenAI-compatible endpoint, drafts for a remote target")
    _common(parser)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--target", required=True, help="the target server, host:port")
    parser.add_argument("--gamma", type=int, default=4, help="draft tokens per step (seed 002: 4)")
    parser.add_argument("--max-concurrency", type=int, default=2, help="requests served at once; beyond, HTTP 429")
    parser.add_argument("--rpc-timeout-s", type=float, default=10.0, help="deadline of every call to the target")
    parser.add_argument("--target-wait-s", type=float, default=600.0, help="how long to wait for the target at start")
    parser.add_argument("--served-model-name", help="the model name the endpoint answers to (default: the model directory's name)")
    args = parser.parse_args(argv)
    errors: dict[str, str] = {}
    _check_common(args, errors)
    if args.gamma < 1:
        errors["--gamma"] = f"{args.gamma}: at least 1 draft token per step"
    host, _, port = args.target.rpartition(":")
    if not host or not port.isdigit():
        errors["--target"] = f"{args.target!r} is not host:port"
    if args.max_concurrency < 1:
        errors["--max-concurrency"] = "at least 1"
    elif args.backend == "neuron" and args.max_concurrency != 1:
        errors["--max-concurrency"] = "1 on the neuron backend: its models are compiled for batch 1 (distributed/neuron.py)"
    for key in ("rpc_timeout_s", "target_wait_s"):
        if not getattr(args, key) > 0:
            errors["--" + key.replace("_", "-")] = "must be positive"
    if errors:
        raise ConfigError(errors)
    return DraftSettings(args.model, args.backend, args.target, args.gamma, args.host, args.port, args.max_concurrency,
                         args.rpc_timeout_s, args.target_wait_s, args.served_model_name or args.model.name,
                         args.compiled_dir, args.tp_degree)


def check_pairing(settings: DraftSettings, draft: Description, target: Description) -> None:
    """What the draft refuses once it knows the target, every key at once."""
    errors: dict[str, str] = {}
    if settings.gamma + 1 > target.speculation_length:
        errors["--gamma"] = (f"{settings.gamma}: the target scores {target.speculation_length} positions per forward "
                             f"(its speculation length), so gamma is at most {target.speculation_length - 1}")
    if draft.tokenizer_sha256 != target.tokenizer_sha256:
        errors["--model"] = (f"the draft's tokenizer (vocabulary sha256 {draft.tokenizer_sha256[:12]}) differs from the "
                             f"target's ({target.tokenizer_sha256[:12]}): the same ids would be different tokens")
    elif draft.vocab_size != target.vocab_size:
        errors["--model"] = f"the draft's vocabulary has {draft.vocab_size} entries, the target's {target.vocab_size}"
    if errors:
        raise ConfigError(errors)
