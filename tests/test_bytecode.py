"""tools/bytecode.py, the step of `make setup` that byte-compiles what the operator commands import:
requirements.txt's packages and what they depend on, from the installed metadata, nothing else."""
from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.bytecode import REQUIREMENTS, closure, requirements, sources


def names(roots: list[str]) -> set[str]:
    return {canonicalize_name(distribution.metadata["Name"]) for distribution in closure([Requirement(root) for root in roots])}


def test_a_closure_follows_dependencies_but_not_extras_nobody_asked_for():
    # requests' PySocks and chardet are behind extras ("socks", "use-chardet-on-py3"): followed,
    # they would name packages make setup never installs.
    assert names(["requests"]) == {"requests", "charset-normalizer", "idna", "urllib3", "certifi"}


def test_what_a_plan_imports_is_compiled_and_the_test_tools_and_torch_are_not():
    compiled = names([str(requirement) for requirement in requirements(REQUIREMENTS)])
    # pulumi's own dependencies (grpc, protobuf) are imported by every plan.
    assert {"pulumi", "pulumi-aws", "pulumi-kubernetes", "pulumi-eks", "grpcio", "protobuf", "boto3", "matplotlib"} <= compiled
    assert not {"torch", "transformers", "sympy", "moto", "hypothesis", "pytest"} & compiled


def test_the_sources_are_the_installed_python_files():
    files = sources(closure([Requirement("semver")]))
    assert files and all(file.endswith(".py") for file in files)
    assert any(file.endswith("/semver/__init__.py") for file in files)
