"""The target seen from the draft: the Target interface over gRPC, every call with a deadline."""
from __future__ import annotations

import logging

import grpc
import numpy as np
import torch

from .backend import Description, UnknownSession, Verdict, VerifyError
from .proto import verifier_pb2 as pb
from .proto.verifier_pb2_grpc import TargetVerifierStub
from .sampling import Sampling

log = logging.getLogger(__name__)


class TargetFailed(Exception):
    """The target could not answer: unreachable, past the deadline, restarted (the session is
    lost), or full. The request fails; the next one may succeed."""

    def __init__(self, code: str, message: str):
        super().__init__(f"target {code}: {message}")
        self.code = code


def sampling_message(sampling: Sampling) -> pb.Sampling:
    return pb.Sampling(temperature=sampling.temperature, top_p=sampling.top_p, has_seed=sampling.seed is not None,
                       seed=sampling.seed or 0)


def describe(stub: TargetVerifierStub, timeout_s: float, wait: bool = False) -> Description:
    reply = stub.Describe(pb.DescribeRequest(), timeout=timeout_s, wait_for_ready=wait)
    return Description(reply.model, reply.tokenizer_sha256, reply.speculation_length, reply.max_context, reply.vocab_size)


# A restarted target is reconnected to within about a second, instead of gRPC's default backoff
# that grows to 120 s (grpc/grpc doc/connection-backoff.md; channel arguments in
# include/grpc/impl/channel_arg_names.h).
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 1000)]


class RemoteTarget:
    """Calls wait for the channel to be ready (wait_for_ready) but never past their deadline: a
    target that is restarting is waited for up to timeout_s, then the call fails."""

    def __init__(self, address: str, *, timeout_s: float):
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.stub = TargetVerifierStub(self.channel)
        self.timeout_s = timeout_s

    def describe(self, wait: bool = False, timeout_s: float | None = None) -> Description:
        try:
            return describe(self.stub, timeout_s or self.timeout_s, wait)
        except grpc.RpcError as error:
            raise TargetFailed(error.code().name, error.details() or "") from error

    def verify(self, session: str, cached_length: int, new_tokens: list[int], drafts: list[int],
               draft_probs: torch.Tensor | None, sampling: Sampling) -> Verdict:
        request = pb.VerifyRequest(session=session, cached_length=cached_length, new_tokens=new_tokens, draft_tokens=drafts,
                                   sampling=sampling_message(sampling))
        if draft_probs is not None:
            request.draft_probabilities = draft_probs.numpy().astype("<f4").tobytes()
        try:
            reply = self.stub.Verify(request, timeout=self.timeout_s, wait_for_ready=True)
        except grpc.RpcError as error:
            code, details = error.code(), error.details() or ""
            key, _, message = details.partition(": ")
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise VerifyError(key, message) from error
            if code == grpc.StatusCode.FAILED_PRECONDITION:
                raise UnknownSession(key, message) from error
            raise TargetFailed(code.name, details) from error
        return Verdict(reply.accepted, reply.next_token, reply.cached_length)

    def release(self, session: str) -> None:
        """Best effort: a target that is gone has freed the session with itself."""
        try:
            self.stub.Release(pb.ReleaseRequest(session=session), timeout=self.timeout_s)
        except grpc.RpcError as error:
            log.info("release of %s failed: %s", session, error.code().name)

    def close(self) -> None:
        self.channel.close()


def draft_probabilities(message: bytes, gamma: int, vocab_size: int) -> torch.Tensor | None:
    """The draft's distributions as sent (VerifyRequest.draft_probabilities); None when absent."""
    if not message:
        return None
    values = np.frombuffer(message, dtype="<f4")
    if values.size != gamma * vocab_size:
        raise VerifyError("draft_probabilities", f"{values.size} values, expected gamma x vocab = {gamma} x {vocab_size}")
    return torch.from_numpy(values.astype(np.float32).reshape(gamma, vocab_size))
