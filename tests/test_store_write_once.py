"""Write-once, enforced by the bucket: its policy refuses any write that could replace an object under
weights/ and compiled/, and the program's own writers (preparation, publication) never send one.

moto stores a bucket policy but does not evaluate it, so every S3 request the writers make against
moto is recorded and asked of the rendered policy with the IAM evaluator (tests/iam_eval.py), whose
reading of the condition keys is first checked on AWS's own example policies."""
from __future__ import annotations

import json

import pytest

from components.platform.model_store import bucket_policy
from modelstore import objects, prepare, publish
from modelstore.hub import Hub

from .conftest import STANDALONE, recorded
from .fake_hub import FakeHub, FakeRepo
from .iam_eval import ALLOW, EXPLICIT_DENY, IMPLICIT_DENY, decide, s3_request
from .modelstore_helpers import ARTIFACT, BUCKET, compiled

ARN = f"arn:aws:s3:::{BUCKET}"
MiB = 1024 * 1024

# AWS S3 User Guide, "Enforce conditional writes on Amazon S3 buckets", example 1 (only uploads with
# if-none-match) and example 2 (a Deny of creations without if-match), as published.
EXAMPLE_1 = {"Version": "2012-10-17", "Statement": [
    {"Sid": "AllowConditionalPut", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:user/Alice"},
     "Action": "s3:PutObject", "Resource": "arn:aws:s3:::amzn-s3-demo-bucket1/*",
     "Condition": {"Null": {"s3:if-none-match": "false"}}},
    {"Sid": "AllowConditionalPutwithMPUs", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:user/Alice"},
     "Action": "s3:PutObject", "Resource": "arn:aws:s3:::amzn-s3-demo-bucket1/*",
     "Condition": {"Bool": {"s3:ObjectCreationOperation": "false"}}}]}
EXAMPLE_2 = {"Version": "2012-10-17", "Statement": [
    {"Sid": "AllowPutObject", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:user/Alice"},
     "Action": "s3:PutObject", "Resource": "arn:aws:s3:::amzn-s3-demo-bucket1/*"},
    {"Sid": "BlockNonConditionalObjectCreation", "Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::111122223333:user/Alice"},
     "Action": "s3:PutObject", "Resource": "arn:aws:s3:::amzn-s3-demo-bucket1/*",
     "Condition": {"Null": {"s3:if-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}}}]}


def asked(policy: dict, operation: str, key: str, arn: str = ARN, **params) -> str:
    action, resource, context = s3_request(operation, {"Key": key, **params}, arn)
    return decide(policy, action, resource, context)


def test_the_evaluator_reads_aws_examples_as_aws_describes_them():
    demo = "arn:aws:s3:::amzn-s3-demo-bucket1"
    # Example 1: "All PutObject and CompleteMultipartUpload requests ... must include the
    # if-none-match header"; CreateMultipartUpload, UploadPart and UploadPartCopy are allowed.
    assert asked(EXAMPLE_1, "PutObject", "k", demo, IfNoneMatch="*") == ALLOW
    assert asked(EXAMPLE_1, "PutObject", "k", demo) == IMPLICIT_DENY
    assert asked(EXAMPLE_1, "CompleteMultipartUpload", "k", demo, IfNoneMatch="*") == ALLOW
    assert asked(EXAMPLE_1, "CompleteMultipartUpload", "k", demo) == IMPLICIT_DENY
    for exempt in ("CreateMultipartUpload", "UploadPart", "UploadPartCopy"):
        assert asked(EXAMPLE_1, exempt, "k", demo) == ALLOW
    # Example 2: the Deny form, on the other header.
    assert asked(EXAMPLE_2, "PutObject", "k", demo) == EXPLICIT_DENY
    assert asked(EXAMPLE_2, "PutObject", "k", demo, IfNoneMatch="*") == EXPLICIT_DENY
    assert asked(EXAMPLE_2, "UploadPart", "k", demo) == ALLOW


WRITE_ONCE_KEYS = ["weights/org-model/0123/hub/files/model.safetensors", "weights/org-model/0123/hub/manifest.json",
                   "weights/org-model/0123/hub/.complete", f"{ARTIFACT}/commit.json", f"{ARTIFACT}/files/graph.neff",
                   f"{ARTIFACT}/complete.json"]
ORDINARY_KEYS = [f"staging/{ARTIFACT}/pod-a/files/graph.neff", "results/pairing/run-1/run.json",
                 "cache/pairing/tokenizers/tokenizer.json"]


def test_the_bucket_refuses_every_write_that_could_replace_a_write_once_key():
    policy = bucket_policy(ARN)
    for key in WRITE_ONCE_KEYS:
        for replacing in ("PutObject", "CompleteMultipartUpload", "CopyObject"):
            assert asked(policy, replacing, key) == EXPLICIT_DENY, (replacing, key)
        for allowed in (("PutObject", {"IfNoneMatch": "*"}), ("CompleteMultipartUpload", {"IfNoneMatch": "*"}),
                        ("CreateMultipartUpload", {}), ("UploadPart", {}), ("UploadPartCopy", {})):
            assert asked(policy, allowed[0], key, **allowed[1]) != EXPLICIT_DENY, (allowed, key)
    for key in ORDINARY_KEYS:  # results are versioned, staging sets expire: ordinary writes there
        assert asked(policy, "PutObject", key) != EXPLICIT_DENY, key
        assert asked(policy, "CompleteMultipartUpload", key) != EXPLICIT_DENY, key


@pytest.mark.parametrize("stack", [STANDALONE[0], "platform"])
def test_the_platform_bucket_carries_that_policy(stack):
    recording = recorded(stack)
    arn = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
    assert json.loads(recording.one("aws:s3/bucketPolicy:BucketPolicy", "model-store").inputs["policy"]) == bucket_policy(arn)


class Requests:
    """Every S3 API call a boto3 client makes, by operation name with its parameters."""

    def __init__(self, client):
        self.made: list[tuple[str, dict]] = []
        client.meta.events.register("before-parameter-build.s3", self.record)

    def record(self, params, model, **_):
        self.made.append((model.name, dict(params)))

    def operations(self) -> set[str]:
        return {operation for operation, _ in self.made}


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 5 MiB (S3's smallest), so files of a few MiB go through multipart uploads and copies."""
    monkeypatch.setattr(objects, "PART_BYTES", 5 * MiB)
    monkeypatch.setattr(objects, "COPY_PART_BYTES", 5 * MiB)


def prepare_model(client, hub_url, tmp_path):
    argv = ["--model", "org/model", "--revision", "main", "--form", "hub", "--bucket", BUCKET,
            "--prefix", "weights/org-model/main/hub/", "--work-dir", str(tmp_path / "work"), "--parallel", "2",
            "--scratch-bytes", str(64 * MiB)]
    return prepare.main(argv, client=client, hub=Hub(hub_url, None, sleep=lambda s: None))


WEIGHTS = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}',
           "model-00001-of-00002.safetensors": bytes(range(256)) * (48 * 1024),  # 12 MiB: three parts
           "model-00002-of-00002.safetensors": b"B" * 5000}


def test_the_writers_own_requests_all_pass_the_bucket_policy(models_bucket, tmp_path, small_parts):
    requests = Requests(models_bucket)
    with FakeHub({"org/model": FakeRepo(dict(WEIGHTS))}) as hub:
        assert prepare_model(models_bucket, hub.url, tmp_path) == 0
    graph = bytes(range(251)) * (32 * 1024)  # ~7.8 MiB: a multipart upload and a two-part copy
    assert publish.publish_once(models_bucket, BUCKET, ARTIFACT, compiled(tmp_path, "a", graph), "pod-a") \
        == "committed set pod-a is in place"
    assert models_bucket.get_object(Bucket=BUCKET, Key=f"{ARTIFACT}/files/graphs/model.neff")["Body"].read() == graph
    assert {"CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload", "PutObject"} <= requests.operations()
    assert "CopyObject" not in requests.operations()
    policy = bucket_policy(ARN)
    for operation, params in requests.made:
        if operation in ("CreateBucket",):
            continue
        action, resource, context = s3_request(operation, params, ARN)
        assert decide(policy, action, resource, context) != EXPLICIT_DENY, (operation, params.get("Key"))


def test_a_retried_upload_is_done_only_if_the_stored_bytes_are_the_expected_ones(models_bucket, tmp_path, small_parts):
    key = "weights/org-model/main/hub/files/model.safetensors"
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"x" * (6 * MiB))
    digest = objects.sha256_of(path)
    assert objects.upload_once(models_bucket, BUCKET, key, path, digest) is True
    assert objects.upload_once(models_bucket, BUCKET, key, path, digest) is False  # 412, same bytes: done
    other = tmp_path / "other.safetensors"
    other.write_bytes(b"y" * (6 * MiB))
    with pytest.raises(objects.StoreConflict, match="already holds sha256"):
        objects.upload_once(models_bucket, BUCKET, key, other, objects.sha256_of(other))
    assert models_bucket.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"x" * (6 * MiB)


class FreeWhenFirstAsked:
    """objects.exists, but its first answer is False: the key was free when the writer asked, and
    another writer took it before this one's upload completed."""

    def __init__(self, real):
        self.real, self.asked = real, 0

    def __call__(self, *args):
        self.asked += 1
        return False if self.asked == 1 else self.real(*args)


@pytest.mark.parametrize("mine, done", [(b"x" * (6 * MiB), True), (b"y" * (6 * MiB), False)])
def test_a_writer_that_loses_the_race_after_its_upload_checks_what_won(models_bucket, tmp_path, small_parts, monkeypatch,
                                                                        mine, done):
    """The multipart completion meets 412: the upload is aborted, and the write counts as done only
    if the winner's bytes are the ones this writer expects."""
    key = "weights/org-model/main/hub/files/model.safetensors"
    models_bucket.put_object(Bucket=BUCKET, Key=key, Body=b"x" * (6 * MiB))  # the other writer's
    monkeypatch.setattr(objects, "exists", FreeWhenFirstAsked(objects.exists))
    path = tmp_path / "mine.safetensors"
    path.write_bytes(mine)
    if done:
        assert objects.upload_once(models_bucket, BUCKET, key, path, objects.sha256_of(path)) is False
    else:
        with pytest.raises(objects.StoreConflict, match="already holds sha256"):
            objects.upload_once(models_bucket, BUCKET, key, path, objects.sha256_of(path))
    assert not models_bucket.list_multipart_uploads(Bucket=BUCKET).get("Uploads")  # the refused one was aborted
    assert models_bucket.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"x" * (6 * MiB)


def test_a_preparation_meeting_other_bytes_fails_without_a_marker(models_bucket, tmp_path, capsys):
    prefix = "weights/org-model/main/hub/"
    models_bucket.put_object(Bucket=BUCKET, Key=prefix + "files/model-00002-of-00002.safetensors", Body=b"not these")
    with FakeHub({"org/model": FakeRepo(dict(WEIGHTS))}) as hub:
        assert prepare_model(models_bucket, hub.url, tmp_path) == 1
    listed = {o["Key"] for o in models_bucket.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert prefix + ".complete" not in listed and prefix + "manifest.json" not in listed
    assert "already holds sha256" in capsys.readouterr().err


def test_a_preparation_killed_before_its_marker_is_finished_by_its_retry(models_bucket, tmp_path, monkeypatch):
    prefix = "weights/org-model/main/hub/"
    with FakeHub({"org/model": FakeRepo(dict(WEIGHTS))}) as hub:
        monkeypatch.setattr(prepare, "put_if_absent", lambda *a: (_ for _ in ()).throw(OSError("killed")))
        assert prepare_model(models_bucket, hub.url, tmp_path / "first") == 1
        monkeypatch.undo()
        # Every file and the manifest meet 412; the same bytes and the same manifest (but its time) are done.
        assert prepare_model(models_bucket, hub.url, tmp_path / "retry") == 0
    assert json.loads(models_bucket.get_object(Bucket=BUCKET, Key=prefix + ".complete")["Body"].read())["manifest"] == "manifest.json"


def test_two_copiers_of_one_committed_set_agree_and_a_foreign_object_is_refused(models_bucket, tmp_path, small_parts):
    graph = bytes(range(251)) * (32 * 1024)
    staging = f"staging/{ARTIFACT}/pod-a/files/"
    models_bucket.put_object(Bucket=BUCKET, Key=staging + "g.neff", Body=graph)
    entry = objects.Entry("g.neff", len(graph), objects.hashlib.sha256(graph).hexdigest())
    assert objects.copy_once(models_bucket, BUCKET, staging + "g.neff", f"{ARTIFACT}/files/g.neff", entry) is True
    assert objects.copy_once(models_bucket, BUCKET, staging + "g.neff", f"{ARTIFACT}/files/g.neff", entry) is False
    models_bucket.put_object(Bucket=BUCKET, Key=f"{ARTIFACT}/files/h.neff", Body=b"other")
    with pytest.raises(objects.StoreConflict):
        objects.copy_once(models_bucket, BUCKET, staging + "g.neff", f"{ARTIFACT}/files/h.neff", entry)
