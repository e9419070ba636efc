"""Operator tools: fetching results (against moto S3) and re-running the benchmark."""
from datetime import datetime, timezone

import boto3
from moto import mock_aws

from offline.stacks import load_stack
from tools import fetch_results, rerun_benchmark

from .llmperf_files import request, write_case, write_run


STACK = "qwen3-32b-qwen3-1.7b"
STACK_SLUG = load_stack(STACK).spec().name


@mock_aws
def test_fetch_downloads_the_latest_run_and_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    local = tmp_path / "made"
    for run_id, e2e in (("20261119T000000Z-a", 9.0), ("20261120T000000Z-b", 3.0)):
        write_run(local, run_id, {"counting": "x"})
        for variant in ("base", "sd"):
            write_case(local, run_id, variant, "counting", [request(ttft=0.05, e2e=e2e, output_tokens=100)])
        for path in (local / run_id).rglob("*"):
            if path.is_file():
                s3.upload_file(str(path), "models", f"results/{STACK_SLUG}/{run_id}/{path.relative_to(local / run_id).as_posix()}")
    out = tmp_path / "out"
    assert fetch_results.main(["--stack", STACK, "--bucket", "models", "--out", str(out)], client=s3) == 0
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["20261120T000000Z-b"]
    assert (out / "report.md").exists() and (out / "report.json").exists() and (out / "report.png").exists()
    assert "Run 20261120T000000Z-b" in capsys.readouterr().out


@mock_aws
def test_fetch_says_when_there_is_nothing_yet(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    assert fetch_results.main(["--stack", STACK, "--bucket", "models", "--out", str(tmp_path)], client=s3) == 1


def test_rerun_creates_a_job_from_the_template():
    argv = rerun_benchmark.command(datetime(2026, 11, 22, 3, 4, 5, tzinfo=timezone.utc), "sd-x")
    assert argv == ["kubectl", "--namespace", "sd-x", "create", "job", "llmperf-manual-20261122-030405", "--from=cronjob/llmperf"]


@mock_aws
def test_sweep_finds_what_karpenter_left_and_nothing_else(monkeypatch, capsys):
    from tools import sweep

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    ec2, iam = boto3.client("ec2", region_name="us-west-2"), boto3.client("iam")
    assert sweep.main(["--stack", "qwen3-32b-qwen3-1.7b"], ec2=ec2, iam=iam) == 0
    cluster = load_stack(STACK).spec().cluster_name
    owned = [{"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}, {"Key": "karpenter.sh/nodepool", "Value": "trn2"}]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=[{"ResourceType": "instance", "Tags": owned}])
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)  # someone else's
    ec2.create_launch_template(LaunchTemplateName="karpenter-lt", LaunchTemplateData={},
                               TagSpecifications=[{"ResourceType": "launch-template", "Tags": owned}])
    iam.create_instance_profile(InstanceProfileName=f"{cluster}_1234567890", Tags=owned[:1])
    iam.create_instance_profile(InstanceProfileName=f"{cluster}_untagged")
    iam.create_instance_profile(InstanceProfileName="unrelated")
    assert sweep.main(["--stack", "qwen3-32b-qwen3-1.7b"], ec2=ec2, iam=iam) == 1
    out = capsys.readouterr().out
    assert "instances: i-" in out and "launch templates: lt-" in out and f"instance profiles: {cluster}_1234567890\n" in out
    assert "unrelated" not in out and "untagged" not in out and out.count("i-") == 1
