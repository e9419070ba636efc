"""The layout holds: which part of the program may import which, read from the source with `ast`.

- components/platform/ and components/pairing/ meet only at the cluster handle: neither imports the
  other; both may import the seam (components/handle.py) and the shared identity and IAM helpers.
- stackconfig/ (typed config) imports no Pulumi and nothing of components/, offline/ or tools/, so
  validation runs anywhere; benchmark/ (the benchmark pod's code) and modelstore/ (the model store
  pods' code) import no other part of the project, so their pods run them alone; nor does
  distributed/ (seed 002's draft and target servers). benchmark/ imports nothing the pod image
  lacks: the standard library and the packages of its lock. reporting/ (the operator's reports over
  downloaded results) reads them through benchmark/ only.
- tools/ (operator commands) never imports the Pulumi program or its offline engine; the CLI's
  dispatcher (tools/__main__.py) names modules by string, and only `plan` and `plan-all` name
  offline/ (the offline plan runs the program by design).
- No two modules import each other in a circle.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from stackconfig.source import PROJECT_DIR
from tests.helpers import parse_python

PACKAGES = ("components", "stackconfig", "benchmark", "reporting", "modelstore", "offline", "tools", "distributed", "rehearse")
SEAM = {"components", "components.handle", "components.identity", "components.iam", "components.nodeclass"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (PROJECT_DIR / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module a file imports (relative imports resolved), at any depth of the file."""
    own = module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                root = ".".join(base + ([node.module] if node.module else []))
            else:
                root = node.module or ""
            found.add(root)
            found |= {f"{root}.{alias.name}" for alias in node.names}
    return found


MODULES = modules()
GRAPH = {name: {i for i in imports(path) if i in MODULES and i != name} for name, path in MODULES.items()}


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("wing, other", [("components.platform", "components.pairing"),
                                         ("components.pairing", "components.platform")])
def test_the_wings_meet_only_at_the_handle(wing, other):
    crossing = {m: sorted(i for i in imported if in_package(i, other))
                for m, imported in GRAPH.items() if in_package(m, wing)}
    assert {m: i for m, i in crossing.items() if i} == {}
    outside = {m: sorted(i for i in imported if in_package(i, "components") and not in_package(i, wing) and i not in SEAM)
               for m, imported in GRAPH.items() if in_package(m, wing)}
    assert {m: i for m, i in outside.items() if i} == {}


@pytest.mark.parametrize("package, forbidden", [
    ("stackconfig", ("components", "offline", "tools", "pulumi")),
    ("benchmark", ("components", "offline", "tools", "stackconfig", "modelstore", "reporting", "pulumi")),
    ("reporting", ("components", "offline", "tools", "stackconfig", "modelstore", "pulumi")),
    ("modelstore", ("components", "offline", "tools", "stackconfig", "benchmark", "pulumi")),
    ("tools", ("components", "offline", "pulumi")),
    ("distributed", ("components", "offline", "tools", "stackconfig", "benchmark", "modelstore", "pulumi")),
    # The rehearsal runs what the plan rendered; it never builds resources itself, and no shipped
    # code reads the tests' stand-ins.
    ("rehearse", ("components", "pulumi", "tests")),
])
def test_lower_parts_do_not_reach_up(package, forbidden):
    reached = {m: sorted(i for i in imports(MODULES[m]) if any(in_package(i, f) for f in forbidden))
               for m in MODULES if in_package(m, package)}
    assert {m: i for m, i in reached.items() if i} == {}


def pod_lock_packages() -> set[str]:
    """The import names of benchmark/requirements-pod.lock's packages ("huggingface-hub==..." is
    huggingface_hub); a package importable under another name is not found, which errs on the safe
    side: the test below then fails and that name is added here with its source."""
    lock = (PROJECT_DIR / "benchmark" / "requirements-pod.lock").read_text()
    return {m.group(1).lower().replace("-", "_") for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", lock, re.M)}


def test_the_benchmark_pod_imports_only_what_its_image_has():
    """Every benchmark/ module is shipped to the pod (benchmark/pod.py POD_MODULES), so none may
    import reporting/ or a package the pod's Python (3.11, the standard library) and its lock lack."""
    has = set(sys.stdlib_module_names) | pod_lock_packages() | {"benchmark"}
    lacking = {m: sorted(i for i in imports(MODULES[m]) if i.split(".")[0] not in has)
               for m in MODULES if in_package(m, "benchmark")}
    assert {m: i for m, i in lacking.items() if i} == {}
    assert {"boto3", "botocore", "huggingface_hub"} <= pod_lock_packages()


def test_the_cli_runs_the_offline_engine_only_to_plan_and_to_scan():
    from tools.__main__ import COMMANDS

    outside = {command: module for command, module in COMMANDS.items() if not module.startswith("tools.")}
    # The rehearsal plans first (offline.plan), then runs what the plan rendered.
    assert outside == {"plan": "offline.plan", "plan-all": "offline.plan", "scan": "offline.scan", "rehearse": "rehearse.cli"}


def test_no_circle_of_imports():
    """Depth-first search for a back edge in the module graph."""
    state: dict[str, str] = {}
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for nxt in sorted(GRAPH[name]):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_the_walk_sees_the_imports_it_judges():
    """Guards the checker: a known cross-wing import would be caught, relative imports resolve."""
    assert "components.handle" in GRAPH["components.pairing.trn2_nodes"]
    assert "components.platform.addons" in GRAPH["components.platform.cluster"]
    assert {"components.pairing", "components.platform"} <= {i for i in imports(PROJECT_DIR / "__main__.py")}
    assert len(MODULES) > 60
    # What the pod-image check reads: the lazy imports inside functions too.
    assert {"boto3", "botocore.config", "benchmark.telemetry"} <= imports(MODULES["benchmark.driver"])
    assert "matplotlib.pyplot" in imports(MODULES["reporting.report"])
