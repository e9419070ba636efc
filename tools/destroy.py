"""`make destroy STACK=<s>`: `pulumi destroy` the stack, then sweep its region for leftovers.

The sweep runs even when the destroy fails: what it lists (instances, network interfaces) is
usually why (README, "Troubleshooting"). Exits non-zero when either step does.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from offline.stacks import ROOT

from . import sweep
from .stack import aws_session, require_cli, run_tool, stack_spec


def destroy(stack: str) -> int:
    spec = stack_spec(stack)
    aws_session(spec.region)  # the sweep needs credentials too: say so before anything is destroyed
    require_cli("pulumi")
    destroyed = subprocess.run(["pulumi", "destroy", "--stack", stack], cwd=ROOT).returncode
    if destroyed != 0:
        print(f"pulumi destroy --stack {stack} exited with {destroyed}; sweeping {spec.region} anyway", file=sys.stderr)
    swept = sweep.sweep(stack)
    return 1 if destroyed or swept else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    args = parser.parse_args(argv)
    return run_tool(lambda: destroy(args.stack))


if __name__ == "__main__":
    sys.exit(main())
