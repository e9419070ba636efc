"""Small readers over a Recording, shared by the component tests."""
from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from offline.engine import RecordedResource, Recording
from stackconfig.source import PROJECT_DIR


def parse_python(source: str) -> ast.Module:
    """ast.parse, once more if CPython 3.11.7 raises "AST constructor recursion depth mismatch": its
    AST converter kept its recursion depth in state shared by every thread, so a traceback formatted
    in another thread at the same moment (3.11's tracebacks call ast.parse) trips the check; fixed in
    3.11.8 (python/cpython gh-106905). A second parse of the same source is unaffected."""
    try:
        return ast.parse(source)
    except SystemError:
        return ast.parse(source)


PROGRAM_PARTS = ("__main__.py", "Pulumi.yaml", "components", "stackconfig", "offline", "benchmark", "reporting", "modelstore", "distributed", "stacks")


def project_copy(target: Path) -> Path:
    """A copy of the program and its stack files, for tests that must change a stack file
    (nothing writes into the source tree's stacks/). Run `python -m offline.plan` inside it."""
    target.mkdir(parents=True, exist_ok=True)
    for part in PROGRAM_PARTS:
        source = PROJECT_DIR / part
        if source.is_dir():
            shutil.copytree(source, target / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target / part)
    return target


def plan_copy(project: Path, stack: str, out: Path) -> subprocess.CompletedProcess:
    """`python -m offline.plan` for one stack of a project_copy, as a user runs it: its exit code and output."""
    return subprocess.run([sys.executable, "-m", "offline.plan", "--stack", stack, "--out", str(out)],
                          cwd=project, capture_output=True, text=True, timeout=120)


def child(recording: Recording, parent: RecordedResource, type_token: str) -> RecordedResource:
    matches = [r for r in recording.of_type(type_token) if r.parent == parent.urn]
    assert len(matches) == 1, (parent.urn, type_token, [m.name for m in matches])
    return matches[0]


def role_documents(recording: Recording, role_component_name: str) -> tuple[dict, dict]:
    """(trust policy, inline policy) of a WorkloadRole component."""
    component = recording.one("sdtrn2:iam:WorkloadRole", role_component_name)
    role = child(recording, component, "aws:iam/role:Role")
    policy = child(recording, component, "aws:iam/rolePolicy:RolePolicy")
    return json.loads(role.inputs["assumeRolePolicy"]), json.loads(policy.inputs["policy"])


def assert_least_privilege(policy: dict) -> int:
    """No wildcard actions; a "*" resource only on read calls or with a condition. Returns the
    number of statements checked, so callers can assert the loop ran."""
    statements = policy["Statement"]
    for statement in statements:
        assert statement.get("Sid"), statement
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            assert "*" not in action, (statement["Sid"], action)
        read_only = all(a.split(":")[1].startswith(("Describe", "Get", "List")) for a in actions)
        if "*" in resources and statement["Effect"] == "Allow" and not read_only:
            assert statement.get("Condition"), statement["Sid"]
    return len(statements)


def trust_condition(trust: dict) -> dict:
    (statement,) = trust["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    return statement["Condition"]["StringEquals"]
