"""The S3 operations the store's writers use, through the S3 API (never the Mountpoint mount, which
cannot rename and whose writes are not conditional): parallel uploads and server-side copies with
sha256 manifests, and the conditional write that lets exactly one writer commit.

A conditional PutObject (`If-None-Match: *`) succeeds only when no object has the key; otherwise S3
answers 412 Precondition Failed (or 409 ConditionalRequestConflict while another conditional write
to the key is in flight), and the caller knows another writer got there first (S3 User Guide,
"Add preconditions to S3 operations with conditional requests"; moto answers 412 as well).
"""
from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from .progress import Progress

LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
READ_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def put_if_absent(client: Any, bucket: str, key: str, body: bytes) -> bool:
    """Write `key` only if nothing is there: True if this call wrote it, False if another did."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        return True
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in LOST_RACE:
            return False
        raise


def exists(client: Any, bucket: str, key: str) -> bool:
    """Whether `key` exists, asked by listing it: a HeadObject or GetObject of a missing key answers
    403, not 404, to a caller without s3:ListBucket (S3 API Reference, HeadObject "Permissions"),
    and the pods' s3:ListBucket is scoped by s3:prefix, a condition key only a list request carries."""
    listed = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    return bool(listed) and listed[0]["Key"] == key


def read_json(client: Any, bucket: str, key: str) -> dict[str, Any] | None:
    if not exists(client, bucket, key):
        return None
    return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def put_json(client: Any, bucket: str, key: str, document: dict[str, Any]) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(document, indent=2, sort_keys=True).encode(),
                      ContentType="application/json")


def upload_tree(client: Any, bucket: str, prefix: str, root: Path, progress: Progress, parallel: int = 8,
                hashes: dict[str, str] | None = None, skip: frozenset[str] = frozenset()) -> list[Entry]:
    """Upload every file under `root` (but the relative paths in `skip`) to `prefix` + its relative
    path, `parallel` at a time (each large file itself in parallel parts), hashing what is not
    already known. Returns the manifest."""
    known = hashes or {}

    def one(path: Path) -> Entry:
        relative = path.relative_to(root).as_posix()
        return upload_file(client, bucket, prefix, relative, path, progress, known.get(relative))

    chosen = [p for p in files_under(root) if p.relative_to(root).as_posix() not in skip]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return sorted(pool.map(one, chosen), key=lambda e: e.path)


def upload_file(client: Any, bucket: str, prefix: str, relative: str, path: Path, progress: Progress,
                sha256: str | None = None) -> Entry:
    """Upload one file to `prefix` + `relative` (boto3's transfer manager: a multipart upload of
    8 MiB parts, several at once, above 8 MiB), hashing it unless its sha256 is known."""
    digest = sha256 or sha256_of(path)
    client.upload_file(str(path), bucket, prefix + relative, Callback=progress.add)
    return Entry(relative, path.stat().st_size, digest)


def copy_set(client: Any, bucket: str, entries: list[Entry], source: str, target: str, progress: Progress,
             parallel: int = 8) -> None:
    """Server-side copy of a manifest's files from one prefix to another (no byte crosses the node)."""
    def one(entry: Entry) -> None:
        client.copy({"Bucket": bucket, "Key": source + entry.path}, bucket, target + entry.path)
        progress.add(entry.size)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, entries))


def entries_of(document: dict[str, Any]) -> list[Entry]:
    return [Entry(f["path"], int(f["size"]), f["sha256"]) for f in document["files"]]
