"""A stand-in Hugging Face hub on 127.0.0.1: the two endpoints modelstore/hub.py uses, answering
as the hub does (huggingface_hub 0.27.0's model_info with files_metadata, and resolve), with a
switch to serve one file corrupt, to require a token, and a count of requests."""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def lfs_sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(f"blob {len(content)}\0".encode() + content).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    lfs: tuple[str, ...] = (".safetensors",)
    """Suffixes stored with Git LFS (listed with their sha256); the rest are plain git blobs."""
    corrupt: str | None = None
    """A path served with one byte changed (what the metadata lists stays right)."""
    token: str | None = None
    requests: list[str] = field(default_factory=list)

    def sibling(self, path: str, content: bytes) -> dict:
        entry = {"rfilename": path, "size": len(content), "blobId": git_blob_id(content)}
        if path.endswith(self.lfs):
            entry["lfs"] = {"size": len(content), "sha256": lfs_sha256(content), "pointerSize": 134}
        return entry


class FakeHub:
    def __init__(self, repos: dict[str, FakeRepo]):
        self.repos = repos
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = unquote(urlparse(self.path).path)
                status, body = hub.answer(path, self.headers.get("Authorization"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, authorization: str | None) -> tuple[int, bytes]:
        for name, repo in self.repos.items():
            api = f"/api/models/{name}/revision/"
            resolve = f"/{name}/resolve/"
            if not path.startswith((api, resolve)):
                continue
            repo.requests.append(path)
            if repo.token and authorization != f"Bearer {repo.token}":
                return 401, b'{"error": "Access to model is restricted"}'
            if path.startswith(api):
                revision = path[len(api):]
                if revision not in ("main", repo.commit):
                    return 404, b'{"error": "Revision Not Found"}'
                document = {"id": name, "sha": repo.commit,
                            "siblings": [repo.sibling(p, c) for p, c in sorted(repo.files.items())]}
                return 200, json.dumps(document).encode()
            revision, _, file = path[len(resolve):].partition("/")
            if revision != repo.commit or file not in repo.files:
                return 404, b"Entry not found"
            content = repo.files[file]
            if file == repo.corrupt:
                content = bytes([content[0] ^ 0xFF]) + content[1:]
            return 200, content
        return 404, b"Repository not found"
