"""The operator CLI: `python -m tools <command> [options]`; `make <command> STACK=...` wraps it.

    plan        what `pulumi up` would create, offline (--stack S [--preview]); plan-all for every stack
    preflight   read-only checks with your AWS credentials (--stack S [--json])
    up          preflight, then `pulumi up`, then what to run next (--stack S [--skip-preflight] [--allow-open-endpoint])
    benchmark   run the benchmark again from the stack's CronJob (--stack S)
    results     fetch the latest (or --run-id) run and write its report (--stack S [--run-id R] [--bucket B])
    sweep       list what Karpenter or EKS left in the stack's region (--stack S)
    destroy     `pulumi destroy`, then the sweep (--stack S)
    lock        pin every model the stack serves to the hub commit main (or --ref MODEL=REF) points to now
                (--stack S [--ref MODEL=REF ...])
    scan        checkov over every stack's Kubernetes objects and AWS resources, against security/checkov-allowlist.yaml
                (--checkov PATH [--stack S]; `make scan` installs checkov)
    rehearse    plan a stack, then run its rendered pods here as local processes against vLLM on CPU
                (--stack S [--faults a,b] ...; docs/rehearsal.md)

Exit codes, for every command: 0 all clear; 1 a check, a tool or AWS failed; 2 bad input (an
invalid stack file, an unknown stack or option, a Python without the pinned packages: `make setup`,
then `.venv/bin/python -m tools ...`). A closed output pipe (`... | head`) ends the
command quietly with 1. Scripts should call this CLI rather than make, which reports any failing
recipe as 2.
"""
from __future__ import annotations

import difflib
import importlib
import os
import sys

# command -> the module whose main(argv) runs it. Imported when run, so a command loads only what
# it needs (`sweep` never loads the Pulumi program; `plan` is the one that runs it, offline).
COMMANDS = {
    "plan": "offline.plan",
    "plan-all": "offline.plan",
    "preflight": "tools.preflight.run",
    "up": "tools.up",
    "benchmark": "tools.rerun_benchmark",
    "results": "tools.fetch_results",
    "sweep": "tools.sweep",
    "destroy": "tools.destroy",
    "scan": "offline.scan",
    "lock": "tools.lock",
    "rehearse": "rehearse.cli",
}

PROJECT_PACKAGES = frozenset({"tools", "offline", "stackconfig", "components", "benchmark", "modelstore", "distributed"})
"""A missing module of these is the program's own fault; any other is a Python without the venv's packages."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        near = difflib.get_close_matches(command, COMMANDS, n=1)
        print(f"unknown command {command!r}{f' (did you mean {near[0]}?)' if near else ''}; commands: "
              f"{', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[command])
        if command == "plan-all":
            return module.plan_all(rest)
        return module.main(rest)
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] in PROJECT_PACKAGES:
            raise  # a fault of the program itself, not of the Python running it
        print(f"{command}: this Python ({sys.executable}) lacks {error.name!r}, a pinned dependency of the CLI: "
              f"run `make setup`, then `.venv/bin/python -m tools {command} ...` (or `make {command}`)", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # argparse: --help (0) or a bad option (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    except BrokenPipeError:
        # The reader closed the pipe (`python -m tools preflight --json | head`): stop quietly
        # (Python docs, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
