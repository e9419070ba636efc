"""A small evaluator of identity policies, for asking what a role may do rather than reading its JSON.

It follows the IAM evaluation logic for a single identity policy (AWS IAM user guide, "Policy
evaluation logic"): an explicit Deny wins, then any Allow whose action, resource and every condition
match; otherwise the request is implicitly denied. Actions match case-insensitively, resources and
StringLike values with `*` and `?` wildcards. Only the condition operators this program's policies
use are known; any other raises, so a policy that starts using one cannot pass by being ignored.

Resource policies (a key policy, a role's trust policy) name a Principal: ask with `principal`, a
(kind, value) pair such as ("Service", "logs.us-east-2.amazonaws.com"), and a statement then applies
only to the principals it names; a statement with no Resource (a trust policy's) is about the
resource the policy is attached to, so it matches any `resource`.
"""
from __future__ import annotations

import fnmatch
import re
from typing import Any

ALLOW, IMPLICIT_DENY, EXPLICIT_DENY = "Allow", "ImplicitDeny", "ExplicitDeny"


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _like(pattern: str, value: str, case_sensitive: bool = True) -> bool:
    # fnmatch's [] classes are not IAM wildcards: escape them so only * and ? are special.
    pattern = re.sub(r"([\[\]])", r"[\1]", pattern)
    if not case_sensitive:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


KNOWN_OPERATORS = {"Null", "StringEquals", "StringLike", "ArnLike", "Bool"}


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, Any]) -> bool:
    if operator not in KNOWN_OPERATORS:
        raise NotImplementedError(f"condition operator {operator} is not modelled")
    expected = [str(e) for e in _listed(expected)]
    if operator == "Null":
        (wanted,) = expected
        return (key not in context) == (wanted == "true")
    if key not in context:
        return False
    actual = [str(a) for a in _listed(context[key])]
    if operator == "StringEquals":
        return any(a in expected for a in actual)
    if operator in ("StringLike", "ArnLike"):  # ARN wildcards are StringLike's (IAM user guide, "ARN condition operators")
        return any(_like(e, a) for a in actual for e in expected)
    return any(a.lower() in (e.lower() for e in expected) for a in actual)  # Bool


def _principal_matches(statement: dict, principal: tuple[str, str] | None) -> bool:
    if principal is None:
        return True
    if "NotPrincipal" in statement:
        raise NotImplementedError("NotPrincipal is not modelled")
    named = statement.get("Principal")
    if named is None:
        raise ValueError("an identity policy names no principal: ask without one")
    kind, value = principal
    return named == "*" or value in _listed(named.get(kind, []))


def _statement_matches(statement: dict, action: str, resource: str, context: dict[str, Any],
                       principal: tuple[str, str] | None = None) -> bool:
    if "NotAction" in statement or "NotResource" in statement:
        raise NotImplementedError("NotAction/NotResource are not modelled")
    if not _principal_matches(statement, principal):
        return False
    if not any(_like(pattern, action, case_sensitive=False) for pattern in _listed(statement["Action"])):
        return False
    if "Resource" in statement and not any(_like(pattern, resource) for pattern in _listed(statement["Resource"])):
        return False
    return all(_condition_holds(operator, key, expected, context)
               for operator, pairs in statement.get("Condition", {}).items() for key, expected in pairs.items())


def decide(policy: dict, action: str, resource: str, context: dict[str, Any] | None = None,
           principal: tuple[str, str] | None = None) -> str:
    """One request against one policy: Allow, ImplicitDeny or ExplicitDeny."""
    context = context or {}
    matching = [s for s in _listed(policy["Statement"]) if _statement_matches(s, action, resource, context, principal)]
    if any(s["Effect"] == "Deny" for s in matching):
        return EXPLICIT_DENY
    return ALLOW if any(s["Effect"] == "Allow" for s in matching) else IMPLICIT_DENY


def allows(policy: dict, action: str, resource: str, context: dict[str, Any] | None = None,
           principal: tuple[str, str] | None = None) -> bool:
    return decide(policy, action, resource, context, principal) == ALLOW


# What S3 authorizes each API call as, for the calls this program makes: the IAM action, and the
# request's condition keys. CopyObject and the multipart calls are not actions of their own; they
# are s3:PutObject, told apart by s3:ObjectCreationOperation, which is false for the three calls that
# cannot carry a conditional header (AWS S3 User Guide, "Enforce conditional writes on Amazon S3
# buckets"). s3:if-none-match is present only when the request carries If-None-Match.
_OBJECT_CREATION = {"PutObject": "true", "CopyObject": "true", "CompleteMultipartUpload": "true",
                    "CreateMultipartUpload": "false", "UploadPart": "false", "UploadPartCopy": "false"}
_OTHER_ACTIONS = {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "AbortMultipartUpload": "s3:AbortMultipartUpload",
                  "PutObjectTagging": "s3:PutObjectTagging"}


def s3_request(operation: str, params: dict[str, Any], bucket_arn: str) -> tuple[str, str, dict[str, Any]]:
    """(action, resource, context) of one S3 API call made over TLS, as a bucket policy sees it."""
    context: dict[str, Any] = {"aws:SecureTransport": "true"}
    if operation == "ListObjectsV2":
        return "s3:ListBucket", bucket_arn, {**context, "s3:prefix": params.get("Prefix", "")}
    resource = f"{bucket_arn}/{params['Key']}"
    if operation in _OBJECT_CREATION:
        context["s3:ObjectCreationOperation"] = _OBJECT_CREATION[operation]
        if "IfNoneMatch" in params:
            context["s3:if-none-match"] = params["IfNoneMatch"]
        return "s3:PutObject", resource, context
    return _OTHER_ACTIONS[operation], resource, context
