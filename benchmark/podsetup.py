r"""Prepare the benchmark pod: LLMPerf at a verified commit, and the tokenizer it loads, cached.

    python -m benchmark.podsetup --commit SHA --dest /opt/llmperf --hf-home /opt/hf \
        --bucket B --cache-prefix cache/tokenizers/

Runs after `pip install --require-hashes -r requirements-pod.lock` and before the driver. Any
failure exits non-zero with one line saying what failed, so the Job fails instead of running a
benchmark that cannot work.

LLMPerf comes from GitHub's archive of the full commit (the slim image has no git). An archive's
own sha256 is not guaranteed stable over time, so the check is on git objects instead: every
extracted file must have the git blob id that `git ls-tree -r <commit>` lists (checked-in
manifest, benchmark/llmperf/<commit>.manifest), no file may be missing or extra, and the manifest
must hash to the commit's tree id. Nothing patches LLMPerf (the driver measures through a proxy,
benchmark/proxy.py), so there is no patch to check.

LLMPerf loads `hf-internal-testing/llama-tokenizer` from the Hugging Face hub when it is imported
(ray-project/llmperf@f1d6bed:src/llmperf/utils.py, the tokenizer default argument of
randomly_sample_sonnet_lines_prompt). It is downloaded once, stored under the bucket's cache
prefix with a manifest of sha256 sums written last, and restored from there on every later run;
the driver then runs LLMPerf with HF_HUB_OFFLINE=1.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

MANIFEST_DIR = Path(__file__).resolve().parent / "llmperf"
ARCHIVE_URL = "https://github.com/ray-project/llmperf/archive/{commit}.tar.gz"
LLMPERF_TOKENIZER = "hf-internal-testing/llama-tokenizer"
CACHE_MANIFEST = "manifest.json"


class SetupError(RuntimeError):
    """A setup step failed; the message says which and why."""


@dataclass(frozen=True)
class ManifestEntry:
    mode: str
    blob: str
    path: str


@dataclass(frozen=True)
class Manifest:
    commit: str
    tree: str
    entries: tuple[ManifestEntry, ...]


def llmperf_commits() -> tuple[str, ...]:
    """Commits with a checked-in manifest: the only ones the pod can verify."""
    return tuple(sorted(p.stem for p in MANIFEST_DIR.glob("*.manifest")))


def read_manifest(commit: str, directory: Path = MANIFEST_DIR) -> Manifest:
    tree, entries = "", []
    for line in (directory / f"{commit}.manifest").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("tree "):
            tree = line.split()[1]
            continue
        meta, path = line.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind != "blob":
            raise SetupError(f"manifest {commit}: unexpected {kind} entry {path}")
        entries.append(ManifestEntry(mode, blob, path))
    return Manifest(commit, tree, tuple(entries))


def blob_id(data: bytes) -> str:
    """Git's object id of a file's content: sha1 of "blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_id(entries: tuple[ManifestEntry, ...]) -> str:
    """Git's tree id of a set of (mode, blob, path) entries, computed as git does: each directory
    is a tree object of "<mode> <name>\\0<20-byte id>" records sorted by name (a subtree sorts as
    if its name ended in "/")."""
    files: dict[str, tuple[str, str]] = {}
    subdirs: dict[str, list[ManifestEntry]] = {}
    for entry in entries:
        head, _, rest = entry.path.partition("/")
        if rest:
            subdirs.setdefault(head, []).append(ManifestEntry(entry.mode, entry.blob, rest))
        else:
            files[head] = (entry.mode, entry.blob)
    records = [(name, mode, blob) for name, (mode, blob) in files.items()]
    records += [(name + "/", "40000", tree_id(tuple(sub))) for name, sub in subdirs.items()]
    body = b"".join(f"{mode} {name.rstrip('/')}".encode() + b"\0" + bytes.fromhex(oid)
                    for name, mode, oid in sorted(records))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def verify_tree(root: Path, manifest: Manifest) -> None:
    """Raise SetupError unless `root` holds exactly the manifest's files with their blob ids."""
    if tree_id(manifest.entries) != manifest.tree:
        raise SetupError(f"manifest for {manifest.commit} does not hash to tree {manifest.tree}; it was altered")
    expected = {e.path: e.blob for e in manifest.entries}
    found = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    problems = [f"missing {path}" for path in sorted(set(expected) - set(found))]
    problems += [f"unexpected {path}" for path in sorted(set(found) - set(expected))]
    problems += [f"{path} differs from blob {expected[path][:12]}" for path in sorted(set(found) & set(expected))
                 if found[path].is_symlink() or blob_id(found[path].read_bytes()) != expected[path]]
    if problems:
        raise SetupError(f"LLMPerf source is not commit {manifest.commit}: " + "; ".join(problems[:5])
                         + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""))


def download(url: str, timeout_s: float = 120) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.read()


def fetch_llmperf(commit: str, dest: Path, fetch: Callable[[str], bytes] = download,
                  manifest_dir: Path = MANIFEST_DIR) -> Path:
    """Download LLMPerf's archive of `commit`, verify it against the manifest, move it to `dest`."""
    manifest = read_manifest(commit, manifest_dir)
    url = ARCHIVE_URL.format(commit=commit)
    try:
        archive = fetch(url)
    except OSError as error:
        raise SetupError(f"could not download {url}: {error}") from error
    with tempfile.TemporaryDirectory() as scratch:
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                # The "data" filter refuses absolute paths, links out of the tree and devices.
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as error:
            raise SetupError(f"{url} is not a readable tar.gz archive: {error}") from error
        tops = list(Path(scratch).iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise SetupError(f"{url} should hold one top-level folder, found {sorted(p.name for p in tops)}")
        verify_tree(tops[0], manifest)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.move(str(tops[0]), dest)
    return dest


def repo_cache_dir(hf_home: Path, repo: str) -> Path:
    """Where huggingface_hub keeps a model repository: $HF_HOME/hub/models--<org>--<name>."""
    return hf_home / "hub" / ("models--" + repo.replace("/", "--"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_files(repo_dir: Path) -> dict[str, Path]:
    """refs/ and snapshots/ of a hub cache folder (blobs/ holds the same bytes the snapshot
    links point at; uploading through the links stores regular files)."""
    return {p.relative_to(repo_dir).as_posix(): p for folder in ("refs", "snapshots")
            for p in sorted((repo_dir / folder).rglob("*")) if p.is_file()}


def restore_tokenizer(s3: Any, bucket: str, prefix: str, repo_dir: Path) -> dict[str, Any] | None:
    """Restore the cached tokenizer into `repo_dir`; None if the cache is empty or incomplete."""
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    if not any(o["Key"] == prefix + CACHE_MANIFEST for o in listed):
        return None  # never cached, or an upload died before its manifest: download again
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + CACHE_MANIFEST)["Body"].read())
    for relative, digest in manifest["files"].items():
        target = repo_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket=bucket, Key=prefix + relative)["Body"].read())
        if sha256(target) != digest:
            raise SetupError(f"cached tokenizer file s3://{bucket}/{prefix}{relative} does not match its manifest")
    return manifest


def store_tokenizer(s3: Any, bucket: str, prefix: str, repo: str, repo_dir: Path) -> dict[str, Any]:
    files = cached_files(repo_dir)
    if not files:
        raise SetupError(f"the hub download of {repo} left no files in {repo_dir}")
    manifest = {"repo": repo, "revision": (repo_dir / "refs" / "main").read_text().strip(),
                "files": {relative: sha256(path) for relative, path in files.items()}}
    for relative, path in files.items():
        s3.put_object(Bucket=bucket, Key=prefix + relative, Body=path.read_bytes())
    s3.put_object(Bucket=bucket, Key=prefix + CACHE_MANIFEST, Body=json.dumps(manifest, indent=2).encode())
    return manifest


def hub_download(repo: str, hf_home: Path) -> None:
    """Download a repository into the hub cache; huggingface_hub reads HF_ENDPOINT, and the token
    from the file HF_TOKEN_PATH names (the pod's secret volume), itself, so the token is never on a
    command line, in an environment variable or in a log."""
    from huggingface_hub import snapshot_download

    snapshot_download(repo_id=repo, cache_dir=hf_home / "hub")


def offline_load(repo: str, hf_home: Path) -> None:
    """Load the tokenizer the way LLMPerf's import does, offline, in a fresh interpreter (the hub
    library reads HF_HOME and HF_HUB_OFFLINE when it is imported)."""
    code = f"from transformers import LlamaTokenizerFast; LlamaTokenizerFast.from_pretrained({repo!r})"
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SetupError(f"{repo} does not load offline from {hf_home}: {last}")


def ensure_tokenizer(s3: Any, bucket: str, prefix: str, hf_home: Path, repo: str = LLMPERF_TOKENIZER,
                     fetch: Callable[[str, Path], None] = hub_download,
                     load: Callable[[str, Path], None] = offline_load) -> str:
    """Make `repo` loadable offline from `hf_home`; returns where it came from."""
    repo_prefix = f"{prefix}{repo}/"
    repo_dir = repo_cache_dir(hf_home, repo)
    manifest = restore_tokenizer(s3, bucket, repo_prefix, repo_dir)
    source = f"s3://{bucket}/{repo_prefix}"
    if manifest is None:
        try:
            fetch(repo, hf_home)
        except Exception as error:  # the hub client raises many types; all mean "not downloaded"
            raise SetupError(f"could not download {repo} from the Hugging Face hub: {type(error).__name__}: {error}") from error
        manifest = store_tokenizer(s3, bucket, repo_prefix, repo, repo_dir)
        source = f"the Hugging Face hub (now cached at s3://{bucket}/{repo_prefix})"
    load(repo, hf_home)
    return f"{repo} revision {manifest['revision']} from {source}"


def link_installed(program: Path, dest: Path, hf_home: Path, repo: str = LLMPERF_TOKENIZER) -> None:
    """A generator installed from the lock (inference-perf) as its invocation finds it under `dest`:
    its program in bin/, and the tokenizer's snapshot folder as tokenizer/ (it loads a tokenizer
    from a folder: benchmark/loadgen/inference_perf.py)."""
    snapshots = sorted((repo_cache_dir(hf_home, repo) / "snapshots").iterdir())
    if len(snapshots) != 1 or not program.exists():
        raise SetupError(f"cannot link {program} and one snapshot of {repo} into {dest}: found {program.exists()=}, "
                         f"{len(snapshots)} snapshot(s)")
    (dest / "bin").mkdir(parents=True, exist_ok=True)
    (dest / "bin" / program.name).symlink_to(program)
    (dest / "tokenizer").symlink_to(snapshots[0], target_is_directory=True)


def main(argv: list[str] | None = None, s3: Any = None, fetch: Callable[[str], bytes] = download) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--commit", help="fetch LLMPerf at this commit into --dest, verified")
    source.add_argument("--link-installed", type=Path, metavar="PROGRAM",
                        help="link a generator the lock installed, and the tokenizer, into --dest")
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--hf-home", type=Path, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--cache-prefix", required=True)
    args = parser.parse_args(argv)
    try:
        if args.commit:
            fetch_llmperf(args.commit, args.dest, fetch)
            print(f"LLMPerf {args.commit} verified against its git tree and installed at {args.dest}", flush=True)
        if s3 is None:
            import boto3

            s3 = boto3.client("s3")
        print(f"tokenizer: {ensure_tokenizer(s3, args.bucket, args.cache_prefix, args.hf_home)}", flush=True)
        if args.link_installed:
            link_installed(args.link_installed, args.dest, args.hf_home)
            print(f"{args.link_installed} and the tokenizer linked into {args.dest}", flush=True)
    except SetupError as error:
        print(f"FATAL: benchmark setup failed: {error}", file=sys.stderr, flush=True)
        return 2
    except Exception as error:  # S3 denied, no network, ...: one line, not a traceback to dig through
        print(f"FATAL: benchmark setup failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
