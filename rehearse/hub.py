"""A Hugging Face hub on 127.0.0.1, for the rehearsal's preparation Jobs and for the tests: the two
endpoints modelstore/hub.py calls, answered as the hub answers them (huggingface_hub 0.27.0
hf_api.py model_info with files_metadata, and resolve):

- `GET /api/models/{repo}/revision/{revision}?blobs=true`: {"id", "sha", "siblings": [{"rfilename",
  "size", "blobId", "lfs": {"sha256", "size", "pointerSize"}}]}, for "main", the commit or a tag;
- `GET /{repo}/resolve/{commit}/{path}`: the file, or for a Git LFS file a 302 to a second host,
  its CDN (another server on another port), whose URL carries its own authorisation: the CDN
  refuses (and records) any request that carries the hub token, which must never leave the hub.

Switches for the tests: a repository may require a token, serve one file corrupt (one byte
changed, its listing still right), and counts the requests it answered.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse


def lfs_sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(f"blob {len(content)}\0".encode() + content).hexdigest()


@dataclass
class Repository:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    lfs: tuple[str, ...] = (".safetensors",)
    """Suffixes stored with Git LFS (listed with their sha256); the rest are plain git blobs."""
    tags: tuple[str, ...] = ()
    """Refs besides `main` that point to `commit`."""
    corrupt: str | None = None
    """A path served with one byte changed (what the metadata lists stays right)."""
    token: str | None = None
    requests: list[str] = field(default_factory=list)

    @classmethod
    def from_folder(cls, folder: Path, commit: str | None = None) -> Repository:
        """A folder's files at `commit` (the stack's pinned one), by default a hash of their content."""
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        return cls(files, commit or hashlib.sha1(b"".join(git_blob_id(c).encode() for c in files.values())).hexdigest())

    def sibling(self, path: str, content: bytes) -> dict:
        entry = {"rfilename": path, "size": len(content), "blobId": git_blob_id(content)}
        if path.endswith(self.lfs):
            entry["lfs"] = {"size": len(content), "sha256": lfs_sha256(content), "pointerSize": 134}
        return entry


def _serve(answer: Callable[[str, str | None], tuple[int, bytes, dict[str, str]]]) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 whose GETs `answer(path, authorization)` gives (status, body, headers)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            status, body, headers = answer(unquote(urlparse(self.path).path), self.headers.get("Authorization"))
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server


class LocalHub:
    """The hub and its CDN, two servers on 127.0.0.1; a context manager."""

    def __init__(self, repos: dict[str, Repository]):
        self.repos = repos
        self.cdn_requests: list[str] = []
        self.token_seen_by_cdn: list[str] = []
        """CDN paths requested with an Authorization header: a leaked token."""
        self.servers = [_serve(self._hub), _serve(self._cdn)]
        self.threads = [threading.Thread(target=s.serve_forever, args=(0.1,), daemon=True) for s in self.servers]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.servers[0].server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self.servers[1].server_address[1]}"

    def __enter__(self) -> LocalHub:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def _hub(self, path: str, authorization: str | None) -> tuple[int, bytes, dict[str, str]]:
        status, body = self.answer(path, authorization)
        if status == 302:  # body: where the CDN serves it
            return 302, b"", {"Location": self.cdn_url + body.decode()}
        return status, body, {}

    def _cdn(self, path: str, authorization: str | None) -> tuple[int, bytes, dict[str, str]]:
        """/<repo>/<commit>/<file>, as the hub's redirect names it."""
        self.cdn_requests.append(path)
        if authorization is not None:
            self.token_seen_by_cdn.append(path)
            return 400, b"Only one auth mechanism allowed", {}
        for name, repo in self.repos.items():
            if path.startswith(f"/{name}/{repo.commit}/") and path[len(f"/{name}/{repo.commit}/"):] in repo.files:
                return 200, self._content(repo, path[len(f"/{name}/{repo.commit}/"):]), {}
        return 404, b"NoSuchKey", {}

    @staticmethod
    def _content(repo: Repository, file: str) -> bytes:
        content = repo.files[file]
        return bytes([content[0] ^ 0xFF]) + content[1:] if file == repo.corrupt else content

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
                if revision not in ("main", repo.commit, *repo.tags):
                    return 404, b'{"error": "Revision Not Found"}'
                document = {"id": name, "sha": repo.commit,
                            "siblings": [repo.sibling(p, c) for p, c in sorted(repo.files.items())]}
                return 200, json.dumps(document).encode()
            revision, _, file = path[len(resolve):].partition("/")
            if revision != repo.commit or file not in repo.files:
                return 404, b"Entry not found"
            if file.endswith(repo.lfs):
                return 302, f"/{name}/{repo.commit}/{file}".encode()
            return 200, self._content(repo, file)
        return 404, b"Repository not found"
