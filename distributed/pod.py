"""What a distributed server's pod is given beside the Neuron image, as benchmark/ and modelstore/
ship theirs: the package's modules and a hash-locked requirements file in a ConfigMap, installed by
an init container into a writable volume (pip --target) and put on PYTHONPATH. The Neuron image
brings torch, transformers, numpy and NxD Inference; the lock brings gRPC and protobuf
(requirements-pod.in says why those versions). The Pulumi component builds the pods from these
facts (components/pairing/distributed_variant.py). Standard library only: the Pulumi program
imports it.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
POD_MODULES = ("__init__.py", "backend.py", "config.py", "cpu.py", "draft_server.py", "metrics.py", "neuron.py", "sampling.py",
               "speculate.py", "target_client.py", "target_server.py", "proto/__init__.py", "proto/verifier_pb2.py",
               "proto/verifier_pb2_grpc.py")
"""Every module the two servers import on the neuron backend (cpu.py: its tokenizer digest)."""
LOCK = "requirements-pod.lock"
CODE_MOUNT = "/opt/distributed-code"
DEPS_MOUNT = "/opt/distributed-deps"
TMP_MOUNT = "/tmp"


def config_map_key(name: str) -> str:
    """ConfigMap keys allow no "/": proto/verifier_pb2.py is proto.verifier_pb2.py."""
    return name.replace("/", ".")


def pod_code() -> dict[str, str]:
    """ConfigMap data: the modules and the lock."""
    return {config_map_key(name): (PACKAGE_DIR / name).read_text() for name in POD_MODULES + (LOCK,)}


def code_items() -> list[dict[str, str]]:
    """Where each key is mounted under CODE_MOUNT: as the package distributed/."""
    return [{"key": config_map_key(name), "path": f"distributed/{name}"} for name in POD_MODULES + (LOCK,)]


def install_script() -> str:
    """Install the lock into DEPS_MOUNT, every hash checked; a failure ends the pod with one FATAL line."""
    return "\n".join([
        "set -euo pipefail",
        f"pip install --quiet --require-hashes --no-deps --target {DEPS_MOUNT} -r {CODE_MOUNT}/distributed/{LOCK}"
        f" || {{ echo 'FATAL: pip could not install distributed/{LOCK}' >&2; exit 2; }}",
    ])


def environment() -> dict[str, str]:
    """The servers' and the installer's: the lock's packages first, then the code."""
    return {"PYTHONPATH": f"{DEPS_MOUNT}:{CODE_MOUNT}", "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_CACHE_DIR": "1"}
