"""benchmark.podsetup: LLMPerf verified by git object ids, the tokenizer cached in S3 (moto)."""
import io
import subprocess
import tarfile

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
