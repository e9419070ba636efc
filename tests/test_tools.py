"""Operator tools: fetching results (against moto S3) and re-running the benchmark."""
import json
from datetime import datetime, timezone

import boto3
from moto import mock_aws

from tools import fetch_results, rerun_benchmark

from .results_files import record, write_case, write_run


@mock_aws
def test_fetch_lists_runs_with_their_status_and_reports_the_latest_even_unfinished(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    local = tmp_path / "made"
    for run_id, e2e, status in (("20261119T000000Z-a", 9.0, "complete"), ("20261120T000000Z-b", 3.0, "running")):
        write_run(local, run_id, {"counting": "x", "sonnets": None}, status=status)
        # The second run's pod died after its first case: that is all it uploaded.
        for variant in ("base", "sd") if status == "complete" else ("base",):
            write_case(local, run_id, variant, "counting", [record(ttft=0.05, e2e=e2e, tokens=100)])
        for path in (local / run_id).rglob("*"):
            if path.is_file():
                s3.upload_file(str(path), "models", f"results/{run_id}/{path.relative_to(local / run_id).as_posix()}")
    out = tmp_path / "out"
    assert fetch_results.main(["--stack", "s", "--bucket", "models", "--out", str(out)], client=s3) == 0
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["20261120T000000Z-b"]
    assert (out / "report.md").exists() and (out / "report.json").exists() and (out / "report.png").exists()
    printed = capsys.readouterr().out
    assert "  20261119T000000Z-a: complete\n  20261120T000000Z-b: running\n" in printed
    assert "Run 20261120T000000Z-b (qwen3-32b-qwen3-0.6b): RUNNING (or its pod died before finishing" in printed
    report = json.loads((out / "report.json").read_text())["runs"]["20261120T000000Z-b"]["cases"]
    assert report["counting"]["base"]["completed"] == 1 and report["sonnets"]["sd"]["completed"] == 0


@mock_aws
def test_fetch_says_when_there_is_nothing_yet(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    assert fetch_results.main(["--stack", "s", "--bucket", "models", "--out", str(tmp_path)], client=s3) == 1


def test_rerun_creates_a_job_from_the_template():
    argv = rerun_benchmark.command(datetime(2026, 11, 22, 3, 4, 5, tzinfo=timezone.utc))
    assert argv == ["kubectl", "--namespace", "inference", "create", "job", "llmperf-manual-20261122-030405", "--from=cronjob/llmperf"]


@mock_aws
def test_sweep_finds_what_karpenter_left_and_nothing_else(monkeypatch, capsys):
    from tools import sweep

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    ec2, iam = boto3.client("ec2", region_name="us-west-2"), boto3.client("iam")
    assert sweep.main(["--stack", "qwen3-32b-qwen3-1.7b"], ec2=ec2, iam=iam) == 0
    cluster = "sd-qwen3-32b-qwen3-1-7b"
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


def test_the_sample_report_is_labelled_synthetic(tmp_path):
    from tools import sample_report

    assert sample_report.main(["--out", str(tmp_path / "sample"), "--png", str(tmp_path / "sample.png")]) == 0
    text = (tmp_path / "sample" / "report.md").read_text()
    assert "(SYNTHETIC)" in text and "### Seed 003" in text and (tmp_path / "sample.png").read_bytes()[:4] == b"\x89PNG"
