"""Fixtures: the real program under the recording engine, once per stack, and the environments
the operator tools run in (credentials or none, a PATH of fake CLIs)."""
from __future__ import annotations

import collections
import fcntl
import functools
import logging
import os
import pickle
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from offline.engine import Recording
from offline.stacks import load_stack, run_stack, stack_names
from stackconfig import ConfigError, PlatformSpec
from tests.modelstore_helpers import BUCKET


def _kind(stack: str) -> str:
    """A stack's kind, or "invalid" when its file does not parse: one bad stack file fails its own
    test (tests/test_stacks.py), not the collection of the whole suite."""
    try:
        spec = load_stack(stack).spec()
    except (ConfigError, FileNotFoundError):
        return "invalid"
    if isinstance(spec, PlatformSpec):
        return "platform"
    return "shared" if spec.shared else "standalone"


KINDS = {stack: _kind(stack) for stack in stack_names()}
STANDALONE = sorted(s for s, k in KINDS.items() if k == "standalone")
"""Pairings that are their own platform: one program builds the whole deployment."""
SHARED = sorted(s for s, k in KINDS.items() if k == "shared")
PLATFORMS = sorted(s for s, k in KINDS.items() if k == "platform")
STACKS = STANDALONE


SHARED_PLANS: list[Path] = []
"""Under pytest-xdist, the folder where the workers leave the plans they made (shared_plans)."""


def pytest_collection_modifyitems(items):
    """Under -n, whole files go to the workers in the order collected (pytest.ini: --dist loadfile
    --no-loadscope-reorder), a next one to a worker as it runs out. Files marked `waits` (their tests
    mostly wait on processes or on servers that answer at a set pace) come first, so that the waiting
    overlaps the other worker's work; then the others, most tests first. xdist's own order (most
    tests first, --loadscope-reorder) handed out a one-test file that waits 50 s last, and the run
    ended with one worker idle while it waited. Each file's tests keep their order."""
    tests = collections.Counter(item.path for item in items)
    waits = {item.path for item in items if item.get_closest_marker("waits")}
    items.sort(key=lambda item: (item.path not in waits, -tests[item.path]))


@pytest.fixture(scope="session", autouse=True)
def shared_plans(tmp_path_factory):
    """Every worker's base temporary folder is inside the run's (pytest-xdist's documented way to
    share work between workers); pytest removes it with the run's other folders."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        SHARED_PLANS.append(tmp_path_factory.getbasetemp().parent / "plans")
        SHARED_PLANS[0].mkdir(exist_ok=True)


@functools.lru_cache(maxsize=None)
def recorded(stack: str) -> Recording:
    """The stack's plan, shared by every test of this process, and under pytest-xdist by the
    workers: the first to need a stack plans it and leaves it pickled; the others read it instead
    of planning again (about 1 CPU s a stack). Each process unpickles its own copy."""
    if not SHARED_PLANS:
        return run_stack(load_stack(stack))
    path = SHARED_PLANS[0] / f"{stack}.pickle"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists():
            return pickle.loads(path.read_bytes())
        recording = run_stack(load_stack(stack))
        path.write_bytes(pickle.dumps(recording))
        return recording


@pytest.fixture(params=STACKS)
def stack(request) -> str:
    return request.param


@pytest.fixture
def recording(stack) -> Recording:
    return recorded(stack)


@pytest.fixture
def spec(stack):
    return load_stack(stack).spec()


# Every variable botocore's credential chain reads (botocore/credentials.py, create_credential_resolver:
# environment, assume-role and web identity, container provider), besides the files and IMDS.
AWS_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                            "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN")


@pytest.fixture
def no_aws_credentials(tmp_path, monkeypatch):
    """An environment in which botocore finds no credentials anywhere, IMDS included."""
    for name in AWS_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def aws_credentials(no_aws_credentials, monkeypatch):
    """Fake keys (moto accepts any), and one attempt per call: moto answers what it lacks with an
    error that the standard retry mode would retry twice, with backoff."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A PATH holding only the command-line tools a test writes, so the real ones on this machine
    never answer. Returns a writer: fake_bin(name, python_body) -> path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))

    def write(name: str, body: str) -> Path:
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\nimport json, os, stat, sys\n{textwrap.dedent(body)}")
        path.chmod(0o755)
        return path

    return write


@pytest.fixture(scope="session", autouse=True)
def kubernetes_schemas_read_once():
    """kubernetes-validate reads the kind's schema and its version's _definitions.json (1.5 MB of
    JSON) from its package data on every validate() call (kubernetes_validate/utils.py,
    schema_contents); the files do not change during a run, so each is parsed once per process.
    That parse was most of test_manifests.py's time. The cached documents are only read:
    jsonschema and referencing never write into a schema."""
    import kubernetes_validate.utils

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes_validate.utils, "schema_contents",
                      functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents))
        yield


@pytest.fixture(scope="session", autouse=True)
def botocore_data_read_once():
    """botocore parses its JSON data (endpoints.json, each service's model: EC2's is megabytes)
    once per Loader, and each Session has its own (botocore/loaders.py, instance_cache); the code
    under test makes a Session per command, moto makes its own, so the same files were parsed about
    ten times a test: a third of tests/test_preflight.py's time in a profile (cProfile, json
    raw_decode). Here each file is parsed once per process. botocore already shares what it loads
    between every client of a Session and only reads it; the one merge it makes into a loaded model
    (ExtrasProcessor, deep_merge of a service's sdk-extras) sets the same values again."""
    import botocore.loaders

    parsed = functools.lru_cache(maxsize=None)(botocore.loaders.JSONFileLoader().load_file)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.loaders.JSONFileLoader, "load_file", lambda self, file_path: parsed(file_path))
        yield


@pytest.fixture(scope="session", autouse=True)
def moto_without_default_images():
    """moto's EC2 builds every region's backend anew at each mock_aws start and stop and at each
    reset (moto/core/base_backend.py, reset), and each build loads the region's public AMIs, about
    1,300 images (the ECS-optimized ones the most: moto/ec2/models/amis.py, _load_amis;
    MOTO_EC2_LOAD_DEFAULT_AMIS, read at each build: moto/settings.py). No test lists them (instances are launched from an id moto does not
    check: tests/test_tools.py IMAGE), so they are left out: about 0.2 CPU s per region per test.
    Processes the tests start inherit it (a rehearsal's moto)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        yield


@pytest.fixture(autouse=True)
def no_real_hub(monkeypatch):
    """No test reaches the real Hugging Face hub: HF_ENDPOINT names the discard port (connection
    refused) unless a test points it at a local stand-in."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")


@pytest.fixture(scope="session")
def moto_server():
    """moto in server mode on 127.0.0.1 (a free port), for code that builds its own clients and
    finds AWS through AWS_ENDPOINT_URL. It runs in this process (ThreadedMotoServer), so its
    backends are the in-process ones. Its request log and tracebacks for the operations moto lacks
    are silenced."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def moto_endpoint(moto_server, aws_credentials, monkeypatch):
    """Every AWS client in the test talks to the moto server, which starts the test empty
    (moto's reset API, POST /moto-api/reset)."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    return moto_server


@pytest.fixture
def models_bucket(aws_credentials):
    """moto's S3 in this process, with one bucket, BUCKET (tests/modelstore_helpers.py): a client to it."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
        yield client


@pytest.fixture
def llmperf(tmp_path):
    """An LLMPerf checkout as the driver sees it: src/llmperf/sonnet.txt, which a test case replaces."""
    root = tmp_path / "llmperf"
    (root / "src" / "llmperf").mkdir(parents=True)
    (root / "src" / "llmperf" / "sonnet.txt").write_text("Shall I compare thee\n")
    return root
