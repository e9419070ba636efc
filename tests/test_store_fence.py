"""The model store, fenced: request by request, what each role of a pairing may do in the (possibly
shared) bucket, asked of the policies the program renders with an IAM evaluator (tests/iam_eval.py).

- a server's publisher puts its own compiled sets and nothing else, and deletes nothing;
- a benchmark writes only its own pairing's results and tokenizer cache;
- preparation Jobs write only the prepared models their pairing needs;
- the CSI driver, which backs every server's mount, reads only what servers load;
- and the bucket keeps every version of a result: no lifecycle rule expires one.
"""
from __future__ import annotations

import pytest

from offline.stacks import load_stack
from stackconfig.model import RESULTS_ROOT

from .conftest import SHARED, STANDALONE, recorded
from .helpers import role_documents
from .iam_eval import allows, decide

REMOVALS = ("s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutLifecycleConfiguration", "s3:PutBucketVersioning")
ANOTHER = "another-pairing-1a2b3c"


def stack_spec(stack: str):
    return load_stack(stack).spec()


def policies(recording) -> dict[str, dict]:
    names = ["benchmark-runner", "model-preparation-role", "server-access-role"]
    if recording.of_type("aws:s3/bucket:Bucket"):
        names.append("model-store-csi")
    return {name: role_documents(recording, name)[1] for name in names}


def bucket_arn(recording) -> str:
    """The bucket's ARN as the pairing's own policies name it (a shared pairing reads it from the platform)."""
    (writes,) = [s for s in role_documents(recording, "benchmark-runner")[1]["Statement"] if s["Sid"] == "WriteBenchmarkResults"]
    return writes["Resource"].split("/", 1)[0]


@pytest.fixture(params=[*STANDALONE, *SHARED])
def fenced(request):
    recording = recorded(request.param)
    return stack_spec(request.param), recording, policies(recording), bucket_arn(recording)


def every_key(spec, arn: str) -> dict[str, str]:
    """One object of every kind the bucket holds, for this pairing and another."""
    variant = spec.variants[0]
    model = variant.prepared_target
    return {
        "own result": f"{arn}/{spec.results_prefix}run-1/run.json",
        "another pairing's result": f"{arn}/{RESULTS_ROOT}{ANOTHER}/run-1/run.json",
        "own tokenizer cache": f"{arn}/{spec.tokenizer_cache_prefix}tokenizer.json",
        "another pairing's tokenizer cache": f"{arn}/cache/{ANOTHER}/tokenizers/tokenizer.json",
        "own compiled set": f"{arn}/{variant.artifact_path}/files/model.pt",
        "own staging set": f"{arn}/staging/{variant.artifact_path}/set-1/files/model.pt",
        "another compiled set": f"{arn}/compiled/another-model/bs1-len1024-tp4-0123456789/files/model.pt",
        "own prepared model": f"{arn}/{model.files_prefix}model.safetensors",
        "another prepared model": f"{arn}/weights/another-model/main/hub/files/model.safetensors",
    }


WHO_WRITES = {
    "server-access-role": {"own compiled set", "own staging set"},
    "benchmark-runner": {"own result", "own tokenizer cache"},
    "model-preparation-role": {"own prepared model"},
    "model-store-csi": set(),
}


def test_each_role_writes_exactly_its_own_prefixes(fenced):
    spec, _, roles, arn = fenced
    keys = every_key(spec, arn)
    for role, policy in roles.items():
        assert {kind for kind, key in keys.items() if allows(policy, "s3:PutObject", key)} == WHO_WRITES[role], role
        # Aborting an upload is a write too: never outside what the role may put.
        assert {kind for kind, key in keys.items() if allows(policy, "s3:AbortMultipartUpload", key)} <= WHO_WRITES[role], role


def test_no_role_deletes_or_rewrites_history(fenced):
    """A server cannot delete an artifact, a benchmark cannot delete a result, and no role can turn
    off versioning or the lifecycle that keeps results."""
    spec, _, roles, arn = fenced
    for role, policy in roles.items():
        for action in REMOVALS:
            for kind, key in every_key(spec, arn).items():
                assert not allows(policy, action, key), (role, action, kind)
            assert not allows(policy, action, arn), (role, action)


def test_a_server_cannot_write_any_results_and_its_mounts_show_none(fenced):
    spec, recording, roles, arn = fenced
    publisher = roles["server-access-role"]
    for pairing in (spec.name, ANOTHER):
        assert not allows(publisher, "s3:PutObject", f"{arn}/{RESULTS_ROOT}{pairing}/run-1/summary.json")
    mounted = [option.split(" ", 1)[1] for pv in recording.of_type("kubernetes:core/v1:PersistentVolume")
               for option in pv.inputs["spec"]["mountOptions"] if option.startswith("prefix ")]
    assert mounted and not [p for p in mounted if p.startswith((RESULTS_ROOT, "cache/"))]
    assert all(pv.inputs["spec"]["accessModes"] == ["ReadOnlyMany"] for pv in recording.of_type("kubernetes:core/v1:PersistentVolume"))


def test_listing_is_limited_to_what_each_role_reads(fenced):
    spec, _, roles, arn = fenced

    def lists(role, prefix):
        return allows(roles[role], "s3:ListBucket", arn, {"s3:prefix": prefix})
    assert lists("benchmark-runner", spec.tokenizer_cache_prefix)
    assert not lists("benchmark-runner", f"{RESULTS_ROOT}{ANOTHER}/")
    assert lists("server-access-role", f"{spec.variants[0].artifact_path}/")
    assert not lists("server-access-role", RESULTS_ROOT)
    assert not lists("model-preparation-role", RESULTS_ROOT)
    assert not lists("model-preparation-role", "")  # no unconditioned listing of the whole bucket


@pytest.mark.parametrize("stack", STANDALONE)
def test_the_driver_reads_only_what_servers_mount(stack):
    recording = recorded(stack)
    spec, policy, arn = stack_spec(stack), role_documents(recording, "model-store-csi")[1], bucket_arn(recording)
    for mount in spec.store_mounts:
        assert allows(policy, "s3:ListBucket", arn, {"s3:prefix": mount.prefix})
        assert allows(policy, "s3:GetObject", f"{arn}/{mount.prefix}files/model.safetensors")
    for hidden in (f"{spec.results_prefix}run-1/run.json", f"{spec.tokenizer_cache_prefix}tokenizer.json"):
        assert not allows(policy, "s3:GetObject", f"{arn}/{hidden}")
        assert not allows(policy, "s3:ListBucket", arn, {"s3:prefix": hidden})
    assert not allows(policy, "s3:ListBucket", arn, {"s3:prefix": ""})
    assert not allows(policy, "s3:ListBucket", arn)  # a list without a prefix is the whole bucket


def rule_prefix(rule: dict) -> str:
    """The key prefix a lifecycle rule's filter names, alone or in an `and` with tags."""
    return rule["filter"].get("prefix", rule["filter"].get("and", {}).get("prefix"))


@pytest.mark.parametrize("stack", [STANDALONE[0], "platform"])
def test_results_are_versioned_and_no_lifecycle_rule_expires_them(stack):
    recording = recorded(stack)
    (versioning,) = recording.of_type("aws:s3/bucketVersioning:BucketVersioning")
    assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"
    lifecycle = recording.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "model-store")
    assert versioning.urn in lifecycle.dependencies  # versions exist before rules about them
    result = f"{RESULTS_ROOT}some-pairing/run-1/run.json"
    covering = [r for r in lifecycle.inputs["rules"] if result.startswith(rule_prefix(r))]
    assert covering, "the cleanup rules cover the whole bucket"
    for rule in covering:
        assert "noncurrentVersionExpiration" not in rule and "transitions" not in rule, rule["id"]
        assert rule.get("expiration", {}).get("days") is None, rule["id"]
    expiring_versions = {rule_prefix(r) for r in lifecycle.inputs["rules"] if "noncurrentVersionExpiration" in r}
    assert expiring_versions == {"weights/", "compiled/", "cache/", "staging/"}


def test_the_evaluator_can_fail():
    """Guards tests/iam_eval.py: a wildcard grant allows what the fence refuses, a Deny wins, a
    prefix condition refuses a list outside it, and an unknown operator is not ignored."""
    arn = "arn:aws:s3:::bucket"
    wide = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": ["*"]}]}
    assert allows(wide, "s3:DeleteObject", f"{arn}/results/x")
    assert allows(wide, "S3:putobject", f"{arn}/results/x")
    denied = {"Statement": wide["Statement"] + [{"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": f"{arn}/results/*"}]}
    assert decide(denied, "s3:DeleteObject", f"{arn}/results/x") == "ExplicitDeny"
    scoped = {"Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": arn,
                             "Condition": {"StringLike": {"s3:prefix": ["weights/*"]}}}]}
    assert allows(scoped, "s3:ListBucket", arn, {"s3:prefix": "weights/x/"})
    assert not allows(scoped, "s3:ListBucket", arn, {"s3:prefix": "results/"})
    assert not allows(scoped, "s3:ListBucket", arn)
    unknown = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                              "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}]}
    with pytest.raises(NotImplementedError):
        decide(unknown, "s3:GetObject", f"{arn}/x")


def webhook_injected(pod: dict) -> set[str]:
    """The containers the EKS pod identity webhook hands the service account's AWS credentials to:
    every container and init container but those the pod's `eks.amazonaws.com/skip-containers`
    annotation names, in IRSA and in Pod Identity (container credentials) mode alike
    (aws/amazon-eks-pod-identity-webhook@3bf80a34 pkg/handler/handler.go: getContainersToSkip, used
    by both branches of buildPodPatchConfig). Nothing else in the pod reaches them: no container
    mounts a Kubernetes token and IMDS is out of reach at hop limit 1."""
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    skipped = set(pod["metadata"].get("annotations", {}).get("eks.amazonaws.com/skip-containers", "").split(","))
    return {c["name"] for c in spec.get("initContainers", []) + spec["containers"]} - skipped


WRITES = ("s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:PutObjectTagging")


@pytest.mark.parametrize("stack", STANDALONE[:1] + SHARED[:1])
def test_each_container_of_a_server_reaches_only_the_aws_actions_it_uses(stack):
    """Per container of every server pod, which S3 actions on which kind of key it can reach: the
    publisher its own compiled and staging sets, the vLLM server (root, serving requests) none."""
    recording, spec = recorded(stack), stack_spec(stack)
    policy, arn = role_documents(recording, "server-access-role")[1], bucket_arn(recording)
    keys = every_key(spec, arn)
    for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
        pod = deployment.inputs["spec"]["template"]
        credentials = webhook_injected(pod)
        reachable = {c["name"]: {(action, kind) for action in WRITES for kind, key in keys.items()
                                 if c["name"] in credentials and allows(policy, action, key)}
                     for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]}
        assert reachable["vllm"] == set()
        assert {kind for action, kind in reachable["publisher"] if action == "s3:PutObject"} == WHO_WRITES["server-access-role"]
