"""Read a model repository from the Hugging Face hub at one commit, and verify every file.

The hub's own API, as its client uses it (huggingface_hub 0.27.0):
- `GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true` answers the commit the revision
  points to ("sha") and every file ("siblings"), each with its size, its git blob id ("blobId") and,
  for files stored with Git LFS, the LFS object's sha256 ("lfs": {"sha256", "size"})
  (hf_api.py model_info L2520-2535, RepoSibling built at L830-841);
- `GET {endpoint}/{repo}/resolve/{revision}/{path}` serves a file (constants.py L68,
  HUGGINGFACE_CO_URL_TEMPLATE), redirecting large ones to a CDN.
A gated repository needs `Authorization: Bearer <token>`, sent to the hub only: a redirect to
another origin (the CDN that serves LFS files, through a URL that carries its own authorisation)
is followed without it, as huggingface_hub does (it downloads through requests, whose
Session.rebuild_auth drops Authorization when a redirect changes the host, the port or the scheme;
urllib's own redirect handler would copy it onto the CDN request).

Every downloaded file is checked against that metadata at the resolved commit: an LFS file's
sha256, a small file's git blob id (sha1 of "blob <size>\\0" + content). A file that does not match
stops the preparation: nothing unverified reaches the store.
"""
from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK = 8 * 1024 * 1024
WANTED_SUFFIXES = (".safetensors", ".json", ".model", ".txt", ".tiktoken", ".jinja")
"""What the engines load: weights, configs, tokenizer files. Everything else is left out: Meta's
`original/` consolidated checkpoints (as large again as the safetensors), READMEs, licences, images."""
ATTEMPTS = 3


class HubError(RuntimeError):
    """The hub refused, or a file did not verify; the message says which file and why."""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    blob_id: str
    sha256: str | None
    """The LFS object's sha256; None for a file stored in git itself."""


@dataclass(frozen=True)
class Revision:
    commit: str
    files: tuple[RemoteFile, ...]


def wanted(files: tuple[RemoteFile, ...]) -> tuple[RemoteFile, ...]:
    """The files an engine loads: at the repository's root, with a weights, config or tokenizer
    suffix. A repository with no safetensors is refused (the engines here load no other format)."""
    chosen = tuple(f for f in files if "/" not in f.path and f.path.endswith(WANTED_SUFFIXES))
    if not any(f.path.endswith(".safetensors") for f in chosen):
        raise HubError("the repository has no .safetensors weights at its root")
    return chosen


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parsed = urllib.parse.urlsplit(url)
    return parsed.scheme, parsed.hostname, parsed.port


class TokenStaysHome(urllib.request.HTTPRedirectHandler):
    """Follow redirects as urllib does, but never carry Authorization to another origin."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        follow = super().redirect_request(req, fp, code, msg, headers, newurl)
        if follow is not None and _origin(newurl) != _origin(req.full_url):
            follow.remove_header("Authorization")
        return follow


open_url_keeping_the_token_home = urllib.request.build_opener(TokenStaysHome).open


class Hub:
    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, token: str | None = None,
                 open_url: Callable[..., object] = open_url_keeping_the_token_home, sleep: Callable[[float], None] = time.sleep):
        self.endpoint, self.token, self.open_url, self.sleep = endpoint.rstrip("/"), token, open_url, sleep

    def _request(self, url: str) -> urllib.request.Request:
        headers = {"User-Agent": "sd-trn2-modelstore"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return urllib.request.Request(url, headers=headers)

    def _open(self, url: str, what: str):
        """Open a URL, retrying what may pass (connection errors, 5xx, 429); a 401/403/404 says why."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return self.open_url(self._request(url), timeout=60)
            except urllib.error.HTTPError as error:
                if error.code in (401, 403):
                    raise HubError(f"{what}: HTTP {error.code}; the token cannot read it (a gated model: accept its licence on "
                                   "the hub with the account whose token the stack holds)") from None
                if error.code == 404:
                    raise HubError(f"{what}: HTTP 404, no such repository, revision or file") from None
                if error.code < 500 and error.code != 429 or attempt == ATTEMPTS:
                    raise HubError(f"{what}: HTTP {error.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if attempt == ATTEMPTS:
                    raise HubError(f"{what}: {getattr(error, 'reason', error)}") from None
            self.sleep(2 ** attempt)
        raise AssertionError("unreachable")

    def revision(self, repo: str, revision: str) -> Revision:
        url = f"{self.endpoint}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}?blobs=true"
        with self._open(url, f"{repo}@{revision}") as response:
            info = json.load(response)
        files = tuple(RemoteFile(path=s["rfilename"], size=int(s["size"]), blob_id=s["blobId"],
                                 sha256=(s.get("lfs") or {}).get("sha256")) for s in info.get("siblings", []))
        return Revision(commit=info["sha"], files=files)

    def download(self, repo: str, commit: str, remote: RemoteFile, dest: Path, on_bytes: Callable[[int], None]) -> None:
        """Stream one file to `dest`, hashing as it comes; raise HubError unless size and hash match."""
        url = f"{self.endpoint}/{repo}/resolve/{commit}/{urllib.parse.quote(remote.path)}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        content = hashlib.sha256() if remote.sha256 else hashlib.sha1(f"blob {remote.size}\0".encode())
        size = 0
        with self._open(url, f"{repo}@{commit[:12]}/{remote.path}") as response, dest.open("wb") as out:
            while chunk := response.read(CHUNK):
                out.write(chunk)
                content.update(chunk)
                size += len(chunk)
                on_bytes(len(chunk))
        expected = remote.sha256 or remote.blob_id
        if size != remote.size or content.hexdigest() != expected:
            dest.unlink()
            kind = "sha256" if remote.sha256 else "git blob id"
            raise HubError(f"{remote.path} does not verify: {size} bytes with {kind} {content.hexdigest()}, the hub lists "
                           f"{remote.size} bytes with {expected} at {commit}")
