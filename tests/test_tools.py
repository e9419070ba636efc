"""Operator tools act on the stack they are given: its region, cluster, kubeconfig and bucket,
never the shell's current context; what is missing comes out as one line, never a traceback.

AWS is moto (in-process); the pulumi, kubectl and aws CLIs are stand-ins on a PATH of their own
(tests/fake_clis.py), so the real CLIs on a developer's machine never answer.
"""
from __future__ import annotations

import json
import stat
from datetime import datetime, timezone

import boto3
import pytest
from moto import mock_aws

from offline.stacks import load_stack
from tools import destroy, fetch_results, rerun_benchmark, sweep

from . import fake_clis
from .fake_clis import (
    CLUSTER,
    NAMESPACE,
    RESULTS,
    SECRET_MARKER,
    deployed_outputs,
    logged,
)
from .results_files import record, write_case, write_run

STACK = "qwen3-32b-qwen3-1.7b"  # aws:region us-east-2
PLATFORM, SHARED = "platform", "qwen3-32b-qwen3-1.7b-shared"  # the shared pairing names the platform
BUCKET = deployed_outputs()["modelBucket"]
# moto validates AMI ids only with MOTO_ENABLE_AMI_VALIDATION (moto/ec2/models/instances.py), and
# listing its AMIs is slow; the id is an example from moto's own sources (moto/emr/models.py).
IMAGE = "ami-12c6146b"


@pytest.fixture
def elsewhere(monkeypatch):
    """The shell points at another region: the tools must not follow it."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_REGION", "us-west-2")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def upload_runs(s3, tmp_path, runs: dict[str, float]) -> None:
    local = tmp_path / "made"
    for run_id, e2e in runs.items():
        status = "complete" if e2e > 5 else "running"
        write_run(local, run_id, {"counting": "x", "sonnets": None}, status=status)
        # A running run's pod died after its first case: that is all it uploaded.
        for variant in ("base", "sd") if status == "complete" else ("base",):
            write_case(local, run_id, variant, "counting", [record(ttft=0.05, e2e=e2e, tokens=100)])
        for path in (local / run_id).rglob("*"):
            if path.is_file():
                s3.upload_file(str(path), BUCKET, f"{RESULTS}{run_id}/{path.relative_to(local / run_id).as_posix()}")


# --- make results -----------------------------------------------------------------------------

@mock_aws
def test_results_reads_the_bucket_output_in_the_stack_region(tmp_path, aws_credentials, elsewhere, fake_bin, capsys):
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    upload_runs(s3, tmp_path, {"20261119T000000Z-a": 9.0, "20261120T000000Z-b": 3.0})
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log, deployed_outputs()))
    out = tmp_path / "out"
    assert fetch_results.main(["--stack", STACK, "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["20261120T000000Z-b"]
    assert (out / "report.md").exists() and (out / "report.json").exists() and (out / "report.png").exists()
    assert logged(log) == [["pulumi", "stack", "output", "--json", "--show-secrets", "--non-interactive", "--stack", STACK]]
    printed = capsys.readouterr().out
    assert SECRET_MARKER not in printed
    assert "  20261119T000000Z-a: complete\n  20261120T000000Z-b: running\n" in printed
    assert "Run 20261120T000000Z-b" in printed and "RUNNING (or its pod died before finishing" in printed
    report = json.loads((out / "report.json").read_text())["runs"]["20261120T000000Z-b"]["cases"]
    assert report["counting"]["base"]["completed"] == 1 and report["sonnets"]["sd"]["completed"] == 0


@mock_aws
def test_results_takes_run_and_bucket_without_pulumi(tmp_path, aws_credentials, elsewhere, fake_bin, capsys):
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    upload_runs(s3, tmp_path, {"20261119T000000Z-a": 9.0, "20261120T000000Z-b": 3.0})
    out = tmp_path / "out"
    assert fetch_results.main(["--stack", STACK, "--bucket", BUCKET, "--run-id", "20261119T000000Z-a", "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["20261119T000000Z-a"]
    assert fetch_results.main(["--stack", STACK, "--bucket", BUCKET, "--run-id", "nope", "--out", str(out)]) == 1
    assert "no run nope" in one_line_error(capsys)


@mock_aws
def test_results_says_when_there_is_nothing_yet(tmp_path, aws_credentials, elsewhere, fake_bin, capsys):
    boto3.client("s3", region_name="us-east-2").create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    assert fetch_results.main(["--stack", STACK, "--bucket", BUCKET, "--out", str(tmp_path)]) == 1
    assert "no benchmark runs" in one_line_error(capsys)


@mock_aws
def test_results_of_a_study_stack_fetch_the_latest_study_and_write_its_tuning_report(tmp_path, aws_credentials, elsewhere, capsys):
    from offline.stacks import load_stack

    from .test_tuning_report import STUDY_ID, write_study

    study_stack = "qwen3-32b-study"
    prefix = load_stack(study_stack).spec().results_prefix
    s3 = boto3.client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    local = write_study(tmp_path / "made")
    older = {"study": {"id": "study-aaaaaaaaaa"}, "status": "complete", "startedAt": "2026-11-01T00:00:00Z"}
    (local / "study-aaaaaaaaaa").mkdir()
    (local / "study-aaaaaaaaaa" / "study.json").write_text(json.dumps(older))
    for path in local.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), BUCKET, prefix + path.relative_to(local).as_posix())
    out = tmp_path / "out"
    assert fetch_results.main(["--stack", study_stack, "--bucket", BUCKET, "--out", str(out)]) == 0
    # The later study by its record, though its id sorts first.
    assert STUDY_ID < "study-aaaaaaaaaa" and [p.name for p in out.iterdir() if p.is_dir()] == [STUDY_ID]
    printed = capsys.readouterr().out
    assert f"  {STUDY_ID}: incomplete: failed configurations: d2-k4\n" in printed and "| **overall** | **d1-k4** |" in printed
    assert (out / "tuning.md").exists() and (out / f"{STUDY_ID}-heatmap.png").exists()
    assert f"{out / STUDY_ID}-heatmap.png, {out / STUDY_ID}-windows.png\n" in printed  # the charts it wrote


# --- make benchmark ---------------------------------------------------------------------------

def test_benchmark_runs_kubectl_on_the_stack_kubeconfig_and_namespace(tmp_path, aws_credentials, fake_bin, capsys):
    pulumi_log, kubectl_log = tmp_path / "pulumi.log", tmp_path / "kubectl.log"
    fake_bin("pulumi", fake_clis.pulumi(pulumi_log, deployed_outputs()))
    fake_bin("kubectl", fake_clis.kubectl(kubectl_log))
    fake_bin("aws", fake_clis.AWS_CLI)
    assert rerun_benchmark.main(["--stack", STACK]) == 0
    (call,) = logged(kubectl_log)
    argv = call["argv"]
    kubeconfig_path = argv[argv.index("--kubeconfig") + 1]
    job = argv[argv.index("job") + 1]
    assert argv == ["kubectl", "--kubeconfig", kubeconfig_path, "--namespace", NAMESPACE,
                    "create", "job", job, "--from=cronjob/llmperf"]
    assert job.startswith("llmperf-manual-")
    assert call["mode"] == oct(stat.S_IRUSR | stat.S_IWUSR) and call["kubeconfig"] == deployed_outputs()["kubeconfig"]
    assert not (tmp_path / kubeconfig_path).exists()
    out = capsys.readouterr()
    assert SECRET_MARKER not in out.out + out.err and CLUSTER in out.out


@pytest.mark.parametrize("renewed_s_ago, refused", [(30, True), (600, False), (None, False)])
def test_benchmark_refuses_while_a_study_runs(tmp_path, aws_credentials, fake_bin, capsys, renewed_s_ago, refused):
    """On a study stack, a second Job's tuner would wait for the running one: `make benchmark`
    says so instead, naming the study, while its lease is held; a lapsed or absent lease is none."""
    from benchmark.lease import micro_time

    now = datetime.now(timezone.utc)
    lease = None if renewed_s_ago is None else {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "llmperf-tuner", "namespace": NAMESPACE},
        "spec": {"holderIdentity": "study-0123456789-llmperf-1a2b3c4d (pod llmperf-1a2b3c4d-x7k2p)", "leaseDurationSeconds": 120,
                 "renewTime": micro_time(now.timestamp() - renewed_s_ago)}}
    kubectl_log = tmp_path / "kubectl.log"
    fake_bin("pulumi", fake_clis.pulumi(tmp_path / "pulumi.log", deployed_outputs()))
    fake_bin("kubectl", fake_clis.kubectl(kubectl_log, lease=lease))
    fake_bin("aws", fake_clis.AWS_CLI)
    assert rerun_benchmark.main(["--stack", "qwen3-32b-study"]) == (1 if refused else 0)
    calls = [c["argv"][5:] for c in logged(kubectl_log)]
    assert calls[0] == ["get", "lease", "llmperf-tuner", "--ignore-not-found", "--output", "json"]
    if refused:
        assert calls == calls[:1]
        assert (f"a study is running in {NAMESPACE}: study-0123456789-llmperf-1a2b3c4d (pod llmperf-1a2b3c4d-x7k2p) holds lease "
                "llmperf-tuner") in one_line_error(capsys)
    else:
        assert calls[1][:2] == ["create", "job"]


def test_benchmark_job_names_are_timestamped():
    assert rerun_benchmark.job_name(datetime(2026, 11, 22, 3, 4, 5, tzinfo=timezone.utc)) == "llmperf-manual-20261122-030405"


@pytest.mark.parametrize("outputs, error, says", [
    ({}, None, "not deployed; run `make up STACK=qwen3-32b-qwen3-1.7b`"),
    (None, "error: no stack named 'qwen3-32b-qwen3-1.7b' found", "no stack named"),
    ({k: v for k, v in deployed_outputs().items() if k != "benchmarkCronJob"}, None, "no output benchmarkCronJob"),
    (deployed_outputs(region="us-west-2"), None, "deployed in us-west-2 but its stack file says aws:region us-east-2"),
])
def test_benchmark_without_a_usable_deployed_stack_says_so(tmp_path, aws_credentials, fake_bin, capsys, outputs, error, says):
    fake_bin("pulumi", fake_clis.pulumi(tmp_path / "pulumi.log", outputs, error=error))
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    fake_bin("aws", fake_clis.AWS_CLI)
    assert rerun_benchmark.main(["--stack", STACK]) == 1
    assert says in one_line_error(capsys)
    assert not logged(tmp_path / "kubectl.log")


@pytest.mark.parametrize("missing", ["pulumi", "kubectl", "aws"])
def test_benchmark_names_a_missing_cli(tmp_path, aws_credentials, fake_bin, capsys, missing):
    writers = {"pulumi": fake_clis.pulumi(tmp_path / "pulumi.log", deployed_outputs()),
               "kubectl": fake_clis.kubectl(tmp_path / "kubectl.log"), "aws": fake_clis.AWS_CLI}
    for name, body in writers.items():
        if name != missing:
            fake_bin(name, body)
    assert rerun_benchmark.main(["--stack", STACK]) == 1
    assert f"`{missing}` not found on PATH: install" in one_line_error(capsys)


# --- make sweep -------------------------------------------------------------------------------

def leave_behind(region: str, cluster: str) -> dict[str, str]:
    """What an interrupted destroy leaves, tagged the way Karpenter, the VPC CNI and EKS tag it."""
    ec2 = boto3.client("ec2", region_name=region)
    owned = [{"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}, {"Key": "eks:eks-cluster-name", "Value": cluster},
             {"Key": "karpenter.sh/nodepool", "Value": "trn2"}, {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "trn2"}]
    instance = ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1,
                                 TagSpecifications=[{"ResourceType": "instance", "Tags": owned}])["Instances"][0]["InstanceId"]
    template = ec2.create_launch_template(LaunchTemplateName=f"karpenter-{cluster}", LaunchTemplateData={},
                                          TagSpecifications=[{"ResourceType": "launch-template", "Tags": owned}])
    vpc = ec2.create_vpc(CidrBlock="10.64.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.64.32.0/19")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"eks-cluster-sg-{cluster}", Description="EKS created security group",
                                      VpcId=vpc, TagSpecifications=[{"ResourceType": "security-group", "Tags": [
                                          {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}]}])["GroupId"]
    tagged_eni = ec2.create_network_interface(SubnetId=subnet, Description="aws-K8S-i-0123456789abcdef0",
                                              TagSpecifications=[{"ResourceType": "network-interface", "Tags": [
                                                  {"Key": "cluster.k8s.amazonaws.com/name", "Value": cluster}]}])
    untagged_eni = ec2.create_network_interface(SubnetId=subnet, Groups=[group], Description="aws-K8S-i-0fedcba9876543210")
    iam = boto3.client("iam", region_name=region)
    # Karpenter >= 1.7 under its path; older ones at "/" tagged with cluster and region (IAM names are global).
    iam.create_instance_profile(InstanceProfileName=f"{cluster}_{region}-1", Path=f"/karpenter/{region}/{cluster}/uid-1/")
    iam.create_instance_profile(InstanceProfileName=f"{cluster}_{region}-2",
                                Tags=[*owned[:1], {"Key": "topology.kubernetes.io/region", "Value": region}])
    boto3.client("logs", region_name=region).create_log_group(logGroupName=f"/aws/eks/{cluster}/cluster")
    return {"instance": instance, "launch template": template["LaunchTemplate"]["LaunchTemplateId"], "security group": group,
            "tagged eni": tagged_eni["NetworkInterface"]["NetworkInterfaceId"],
            "eni in the cluster group": untagged_eni["NetworkInterface"]["NetworkInterfaceId"],
            "pathed profile": f"{cluster}_{region}-1", "tagged profile": f"{cluster}_{region}-2",
            "log group": f"/aws/eks/{cluster}/cluster"}


@mock_aws
def test_sweep_searches_the_stack_region_not_the_shell_region(aws_credentials, elsewhere, capsys):
    assert sweep.main(["--stack", STACK]) == 0
    assert f"nothing left for cluster {CLUSTER} in us-east-2" in capsys.readouterr().out
    left = leave_behind("us-east-2", CLUSTER)
    leave_behind("us-west-2", CLUSTER)  # the shell's region: must not be reported
    leave_behind("us-east-2", "sd-someone-else")
    ec2 = boto3.client("ec2", region_name="us-east-2")
    ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1)  # someone else's
    boto3.client("iam").create_instance_profile(InstanceProfileName=f"{CLUSTER}_untagged")
    assert sweep.main(["--stack", STACK]) == 1
    out = capsys.readouterr().out
    for what, found in left.items():
        assert found in out, what
    listed = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip().split(", ") for line in out.splitlines() if line.startswith("  ")}
    assert len(listed["instances"]) == 1 and len(listed["security groups"]) == 1 and len(listed["network interfaces"]) == 2
    assert sorted(listed["instance profiles"]) == [f"{CLUSTER}_us-east-2-1", f"{CLUSTER}_us-east-2-2"]
    assert "someone-else" not in out and "untagged" not in out


def karpenter_instance(region: str, cluster: str, node_class: str) -> str:
    tags = [{"Key": "eks:eks-cluster-name", "Value": cluster}, {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": node_class},
            {"Key": "karpenter.sh/nodepool", "Value": node_class}]
    return boto3.client("ec2", region_name=region).run_instances(
        ImageId=IMAGE, MinCount=1, MaxCount=1, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0]["InstanceId"]


@mock_aws
def test_a_shared_pairing_sweep_lists_only_its_own_node_class(aws_credentials, capsys):
    spec = load_stack(SHARED).spec()
    cluster, own = spec.cluster_name, spec.node_pool_name
    assert cluster == load_stack(PLATFORM).spec().cluster_name  # the platform's cluster
    left = leave_behind("us-east-2", cluster)  # the platform's own: security groups, ENIs, log group...
    mine = karpenter_instance("us-east-2", cluster, own)
    theirs = karpenter_instance("us-east-2", cluster, "sd-another-pairing")
    boto3.client("ec2", region_name="us-east-2").create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/123", LaunchTemplateData={}, TagSpecifications=[{"ResourceType": "launch-template", "Tags": [
            {"Key": "eks:eks-cluster-name", "Value": cluster}, {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": own}]}])
    assert sweep.main(["--stack", SHARED]) == 1
    out = capsys.readouterr().out
    assert f"left behind for node class {own} on cluster {cluster} in us-east-2:" in out
    listed = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip().split(", ") for line in out.splitlines() if line.startswith("  ")}
    assert listed["instances"] == [mine] and theirs not in out and left["instance"] not in out
    assert len(listed["launch templates"]) == 1 and set(listed) == {"instances", "launch templates"}
    assert left["security group"] not in out and left["log group"] not in out


@mock_aws
def test_sweep_lists_the_cluster_log_groups_a_destroy_left_and_only_those(aws_credentials, capsys):
    """The program creates and deletes the cluster's log groups; any still there is a leftover.
    Another cluster whose name extends this one's keeps its groups out of the list."""
    spec = load_stack(STACK).spec()
    logs = boto3.client("logs", region_name="us-east-2")
    assert len(spec.platform.log_groups) == 6  # control plane, Container Insights' four, flow logs
    for name in spec.platform.log_groups:
        logs.create_log_group(logGroupName=name)
        logs.create_log_group(logGroupName=name.replace(CLUSTER, CLUSTER + "-2"))
    assert sweep.main(["--stack", STACK]) == 1
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert listed == [f"  log groups: {', '.join(sorted(spec.platform.log_groups))}"]
    for name in spec.platform.log_groups:
        logs.delete_log_group(logGroupName=name)
    assert sweep.main(["--stack", STACK]) == 0
    assert f"nothing left for cluster {CLUSTER} in us-east-2" in capsys.readouterr().out


def test_sweep_without_credentials_says_how_to_get_them(no_aws_credentials, capsys):
    assert sweep.main(["--stack", STACK]) == 1
    assert "no AWS credentials found: run `aws configure`" in one_line_error(capsys)


# --- make destroy -----------------------------------------------------------------------------

@mock_aws
@pytest.mark.parametrize("destroy_exit, leftovers, expected", [(0, False, 0), (0, True, 1), (255, False, 1)])
def test_destroy_runs_pulumi_destroy_then_the_sweep(tmp_path, aws_credentials, elsewhere, fake_bin, capsys,
                                                    destroy_exit, leftovers, expected):
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log, destroy_exit=destroy_exit))
    if leftovers:
        leave_behind("us-east-2", CLUSTER)
    assert destroy.main(["--stack", STACK]) == expected
    assert logged(log) == [["pulumi", "destroy", "--stack", STACK]]
    out = capsys.readouterr().out
    assert ("left behind for cluster" in out) == leftovers and ("nothing left" in out) == (not leftovers)


def test_destroy_refuses_before_destroying_when_the_sweep_could_not_run(tmp_path, no_aws_credentials, fake_bin, capsys):
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log))
    assert destroy.main(["--stack", STACK]) == 1
    assert "no AWS credentials" in one_line_error(capsys) and not logged(log)


@mock_aws
def test_a_platform_with_a_deployed_pairing_is_not_destroyed(tmp_path, aws_credentials, fake_bin, capsys):
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log, stacks={SHARED: deployed_outputs()}))
    assert destroy.main(["--stack", PLATFORM]) == 1
    error = one_line_error(capsys)
    assert f"platform {PLATFORM} still hosts pairing stack(s) {SHARED}" in error and f"make destroy STACK={SHARED}" in error
    assert ["pulumi", "destroy", "--stack", PLATFORM] not in logged(log)


@mock_aws
def test_a_platform_without_deployed_pairings_is_destroyed_and_swept(tmp_path, aws_credentials, fake_bin, capsys):
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log, stacks={}))  # the pairing stack does not exist (any more)
    assert destroy.main(["--stack", PLATFORM]) == 0
    assert logged(log)[-1] == ["pulumi", "destroy", "--stack", PLATFORM]
    assert f"nothing left for cluster {load_stack(PLATFORM).spec().cluster_name} in us-east-2" in capsys.readouterr().out


@pytest.mark.parametrize("tool", [fetch_results, rerun_benchmark])
def test_results_and_benchmark_refuse_a_platform_stack(aws_credentials, capsys, tool):
    assert tool.main(["--stack", PLATFORM]) == 1
    assert f"stack {PLATFORM} is a platform (stackKind: platform)" in one_line_error(capsys)


# --- every tool -------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", [fetch_results, rerun_benchmark, sweep, destroy])
def test_every_tool_without_credentials_prints_one_line_and_fails(tmp_path, no_aws_credentials, fake_bin, capsys, tool):
    fake_bin("pulumi", fake_clis.pulumi(tmp_path / "pulumi.log", deployed_outputs()))
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    fake_bin("aws", fake_clis.AWS_CLI)
    assert tool.main(["--stack", STACK]) == 1
    assert "no AWS credentials found" in one_line_error(capsys)
    assert not logged(tmp_path / "kubectl.log")


@pytest.mark.parametrize("tool", [fetch_results, rerun_benchmark, sweep, destroy])
def test_every_tool_names_an_unknown_stack(aws_credentials, capsys, tool):
    assert tool.main(["--stack", "no-such-stack"]) == 2
    assert "no stack file Pulumi.no-such-stack.yaml in stacks/; stacks: " in capsys.readouterr().err


def test_the_sample_report_is_labelled_synthetic(tmp_path):
    from tools import sample_report

    assert sample_report.main(["--out", str(tmp_path / "sample"), "--png", str(tmp_path / "sample.png")]) == 0
    text = (tmp_path / "sample" / "report.md").read_text()
    assert "(SYNTHETIC)" in text and "### Seed 003" in text and (tmp_path / "sample.png").read_bytes()[:4] == b"\x89PNG"
