"""Models prepared once, and compiled sets published once, as the plan renders them: a preparation
Job per distinct (model, revision, form) on the preparation nodes, never a trn2 node; the publisher
beside every server; identities that may write only their own prefixes and never delete; the
bucket's lifecycle for abandoned staging sets; every new pod restricted."""
from __future__ import annotations

import json

import pytest

from components.handle import PREPARATION_NODE_LABEL, PREPARATION_TAINT
from components.platform.preparation_nodes import MIN_NETWORK_MBPS
from modelstore.pod import LOCK, POD_MODULES, RUN_AS
from offline.stacks import load_stack

from .conftest import STANDALONE, recorded
from .helpers import assert_least_privilege, role_documents, trust_condition

RESTRICTED = {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "allowPrivilegeEscalation": False,
              "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def preparation_jobs(recording):
    return {j.inputs["metadata"]["annotations"]["sd-trn2/prepares"]: j for j in recording.of_type("kubernetes:batch/v1:Job")
            if "sd-trn2/prepares" in j.inputs["metadata"]["annotations"]}


@pytest.mark.parametrize("stack", STANDALONE)
def test_one_preparation_job_per_prepared_model_on_the_preparation_nodes(stack):
    spec, recording = load_stack(stack).spec(), recorded(stack)
    jobs = preparation_jobs(recording)
    assert sorted(jobs) == sorted(m.prefix for m in spec.prepared_models)
    assert len(jobs) == len({(m.model, m.revision, m.form) for v in spec.variants for m in v.prepared_models})
    for model in spec.prepared_models:
        job = jobs[model.prefix].inputs
        pod = job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert job["metadata"]["name"] == model.job_name and len(model.job_name) <= 63
        assert pod["nodeSelector"] == PREPARATION_NODE_LABEL and pod["nodeSelector"] != {"sd-trn2/node-role": "trn2"}
        assert pod["tolerations"] == [{**PREPARATION_TAINT, "operator": "Exists"}]
        assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "model-prep"
        assert container["securityContext"] == RESTRICTED and pod["securityContext"]["runAsNonRoot"] is True
        assert not [v for v in pod["volumes"] if "hostPath" in v]
        args = container["command"][2].splitlines()[-1]
        assert f"--model {model.model} --revision {model.revision} --form {model.form}" in args and f"--prefix {model.prefix}" in args
        assert container["resources"]["requests"]["ephemeral-storage"] == f"{model.disk_gib + 3}Gi"  # scratch, deps, tmp
        assert f"--scratch-bytes {model.scratch_bytes} --parallel 4" in args


def test_the_fp8_job_checks_the_bf16_modules_the_servers_are_told():
    spec, recording = load_stack("llama3.1-405b-llama3.2-1b").spec(), recorded("llama3.1-405b-llama3.2-1b")
    fp8 = spec.variant("fp8").prepared_target
    command = preparation_jobs(recording)[fp8.prefix].inputs["spec"]["template"]["spec"]["containers"][0]["command"][2]
    listed = json.loads(command.split("--bf16-modules ", 1)[1].strip("'"))
    assert listed == spec.variant("fp8").neuron_config["modules_to_not_convert"] and len(listed) == 129


def test_the_preparation_nodes_are_cpu_nodes_with_nvme_and_fast_networking():
    recording = recorded(STANDALONE[0])
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "preparation-nodes-nodepool").inputs["spec"]
    requirements = {r["key"]: r for r in pool["template"]["spec"]["requirements"]}
    assert requirements["karpenter.k8s.aws/instance-category"]["values"] == ["c", "m", "r", "i"]
    assert requirements["karpenter.k8s.aws/instance-network-bandwidth"] == {
        "key": "karpenter.k8s.aws/instance-network-bandwidth", "operator": "Gt", "values": [str(MIN_NETWORK_MBPS - 1)]}
    assert "node.kubernetes.io/instance-type" not in requirements  # never pinned to trn2
    assert pool["template"]["spec"]["taints"] == [PREPARATION_TAINT]
    assert pool["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"} and "replicas" not in pool
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "preparation-nodes-nodeclass").inputs["spec"]
    assert node_class["instanceStorePolicy"] == "RAID0" and node_class["metadataOptions"]["httpTokens"] == "required"


@pytest.mark.parametrize("stack", STANDALONE)
def test_the_preparation_identity_writes_only_its_models_and_never_deletes(stack):
    spec, recording = load_stack(stack).spec(), recorded(stack)
    trust, policy = role_documents(recording, "model-preparation-role")
    assert f"system:serviceaccount:{spec.namespace}:model-prep" in trust_condition(trust).values()
    assert assert_least_privilege(policy) == 2
    bucket = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
    write, listing = policy["Statement"]
    assert write["Resource"] == [f"{bucket}/{m.prefix}*" for m in spec.prepared_models]
    assert sorted(write["Action"]) == ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{m.prefix}*" for m in spec.prepared_models]}}


@pytest.mark.parametrize("stack", STANDALONE)
def test_every_server_has_a_restricted_publisher_under_an_identity_that_cannot_delete(stack):
    spec, recording = load_stack(stack).spec(), recorded(stack)
    for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
        variant = spec.variant(deployment.inputs["metadata"]["labels"]["sd-trn2/variant"])
        part = deployment.inputs["metadata"]["labels"].get("sd-trn2/server")
        server = next(s for s in variant.servers if s.part == (part or ""))
        pod = deployment.inputs["spec"]["template"]["spec"]
        # The publisher first; a distributed server's lock installer after it (restricted too).
        publisher, *others = pod["initContainers"]
        assert [c["name"] for c in others] == (["install"] if part else [])
        assert all(c["securityContext"] == RESTRICTED for c in others)
        assert publisher["restartPolicy"] == "Always" and publisher["securityContext"] == RESTRICTED
        # Each server publishes its own compiled set (a distributed variant's: <path>/target, <path>/draft).
        assert f"--artifact {variant.server_artifact_path(server)} " in publisher["command"][2]
        (cache,) = [m for m in publisher["volumeMounts"] if m["name"] == "node-cache"]
        assert cache["readOnly"] is True
        assert pod["serviceAccountName"] == "vllm" and pod["automountServiceAccountToken"] is False
    trust, policy = role_documents(recording, "server-access-role")
    assert f"system:serviceaccount:{spec.namespace}:vllm" in trust_condition(trust).values()
    assert assert_least_privilege(policy) == 3
    bucket = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
    write, tag, _ = policy["Statement"]
    paths = sorted({v.artifact_path for v in spec.variants})
    assert write["Resource"] == [f"{bucket}/{p}*" for path in paths for p in (f"staging/{path}/", f"{path}/")]
    # Tags mark a staging set's state for the lifecycle rule; only staging sets are tagged.
    assert (tag["Action"], tag["Resource"]) == ("s3:PutObjectTagging", [f"{bucket}/staging/{path}/*" for path in paths])
    assert not any("Delete" in action for statement in policy["Statement"] for action in statement["Action"]
                   if isinstance(statement["Action"], list))


def test_the_pods_are_given_the_modelstore_code_and_lock():
    recording = recorded(STANDALONE[0])
    data = recording.one("kubernetes:core/v1:ConfigMap", "model-preparation-code").inputs["data"]
    assert set(data) == set(POD_MODULES) | {LOCK}


def test_abandoned_staging_sets_expire_and_nothing_else_does():
    recording = recorded(STANDALONE[0])
    rules = {r["id"]: r for r in recording.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "model-store").inputs["rules"]}
    # Only staging objects tagged uncommitted: a set a commit names is tagged committed until in place.
    assert rules["expire-uncommitted-staging-sets"]["filter"] == {"and": {"prefix": "staging/", "tags": {"sd-trn2-staging": "uncommitted"}}}
    assert rules["expire-uncommitted-staging-sets"]["expiration"] == {"days": 7}
    assert rules["abort-abandoned-multipart-uploads"]["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 1}
    assert "expiration" not in rules["abort-abandoned-multipart-uploads"]


def test_pairings_on_one_platform_share_what_they_prepare():
    """The shared pairing and its standalone twin prepare the same prefixes: whichever runs first
    prepares, the other finds the marker."""
    shared, standalone = (load_stack(s).spec() for s in ("qwen3-32b-qwen3-1.7b-shared", "qwen3-32b-qwen3-1.7b"))
    assert [m.prefix for m in shared.prepared_models] == [m.prefix for m in standalone.prepared_models]
