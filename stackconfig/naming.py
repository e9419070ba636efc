"""Names derived from stack names, injective and within the limits of where they are used.

A stack name may hold characters that AWS and Kubernetes names cannot ("qwen3-32b-qwen3-1.7b").
Slugging alone would map "qwen3-1.7b" and "qwen3-1-7b" to one name, and two stacks (which
cannot see each other) would then fight over one cluster, queue, namespace or NodePool. So
whenever the slug differs from the stack name, a short hash of the stack name is appended.
"""
from __future__ import annotations

import hashlib
import re

HASH_LENGTH = 6
PREFIX = "sd-"

# Limits of the names built from a slug (the longest user of each slug decides):
# - EKS cluster name: 1-100 characters (CreateCluster `name`); the interruption queue takes the
#   cluster name and SQS allows 80 (CreateQueue `QueueName`), so 80 binds: "sd-" + slug.
# - Kubernetes namespace (DNS-1123 label) and label values: 63 characters: "sd-" + slug.
CLUSTER_NAME_MAX = 80
LABEL_MAX = 63


def slug(text: str) -> str:
    """Lowercase DNS-label-safe form ("Qwen/Qwen3-1.7B" -> "qwen3-1-7b"); lossy, see stack_slug."""
    return re.sub(r"[^a-z0-9]+", "-", text.rsplit("/", 1)[-1].lower()).strip("-")


def stack_slug(stack: str) -> str:
    """The stack's name in AWS/Kubernetes names: its slug, plus a hash of the stack name when
    slugging lost information, so distinct stacks never share a slug."""
    base = slug(stack)
    if base == stack:
        return base
    return f"{base}-{hashlib.sha256(stack.encode()).hexdigest()[:HASH_LENGTH]}"


def prefixed(stack: str) -> str:
    """"sd-<stack slug>": the cluster, namespace, NodePool and dashboard names of a stack."""
    return f"{PREFIX}{stack_slug(stack)}"


def name_problems(stack: str) -> list[str]:
    """What is wrong with a stack name for the names derived from it (empty when fine)."""
    name = prefixed(stack)
    limit = min(CLUSTER_NAME_MAX, LABEL_MAX)
    if len(name) > limit:
        return [f"derives {name!r} ({len(name)} characters) but Kubernetes namespaces and label values allow "
                f"{LABEL_MAX}; rename the stack (`pulumi stack rename`) to at most "
                f"{len(stack) - (len(name) - limit)} characters"]
    return []
