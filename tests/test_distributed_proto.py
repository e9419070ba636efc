"""distributed/proto: the generated modules are checked in, and are what grpcio-tools (pinned in
requirements-distributed.txt) writes from verifier.proto today, byte for byte."""
from __future__ import annotations

import shutil
import subprocess
import sys

from stackconfig.source import PROJECT_DIR

PROTO = "distributed/proto/verifier.proto"
GENERATED = ("distributed/proto/verifier_pb2.py", "distributed/proto/verifier_pb2_grpc.py")


def test_the_generated_grpc_modules_are_current(tmp_path):
    (tmp_path / "distributed" / "proto").mkdir(parents=True)
    shutil.copy(PROJECT_DIR / PROTO, tmp_path / PROTO)
    # The command the .proto's header gives, run from a copy of the tree.
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--grpc_python_out=.", PROTO],
                   cwd=tmp_path, check=True)
    stale = [name for name in GENERATED if (tmp_path / name).read_bytes() != (PROJECT_DIR / name).read_bytes()]
    assert stale == [], f"regenerate with the command in {PROTO}"


def test_the_generated_modules_import_as_a_package():
    """The seed's generated code imported its sibling as a top-level module and needed a hand edit;
    generating from the repository root makes the import package-relative by itself."""
    from distributed.proto import verifier_pb2_grpc
    assert "from distributed.proto import verifier_pb2" in (PROJECT_DIR / GENERATED[1]).read_text()
    assert hasattr(verifier_pb2_grpc, "TargetVerifierStub")
