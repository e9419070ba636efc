"""The S3 operations the store's writers use, through the S3 API (never the Mountpoint mount, which
cannot rename and whose writes are not conditional): parallel uploads and server-side copies with
sha256 manifests, and the conditional write that lets exactly one writer commit.

A conditional PutObject (`If-None-Match: *`) succeeds only when no object has the key; otherwise S3
answers 412 Precondition Failed (or 409 ConditionalRequestConflict while another conditional write
to the key is in flight), and the caller knows another writer got there first (S3 User Guide,
"Add preconditions to S3 operations with conditional requests"; moto answers 412 as well).

Every object is written once. The bucket refuses a write without `If-None-Match` under the roots
that never change (components/platform/model_store.py write_once_statement), so nothing here uses
boto3's transfer manager, which cannot send the header: a large file is a multipart upload whose
CompleteMultipartUpload carries it (CreateMultipartUpload and UploadPart cannot, and the bucket
policy exempts them), and a server-side copy is a multipart upload of UploadPartCopy parts, because
that policy refuses CopyObject with or without the header (S3 User Guide, "Enforce conditional
writes on Amazon S3 buckets": 403 without, 501 with). A write that meets 412 is done only if the
object already there has the sha256 the writer's manifest expects; anything else is a conflict.
"""
from __future__ import annotations

import hashlib
import json
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from botocore.exceptions import ClientError

from .progress import Progress

LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
READ_CHUNK = 8 * 1024 * 1024
PART_BYTES = 32 * 1024 * 1024
"""A multipart upload's part (at least 5 MiB but the last, at most 10,000 parts: S3 User Guide,
"Amazon S3 multipart upload limits"); each of a file's parts is read into memory in turn."""
COPY_PART_BYTES = 1024 * 1024 * 1024
"""A server-side copy's part: no byte crosses the node, so fewer, larger requests (at most 5 GiB each)."""
MAX_PARTS = 10_000
CHECKSUM = "CRC32"
"""The per-part checksum S3 verifies on upload, as boto3's transfer manager sends it (S3 User Guide,
"Checking object integrity"); the manifest's sha256 is the store's own."""


class StoreConflict(RuntimeError):
    """A key the writer must write once already holds something else: the write is not done."""


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


def lost_race(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in LOST_RACE


def put_if_absent(client: Any, bucket: str, key: str, body: bytes) -> bool:
    """Write `key` only if nothing is there: True if this call wrote it, False if another did."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        return True
    except ClientError as error:
        if lost_race(error):
            return False
        raise


def stored_sha256(client: Any, bucket: str, key: str) -> str:
    """The sha256 of the object at `key`, read back in full (S3's own checksums of a multipart
    object are composite, not the file's sha256)."""
    digest = hashlib.sha256()
    for chunk in client.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(READ_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def already_there(client: Any, bucket: str, key: str, sha256: str) -> bool:
    """True if `key` holds the bytes expected (a retried writer, or another writer of the same bytes),
    False if it is free; StoreConflict if it holds other bytes."""
    if not exists(client, bucket, key):
        return False
    found = stored_sha256(client, bucket, key)
    if found != sha256:
        raise StoreConflict(f"s3://{bucket}/{key} already holds sha256 {found}, not the expected {sha256}")
    return True


def _write_once(client: Any, bucket: str, key: str, sha256: str, write: Callable[[], None]) -> bool:
    """Run the conditional `write` of `key` unless the expected bytes are there already (asked first,
    so a retried writer sends nothing twice): True if it wrote, False if the key was done. A write
    that meets 412 is done only if the object it met is the expected one."""
    if already_there(client, bucket, key, sha256):
        return False
    try:
        write()
        return True
    except ClientError as error:
        if lost_race(error) and already_there(client, bucket, key, sha256):
            return False
        raise


def ranges(size: int, part_bytes: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges of a multipart upload of `size` bytes, at most MAX_PARTS of them."""
    step = max(part_bytes, -(-size // MAX_PARTS))
    return [(start, min(start + step, size) - 1) for start in range(0, size, step)]


def tagging(tags: dict[str, str] | None) -> dict[str, str]:
    """The `Tagging` parameter of a PutObject or CreateMultipartUpload, if there are tags."""
    return {"Tagging": urllib.parse.urlencode(tags)} if tags else {}


def _multipart_once(client: Any, bucket: str, key: str, size: int, part_bytes: int,
                    upload_part: Callable[[str, int, tuple[int, int]], dict[str, Any]], tags: dict[str, str] | None = None) -> None:
    """One multipart upload of `key`, completed only if the key is still free; aborted on failure."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=CHECKSUM, **tagging(tags))["UploadId"]
    try:
        parts = [{"PartNumber": number, **upload_part(upload, number, span)}
                 for number, span in enumerate(ranges(size, part_bytes), start=1)]
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, IfNoneMatch="*",
                                         MultipartUpload={"Parts": parts})
    except BaseException:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        raise


def _part_result(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k == "ETag" or k == f"Checksum{CHECKSUM}"}


def upload_once(client: Any, bucket: str, key: str, path: Path, sha256: str, tags: dict[str, str] | None = None) -> bool:
    """Write the file at `path` to `key` once (with `tags`): True if this call wrote it, False if the
    same bytes were already there; StoreConflict if other bytes are."""
    size = path.stat().st_size

    def part(upload: str, number: int, span: tuple[int, int]) -> dict[str, Any]:
        with path.open("rb") as handle:
            handle.seek(span[0])
            body = handle.read(span[1] - span[0] + 1)
        return _part_result(client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number,
                                               Body=body, ChecksumAlgorithm=CHECKSUM))

    def write() -> None:
        if size <= PART_BYTES:
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), IfNoneMatch="*", **tagging(tags))
        else:
            _multipart_once(client, bucket, key, size, PART_BYTES, part, tags)
    return _write_once(client, bucket, key, sha256, write)


def copy_once(client: Any, bucket: str, source: str, target: str, entry: "Entry") -> bool:
    """Server-side copy of a manifest entry from `source` to `target` once (UploadPartCopy parts,
    completed with If-None-Match): True if this call wrote it, False if the same bytes were there."""
    def part(upload: str, number: int, span: tuple[int, int]) -> dict[str, Any]:
        response = client.upload_part_copy(Bucket=bucket, Key=target, UploadId=upload, PartNumber=number,
                                           CopySource={"Bucket": bucket, "Key": source},
                                           CopySourceRange=f"bytes={span[0]}-{span[1]}")
        return _part_result(response["CopyPartResult"])

    def write() -> None:
        if entry.size == 0:  # UploadPartCopy needs a byte to copy
            client.put_object(Bucket=bucket, Key=target, Body=b"", IfNoneMatch="*")
        else:
            _multipart_once(client, bucket, target, entry.size, COPY_PART_BYTES, part)
    return _write_once(client, bucket, target, entry.sha256, write)


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


def json_bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2, sort_keys=True).encode()


def put_json(client: Any, bucket: str, key: str, document: dict[str, Any], tags: dict[str, str] | None = None) -> None:
    """An ordinary write, for keys outside the write-once roots (a staging set's manifest)."""
    client.put_object(Bucket=bucket, Key=key, Body=json_bytes(document), ContentType="application/json", **tagging(tags))


def tag_objects(client: Any, bucket: str, keys: list[str], tags: dict[str, str], parallel: int = 8) -> None:
    """Replace the tags of every object in `keys` (its current version) with `tags`."""
    tag_set = {"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(lambda key: client.put_object_tagging(Bucket=bucket, Key=key, Tagging=tag_set), keys))


def put_json_once(client: Any, bucket: str, key: str, document: dict[str, Any], volatile: frozenset[str] = frozenset()) -> bool:
    """Write a JSON document once: True if this call wrote it, False if one already there says the
    same but for its `volatile` fields (a retried writer's timestamp); StoreConflict if it differs."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=json_bytes(document), ContentType="application/json",
                          IfNoneMatch="*")
        return True
    except ClientError as error:
        if not lost_race(error):
            raise
    stored = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    if {k: v for k, v in stored.items() if k not in volatile} != {k: v for k, v in document.items() if k not in volatile}:
        raise StoreConflict(f"s3://{bucket}/{key} already holds another document")
    return False


def upload_tree(client: Any, bucket: str, prefix: str, root: Path, progress: Progress, parallel: int = 8,
                hashes: dict[str, str] | None = None, skip: frozenset[str] = frozenset(),
                tags: dict[str, str] | None = None) -> list[Entry]:
    """Upload every file under `root` (but the relative paths in `skip`) to `prefix` + its relative
    path once (upload_once), `parallel` files at a time, hashing what is not already known. Returns
    the manifest."""
    known = hashes or {}

    def one(path: Path) -> Entry:
        relative = path.relative_to(root).as_posix()
        return upload_file(client, bucket, prefix, relative, path, progress, known.get(relative), tags)

    chosen = [p for p in files_under(root) if p.relative_to(root).as_posix() not in skip]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return sorted(pool.map(one, chosen), key=lambda e: e.path)


def upload_file(client: Any, bucket: str, prefix: str, relative: str, path: Path, progress: Progress,
                sha256: str | None = None, tags: dict[str, str] | None = None) -> Entry:
    """Upload one file to `prefix` + `relative` once (upload_once: a conditional put, or a multipart
    upload of PART_BYTES parts completed with If-None-Match), hashing it unless its sha256 is known."""
    entry = Entry(relative, path.stat().st_size, sha256 or sha256_of(path))
    upload_once(client, bucket, prefix + relative, path, entry.sha256, tags)
    progress.add(entry.size)
    return entry


def copy_set(client: Any, bucket: str, entries: list[Entry], source: str, target: str, progress: Progress,
             parallel: int = 8) -> None:
    """Server-side copy of a manifest's files from one prefix to another, each once (copy_once: no
    byte crosses the node)."""
    def one(entry: Entry) -> None:
        copy_once(client, bucket, source + entry.path, target + entry.path, entry)
        progress.add(entry.size)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, entries))


def entries_of(document: dict[str, Any]) -> list[Entry]:
    return [Entry(f["path"], int(f["size"]), f["sha256"]) for f in document["files"]]
