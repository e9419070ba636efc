"""The operator CLI (`python -m tools <command>`) and the make targets that wrap it: documented exit
codes, no traceback for a closed pipe or a bad name, and make variables that never reach a shell."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from stackconfig.source import PROJECT_DIR
from tools import __main__ as cli

STACK = "qwen3-32b-qwen3-1.7b"


def run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", *argv], cwd=PROJECT_DIR, capture_output=True, text=True,
                          timeout=120, **kwargs)


@pytest.mark.parametrize("argv, code, says", [
    (["plna"], 2, "unknown command 'plna' (did you mean plan?)"),
    (["plan"], 2, "the following arguments are required: --stack"),
    (["plan", "--stack", ""], 2, "set STACK=<name> (--stack); stacks:"),
    (["plan", "--stack", "qwen3-32b-qwen3-17b"], 2, "(did you mean qwen3-32b-qwen3-1.7b?)"),
    (["sweep", "--stack", "no-such-stack"], 2, "no stack file Pulumi.no-such-stack.yaml"),
    (["plan", "--stack", "../../etc/passwd"], 2, "'../../etc/passwd' is not a stack name"),
    ([], 2, "Exit codes, for every command"),
])
def test_bad_input_exits_2_with_one_message(argv, code, says, capsys):
    assert cli.main(argv) == code
    captured = capsys.readouterr()
    assert says in captured.out + captured.err and "Traceback" not in captured.err


def test_every_command_names_an_existing_module_with_a_main():
    import importlib

    for command, module in cli.COMMANDS.items():
        loaded = importlib.import_module(module)
        assert callable(getattr(loaded, "plan_all" if command == "plan-all" else "main")), command


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_command_names_itself_in_its_usage(command, capsys):
    """`python -m tools <command> --help` says how to call it, not `usage: __main__.py`."""
    assert cli.main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m tools {command} ")


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_outside_the_venv_every_command_says_how_to_run_it(command):
    """A Python without the pinned packages (here this one with -S: no site-packages, as a system
    python3 without pulumi or boto3) gets one line naming make setup and .venv/bin/python, exit 2."""
    done = subprocess.run([sys.executable, "-S", "-m", "tools", command, "--stack", STACK], cwd=PROJECT_DIR,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"{command}: this Python ({sys.executable}) lacks '") and done.stderr.count("\n") == 1
    assert "make setup" in done.stderr and f".venv/bin/python -m tools {command}" in done.stderr


def test_a_missing_module_of_the_program_itself_is_not_blamed_on_the_python(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "broken", "tools.no_such_module")
    with pytest.raises(ModuleNotFoundError, match="tools.no_such_module"):
        cli.main(["broken"])


def test_a_closed_output_pipe_ends_quietly():
    """`python -m tools plan --stack S | head -c 10`: the plan prints far more than the reader
    takes; the CLI stops without a BrokenPipeError traceback."""
    pipeline = subprocess.run(f"'{sys.executable}' -m tools plan --stack {STACK} | head -c 10", shell=True, cwd=PROJECT_DIR,
                              capture_output=True, text=True, timeout=120)
    assert pipeline.stdout == "Plan for s" and "Traceback" not in pipeline.stderr and "BrokenPipe" not in pipeline.stderr


def test_make_variables_never_reach_a_shell(tmp_path):
    make = shutil.which("make", path="/usr/local/bin:/usr/bin:/bin")
    marker = tmp_path / "pwned"
    done = subprocess.run([make, "--no-print-directory", "plan", f"STACK=x;touch {marker}", "PREVIEW=1;touch " + str(marker),
                           f"PREVIOUS=$(touch {marker})"],
                          cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not marker.exists()
    assert "'x;touch " in done.stderr and "is not a stack name" in done.stderr


def test_make_help_lists_the_targets_and_the_stacks():
    make = shutil.which("make", path="/usr/local/bin:/usr/bin:/bin")
    done = subprocess.run([make, "--no-print-directory"], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "make plan STACK=<s>" in done.stdout and STACK in done.stdout
    phony = re.search(r"^\.PHONY:(.*)$", (PROJECT_DIR / "Makefile").read_text(), flags=re.M).group(1).split()
    assert [target for target in phony if f"make {target}" not in done.stdout and target != "help"] == []
