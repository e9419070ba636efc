"""`make scan` (offline/scan.py): the allowlist's rules, and the verdicts on checkov's report. checkov
itself is not installed here (it has a virtualenv of its own, `make scan`); a stand-in prints a
report in checkov's JSON shape, so the verdicts are tested without it, and CI runs the real one."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from offline import scan

VLLM = "Deployment.sd-pairing-1a2b3c.vllm-sd"
BENCHMARK = "Job.sd-pairing-1a2b3c.llmperf-0b71e74a"


def write_allowlist(tmp_path: Path, entries) -> Path:
    path = tmp_path / "allow.yaml"
    path.write_text(yaml.safe_dump(entries) if not isinstance(entries, str) else entries)
    return path


def entry(check: str, resource: str) -> dict:
    return {"check": check, "resource": resource, "reason": "why", "source": "where"}


def test_the_checked_in_allowlist_loads_and_every_entry_has_a_reason_and_a_source():
    allowlist = scan.load_allowlist()
    assert allowlist and all(a.reason.strip() and a.source.strip() for a in allowlist)


@pytest.mark.parametrize("check, resource", [
    ("CKV_K8S_20", VLLM), ("CKV_K8S_38", "Deployment.*.vllm-*"), ("CKV_K8S_28", "Job.*.prepare-*"),
    ("CKV_K8S_23", BENCHMARK), ("CKV_K8S_22", "CronJob.*.llmperf"), ("CKV_K8S_40", "*"),
    ("CKV2_K8S_6", "Pod.*.anything"),
])
def test_what_may_never_be_excused_is_refused_as_bad_input(tmp_path, check, resource):
    """A pattern that would cover a guarded workload is refused too ("*" covers the benchmark)."""
    with pytest.raises(scan.ScanInputError, match=check):
        scan.load_allowlist(write_allowlist(tmp_path, [entry(check, resource)]))


@pytest.mark.parametrize("entries", [
    "- check: [unclosed", "check: not a list", [{"check": "CKV_K8S_11", "resource": "*", "reason": "why"}],
    [{**entry("CKV_K8S_11", "*"), "reason": "  "}], [{**entry("CKV_K8S_11", "*"), "extra": "x"}],
])
def test_a_malformed_allowlist_is_bad_input(tmp_path, entries):
    with pytest.raises(scan.ScanInputError):
        scan.load_allowlist(write_allowlist(tmp_path, entries))


def test_a_failure_no_entry_covers_and_an_entry_that_covers_nothing_are_both_reported():
    allowlist = [scan.Allowed("CKV_K8S_11", "*", "r", "s"), scan.Allowed("CKV_K8S_22", "Deployment.*.vllm-*", "r", "s"),
                 scan.Allowed("CKV_K8S_43", "Job.*.prepare-*", "r", "s")]
    findings = [scan.Finding("CKV_K8S_11", BENCHMARK, "a.yaml"), scan.Finding("CKV_K8S_22", VLLM, "b.yaml"),
                scan.Finding("CKV_K8S_22", BENCHMARK, "c.yaml")]
    unlisted, stale = scan.compare(findings, allowlist)
    assert unlisted == [scan.Finding("CKV_K8S_22", BENCHMARK, "c.yaml")]  # the vLLM excuse does not reach the benchmark
    assert [a.check for a in stale] == ["CKV_K8S_43"]


def test_checkovs_report_is_read_in_both_of_its_shapes():
    one = {"check_type": "kubernetes", "results": {"failed_checks": [{"check_id": "CKV_K8S_11", "resource": VLLM, "file_path": "/x.yaml"}]}}
    assert scan.parse_findings(json.dumps(one)) == [scan.Finding("CKV_K8S_11", VLLM, "/x.yaml")]
    assert scan.parse_findings(json.dumps([one, one])) == [scan.Finding("CKV_K8S_11", VLLM, "/x.yaml")] * 2
    assert scan.parse_findings("") == []  # nothing to scan: checkov prints nothing


def test_a_silent_canary_is_named():
    assert scan.silent_canary_checks([]) == set(scan.CANARY_MUST_FAIL)
    assert scan.silent_canary_checks([scan.Finding(c, "x", "y") for c in scan.CANARY_MUST_FAIL]) == set()


def fake_checkov(tmp_path: Path, canary: list[str], stacks: list[tuple[str, str]]) -> str:
    """A stand-in that answers like checkov: the canary's failures for the canary folder, the given
    (check, resource) failures for the stacks, exit 1 when anything failed."""
    def report(pairs):
        return {"check_type": "kubernetes", "results": {"failed_checks": [
            {"check_id": c, "resource": r, "file_path": "/f.yaml"} for c, r in pairs]}}
    script = tmp_path / "checkov"
    script.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                      f"canary, stacks = {json.dumps(report([(c, 'Deployment.canary.scan-canary') for c in canary]))!r}, "
                      f"{json.dumps(report(stacks))!r}\n"
                      "print(canary if sys.argv[2].endswith('canary') else stacks)\nsys.exit(1)\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture
def scan_out(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "OUT", tmp_path / "out")
    monkeypatch.setattr(scan, "render", lambda stacks, out: out.mkdir(parents=True, exist_ok=True) or scan.Rendered(1, 1, {}))


def test_the_scan_passes_only_when_every_failure_is_allowed_and_every_entry_is_used(tmp_path, scan_out, capsys):
    used = [(a.check, a.resource.replace("*", "x")) for a in scan.load_allowlist()]
    assert scan.main(["--checkov", fake_checkov(tmp_path, sorted(scan.CANARY_MUST_FAIL), used)]) == 0
    assert scan.main(["--checkov", fake_checkov(tmp_path, sorted(scan.CANARY_MUST_FAIL), used + [("CKV_K8S_38", BENCHMARK)])]) == 1
    assert f"NOT ALLOWED  CKV_K8S_38  {BENCHMARK}" in capsys.readouterr().out
    assert scan.main(["--checkov", fake_checkov(tmp_path, sorted(scan.CANARY_MUST_FAIL), used[1:])]) == 1
    assert "STALE" in capsys.readouterr().out


def test_a_checkov_that_sees_nothing_in_the_canary_fails_the_scan(tmp_path, scan_out, capsys):
    assert scan.main(["--checkov", fake_checkov(tmp_path, [], [])]) == 1
    assert "not scanning" in capsys.readouterr().err


def test_an_unknown_stack_fails_cleanly(tmp_path, scan_out, capsys):
    assert scan.main(["--checkov", fake_checkov(tmp_path, [], []), "--stack", "no-such-stack"]) == 2
    assert "unknown stack(s) no-such-stack" in capsys.readouterr().err


@pytest.mark.parametrize("checkov", ["absent", "not-executable"])
def test_a_checkov_that_cannot_run_is_bad_input_at_once(checkov, tmp_path, monkeypatch, capsys):
    """Refused before the stacks are rendered (a minute of work), with exit 2 naming --checkov."""
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    monkeypatch.setattr(scan, "render", lambda stacks, out: pytest.fail("rendered before checking --checkov"))
    with pytest.raises(SystemExit) as exit_:
        scan.main(["--checkov", str(tmp_path / checkov)])
    assert exit_.value.code == 2
    assert f"argument --checkov: no executable at {tmp_path / checkov}" in capsys.readouterr().err


def test_render_writes_every_kubernetes_object_of_a_stack_as_yaml_and_its_aws_side_as_a_plan(tmp_path):
    from .conftest import STANDALONE, recorded

    stack = STANDALONE[0]
    rendered = scan.render([stack], tmp_path / "out")
    assert rendered.objects == len(recorded(stack).kubernetes_objects()) and rendered.unconverted == {}
    plan = json.loads((tmp_path / "out" / "aws" / f"{stack}.json").read_text())
    assert len(plan["planned_values"]["root_module"]["resources"]) == rendered.aws_resources > 0
    documents = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "out" / "kubernetes" / stack).glob("*.yaml"))]
    assert {d["kind"] for d in documents} >= {"Deployment", "Job", "CronJob", "NetworkPolicy", "Namespace"}
    assert all(d["metadata"]["name"] for d in documents)


def test_an_aws_type_the_conversion_does_not_know_fails_the_scan_and_is_named(tmp_path, scan_out, monkeypatch, capsys):
    monkeypatch.setattr(scan, "render", lambda stacks, out: out.mkdir(parents=True, exist_ok=True)
                        or scan.Rendered(1, 1, {"s": ["aws:ec2/instance:Instance"]}))
    used = [(a.check, a.resource.replace("*", "x")) for a in scan.load_allowlist()]
    assert scan.main(["--checkov", fake_checkov(tmp_path, sorted(scan.CANARY_MUST_FAIL), used)]) == 1
    assert "NOT SCANNED  s: no Terraform type for aws:ec2/instance:Instance" in capsys.readouterr().out


def test_the_aws_canary_is_a_plan_with_an_unencrypted_log_group():
    """What the canary must make checkov report (CANARY_MUST_FAIL has CKV_AWS_158): a log group with no key."""
    (canary_plan,) = [c for c in scan.CANARIES if c.suffix == ".json"]
    plan = json.loads(canary_plan.read_text())
    (group,) = plan["planned_values"]["root_module"]["resources"]
    assert group["type"] == "aws_cloudwatch_log_group" and "kms_key_id" not in group["values"]
    assert "CKV_AWS_158" in scan.CANARY_MUST_FAIL


@pytest.mark.parametrize("check, resource", [
    ("CKV_AWS_158", "aws_cloudwatch_log_group.flow-logs"), ("CKV_AWS_18", "aws_s3_bucket.model-store"),
    ("CKV2_AWS_12", "aws_vpc.*"), ("CKV2_AWS_64", "*"),
])
def test_what_the_aws_side_fixed_may_never_be_excused(tmp_path, check, resource):
    with pytest.raises(scan.ScanInputError, match=check):
        scan.load_allowlist(write_allowlist(tmp_path, [entry(check, resource)]))
