"""Names derived from stack and model names (stackconfig/naming.py): DNS-label-safe, injective
over stack names, and within the limits of the AWS and Kubernetes names built from them."""
from __future__ import annotations

import pytest

from stackconfig.naming import LABEL_MAX, name_problems, prefixed, slug, stack_slug


@pytest.mark.parametrize("text, expected", [
    ("Qwen/Qwen3-1.7B", "qwen3-1-7b"),
    ("org/family/Model_Name", "model-name"),      # only the part after the last "/"
    ("plain", "plain"),
    ("-Leading..and trailing--", "leading-and-trailing"),
    ("UPPER", "upper"),
    ("a/", ""),
])
def test_slug_is_the_last_path_part_lowercased_with_runs_of_other_characters_as_one_dash(text, expected):
    assert slug(text) == expected


@pytest.mark.parametrize("stack, expected", [
    ("qwen3-32b", "qwen3-32b"),                 # already a slug: kept as it is
    ("qwen3-1.7b", "qwen3-1-7b-c7b98a"),        # slugging lost the ".": sha256("qwen3-1.7b")[:6] appended
    ("qwen3-32b-qwen3-1.7b", "qwen3-32b-qwen3-1-7b-a5a34f"),
    ("Qwen3", "qwen3-9562c4"),
    ("-edge-", "edge-8074bf"),
])
def test_a_stack_slug_carries_a_hash_of_the_stack_name_whenever_slugging_changed_it(stack, expected):
    assert stack_slug(stack) == expected


def test_stack_slugs_are_injective_where_slugs_are_not():
    names = ["qwen3-1.7b", "qwen3-1-7b", "Qwen3-1.7b", "qwen3_1_7b"]
    assert len({slug(n) for n in names}) == 1
    assert len({stack_slug(n) for n in names}) == len(names)


def test_prefixed_names_are_the_stack_slug_after_sd():
    assert prefixed("qwen3-32b") == "sd-qwen3-32b"
    assert prefixed("qwen3-1.7b") == "sd-qwen3-1-7b-c7b98a"


def test_a_stack_name_fits_exactly_up_to_the_label_limit():
    longest = "x" * (LABEL_MAX - len("sd-"))
    assert len(prefixed(longest)) == LABEL_MAX == 63
    assert name_problems(longest) == []
    assert name_problems(longest + "x") == [
        "derives 'sd-" + "x" * 61 + "' (64 characters) but Kubernetes namespaces and label values allow 63; "
        "rename the stack (`pulumi stack rename`) to at most 60 characters"]


def test_the_advised_length_accounts_for_the_hash_suffix():
    # 57 characters slugged to 57 plus "-" and a 6-character hash: "sd-" + 64 = 67, four too many.
    stack = "a." + "b" * 55
    (problem,) = name_problems(stack)
    assert problem.endswith("(67 characters) but Kubernetes namespaces and label values allow 63; "
                            "rename the stack (`pulumi stack rename`) to at most 53 characters")
    assert name_problems("a." + "b" * 51) == []
