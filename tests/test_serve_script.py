"""serve.sh: compile once, publish with plain copies, load thereafter. Runs the real script
with a stand-in `vllm` that writes NxDI-like artifacts and answers /health on a local port."""
import os
import socket
import stat
import subprocess
import textwrap
from pathlib import Path

from components.pairing.serving import SERVE_SCRIPT

FAKE_VLLM = textwrap.dedent("""\
    #!/usr/bin/env python3
    import http.server, os, sys, threading, pathlib
    out = pathlib.Path(os.environ["COMPILE_DIR"])
    log = pathlib.Path(os.environ["CALL_LOG"])
    compiled = (out / "model.pt").exists()
    log.write_text(log.read_text() + ("load" if compiled else "compile") + "\\n" if log.exists() else ("load" if compiled else "compile") + "\\n")
    if not compiled:
        (out / "weights").mkdir(parents=True, exist_ok=True)
        (out / "model.pt").write_text("graph")
        (out / "neuron_config.json").write_text("{}")
        (out / "weights" / "tp0_sharded_checkpoint.safetensors").write_text("w")
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", int(os.environ["VLLM_PORT"])), Health)
    threading.Timer(1.5, server.shutdown).start()
    server.serve_forever()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_script(tmp_path: Path, store: Path, cache: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "vllm"
    fake.write_text(FAKE_VLLM)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ARTIFACT_DIR": str(store / "compiled" / "v1"),
        "COMPILE_DIR": str(cache / "compiled" / "v1"),
        "VLLM_PORT": str(free_port()),
        "HEALTH_POLL_SECONDS": "0.2",
        "CALL_LOG": str(tmp_path / "calls.log"),
    }
    return subprocess.run(["bash", str(SERVE_SCRIPT), "serve", "model"], env=env, capture_output=True, text=True, timeout=60)


def test_first_start_compiles_and_publishes_then_later_starts_load(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    first = run_script(tmp_path, store, cache)
    assert first.returncode == 0, first.stderr
    published = store / "compiled" / "v1"
    assert (published / ".complete").exists()
    assert (published / "weights" / "tp0_sharded_checkpoint.safetensors").read_text() == "w"

    # A new node: empty cache, artifacts come from the store and nothing is compiled.
    second = run_script(tmp_path, store, tmp_path / "fresh-node-cache")
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "fresh-node-cache" / "compiled" / "v1" / "model.pt").read_text() == "graph"
    assert (tmp_path / "calls.log").read_text().split() == ["compile", "load"]
    assert "loading compiled artifacts" in second.stdout


def test_a_half_published_compile_is_redone(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    partial = store / "compiled" / "v1"
    partial.mkdir(parents=True)
    (partial / "model.pt").write_text("truncated")
    result = run_script(tmp_path, store, cache)
    assert result.returncode == 0, result.stderr
    assert (partial / "model.pt").read_text() == "graph" and (partial / ".complete").exists()
    assert (tmp_path / "calls.log").read_text().split() == ["compile"]
