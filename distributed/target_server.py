"""The target verification server: gRPC (distributed/proto/verifier.proto), its own process.

    python -m distributed.target_server --model DIR [--backend cpu|neuron] [--port 50051]
        [--speculation-length 5] [--max-context 128] [--max-sessions 4] [--health-port 8000]

It prints one line `listening on HOST:PORT` when it serves. Refusals carry the field at fault as
"key: message" in the status details: INVALID_ARGUMENT for a bad request, FAILED_PRECONDITION for a
session it does not hold (it restarted), RESOURCE_EXHAUSTED when its sessions or RPC slots are full
(gRPC itself answers that beyond --max-concurrent-rpcs). With --health-port it also answers HTTP
GET /health with 200 once the model is loaded and gRPC serves: the pod's probes, and the publisher
and start script that wait for a healthy server before publishing its compiled set
(components/pairing/scripts/serve.sh), ask over HTTP.
"""
from __future__ import annotations

import signal
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc

from .backend import Target, UnknownSession, VerifyError
from .config import ConfigError, TargetSettings, exit_on_error, target_settings
from .proto import verifier_pb2 as pb
from .proto import verifier_pb2_grpc
from .sampling import Sampling
from .target_client import draft_probabilities


class Verifier(verifier_pb2_grpc.TargetVerifierServicer):
    def __init__(self, target: Target):
        self.target = target

    def Describe(self, request, context):
        d = self.target.describe()
        return pb.TargetDescription(model=d.model, tokenizer_sha256=d.tokenizer_sha256, speculation_length=d.speculation_length,
                                    max_context=d.max_context, vocab_size=d.vocab_size)

    def Verify(self, request, context):
        sampling = Sampling(request.sampling.temperature, request.sampling.top_p or 1.0,
                            request.sampling.seed if request.sampling.has_seed else None)
        try:
            probs = draft_probabilities(request.draft_probabilities, len(request.draft_tokens), self.target.describe().vocab_size)
            verdict = self.target.verify(request.session, request.cached_length, list(request.new_tokens),
                                         list(request.draft_tokens), probs, sampling)
        except UnknownSession as error:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        except VerifyError as error:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if error.key == "max_sessions" else grpc.StatusCode.INVALID_ARGUMENT
            context.abort(code, str(error))
        return pb.VerifyReply(accepted=verdict.accepted, next_token=verdict.next_token, cached_length=verdict.cached_length)

    def Release(self, request, context):
        self.target.release(request.session)
        return pb.ReleaseReply()


def build_target(settings: TargetSettings) -> Target:
    if settings.backend == "neuron":
        from .neuron import NeuronTarget  # NxD Inference exists only on a Neuron instance
        return NeuronTarget.compile_or_load(settings)
    from .cpu import CpuTarget
    return CpuTarget.from_directory(settings.model, speculation_length=settings.speculation_length,
                                    max_context=settings.max_context, max_sessions=settings.max_sessions)


def serve(target: Target, settings: TargetSettings) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=settings.max_concurrent_rpcs),
                         maximum_concurrent_rpcs=settings.max_concurrent_rpcs)
    verifier_pb2_grpc.add_TargetVerifierServicer_to_server(Verifier(target), server)
    port = server.add_insecure_port(f"{settings.host}:{settings.port}")
    if not port:
        raise SystemExit(f"cannot listen on {settings.host}:{settings.port}")
    server.start()
    return server, port


class _Health(BaseHTTPRequestHandler):
    def do_GET(self):
        status = 200 if self.path == "/health" else 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):  # probes every few seconds: not worth a line each
        pass


def serve_health(host: str, port: int) -> ThreadingHTTPServer:
    """GET /health -> 200, on its own thread; started after the gRPC server, so it answers only
    once the target serves."""
    server = ThreadingHTTPServer((host, port), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    try:
        settings = target_settings(argv)
    except ConfigError as error:
        exit_on_error(error)
    server, port = serve(build_target(settings), settings)
    health = serve_health(settings.host, settings.health_port) if settings.health_port is not None else None
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print(f"listening on {settings.host}:{port}", flush=True)
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    if health is not None:
        health.shutdown()
    server.stop(grace=5).wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
