"""A local Hugging Face hub for the preparation Jobs: the two endpoints modelstore/hub.py calls,
answered as the hub answers them, serving the rehearsal's stand-in models under the stack's model
ids. Like the hub, it redirects a large (LFS) file's download to a second host (its CDN), which the
client must follow.

- `GET /api/models/{repo}/revision/{revision}?blobs=true`: {"id", "sha", "siblings": [{"rfilename",
  "size", "blobId", "lfs": {"sha256", "size"}}]} (huggingface_hub 0.27.0 hf_api.py model_info);
- `GET /{repo}/resolve/{revision}/{path}`: the file, or for an LFS file a 302 to the CDN host.
A revision is a commit id or "main" (which resolves to the folder's own content hash).
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

LFS_SUFFIXES = (".safetensors",)


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(f"blob {len(content)}\0".encode() + content).hexdigest()


class Repository:
    def __init__(self, folder: Path):
        self.files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        self.main = hashlib.sha1(b"".join(git_blob_id(c).encode() for c in self.files.values())).hexdigest()

    def sibling(self, path: str) -> dict[str, Any]:
        content = self.files[path]
        entry: dict[str, Any] = {"rfilename": path, "size": len(content), "blobId": git_blob_id(content)}
        if path.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"size": len(content), "sha256": hashlib.sha256(content).hexdigest(), "pointerSize": 134}
        return entry


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class LocalHub:
    """The hub and its CDN, two servers on 127.0.0.1; `repos`: model id -> the folder served for it."""

    def __init__(self, repos: dict[str, Path]):
        self.repos = {name: Repository(folder) for name, folder in repos.items()}
        self.requests: list[str] = []
        self.blobs = {hashlib.sha256(c).hexdigest(): c for r in self.repos.values() for c in r.files.values()}
        self.hub = _Server(("127.0.0.1", 0), self._handler(self.answer_hub))
        self.cdn = _Server(("127.0.0.1", 0), self._handler(self.answer_cdn))
        self.threads = [threading.Thread(target=s.serve_forever, args=(0.1,), daemon=True) for s in (self.hub, self.cdn)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def __enter__(self) -> LocalHub:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    def _handler(self, answer):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append(path)
                status, headers, body = answer(path)
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def answer_hub(self, path: str) -> tuple[int, dict[str, str], bytes]:
        for name, repo in self.repos.items():
            api, resolve = f"/api/models/{name}/revision/", f"/{name}/resolve/"
            if path.startswith(api):
                revision = path[len(api):]
                commit = repo.main if revision == "main" else revision
                document = {"id": name, "sha": commit, "siblings": [repo.sibling(p) for p in repo.files]}
                return 200, {"Content-Type": "application/json"}, json.dumps(document).encode()
            if path.startswith(resolve):
                _, _, file = path[len(resolve):].partition("/")
                if file not in repo.files:
                    return 404, {}, b"Entry not found"
                content = repo.files[file]
                if file.endswith(LFS_SUFFIXES):
                    digest = hashlib.sha256(content).hexdigest()
                    return 302, {"Location": f"{self.cdn_url}/blobs/{quote(digest)}"}, b""
                return 200, {}, content
        return 404, {}, b"Repository not found"

    def answer_cdn(self, path: str) -> tuple[int, dict[str, str], bytes]:
        content = self.blobs.get(path.removeprefix("/blobs/"))
        return (200, {}, content) if content is not None else (404, {}, b"NoSuchKey")
