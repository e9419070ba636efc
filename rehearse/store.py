"""The local stand-ins for what the pods reach over the network: S3 and CloudWatch (moto's server on
127.0.0.1), S3 answering 5xx in bursts (a proxy in front of it), the store's Mountpoint volumes (a
read-only view of one prefix, kept in step with the bucket), and a watch on the bucket that puts
every marker, commit and result the pods write on the timeline.
"""
from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from .processes import Timeline

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal", "AWS_SESSION_TOKEN": "rehearsal"}
"""moto accepts any credentials; these stand in for what IRSA or Pod Identity gives a pod."""
WATCHED = ("/.complete", "/manifest.json", "/commit.json", "/complete.json", "/run.json", "/study.json", "/case.json",
           "/published.json")
"""Keys worth a line on the timeline (the markers, commits and records; not every weight or result file)."""


def client(service: str, endpoint: str, region: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"], aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])


def all_objects(s3: Any, bucket: str, prefix: str = "") -> dict[str, str]:
    """key -> ETag under `prefix`."""
    objects: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        objects.update({o["Key"]: o["ETag"] for o in page.get("Contents", [])})
    return objects


class Poller(threading.Thread):
    """Calls `step` every `interval` seconds until stopped; a failed step is retried next time."""

    def __init__(self, name: str, interval: float):
        super().__init__(name=name, daemon=True)
        self.interval, self.stopped = interval, threading.Event()
        self.errors = 0

    def step(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.step()
            except Exception:  # the store may answer 5xx (a fault) or be stopping: try again next time
                self.errors += 1
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()
        self.join()


class StoreView(Poller):
    """A Mountpoint volume: the objects under one prefix as files, read-only to the pods. An object
    appears only whole, once its upload is complete (written aside, then renamed), as Mountpoint
    lists only completed objects; one removed from the bucket disappears."""

    def __init__(self, s3: Any, bucket: str, prefix: str, folder: Path, interval: float = 1.0):
        super().__init__(f"view {prefix}", interval)
        self.s3, self.bucket, self.prefix, self.folder = s3, bucket, prefix, folder
        self.seen: dict[str, str] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def step(self) -> None:
        objects = all_objects(self.s3, self.bucket, self.prefix)
        for key, etag in objects.items():
            if self.seen.get(key) == etag or key.endswith("/"):
                continue
            target = self.folder / key[len(self.prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.rehearsal-partial")
            self.s3.download_file(self.bucket, key, str(partial))
            partial.replace(target)
            self.seen[key] = etag
        for key in set(self.seen) - set(objects):
            (self.folder / key[len(self.prefix):]).unlink(missing_ok=True)
            del self.seen[key]


class BucketWatch(Poller):
    """Every write of a watched key onto the timeline, with the number of the listing that first
    showed it (writes within one poll are not ordered), and how often each key was written."""

    def __init__(self, s3: Any, bucket: str, timeline: Timeline, interval: float = 0.5):
        super().__init__(f"watch {bucket}", interval)
        self.s3, self.bucket, self.timeline = s3, bucket, timeline
        self.seen: dict[str, str] = {}
        self.writes: Counter[str] = Counter()
        self.polls = 0

    def step(self) -> None:
        self.polls += 1
        for key, etag in sorted(all_objects(self.s3, self.bucket).items()):
            if self.seen.get(key) != etag:
                self.seen[key] = etag
                self.writes[key] += 1
                if key.endswith(WATCHED):
                    self.timeline.event("store-write", key, f"s3://{self.bucket}", poll=self.polls)


class FaultyS3(ThreadingHTTPServer):
    """A proxy in front of moto that answers 503 SlowDown to `burst` requests in a row, every
    `every` requests (fault s3-5xx; `every` 0: none), holds for `hold_s` the first request that
    `hold` picks (fault prep-killed-mid-upload: `held` is set while it waits), and forwards the
    rest unchanged."""

    daemon_threads = True

    def __init__(self, upstream: str, every: int = 20, burst: int = 3, hold: Callable[[str, str], bool] | None = None,
                 hold_s: float = 0):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.every, self.burst, self.hold, self.hold_s = every, burst, hold, hold_s
        self.count = self.failed = 0
        self.held = threading.Event()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.thread = threading.Thread(target=self.serve_forever, args=(0.1,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def fails_next(self) -> bool:
        with self.lock:
            self.count += 1
            failing = bool(self.every) and self.count % self.every < self.burst and self.count > self.every
            self.failed += failing
            return failing

    def holds(self, method: str, path: str) -> bool:
        """Whether to hold this request: the first one `hold` picks."""
        with self.lock:
            if self.hold is None or self.held.is_set() or not self.hold(method, path):
                return False
            self.held.set()
            return True

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.'
             b'</Message></Error>')
"""S3's 503 answer (S3 API Reference, "Error responses": SlowDown)."""


class _ProxyHandler(BaseHTTPRequestHandler):
    server: FaultyS3
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self) -> None:
        body = self._body()
        if self.server.holds(self.command, self.path):
            time.sleep(self.server.hold_s)
        if self.server.fails_next():
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(SLOW_DOWN)
            return
        upstream = http.client.HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "content-length")}
        headers["Content-Length"] = str(len(body))
        upstream.request(self.command, self.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    def _answer(self) -> None:
        try:
            self._forward()
        except (BrokenPipeError, ConnectionResetError):  # the client is gone (killed while its request was held)
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer


class HealthWatch(Poller):
    """Each server's /health, as its readiness probe sees it, onto the timeline when it changes."""

    def __init__(self, servers: dict[str, int], timeline: Timeline, interval: float = 1.0):
        super().__init__("health", interval)
        self.servers, self.timeline = servers, timeline
        self.state: dict[str, bool] = {}

    def step(self) -> None:
        for name, port in self.servers.items():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    healthy = response.status == 200
            except OSError:
                healthy = False
            if self.state.get(name, False) != healthy:
                self.timeline.event("health", name, "healthy" if healthy else "not healthy")
            self.state[name] = healthy
