"""`make scan`: checkov over every Kubernetes object and every AWS resource every stack creates,
against a checked-in allowlist.

    python -m tools scan --checkov .venv-scan/bin/checkov [--stack S ...]

1. Renders each stack offline (the same recording `make plan` uses): its Kubernetes objects, one
   YAML file per object, under build/scan/stacks/kubernetes/<stack>/; its AWS resources as a
   Terraform plan (offline/terraform_plan.py) in build/scan/stacks/aws/<stack>.json. An AWS type the conversion does
   not know fails the scan, named: it would otherwise go unscanned.
2. Runs checkov over both (`--framework kubernetes terraform_plan --skip-download`: no network, no
   platform), and, in a run of their own, over two canaries (security/scan-canary.yaml, a pod with
   none of the hardening; security/scan-canary-aws.json, a plan with an unencrypted log group),
   which must fail the checks this program relies on. A checkov that finds nothing in a canary is
   not scanning, and the scan fails rather than report a clean result. (Apart, because checkov's
   graph lets a stack's default-deny NetworkPolicy cover the canary's namespace too.)
3. Compares the failures with security/checkov-allowlist.yaml (check, resource pattern, reason,
   source). A failure the allowlist does not name fails the scan; so does an entry that matches no
   failure in a scan of every stack (the list says only what is true). Some checks may never be
   allowlisted for some resources (NEVER_ALLOWED): such an entry is refused as bad input.

Helm releases (Karpenter, the Neuron DRA driver) are not scanned: their charts are not rendered
offline. Exit codes: 0 clean, 1 a failure, a stale entry, an unconverted type or a silent canary,
2 bad input.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from stackconfig.source import PROJECT_DIR

SECURITY = PROJECT_DIR / "security"
ALLOWLIST = SECURITY / "checkov-allowlist.yaml"
CANARIES = (SECURITY / "scan-canary.yaml", SECURITY / "scan-canary-aws.json")
OUT = PROJECT_DIR / "build" / "scan"
CHECKOV_ARGS = ["--framework", "kubernetes", "terraform_plan", "--skip-download", "--output", "json", "--quiet"]

# Checks no reason can excuse, per workload (issue 21): the benchmark meets "restricted"; the servers
# and preparation Jobs never run privileged, never keep capabilities, never take an unused token; and
# no namespace with workloads goes without a NetworkPolicy.
NEVER_ALLOWED: dict[str, frozenset[str]] = {
    "Job.*.llmperf-*": frozenset({"CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_37",
                                  "CKV_K8S_38", "CKV_K8S_40"}),
    "CronJob.*.llmperf": frozenset({"CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_37",
                                    "CKV_K8S_38", "CKV_K8S_40"}),
    "Deployment.*.vllm-*": frozenset({"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_38"}),
    "Job.*.prepare-*": frozenset({"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_38"}),
    "*": frozenset({"CKV2_K8S_6"}),
    # The AWS side (issue 28): every log group the program owns is encrypted with its key, the model
    # bucket logs its requests, every VPC's default security group is closed, and every KMS key has
    # a policy.
    "aws_cloudwatch_log_group.*": frozenset({"CKV_AWS_158"}),
    "aws_s3_bucket.model-store": frozenset({"CKV_AWS_18"}),
    "aws_vpc.*": frozenset({"CKV2_AWS_12"}),
    "aws_kms_key.*": frozenset({"CKV2_AWS_64"}),
}
CANARY_MUST_FAIL = frozenset({"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_38", "CKV2_K8S_6", "CKV_AWS_158"})


class ScanInputError(Exception):
    """A malformed allowlist, or an entry that excuses what may never be excused: exit 2."""


@dataclass(frozen=True)
class Allowed:
    check: str
    resource: str
    """A pattern over checkov's resource id, `Kind.namespace.name` (fnmatch: `*` matches any run)."""
    reason: str
    source: str

    def covers(self, finding: Finding) -> bool:
        return finding.check == self.check and fnmatch.fnmatchcase(finding.resource, self.resource)


@dataclass(frozen=True)
class Finding:
    check: str
    resource: str
    file: str


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    try:
        entries = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ScanInputError(f"{path.name}: {error}") from None
    if not isinstance(entries, list):
        raise ScanInputError(f"{path.name}: a list of entries (check, resource, reason, source) expected")
    allowed, problems = [], []
    for index, entry in enumerate(entries):
        fields = ("check", "resource", "reason", "source")
        if not isinstance(entry, dict) or sorted(entry) != sorted(fields) or not all(
                isinstance(entry[f], str) and entry[f].strip() for f in fields):
            problems.append(f"entry {index}: needs exactly {', '.join(fields)}, each a non-empty string")
            continue
        item = Allowed(**{f: entry[f] for f in fields})
        for pattern, checks in NEVER_ALLOWED.items():
            if item.check in checks and (pattern == "*" or fnmatch.fnmatchcase(item.resource, pattern)
                                         or fnmatch.fnmatchcase(pattern, item.resource)):
                problems.append(f"entry {index}: {item.check} may never be allowed for {pattern}")
        allowed.append(item)
    if problems:
        raise ScanInputError(f"{path.name}: " + "; ".join(problems))
    return allowed


@dataclass(frozen=True)
class Rendered:
    objects: int
    """Kubernetes objects written."""
    aws_resources: int
    """AWS resources written into the stacks' Terraform plans."""
    unconverted: dict[str, list[str]]
    """Per stack, the AWS types it creates that have no Terraform counterpart (offline/terraform_plan.py)."""


def render(stacks: list[str], out: Path) -> Rendered:
    """Each stack's Kubernetes objects, one YAML file each, and its AWS resources as a Terraform plan."""
    from .stacks import load_stack, run_stack
    from .terraform_plan import to_terraform_plan

    if out.exists():
        shutil.rmtree(out)
    (out / "aws").mkdir(parents=True)
    objects = aws_resources = 0
    unconverted = {}
    for stack in stacks:
        recording = run_stack(load_stack(stack))
        folder = out / "kubernetes" / stack
        folder.mkdir(parents=True)
        for index, resource in enumerate(recording.kubernetes_objects()):
            kind = resource.inputs["kind"]
            (folder / f"{index:03d}-{kind}-{resource.name}.yaml").write_text(yaml.safe_dump(resource.inputs, sort_keys=False))
            objects += 1
        converted = to_terraform_plan(recording)
        (out / "aws" / f"{stack}.json").write_text(json.dumps(converted.plan, indent=1, sort_keys=True) + "\n")
        aws_resources += len(converted.plan["planned_values"]["root_module"]["resources"])
        if converted.unconverted:
            unconverted[stack] = converted.unconverted
    return Rendered(objects, aws_resources, unconverted)


def parse_findings(report: str) -> list[Finding]:
    """checkov's JSON: one report, or a list of them (one per framework)."""
    loaded = json.loads(report) if report.strip() else []
    reports = loaded if isinstance(loaded, list) else [loaded]
    return [Finding(f["check_id"], f["resource"], f["file_path"])
            for r in reports for f in r.get("results", {}).get("failed_checks", [])]


def run_checkov(checkov: str, directory: Path) -> list[Finding]:
    result = subprocess.run([checkov, "-d", str(directory), *CHECKOV_ARGS], capture_output=True, text=True)
    # checkov exits 1 when a check fails; anything else, or no JSON, is checkov itself failing.
    if result.returncode not in (0, 1):
        raise RuntimeError(f"checkov exited {result.returncode}: {result.stderr.strip()[-400:]}")
    try:
        return parse_findings(result.stdout)
    except (json.JSONDecodeError, KeyError) as error:
        raise RuntimeError(f"checkov's output is not its JSON report ({error}): {result.stdout[:200]!r}") from None


def compare(findings: list[Finding], allowlist: list[Allowed]) -> tuple[list[Finding], list[Allowed]]:
    """(failures no entry covers, entries that cover no failure)."""
    unlisted = [f for f in findings if not any(a.covers(f) for a in allowlist)]
    stale = [a for a in allowlist if not any(a.covers(f) for f in findings)]
    return unlisted, stale


def silent_canary_checks(findings: list[Finding]) -> set[str]:
    return set(CANARY_MUST_FAIL) - {f.check for f in findings}


def executable(path: str) -> str:
    """--checkov, checked before the stacks are rendered (a minute of work): a path or a name on PATH."""
    if shutil.which(path) is None:
        raise argparse.ArgumentTypeError(f"no executable at {path} (make scan installs checkov in .venv-scan)")
    return path


def main(argv: list[str] | None = None) -> int:
    from stackconfig.source import stack_argument, stack_names

    parser = argparse.ArgumentParser(prog="python -m tools scan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkov", required=True, type=executable,
                        help="the checkov executable (make scan installs it in .venv-scan)")
    parser.add_argument("--stack", action="append", type=stack_argument,
                        help="scan only this stack (repeatable); default every stack")
    args = parser.parse_args(argv)
    known = stack_names()
    unknown = [s for s in args.stack or [] if s not in known]
    if unknown:
        print(f"scan: unknown stack(s) {', '.join(unknown)}; stacks: {', '.join(known)}", file=sys.stderr)
        return 2
    try:
        allowlist = load_allowlist()
    except ScanInputError as error:
        print(f"scan: {error}", file=sys.stderr)
        return 2
    stacks = args.stack or known
    rendered = render(stacks, OUT / "stacks")
    canary_dir = OUT / "canary"
    canary_dir.mkdir(parents=True, exist_ok=True)
    for canary in CANARIES:
        shutil.copy(canary, canary_dir / canary.name)
    try:
        silent = silent_canary_checks(run_checkov(args.checkov, canary_dir))
        findings = run_checkov(args.checkov, OUT / "stacks")
    except (OSError, RuntimeError) as error:
        print(f"scan: {error}", file=sys.stderr)
        return 1
    if silent:
        print(f"scan: checkov did not report {', '.join(sorted(silent))} on the canaries: it is not scanning", file=sys.stderr)
        return 1
    unlisted, stale = compare(findings, allowlist)
    stale = stale if not args.stack else []  # a partial scan cannot tell a stale entry
    print(f"scan: {rendered.objects} Kubernetes objects and {rendered.aws_resources} AWS resources of {len(stacks)} stacks; "
          f"{len(findings)} failed checks, {len(findings) - len(unlisted)} allowlisted ({ALLOWLIST.relative_to(PROJECT_DIR)})")
    for stack, types in rendered.unconverted.items():
        print(f"  NOT SCANNED  {stack}: no Terraform type for {', '.join(types)} (offline/terraform_plan.py TERRAFORM_TYPES)")
    files: dict[tuple[str, str], list[str]] = {}
    for finding in unlisted:
        files.setdefault((finding.check, finding.resource), []).append(finding.file)
    for (check, resource), where in sorted(files.items()):
        more = f" and {len(where) - 1} more" if len(where) > 1 else ""
        print(f"  NOT ALLOWED  {check}  {resource}  ({sorted(where)[0]}{more})")
    for entry in stale:
        print(f"  STALE        {entry.check}  {entry.resource}: no resource fails it any more; remove the entry")
    return 1 if unlisted or stale or rendered.unconverted else 0


if __name__ == "__main__":
    sys.exit(main())
