"""modelstore/publish.py against moto's S3, which answers a failed conditional write with 412 as S3
does: two writers and a reader, a writer killed before its commit, a winner killed before its copy,
abandoned staging sets never read. Nothing is ever deleted."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from modelstore import objects, publish
from tests.local_server import LocalServer
from tests.modelstore_helpers import ARTIFACT, BUCKET, compiled


class Client:
    """A boto3 client that logs every call by name and may hold the commits at a barrier."""

    def __init__(self, client, barrier: threading.Barrier | None = None):
        self.client, self.barrier, self.calls = client, barrier, []

    def __getattr__(self, name):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            self.calls.append(name)
            if name == "put_object" and kwargs.get("Key", "").endswith(publish.COMMIT_FILE) and self.barrier:
                self.barrier.wait(timeout=10)
            return method(*args, **kwargs)
        return call


@pytest.fixture
def s3(models_bucket):
    return models_bucket


def body(s3, key: str) -> bytes:
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def keys(s3) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_one_writer_commits_and_its_set_is_copied_in_place(s3, tmp_path):
    client = Client(s3)
    result = publish.publish_once(client, BUCKET, ARTIFACT, compiled(tmp_path, "a", "graph-a"), "pod-a")
    assert result == "committed set pod-a is in place"
    commit = json.loads(body(s3, f"{ARTIFACT}/commit.json"))
    assert commit["set"] == "pod-a" and commit["staging"] == f"staging/{ARTIFACT}/pod-a/"
    assert {f["path"] for f in commit["files"]} == {"graphs/model.neff", "neuron_config.json"}  # no local markers
    assert body(s3, f"{ARTIFACT}/files/graphs/model.neff") == b"graph-a"
    assert json.loads(body(s3, f"{ARTIFACT}/complete.json"))["set"] == "pod-a"
    assert not any(call.startswith("delete") for call in client.calls)


def test_two_writers_race_and_exactly_one_commits(s3, tmp_path):
    barrier = threading.Barrier(2)
    results = {}

    def writer(name):
        results[name] = publish.publish_once(Client(s3, barrier), BUCKET, ARTIFACT, compiled(tmp_path, name, f"graph-{name}"), name)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    winner = json.loads(body(s3, f"{ARTIFACT}/commit.json"))["set"]
    loser = ({"a", "b"} - {winner}).pop()
    assert results[winner] == f"committed set {winner} is in place"
    assert results[loser] == "another writer committed first: serving this compile, leaving the committed set alone"
    # The committed files are the winner's; the loser's set stays in staging, unread, to expire.
    assert body(s3, f"{ARTIFACT}/files/graphs/model.neff") == f"graph-{winner}".encode()
    assert body(s3, f"staging/{ARTIFACT}/{loser}/files/graphs/model.neff") == f"graph-{loser}".encode()
    # Both staging sets expire: the loser's never committed, the winner's is in place.
    assert all(expiring(s3, k) for k in staging_keys(s3, loser) | staging_keys(s3, winner))


def test_a_writer_killed_before_its_commit_leaves_nothing_committed(s3, tmp_path, monkeypatch):
    def killed(*args, **kwargs):
        raise KeyboardInterrupt("SIGKILL")

    monkeypatch.setattr(publish, "put_if_absent", killed)
    with pytest.raises(KeyboardInterrupt):
        publish.publish_once(s3, BUCKET, ARTIFACT, compiled(tmp_path, "a", "graph-a"), "pod-a")
    monkeypatch.undo()
    assert f"staging/{ARTIFACT}/pod-a/manifest.json" in keys(s3)
    assert not {f"{ARTIFACT}/commit.json", f"{ARTIFACT}/complete.json"} & keys(s3)
    # The next writer commits its own set; the abandoned one is never named.
    assert publish.publish_once(s3, BUCKET, ARTIFACT, compiled(tmp_path, "b", "graph-b"), "pod-b") == "committed set pod-b is in place"
    assert body(s3, f"{ARTIFACT}/files/graphs/model.neff") == b"graph-b"


def test_a_winner_killed_before_its_copy_is_finished_by_the_next_server(s3, tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "finish", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt("SIGKILL")))
    with pytest.raises(KeyboardInterrupt):
        publish.publish_once(s3, BUCKET, ARTIFACT, compiled(tmp_path, "a", "graph-a"), "pod-a")
    monkeypatch.undo()
    assert f"{ARTIFACT}/commit.json" in keys(s3) and f"{ARTIFACT}/complete.json" not in keys(s3)
    # A server that restored the committed set (from staging) finishes the copy.
    restored = tmp_path / "restored"
    restored.mkdir()
    (restored / publish.LOCAL_RESTORED).touch()
    assert publish.publish_once(s3, BUCKET, ARTIFACT, restored, "pod-c") == "committed set pod-a is in place"
    assert body(s3, f"{ARTIFACT}/files/graphs/model.neff") == b"graph-a"
    assert publish.publish_once(s3, BUCKET, ARTIFACT, restored, "pod-c") == "set pod-a is committed and in place"


def test_nothing_is_published_before_the_compile_is_complete(s3, tmp_path):
    directory = compiled(tmp_path, "a", "graph-a")
    (directory / publish.LOCAL_COMPLETE).unlink()
    assert publish.publish_once(s3, BUCKET, ARTIFACT, directory, "pod-a") == "the compile directory is not complete yet"
    assert keys(s3) == set()


def test_the_sidecar_waits_for_health_and_retries_a_failed_pass(s3, tmp_path):
    health = iter([False, True, True])
    failures = iter([True])
    real = s3.put_object

    def flaky(**kwargs):
        if next(failures, False):
            raise objects.ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"}}, "PutObject")
        return real(**kwargs)

    client = Client(s3)
    client.client = type("C", (), {"__getattr__": lambda self, n: flaky if n == "put_object" else getattr(s3, n)})()
    args = publish.parse_args(["--bucket", BUCKET, "--artifact", ARTIFACT, "--compile-dir", str(compiled(tmp_path, "a", "g")),
                               "--health", "http://127.0.0.1:1/health", "--writer", "pod-a", "--poll-seconds", "0"])
    sleeps = []
    publish.run(client, args, sleep=sleeps.append, is_healthy=lambda url: next(health), passes=5)
    assert len(sleeps) == 2  # one unhealthy poll, one failed pass
    assert f"{ARTIFACT}/complete.json" in keys(s3)


def expiring(s3, key: str) -> bool:
    """Whether a lifecycle rule the program gives the bucket (model_store.lifecycle_rules) expires the
    current version of `key`, by its filter's prefix and tags."""
    from components.platform.model_store import lifecycle_rules

    tags = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]}
    for rule in lifecycle_rules():
        if rule.get("expiration", {}).get("days") is None:
            continue
        condition = rule["filter"].get("and_", rule["filter"])
        if key.startswith(condition["prefix"]) and all(tags.get(k) == v for k, v in condition.get("tags", {}).items()):
            return True
    return False


def staging_keys(s3, writer: str) -> set[str]:
    return {k for k in keys(s3) if k.startswith(f"staging/{ARTIFACT}/{writer}/")}


def test_a_committed_set_outlives_the_staging_expiry_until_it_is_in_place(s3, tmp_path, monkeypatch):
    """The winner dies after its commit, before its copy: its staging set must not expire, however
    long the next server takes to come; once copied into place it may."""
    monkeypatch.setattr(publish, "finish", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt("SIGKILL")))
    with pytest.raises(KeyboardInterrupt):
        publish.publish_once(s3, BUCKET, ARTIFACT, compiled(tmp_path, "a", "graph-a"), "pod-a")
    monkeypatch.undo()
    committed = staging_keys(s3, "pod-a")
    assert json.loads(body(s3, f"{ARTIFACT}/commit.json"))["staging"] == f"staging/{ARTIFACT}/pod-a/"
    assert len(committed) == 3 and not [k for k in committed if expiring(s3, k)]
    restored = tmp_path / "restored"
    restored.mkdir()
    (restored / publish.LOCAL_RESTORED).touch()
    assert publish.publish_once(s3, BUCKET, ARTIFACT, restored, "pod-c") == "committed set pod-a is in place"
    assert all(expiring(s3, k) for k in committed)
    assert not [k for k in keys(s3) if k.startswith(f"{ARTIFACT}/") and expiring(s3, k)]


class HealthyAtOnce(BaseHTTPRequestHandler):
    """A server that answers /health before serve.sh has marked its compile complete: serve.sh
    polls /health itself (HEALTH_POLL_SECONDS, 30 s in the pod) and only then writes .complete."""

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class HealthServer(LocalServer):
    handler = HealthyAtOnce


def wait_until(condition, seconds: float, what: str, output: list[str]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds} s; the sidecar said:\n" + "".join(output)
        time.sleep(0.1)


def test_the_sidecar_as_the_pod_runs_it_publishes_a_compile_marked_complete_after_health(moto_endpoint, tmp_path):
    """The race between the two containers, as processes: the publisher (python -m modelstore.publish,
    the pod's command line) sees /health first and the complete marker a little later. It must go on
    polling and publish the set once, not idle forever after its first healthy pass."""
    import boto3

    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    directory = compiled(tmp_path, "a", "graph-a")
    (directory / publish.LOCAL_COMPLETE).unlink()
    output: list[str] = []
    with HealthServer() as health:
        sidecar = subprocess.Popen(
            [sys.executable, "-m", "modelstore.publish", "--bucket", BUCKET, "--artifact", ARTIFACT,
             "--compile-dir", str(directory), "--health", f"{health.address}/health", "--writer", "pod-a",
             "--poll-seconds", "0.2"],
            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=lambda: output.extend(sidecar.stdout), daemon=True)
        reader.start()
        try:
            wait_until(lambda: any("not complete yet" in line for line in output), 30, "healthy pass", output)
            (directory / publish.LOCAL_COMPLETE).touch()  # serve.sh's own health poll has answered
            wait_until(lambda: f"{ARTIFACT}/complete.json" in keys(s3) or sidecar.poll() is not None, 20,
                       "published set", output)
            assert sidecar.poll() is None, "the native sidecar exited:\n" + "".join(output)
        finally:
            sidecar.terminate()
            sidecar.wait(timeout=10)
            reader.join(timeout=10)
    assert body(s3, f"{ARTIFACT}/files/graphs/model.neff") == b"graph-a"
    assert sum("committed set pod-a at" in line for line in output) == 1, "".join(output)


def test_the_sidecar_says_why_it_waits_even_when_health_came_late(s3, tmp_path, capsys):
    """The first healthy pass that finds the compile incomplete is logged, whatever passes were
    unhealthy before it (it used to be logged only when the very first pass was healthy)."""
    directory = compiled(tmp_path, "a", "graph-a")
    (directory / publish.LOCAL_COMPLETE).unlink()
    health = iter([False, False, True, True])
    args = publish.parse_args(["--bucket", BUCKET, "--artifact", ARTIFACT, "--compile-dir", str(directory),
                               "--health", "http://127.0.0.1:1/health", "--writer", "pod-a", "--poll-seconds", "0"])
    publish.run(s3, args, sleep=lambda _: None, is_healthy=lambda url: next(health), passes=4)
    assert capsys.readouterr().out.count(publish.NOT_COMPLETE) == 1
    assert keys(s3) == set()
