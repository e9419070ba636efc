"""A stack name is checked before any path is built from it, by every command that takes one, and
a plan deletes nothing but its own folder inside the plan (or preview) folder.

Once, `--stack ../..` made `make plan` delete the whole checkout: the output folder was built from
the unchecked name and removed when the name was then refused."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from offline import plan
from stackconfig.source import PROJECT_DIR
from tools import __main__ as cli

STACK = "qwen3-32b-qwen3-1.7b"
TOO_LONG = "a" * 101
"""Pulumi refuses a stack name over 100 characters (pulumi/pulumi pkg/backend/diy,
ParseReference: "stack names are limited to 100 characters")."""


def hostile_names(canary: Path) -> list[str]:
    """Names that reach outside the plan folder, or name no file: relative climbs, the canary's
    own absolute path, dot-only names, an empty one and one too long. (Never "/": on code with the
    bug this test guards against, it would remove the machine's root.)"""
    return ["..", "../..", "../victim", ".", "...", str(canary), "", TOO_LONG, "a/b", "victim/.."]


@pytest.fixture
def layout(tmp_path):
    """build/plan inside a checkout-like folder, with canaries where a climb from it lands."""
    out = tmp_path / "checkout" / "build" / "plan"
    out.mkdir(parents=True)
    canaries = [tmp_path / "checkout" / "build" / "victim" / "keep", tmp_path / "checkout" / "build" / "keep",
                tmp_path / "checkout" / "keep", tmp_path / "checkout" / "build" / "plan" / "keep"]
    for canary in canaries:
        canary.parent.mkdir(parents=True, exist_ok=True)
        canary.write_text("still here")
    return out, canaries


@pytest.mark.parametrize("preview", [False, True], ids=["plan", "preview"])
def test_a_hostile_stack_name_exits_2_and_deletes_nothing(layout, capsys, preview):
    out, canaries = layout
    absolute = out.parent / "victim"
    for name in hostile_names(absolute):
        code = cli.main(["plan", "--stack", name, "--out", str(out), *(["--preview"] if preview else [])])
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert "Traceback" not in err
        survivors = [c for c in canaries if c.exists()]
        assert survivors == canaries, f"--stack {name!r} deleted {set(canaries) - set(survivors)}"


@pytest.mark.parametrize("command", ["preflight", "up", "destroy", "sweep", "benchmark", "results", "lock"])
def test_every_command_refuses_a_hostile_name_before_it_acts(capsys, command, tmp_path):
    for name in hostile_names(tmp_path):
        assert cli.main([command, "--stack", name]) == 2, (command, name)
        err = capsys.readouterr().err
        assert "stack name" in err or "set STACK" in err, (command, name, err)
        assert "Traceback" not in err


def test_scan_refuses_a_hostile_name_before_it_renders(capsys, tmp_path):
    for name in hostile_names(tmp_path):
        assert cli.main(["scan", "--checkov", "/bin/false", "--stack", name]) == 2, name
        assert "Traceback" not in capsys.readouterr().err


def test_the_name_message_says_what_a_name_may_hold(capsys):
    assert cli.main(["plan", "--stack", "../x"]) == 2
    err = capsys.readouterr().err
    assert "'../x' is not a stack name" in err and "at most 100" in err and STACK in err
    assert cli.main(["plan", "--stack", ".."]) == 2
    assert "'..' is not a stack name" in capsys.readouterr().err


def test_a_valid_name_still_clears_only_its_own_earlier_plan(layout, capsys):
    out, canaries = layout
    stale = out / STACK / "stale.txt"
    stale.parent.mkdir()
    stale.write_text("from an earlier plan")
    assert cli.main(["plan", "--stack", STACK, "--out", str(out)]) == 0
    assert not stale.exists() and (out / STACK / "resources.json").exists()
    assert all(c.exists() for c in canaries)


def test_a_plan_folder_that_is_a_link_elsewhere_is_not_followed(tmp_path, capsys):
    """build/plan/<stack> linked to a folder elsewhere: neither emptied nor written through."""
    out = tmp_path / "plan"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "keep").parent.mkdir(parents=True)
    (elsewhere / "keep").write_text("still here")
    out.mkdir()
    (out / STACK).symlink_to(elsewhere, target_is_directory=True)
    assert plan.main(["--stack", STACK, "--out", str(out)]) == 2
    assert "link" in capsys.readouterr().err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep"]


def test_make_plan_with_a_dot_dot_stack_exits_2_and_deletes_nothing():
    """`make plan STACK=..` once removed all of build/ (the name matched the pattern)."""
    make = shutil.which("make", path="/usr/local/bin:/usr/bin:/bin")
    canary = PROJECT_DIR / "build" / f"canary-{__name__}"
    canary.parent.mkdir(exist_ok=True)
    canary.write_text("still here")
    try:
        done = subprocess.run([make, "--no-print-directory", "plan", "STACK=.."], cwd=PROJECT_DIR, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert "'..' is not a stack name" in done.stderr
        assert canary.exists()
    finally:
        canary.unlink(missing_ok=True)


def test_clear_plan_removes_only_a_folder_directly_inside_the_plan_folder(layout):
    """The second guard, for a path that reaches it whatever its name: it removes its own folder and
    refuses a climb, the plan folder itself, or a folder deeper down."""
    out, canaries = layout
    mine = out / STACK
    mine.mkdir()
    plan.clear_plan(mine, out)
    assert not mine.exists()
    for path in (out / "..", out / ".", out / "a" / "b", out.parent / "victim", out / "x" / ".."):
        with pytest.raises(plan.PlanFolderError):
            plan.clear_plan(path, out)
    assert all(c.exists() for c in canaries)
