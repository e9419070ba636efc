"""serve.sh: wait for the prepared weights and copy them to the node, load a committed compiled set or
compile, and never write to the store. Runs the real script with a stand-in `vllm` that writes
NxDI-like artifacts and, after a compile, answers /health on a local port until serve.sh has asked;
the store is a directory laid out as the Mountpoint mount shows the bucket (stackconfig/store.py)."""
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from components.pairing.serving import SERVE_SCRIPT, script_files
from modelstore import publish

FAKE_VLLM = textwrap.dedent("""\
    #!/usr/bin/env python3
    import http.server, os, sys, threading, pathlib
    out = pathlib.Path(os.environ["COMPILE_DIR"])
    log = pathlib.Path(os.environ["CALL_LOG"])
    compiled = (out / "model.pt").exists()
    weights = pathlib.Path(sys.argv[2]) / "config.json"
    with log.open("a") as handle:
        handle.write(("load " + (out / "model.pt").read_text() if compiled else "compile") + " weights=" + weights.read_text() + "\\n")
    if not compiled:
        (out / "weights").mkdir(parents=True, exist_ok=True)
        (out / "model.pt").write_text("graph")
        (out / "weights" / "tp0_sharded_checkpoint.safetensors").write_text("w")
    if compiled:
        sys.exit(0)  # a loaded set: serve.sh has exec'd the server and polls no health
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # serve until serve.sh has seen /health, however late it asks
            self.send_response(200); self.end_headers()
            threading.Thread(target=self.server.shutdown).start()
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", int(os.environ["VLLM_PORT"])), Health)
    server.serve_forever()
""")
ARTIFACT = "compiled/qwen-qwen3-32b/v1"
WEIGHTS = "weights/qwen-qwen3-32b/main/hub"
DRAFT = "weights/qwen-qwen3-1-7b/main/hub"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepared(store: Path, prefix: str = WEIGHTS, config: str = "target") -> None:
    files = store / prefix / "files"
    files.mkdir(parents=True, exist_ok=True)
    (files / "config.json").write_text(config)
    (files / "model.safetensors").write_text("weights")
    (store / prefix / ".complete").write_text("{}")


def run_script(tmp_path: Path, store: Path, cache: Path, bin_dir: Path | None = None, draft: bool = False,
               health_poll_seconds: float = 0.1):
    bin_dir = bin_dir or tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "vllm"
    fake.write_text(FAKE_VLLM)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ARTIFACT_DIR": str(store / ARTIFACT),
        "STAGING_DIR": str(store / "staging" / ARTIFACT),
        "COMPILE_DIR": str(cache / ARTIFACT),
        "WEIGHTS_STORE": str(store / WEIGHTS),
        "WEIGHTS_DIR": str(cache / WEIGHTS),
        "VLLM_PORT": str(free_port()),
        "HEALTH_POLL_SECONDS": str(health_poll_seconds),
        "POLL_SECONDS": "0.1",
        "CALL_LOG": str(tmp_path / "calls.log"),
        "SERVER_PROGRAM": "vllm",
    }
    if draft:
        env |= {"DRAFT_WEIGHTS_STORE": str(store / DRAFT), "DRAFT_WEIGHTS_DIR": str(cache / DRAFT)}
    scripts = tmp_path / "scripts"  # the script directory as the pod mounts it (the ConfigMap's files)
    scripts.mkdir(exist_ok=True)
    for name, text in script_files().items():
        (scripts / name).write_text(text)
    return subprocess.run(["bash", str(scripts / SERVE_SCRIPT.name), "serve", str(cache / WEIGHTS)], env=env, capture_output=True, text=True,
                          timeout=60)


def tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_a_first_start_copies_the_weights_compiles_and_writes_nothing_to_the_store(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    before = tree(store)
    result = run_script(tmp_path, store, cache)
    assert result.returncode == 0, result.stderr
    assert tree(store) == before
    assert calls(tmp_path) == ["compile weights=target"]
    assert (cache / ARTIFACT / ".complete").exists() and not (cache / ARTIFACT / ".restored").exists()
    assert (cache / WEIGHTS / "model.safetensors").read_text() == "weights"
    assert "copied 13 bytes from" in result.stdout  # "target" + "weights" and "MiB/s" in result.stdout


def test_a_compile_is_marked_complete_however_late_the_script_polls_health(tmp_path):
    """On a loaded machine serve.sh's poll can come late: the stand-in must stay up until it has been
    asked, as a real server does, instead of stopping on a timer (which made the suite flaky)."""
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow_python = bin_dir / "python3"  # every python3 start takes 0.7 s, as under a loaded machine
    slow_python.write_text(f"#!/bin/sh\nsleep 0.7\nexec {sys.executable} \"$@\"\n")
    slow_python.chmod(0o755)
    result = run_script(tmp_path, store, cache, bin_dir=bin_dir, health_poll_seconds=1.0)
    assert result.returncode == 0, result.stderr
    assert (cache / ARTIFACT / ".complete").exists(), result.stdout
    assert "compiled and serving" in result.stdout


def committed(store: Path, *, in_place: bool) -> None:
    """A set committed by writer pod-a: copied in place (complete.json), or still in staging."""
    staged = store / "staging" / ARTIFACT / "pod-a" / "files"
    staged.mkdir(parents=True)
    (staged / "model.pt").write_text("graph-a")
    (store / ARTIFACT).mkdir(parents=True)
    (store / ARTIFACT / "commit.json").write_text(json.dumps({"set": "pod-a"}))
    if in_place:
        (store / ARTIFACT / "files").mkdir()
        (store / ARTIFACT / "files" / "model.pt").write_text("graph-a in place")
        (store / ARTIFACT / "complete.json").write_text("{}")


def test_a_committed_set_in_place_is_loaded(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    committed(store, in_place=True)
    result = run_script(tmp_path, store, cache)
    assert result.returncode == 0, result.stderr
    assert calls(tmp_path) == ["load graph-a in place weights=target"]
    assert (cache / ARTIFACT / ".restored").exists()


def test_a_commit_whose_copy_is_not_finished_is_loaded_from_its_staging_set(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    committed(store, in_place=False)
    # An uncommitted set beside it is never read.
    (store / "staging" / ARTIFACT / "pod-b" / "files").mkdir(parents=True)
    (store / "staging" / ARTIFACT / "pod-b" / "files" / "model.pt").write_text("graph-b")
    result = run_script(tmp_path, store, cache)
    assert result.returncode == 0, result.stderr
    assert calls(tmp_path) == ["load graph-a weights=target"]


def test_a_commit_naming_an_expired_set_compiles_again(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    (store / ARTIFACT).mkdir(parents=True)
    (store / ARTIFACT / "commit.json").write_text(json.dumps({"set": "gone"}))
    result = run_script(tmp_path, store, cache)
    assert result.returncode == 0, result.stderr
    assert calls(tmp_path) == ["compile weights=target"] and "names set gone, which is gone" in result.stderr


def test_the_server_waits_for_its_models_to_be_prepared(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    timer = threading.Timer(0.5, prepared, args=(store, DRAFT, "draft"))
    timer.start()
    started = time.monotonic()
    result = run_script(tmp_path, store, cache, draft=True)
    timer.join()
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 0.5
    assert "waiting for the model's preparation Job" in result.stdout
    assert (cache / DRAFT / "config.json").read_text() == "draft"


def test_a_node_that_holds_a_complete_set_loads_it_without_copying(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    assert run_script(tmp_path, store, cache).returncode == 0
    second = run_script(tmp_path, store, cache)
    assert second.returncode == 0, second.stderr
    assert calls(tmp_path) == ["compile weights=target", "load graph weights=target"]
    assert "already on this node" in second.stdout and "copied" not in second.stdout


def test_a_failed_removal_stops_the_script_before_the_server_starts(tmp_path):
    """`rm -rf x && mkdir -p x` under set -e goes on after a failed rm; serve.sh's steps do not."""
    store, cache = tmp_path / "store", tmp_path / "node-cache"
    prepared(store)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    failing_rm = bin_dir / "rm"
    failing_rm.write_text("#!/bin/sh\necho 'rm: cannot remove: Device or resource busy' >&2\nexit 1\n")
    failing_rm.chmod(0o755)
    result = run_script(tmp_path, store, cache, bin_dir=bin_dir)
    assert result.returncode != 0 and "cannot remove" in result.stderr
    assert not (tmp_path / "calls.log").exists()


def test_what_a_writer_publishes_is_what_the_next_server_loads(tmp_path, models_bucket):
    """The publisher through the S3 API, the reader through the store as the mount shows it."""
    s3 = models_bucket
    for name in ("a", "b"):
        directory = tmp_path / f"compile-{name}"
        directory.mkdir()
        (directory / "model.pt").write_text(f"graph-{name}")
        (directory / publish.LOCAL_COMPLETE).touch()
        publish.publish_once(s3, "models", ARTIFACT, directory, f"pod-{name}")
    store = tmp_path / "store"
    for item in s3.list_objects_v2(Bucket="models")["Contents"]:
        path = store / item["Key"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3.get_object(Bucket="models", Key=item["Key"])["Body"].read())
    prepared(store)
    result = run_script(tmp_path, store, tmp_path / "node-cache")
    assert result.returncode == 0, result.stderr
    assert calls(tmp_path) == ["load graph-a weights=target"]
