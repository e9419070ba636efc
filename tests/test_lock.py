"""`python -m tools lock`: each model a stack serves pinned to the commit its ref points to now, asked
of the (fake) hub and written into the stack file; bad refs exit 2 naming the key, nothing written.
The plan and the preflight name every model left on `main`."""
from __future__ import annotations

import shutil

import pytest

from modelstore.hub import Hub
from offline.plan import pairing_lines
from rehearse.hub import LocalHub, Repository
from stackconfig import source as stack_source
from stackconfig.source import PROJECT_DIR, StackFiles, load_stack
from tools import lock
from tools.preflight.hub import check_revisions

STACK = "llama3.1-8b-llama3.2-1b"
TARGET, DRAFT = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"
FILES = {"config.json": b"{}", "model.safetensors": b"weights"}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the project's stack files; stackconfig.source reads (and lock writes) there."""
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(stack_source.STACKS_DIR, tmp_path / "stacks")
    monkeypatch.setattr(stack_source, "FILES", StackFiles(tmp_path))
    return tmp_path / "stacks" / f"Pulumi.{STACK}.yaml"


@pytest.fixture
def hub():
    repos = {TARGET: Repository(dict(FILES), commit="a" * 40, tags=("v1.0",)), DRAFT: Repository(dict(FILES), commit="b" * 40)}
    with LocalHub(repos) as fake:
        yield fake


def run(hub, *argv) -> int:
    return lock.main(["--stack", STACK, *argv], hub=Hub(hub.url, sleep=lambda s: None))


def unpin(path) -> None:
    """The shipped stack pins its models; start from a file that does not."""
    text = path.read_text()
    if "sd-trn2:modelRevisions:" in text:
        head, _, tail = text.partition("  sd-trn2:modelRevisions:\n")
        tail = "\n".join(line for line in tail.splitlines() if not line.startswith("    "))
        path.write_text(head + tail + ("\n" if tail else ""))
    assert {m.revision for m in load_stack(STACK).spec().prepared_models} == {"main"}


def test_lock_pins_every_unpinned_model_keeping_the_files_comments(project, hub, capsys):
    unpin(project)
    comments = [line for line in project.read_text().splitlines() if line.lstrip().startswith("#")]
    assert run(hub) == 0
    spec = load_stack(STACK).spec()
    assert {m.model: m.revision for m in spec.prepared_models} == {TARGET: "a" * 40, DRAFT: "b" * 40}
    assert [line for line in project.read_text().splitlines() if line.lstrip().startswith("#")] == comments
    assert f"{TARGET} pinned at {'a' * 40}" in capsys.readouterr().out
    assert run(hub) == 0 and "every model is pinned already" in capsys.readouterr().out


def test_a_tag_is_resolved_to_its_commit(project, hub):
    unpin(project)
    assert run(hub, "--ref", f"{TARGET}=v1.0") == 0
    assert {m.model: m.revision for m in load_stack(STACK).spec().prepared_models}[TARGET] == "a" * 40


@pytest.mark.parametrize("ref, asks_the_hub", [("no-such-tag", True), ("bad ref", False), ("a..b", False)])
def test_a_ref_neither_a_commit_nor_known_exits_2_naming_the_key_and_writes_nothing(project, hub, capsys, ref, asks_the_hub):
    before = project.read_text()
    assert run(hub, "--ref", f"{TARGET}={ref}") == 2
    assert f"modelRevisions.{TARGET}" in capsys.readouterr().err and project.read_text() == before
    assert any("/revision/" + ref in r for r in hub.repos[TARGET].requests) is asks_the_hub


def test_a_ref_for_a_model_the_stack_does_not_serve_exits_2(project, hub, capsys):
    assert run(hub, "--ref", "Qwen/Qwen3-32B=main") == 2
    assert "'Qwen/Qwen3-32B' is not a model the stack serves" in capsys.readouterr().err


def test_the_plan_and_the_preflight_name_every_unpinned_model(project, hub):
    unpin(project)
    spec = load_stack(STACK).spec()
    (line,) = [line for line in pairing_lines(spec) if "unpinned" in line]
    assert f"{TARGET}, {DRAFT}" in line and f"make lock STACK={STACK}" in line
    result = check_revisions(spec)
    assert result.status == "WARN" and f"{TARGET}, {DRAFT}" in result.found
    assert run(hub) == 0
    spec = load_stack(STACK).spec()
    assert check_revisions(spec).status == "PASS" and not [line for line in pairing_lines(spec) if "unpinned" in line]
