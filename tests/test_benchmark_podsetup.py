"""benchmark.podsetup: LLMPerf verified by git object ids, the tokenizer cached in S3 (moto)."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import types

import boto3
import pytest
from moto import mock_aws

from benchmark import podsetup
from benchmark.podsetup import SetupError

COMMIT = "f1d6bed47e4501b0e371082b41601b59ab55269f"


def test_the_checked_in_manifest_is_the_commits_tree():
    manifest = podsetup.read_manifest(COMMIT)
    # `git cat-file -p f1d6bed` in a mirror of ray-project/llmperf: "tree b3224bb5...".
    assert manifest.tree == "b3224bb56a3c3ce15a43fa610d240c2317bcb207"
    assert podsetup.tree_id(manifest.entries) == manifest.tree
    assert len(manifest.entries) == 23 and {"token_benchmark_ray.py", "src/llmperf/sonnet.txt"} <= {e.path for e in manifest.entries}
    assert podsetup.llmperf_commits() == (COMMIT,)
    # Git's well-known id of the empty blob; src/llmperf/ray_clients/__init__.py is empty.
    assert podsetup.blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def upstream(tmp_path):
    """A tiny git repository standing in for LLMPerf: its manifest (as `git ls-tree -r` prints
    it) and GitHub-style archive (`git archive` with a <name>-<commit>/ prefix), made by real git."""
    repo = tmp_path / "upstream"
    (repo / "src" / "llmperf").mkdir(parents=True)
    (repo / "token_benchmark_ray.py").write_text("print('stand-in')\n")
    (repo / "src" / "llmperf" / "sonnet.txt").write_text("Shall I compare thee\n")
    (repo / "src" / "llmperf" / "__init__.py").write_text("")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    commit = git(repo, "rev-parse", "HEAD").strip()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    (manifests / f"{commit}.manifest").write_text(f"# test\ntree {tree}\n{git(repo, 'ls-tree', '-r', commit)}")
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar.gz", f"--prefix=llmperf-{commit}/", commit],
                             check=True, capture_output=True).stdout
    return commit, manifests, archive


def retarred(archive: bytes, edit) -> bytes:
    """The archive with `edit(members: dict[name, bytes])` applied."""
    members = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                members[member.name] = tar.extractfile(member).read()
    edit(members)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_an_archive_matching_the_tree_is_installed(tmp_path, upstream):
    commit, manifests, archive = upstream
    urls = []
    dest = podsetup.fetch_llmperf(commit, tmp_path / "llmperf", fetch=lambda url: urls.append(url) or archive,
                                  manifest_dir=manifests)
    assert urls == [f"https://github.com/ray-project/llmperf/archive/{commit}.tar.gz"]
    assert (dest / "src" / "llmperf" / "sonnet.txt").read_text() == "Shall I compare thee\n"


@pytest.mark.parametrize("edit, words", [
    (lambda m: m.update({next(k for k in m if k.endswith("sonnet.txt")): b"patched\n"}), "sonnet.txt differs from blob"),
    (lambda m: m.update({next(iter(m)).split("/")[0] + "/extra.py": b"x"}), "unexpected extra.py"),
    (lambda m: m.pop(next(k for k in m if k.endswith("token_benchmark_ray.py"))), "missing token_benchmark_ray.py"),
])
def test_any_other_content_fails_with_a_clear_message(tmp_path, upstream, edit, words):
    commit, manifests, archive = upstream
    with pytest.raises(SetupError, match=f"not commit {commit}: .*{words}"):
        podsetup.fetch_llmperf(commit, tmp_path / "llmperf", fetch=lambda url: retarred(archive, edit), manifest_dir=manifests)
    assert not (tmp_path / "llmperf").exists()


def test_an_altered_manifest_or_a_failed_download_is_refused(tmp_path, upstream):
    commit, manifests, archive = upstream
    path = manifests / f"{commit}.manifest"
    path.write_text(path.read_text().replace("100755", "100644"))
    with pytest.raises(SetupError, match="does not hash to tree"):
        podsetup.fetch_llmperf(commit, tmp_path / "a", fetch=lambda url: archive, manifest_dir=manifests)

    def offline(url):
        raise OSError("Network is unreachable")

    with pytest.raises(SetupError, match="could not download .*Network is unreachable"):
        podsetup.fetch_llmperf(COMMIT, tmp_path / "b", fetch=offline)
    with pytest.raises(SetupError, match="not a readable tar.gz"):
        podsetup.fetch_llmperf(COMMIT, tmp_path / "c", fetch=lambda url: b"<html>rate limited</html>")


REPO = podsetup.LLMPERF_TOKENIZER
PREFIX = "cache/tokenizers/"


@pytest.fixture
def s3(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-2")
        client.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        yield client


def fake_hub(calls):
    """Writes what huggingface_hub's snapshot_download leaves: refs/main and a snapshot folder
    whose files link into blobs/."""
    def fetch(repo, hf_home):
        calls.append(repo)
        folder = podsetup.repo_cache_dir(hf_home, repo)
        (folder / "blobs").mkdir(parents=True)
        (folder / "blobs" / "abc").write_text('{"model": {"type": "BPE"}}')
        snapshot = folder / "snapshots" / ("1" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "tokenizer.json").symlink_to(folder / "blobs" / "abc")
        (snapshot / "tokenizer_config.json").write_text('{"add_bos_token": true}')
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text("1" * 40)
    return fetch


def test_the_tokenizer_is_downloaded_once_then_restored_from_the_bucket(tmp_path, s3):
    downloads, loads = [], []

    def load(repo, hf_home):
        snapshot = podsetup.repo_cache_dir(hf_home, repo) / "snapshots" / ("1" * 40)
        loads.append(((snapshot / "tokenizer.json").read_text(), (podsetup.repo_cache_dir(hf_home, repo) / "refs" / "main").read_text()))

    first = podsetup.ensure_tokenizer(s3, "models", PREFIX, tmp_path / "hf1", fetch=fake_hub(downloads), load=load)
    assert downloads == [REPO] and "Hugging Face hub" in first and f"s3://models/{PREFIX}{REPO}/" in first
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="models")["Contents"])
    assert keys == [f"{PREFIX}{REPO}/{name}" for name in
                    ("manifest.json", "refs/main", f"snapshots/{'1' * 40}/tokenizer.json", f"snapshots/{'1' * 40}/tokenizer_config.json")]

    def no_hub(repo, hf_home):
        raise AssertionError("the cached copy must be used")

    second = podsetup.ensure_tokenizer(s3, "models", PREFIX, tmp_path / "hf2", fetch=no_hub, load=load)
    assert second == f"{REPO} revision {'1' * 40} from s3://models/{PREFIX}{REPO}/"
    assert loads == [('{"model": {"type": "BPE"}}', "1" * 40)] * 2


def test_a_cache_without_its_manifest_is_downloaded_again_and_a_corrupt_one_refused(tmp_path, s3):
    s3.put_object(Bucket="models", Key=f"{PREFIX}{REPO}/refs/main", Body=b"partial upload")
    downloads = []
    podsetup.ensure_tokenizer(s3, "models", PREFIX, tmp_path / "hf1", fetch=fake_hub(downloads), load=lambda r, h: None)
    assert downloads == [REPO]
    s3.put_object(Bucket="models", Key=f"{PREFIX}{REPO}/snapshots/{'1' * 40}/tokenizer.json", Body=b"tampered")
    with pytest.raises(SetupError, match="does not match its manifest"):
        podsetup.ensure_tokenizer(s3, "models", PREFIX, tmp_path / "hf2", fetch=fake_hub([]), load=lambda r, h: None)


def test_a_hub_failure_fails_setup_with_one_line(tmp_path, s3, capsys):
    def unreachable(repo, hf_home):
        raise ConnectionError("huggingface.co unreachable")

    with pytest.raises(SetupError, match="could not download hf-internal-testing/llama-tokenizer .*unreachable"):
        podsetup.ensure_tokenizer(s3, "models", PREFIX, tmp_path / "hf", fetch=unreachable, load=lambda r, h: None)

    def no_route(url):
        raise OSError("no route")

    # main() reports any failure as one FATAL line and exit code 2.
    code = podsetup.main(["--commit", COMMIT, "--dest", str(tmp_path / "l"), "--hf-home", str(tmp_path / "h"),
                          "--bucket", "models", "--cache-prefix", PREFIX], s3=s3, fetch=no_route)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("FATAL: benchmark setup failed: could not download") and "no route" in err[0]


# --- The manifest: `git ls-tree -r` lines, and git's own tree id -----------------------------------------------------

def test_a_manifest_is_read_as_git_ls_tree_prints_it(tmp_path):
    blob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    (tmp_path / "c1.manifest").write_text(
        "# git ls-tree -r c1\n\ntree b3224bb56a3c3ce15a43fa610d240c2317bcb207\n"
        f"100644 blob {blob}\tsrc/llmperf/a b.py\n"
        # `<mode> SP <type> SP <object> TAB <path>`: the path is everything after the first tab.
        f"100755 blob {blob}\tnotes\twith a tab.sh\n")
    assert podsetup.read_manifest("c1", tmp_path) == podsetup.Manifest("c1", "b3224bb56a3c3ce15a43fa610d240c2317bcb207", (
        podsetup.ManifestEntry("100644", blob, "src/llmperf/a b.py"),
        podsetup.ManifestEntry("100755", blob, "notes\twith a tab.sh")))
    # Without a tree line there is no tree id: no set of files hashes to "", so verify_tree refuses it.
    (tmp_path / "c2.manifest").write_text(f"100644 blob {blob}\tREADME.md\n")
    assert podsetup.read_manifest("c2", tmp_path) == podsetup.Manifest("c2", "", (podsetup.ManifestEntry("100644", blob, "README.md"),))


def test_a_submodule_in_the_manifest_is_refused_by_name(tmp_path):
    # GitHub's archive holds no submodule content, so such a commit can never be verified.
    (tmp_path / "c1.manifest").write_text("tree 0\n160000 commit f1d6bed47e4501b0e371082b41601b59ab55269f\tvendor/tokenizers\n")
    with pytest.raises(SetupError) as raised:
        podsetup.read_manifest("c1", tmp_path)
    assert str(raised.value) == "manifest c1: unexpected commit entry vendor/tokenizers"


def test_tree_ids_are_gits_for_names_that_sort_around_a_folder(tmp_path):
    # Git sorts a folder as if its name ended in "/": "a.b" < "a/" < "a0". Names end in letters
    # that a careless rstrip of the "/" would also eat.
    repo = tmp_path / "r"
    files = {"a.b": "1\n", "a/c": "2\n", "a/b/X": "3\n", "a0": "4\n", "docs/INDEX": "5\n", "MAX": "6\n", "bin/run": "7\n"}
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "bin" / "run").chmod(0o755)
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    (tmp_path / "c.manifest").write_text(git(repo, "ls-tree", "-r", "HEAD"))
    entries = podsetup.read_manifest("c", tmp_path).entries
    assert len(entries) == len(files)
    assert podsetup.tree_id(entries) == git(repo, "rev-parse", "HEAD^{tree}").strip()


# --- verify_tree: what differs, in one line ---------------------------------------------------------------------------

def git_blob(data: bytes) -> str:
    """`git hash-object` of `data`, computed here rather than by the code under test."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def checkout(root, manifest_files: dict[str, bytes], found: dict[str, bytes], links: tuple[str, ...] = ()):
    """A manifest of `manifest_files`, and `root` holding `found` (plus `links`: each a symlink to
    a copy of its manifest content kept outside `root`)."""
    entries = tuple(podsetup.ManifestEntry("100644", git_blob(data), path) for path, data in sorted(manifest_files.items()))
    for path, data in found.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    for path in links:
        outside = root.parent / f"outside-{path}"
        outside.write_bytes(manifest_files[path])
        (root / path).symlink_to(outside)
    return podsetup.Manifest("c0ffee", podsetup.tree_id(entries), entries)


MANIFEST_FILES = {name: f"{name} content\n".encode() for name in ("a.py", "b.py", "c.py", "d.py", "e.py")}


def test_five_problems_are_listed_in_full(tmp_path):
    root = tmp_path / "llmperf"
    manifest = checkout(root, MANIFEST_FILES, {"a.py": MANIFEST_FILES["a.py"], "c.py": b"patched\n", "e.py": MANIFEST_FILES["e.py"],
                                               "x.py": b"", "y.py": b""}, links=("d.py",))
    with pytest.raises(SetupError) as raised:
        podsetup.verify_tree(root, manifest)
    c, d = git_blob(MANIFEST_FILES["c.py"])[:12], git_blob(MANIFEST_FILES["d.py"])[:12]
    # d.py has the right bytes, but as a link: GitHub's archive holds a file there.
    assert str(raised.value) == (f"LLMPerf source is not commit c0ffee: missing b.py; unexpected x.py; unexpected y.py; "
                                 f"c.py differs from blob {c}; d.py differs from blob {d}")


def test_more_than_five_problems_end_with_how_many_more(tmp_path):
    root = tmp_path / "llmperf"
    manifest = checkout(root, MANIFEST_FILES, {"c.py": b"patched\n", "e.py": MANIFEST_FILES["e.py"],
                                               "x.py": b"", "y.py": b""}, links=("d.py",))
    c = git_blob(MANIFEST_FILES["c.py"])[:12]
    with pytest.raises(SetupError) as raised:
        podsetup.verify_tree(root, manifest)
    assert str(raised.value) == (f"LLMPerf source is not commit c0ffee: missing a.py; missing b.py; unexpected x.py; "
                                 f"unexpected y.py; c.py differs from blob {c} (+1 more)")
    (root / "z.py").write_bytes(b"")
    with pytest.raises(SetupError) as raised:
        podsetup.verify_tree(root, manifest)
    assert str(raised.value) == ("LLMPerf source is not commit c0ffee: missing a.py; missing b.py; unexpected x.py; "
                                 "unexpected y.py; unexpected z.py (+2 more)")


# --- fetch_llmperf: only GitHub's tar.gz of one folder, extracted safely, replacing any older copy --------------------

def archive_url(commit):
    return f"https://github.com/ray-project/llmperf/archive/{commit}.tar.gz"


def test_only_a_gzipped_tar_is_read(tmp_path, upstream):
    commit, manifests, archive = upstream
    with pytest.raises(SetupError) as raised:
        podsetup.fetch_llmperf(commit, tmp_path / "llmperf", fetch=lambda url: gzip.decompress(archive), manifest_dir=manifests)
    assert str(raised.value) == f"{archive_url(commit)} is not a readable tar.gz archive: not a gzip file"


def test_a_link_out_of_the_tree_is_refused_before_anything_is_checked(tmp_path, upstream):
    commit, manifests, archive = upstream

    def with_link(url):
        out = io.BytesIO()
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar, tarfile.open(fileobj=out, mode="w:gz") as copy:
            for member in tar.getmembers():
                copy.addfile(member, tar.extractfile(member) if member.isfile() else None)
            link = tarfile.TarInfo(f"llmperf-{commit}/src/llmperf/passwd")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            copy.addfile(link)
        return out.getvalue()

    with pytest.raises(SetupError, match=rf"^{archive_url(commit)} is not a readable tar.gz archive: "
                                         rf"'llmperf-{commit}/src/llmperf/passwd' is a link to an absolute path$"):
        podsetup.fetch_llmperf(commit, tmp_path / "llmperf", fetch=with_link, manifest_dir=manifests)


def test_an_archive_must_hold_one_folder(tmp_path, upstream):
    commit, manifests, _ = upstream
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("llmperf.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SetupError) as raised:
        podsetup.fetch_llmperf(commit, tmp_path / "llmperf", fetch=lambda url: out.getvalue(), manifest_dir=manifests)
    assert str(raised.value) == f"{archive_url(commit)} should hold one top-level folder, found ['llmperf.txt']"


def test_a_new_install_replaces_an_old_one(tmp_path, upstream):
    commit, manifests, archive = upstream
    dest = tmp_path / "llmperf"
    (dest / "src").mkdir(parents=True)
    (dest / "src" / "stale.py").write_text("from an older commit\n")
    podsetup.fetch_llmperf(commit, dest, fetch=lambda url: archive, manifest_dir=manifests)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "run.sh", "src/llmperf/__init__.py", "src/llmperf/sonnet.txt", "token_benchmark_ray.py"]


def test_download_reads_the_whole_body_with_a_two_minute_limit(monkeypatch):
    import http.server
    import threading
    import urllib.request

    body = b"\x1f\x8b" + bytes(range(256)) * 64

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    opened, real = [], urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: opened.append((url, kw)) or real(url, **kw))
    url = f"http://127.0.0.1:{server.server_address[1]}/ray-project/llmperf/archive/c.tar.gz"
    try:
        assert podsetup.download(url) == body
    finally:
        server.shutdown()
        server.server_close()
    assert opened == [(url, {"timeout": 120})]


# --- The tokenizer: huggingface_hub's cache layout, the bucket's copy, the offline load ------------------------------

def test_the_hub_cache_folder_is_huggingface_hubs():
    assert podsetup.repo_cache_dir(podsetup.Path("/opt/hf"), REPO) == podsetup.Path(
        "/opt/hf/hub/models--hf-internal-testing--llama-tokenizer")


REVISION = "1" * 40


def hub_files():
    """What huggingface_hub 0.27 leaves for the tokenizer: refs/main, and the snapshot's files."""
    return {"refs/main": REVISION.encode(), f"snapshots/{REVISION}/tokenizer.json": b'{"model": {"type": "BPE"}}',
            f"snapshots/{REVISION}/tokenizer_config.json": b'{"add_bos_token": true}'}


@pytest.fixture
def huggingface_hub(monkeypatch):
    """Stands in for huggingface_hub 0.27's snapshot_download (requirements-pod.lock): it fills
    <cache_dir>/models--<org>--<name>, cache_dir defaulting to $HF_HOME/hub, content in blobs/
    and the snapshot's files linking there. Returns the calls."""
    calls = []

    def snapshot_download(repo_id, *, repo_type=None, revision=None, cache_dir=None, **options):
        calls.append({"repo_id": repo_id, "cache_dir": cache_dir})
        cache = podsetup.Path(cache_dir if cache_dir is not None else podsetup.Path(os.environ["HF_HOME"]) / "hub")
        folder = cache / ("models--" + repo_id.replace("/", "--"))
        for relative, data in hub_files().items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if relative.startswith("snapshots/"):
                blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
                blob.parent.mkdir(parents=True, exist_ok=True)
                blob.write_bytes(data)
                target.symlink_to(podsetup.os.path.relpath(blob, target.parent))
            else:
                target.write_bytes(data)
        return str(folder / "snapshots" / REVISION)

    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = snapshot_download
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    return calls


def test_hub_download_fills_the_cache_under_hf_home(tmp_path, monkeypatch, huggingface_hub):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))  # the pod's environment does not decide
    podsetup.hub_download(REPO, tmp_path / "hf")
    assert huggingface_hub == [{"repo_id": REPO, "cache_dir": tmp_path / "hf" / "hub"}]
    folder = tmp_path / "hf" / "hub" / "models--hf-internal-testing--llama-tokenizer"
    assert {p: data for p, data in hub_files().items()} == {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and "blobs" not in p.parts}


class MemoryBucket:
    """S3 as the cache code uses it: objects kept in the order they were put; ListObjectsV2 gives
    keys in order, at most 1000 a page (MaxKeys' default), and no Contents when none match."""

    def __init__(self, objects: dict[str, bytes] | None = None):
        self.objects = dict(objects or {})

    def list_objects_v2(self, Bucket, Prefix=""):
        keys = sorted(k for k in self.objects if k.startswith(Prefix))
        return {"Contents": [{"Key": k} for k in keys[:1000]], "IsTruncated": len(keys) > 1000} if keys else {}

    def get_object(self, Bucket, Key):
        return {"Body": io.BytesIO(self.objects[Key])}

    def put_object(self, Bucket, Key, Body):
        self.objects.pop(Key, None)
        self.objects[Key] = Body


def test_the_bucket_copy_has_a_manifest_of_sha256_sums_written_last(tmp_path, huggingface_hub):
    bucket = MemoryBucket()
    source = podsetup.ensure_tokenizer(bucket, "models", PREFIX, tmp_path / "hf", load=lambda r, h: None)
    assert source == f"{REPO} revision {REVISION} from the Hugging Face hub (now cached at s3://models/{PREFIX}{REPO}/)"
    assert huggingface_hub == [{"repo_id": REPO, "cache_dir": tmp_path / "hf" / "hub"}]
    sums = {relative: hashlib.sha256(data).hexdigest() for relative, data in hub_files().items()}
    assert list(bucket.objects) == [f"{PREFIX}{REPO}/{relative}" for relative in sums] + [f"{PREFIX}{REPO}/manifest.json"]
    assert all(bucket.objects[f"{PREFIX}{REPO}/{relative}"] == data for relative, data in hub_files().items())
    manifest = bucket.objects[f"{PREFIX}{REPO}/manifest.json"].decode()
    assert manifest == "\n".join([
        "{",
        '  "repo": "hf-internal-testing/llama-tokenizer",',
        f'  "revision": "{REVISION}",',
        '  "files": {',
        ",\n".join(f'    "{relative}": "{digest}"' for relative, digest in sums.items()),
        "  }",
        "}"])


def test_a_hub_download_that_leaves_nothing_is_refused(tmp_path):
    with pytest.raises(SetupError) as raised:
        podsetup.ensure_tokenizer(MemoryBucket(), "models", PREFIX, tmp_path / "hf", fetch=lambda repo, hf_home: None, load=lambda r, h: None)
    assert str(raised.value) == (f"the hub download of {REPO} left no files in "
                                 f"{tmp_path / 'hf' / 'hub' / 'models--hf-internal-testing--llama-tokenizer'}")


def test_a_hub_failure_names_the_error_type(tmp_path):
    def unreachable(repo, hf_home):
        raise ConnectionError("huggingface.co unreachable")

    with pytest.raises(SetupError) as raised:
        podsetup.ensure_tokenizer(MemoryBucket(), "models", PREFIX, tmp_path / "hf", fetch=unreachable, load=lambda r, h: None)
    assert str(raised.value) == ("could not download hf-internal-testing/llama-tokenizer from the Hugging Face hub: "
                                 "ConnectionError: huggingface.co unreachable")


def test_the_cache_is_found_in_a_bucket_holding_thousands_of_other_objects(tmp_path):
    prefix = f"{PREFIX}{REPO}/"
    files = hub_files()
    manifest = {"repo": REPO, "revision": REVISION, "files": {r: hashlib.sha256(d).hexdigest() for r, d in files.items()}}
    # Model weights sort before the tokenizer cache: listing the whole bucket would stop among them.
    bucket = MemoryBucket({**{f"cache/models/shard-{i:05}.safetensors": b"" for i in range(1200)},
                          **{prefix + r: d for r, d in files.items()}, prefix + "manifest.json": json.dumps(manifest).encode()})
    repo_dir = tmp_path / "hf" / "hub" / "models--x"
    assert podsetup.restore_tokenizer(bucket, "models", prefix, repo_dir) == manifest
    assert {p.relative_to(repo_dir).as_posix(): p.read_bytes() for p in repo_dir.rglob("*") if p.is_file()} == files


# --- offline_load: a fresh interpreter, the hub cache under HF_HOME, never the network --------------------------------

STANDIN_TRANSFORMERS = '''"""Stands in for transformers 4.47 (requirements-pod.lock) in the child interpreter: from_pretrained
reads huggingface_hub's cache as 0.27 does ($HF_HOME/hub/models--<org>--<name>, refs/main, snapshots/<rev>),
and reaches for the network unless HF_HUB_OFFLINE is true ("1", "ON", "YES", "TRUE")."""
import json, os, pathlib, signal


class LlamaTokenizerFast:
    @classmethod
    def from_pretrained(cls, repo):
        if os.environ.get("STANDIN_KILLED"):
            os.kill(os.getpid(), signal.SIGKILL)  # the kernel's OOM killer: no output at all
        if os.environ.get("HF_HUB_OFFLINE", "").upper() not in {"1", "ON", "YES", "TRUE"}:
            raise RuntimeError("online mode: would reach https://huggingface.co")
        home = pathlib.Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser()
        folder = home / "hub" / ("models--" + repo.replace("/", "--"))
        if not (folder / "refs" / "main").exists():
            raise OSError(f"We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find {repo} in the cached files.")
        json.loads((folder / "snapshots" / (folder / "refs" / "main").read_text() / "tokenizer.json").read_text())
'''


@pytest.fixture
def transformers(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "transformers").mkdir(parents=True)
    (site / "transformers" / "__init__.py").write_text(STANDIN_TRANSFORMERS)
    monkeypatch.setenv("PYTHONPATH", str(site))
    for name in ("HF_HOME", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "STANDIN_KILLED"):
        monkeypatch.delenv(name, raising=False)


def hub_cache(hf_home):
    folder = hf_home / "hub" / "models--hf-internal-testing--llama-tokenizer"
    for relative, data in hub_files().items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
    return hf_home


def test_the_tokenizer_loads_offline_from_hf_home_or_fails_with_the_last_error_line(tmp_path, transformers, monkeypatch):
    podsetup.offline_load(REPO, hub_cache(tmp_path / "hf"))
    with pytest.raises(SetupError) as raised:
        podsetup.offline_load(REPO, tmp_path / "empty")
    assert str(raised.value) == (f"{REPO} does not load offline from {tmp_path / 'empty'}: OSError: We couldn't connect to "
                                 f"'https://huggingface.co' to load the files, and couldn't find {REPO} in the cached files.")
    monkeypatch.setenv("STANDIN_KILLED", "1")
    with pytest.raises(SetupError) as raised:
        podsetup.offline_load(REPO, tmp_path / "hf")
    assert str(raised.value) == f"{REPO} does not load offline from {tmp_path / 'hf'}: (no output)"


# --- main(): the Job's setup step ---------------------------------------------------------------------------------------

class PipeLog:
    """A pod's stdout or stderr: a pipe, so block-buffered. Text reaches the log when the program
    flushes it; a line left in the buffer shows up late (after the other stream's later lines), or
    never if the process is killed."""

    def __init__(self):
        self.raw = io.BytesIO()
        self.stream = io.TextIOWrapper(io.BufferedWriter(self.raw, buffer_size=1 << 16), encoding="utf-8")

    @property
    def delivered(self) -> str:
        return self.raw.getvalue().decode()


@pytest.fixture
def pod(tmp_path, upstream, s3, monkeypatch, transformers, huggingface_hub):
    """main() as the Job runs it, against the stand-in LLMPerf (its manifest in place of the
    checked-in one), moto's S3, and the hub and transformers stand-ins."""
    commit, manifests, archive = upstream
    real = podsetup.fetch_llmperf
    monkeypatch.setattr(podsetup, "fetch_llmperf", lambda c, dest, fetch: real(c, dest, fetch, manifest_dir=manifests))
    stdout, stderr = PipeLog(), PipeLog()

    def run(hf_home="hf", bucket="models", fetch=lambda url: archive, **kwargs):
        # Here, not at setup: pytest installs its own capture when the test body starts.
        monkeypatch.setattr(sys, "stdout", stdout.stream)
        monkeypatch.setattr(sys, "stderr", stderr.stream)
        return podsetup.main(["--commit", commit, "--dest", str(tmp_path / "llmperf"), "--hf-home", str(tmp_path / hf_home),
                              "--bucket", bucket, "--cache-prefix", PREFIX], fetch=fetch, **kwargs)

    installed = f"LLMPerf {commit} verified against its git tree and installed at {tmp_path / 'llmperf'}\n"
    return types.SimpleNamespace(run=run, commit=commit, stdout=stdout, stderr=stderr, hub=huggingface_hub, s3=s3,
                                 installed=installed)


def test_the_first_pod_downloads_the_tokenizer_and_the_next_restores_it_logging_each_step_as_it_ends(tmp_path, pod):
    logged_before_the_bucket = []

    class Bucket:  # moto's S3, noting what had reached the log when the tokenizer step began
        def __getattr__(self, name):
            if name == "list_objects_v2":
                logged_before_the_bucket.append(pod.stdout.delivered)
            return getattr(pod.s3, name)

    assert pod.run(s3=Bucket()) == 0
    assert logged_before_the_bucket == [pod.installed]
    assert pod.stdout.delivered == pod.installed + (
        f"tokenizer: {REPO} revision {REVISION} from the Hugging Face hub (now cached at s3://models/{PREFIX}{REPO}/)\n")
    assert (tmp_path / "llmperf" / "src" / "llmperf" / "sonnet.txt").read_text() == "Shall I compare thee\n"
    assert pod.hub == [{"repo_id": REPO, "cache_dir": tmp_path / "hf" / "hub"}]

    # The next pod: its own S3 client (the pod's AWS environment), a fresh HF_HOME, LLMPerf again.
    assert pod.run(hf_home="hf2") == 0
    assert pod.stdout.delivered.splitlines()[2:] == [
        pod.installed.strip(), f"tokenizer: {REPO} revision {REVISION} from s3://models/{PREFIX}{REPO}/"]
    assert len(pod.hub) == 1 and pod.stderr.delivered == ""
    assert (tmp_path / "hf2" / "hub" / "models--hf-internal-testing--llama-tokenizer" / "refs" / "main").read_text() == REVISION


def test_a_failure_is_one_fatal_line_on_stderr_delivered_before_the_exit(pod):
    assert pod.run(s3=pod.s3, bucket="no-such-bucket") == 2
    assert pod.stdout.delivered == pod.installed
    assert pod.stderr.delivered == ("FATAL: benchmark setup failed: NoSuchBucket: An error occurred (NoSuchBucket) when "
                                    "calling the ListObjectsV2 operation: The specified bucket does not exist\n")

    def no_route(url):
        raise OSError("no route")

    assert pod.run(s3=pod.s3, fetch=no_route) == 2
    assert pod.stderr.delivered.splitlines()[1:] == [
        f"FATAL: benchmark setup failed: could not download {archive_url(pod.commit)}: no route"]
    assert pod.stdout.delivered == pod.installed


def test_every_option_is_required_and_the_help_shows_the_usage_as_written(capsys):
    with pytest.raises(SystemExit) as exited:
        podsetup.main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "error: the following arguments are required: --dest, --hf-home, --bucket, --cache-prefix")
    with pytest.raises(SystemExit) as exited:
        podsetup.main(["--dest", "d", "--hf-home", "h", "--bucket", "b", "--cache-prefix", "c"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("error: one of the arguments --commit --link-installed is required")
    with pytest.raises(SystemExit) as exited:
        podsetup.main(["--help"])
    assert exited.value.code == 0
    # The module's docstring, verbatim: the example command on two lines, as a shell continues it.
    assert ("\n    python -m benchmark.podsetup --commit SHA --dest /opt/llmperf --hf-home /opt/hf \\\n"
            "        --bucket B --cache-prefix cache/tokenizers/\n") in capsys.readouterr().out
