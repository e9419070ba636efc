"""The Karpenter controller policy equals the upstream v1.15.0 statements, statement by statement.

tests/data/karpenter-v1.15.0-controller-policy.json holds those statements (source commit and
path inside), with CloudFormation placeholders; they are filled in with the plan's own values
and compared with what the program renders. A deviation passes only if
components.karpenter_policy.DEVIATIONS names it with a reason.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components.platform.karpenter_policy import DEVIATIONS
from stackconfig.versions import KARPENTER

from .helpers import role_documents

UPSTREAM = json.loads((Path(__file__).parent / "data" / f"karpenter-v{KARPENTER.version}-controller-policy.json").read_text())
# Sids whose Resource must be "*": their actions have no resource type in the Service
# Authorization Reference; scoped to an ARN they are never granted (docs/facts.md, "Karpenter v1").
UNSCOPED_ONLY = {"AllowUnscopedInstanceProfileListAction": "iam:ListInstanceProfiles",
                 "AllowPricingReadActions": "pricing:GetProducts"}


def normalized(statement: dict) -> dict:
    """Action always a sorted list; everything else as written."""
    out = dict(statement)
    actions = out["Action"] if isinstance(out["Action"], list) else [out["Action"]]
    out["Action"] = sorted(actions)
    return out


def substitute(value, values: dict[str, str]):
    text = json.dumps(value)
    for placeholder, real in values.items():
        text = text.replace(placeholder, real)
    assert "${" not in text, f"unfilled placeholder in {text}"
    return json.loads(text)


@pytest.fixture
def upstream(recording, spec):
    node_role = recording.one("aws:iam/role:Role", "karpenter-node")
    queue = recording.one("aws:sqs/queue:Queue")
    role = recording.one("aws:iam/role:Role", "karpenter-controller")
    account = role.outputs["arn"].split(":")[4]
    values = {
        "${AWS::Partition}": "aws", "${AWS::Region}": spec.region, "${AWS::AccountId}": account,
        "${ClusterName}": spec.cluster_name, "${KarpenterNodeRole.Arn}": node_role.outputs["arn"],
        "${KarpenterInterruptionQueue.Arn}": queue.outputs["arn"],
    }
    assert set(values) == set(UPSTREAM["placeholders"])
    return {s["Sid"]: normalized(substitute(s, values)) for s in UPSTREAM["statements"]}


def test_controller_policy_matches_upstream_statement_by_statement(recording, upstream):
    _, policy = role_documents(recording, "karpenter-controller")
    ours = {s["Sid"]: normalized(s) for s in policy["Statement"]}
    assert len(ours) == len(policy["Statement"]), "duplicate Sids"
    differing = sorted(sid for sid in set(ours) | set(upstream) if ours.get(sid) != upstream.get(sid))
    assert differing == sorted(DEVIATIONS), {sid: (ours.get(sid), upstream.get(sid)) for sid in differing}
    assert len(upstream) == 18


def test_the_one_deviation_only_leaves_out_rebooting(recording, upstream):
    """Least privilege: v1.15 adds ec2:RebootInstances for node repair by reboot, which only the
    RebootForRepair AWS feature gate uses (charts/karpenter/values.yaml at 1.15.0); this program
    does not enable it, so the statement is upstream's without that action."""
    _, policy = role_documents(recording, "karpenter-controller")
    (ours,) = [normalized(s) for s in policy["Statement"] if s["Sid"] == "AllowScopedDeletion"]
    theirs = upstream["AllowScopedDeletion"]
    assert ours == {**theirs, "Action": [a for a in theirs["Action"] if a != "ec2:RebootInstances"]}
    assert "ec2:RebootInstances" in theirs["Action"]
    assert UPSTREAM["source"]["tag"] == f"v{KARPENTER.version}"


@pytest.mark.parametrize("sid, action", sorted(UNSCOPED_ONLY.items()))
def test_actions_without_a_resource_type_are_granted_on_star(recording, sid, action):
    _, policy = role_documents(recording, "karpenter-controller")
    (statement,) = [s for s in policy["Statement"] if action in normalized(s)["Action"]]
    assert statement["Sid"] == sid and statement["Resource"] == "*" and "Condition" not in statement
    assert normalized(statement)["Action"] == [action]


def test_inline_policy_fits_the_iam_limit(recording):
    """Role inline policies may total 10,240 characters, whitespace not counted (IAM quotas)."""
    component = recording.one("sdtrn2:iam:WorkloadRole", "karpenter-controller")
    (inline,) = [r for r in recording.of_type("aws:iam/rolePolicy:RolePolicy") if r.parent == component.urn]
    assert len(re.sub(r"\s", "", inline.inputs["policy"])) <= 10_240
