"""`make destroy STACK=<s>`: `pulumi destroy` the stack, then sweep its region for leftovers.

The sweep runs even when the destroy fails: what it lists (instances, network interfaces) is
usually why (docs/operations.md, "Troubleshooting"). Exits non-zero when either step does. A platform is
destroyed last: while a pairing stack that names it is still deployed, this refuses and names
it (its namespace, NodePool and servers run on the platform's cluster).
"""
from __future__ import annotations

import subprocess
import sys

from stackconfig import ConfigError, PlatformSpec, StackSpec
from stackconfig.source import PROJECT_DIR, load_stack, stack_names

from . import sweep
from .stack import (
    ToolError,
    aws_session,
    pulumi_outputs,
    require_cli,
    stack_spec,
    stack_tool,
)


def pairings_on(platform: str) -> list[str]:
    """Stack files of pairings that name `platform` (sd-trn2:platform: <org>/<project>/<platform>)."""
    found = []
    for name in stack_names():
        try:
            spec = load_stack(name).spec()
        except (ConfigError, FileNotFoundError):
            continue
        if isinstance(spec, StackSpec) and spec.shared and spec.platform_reference.rsplit("/", 1)[-1] == platform:
            found.append(name)
    return found


def deployed(stack: str) -> bool:
    try:
        return bool(pulumi_outputs(stack))
    except ToolError:  # no such stack, or no outputs: nothing of it is running
        return False


def destroy(stack: str) -> int:
    spec = stack_spec(stack)
    aws_session(spec.region)  # the sweep needs credentials too: say so before anything is destroyed
    require_cli("pulumi")
    if isinstance(spec, PlatformSpec):
        live = [p for p in pairings_on(stack) if deployed(p)]
        if live:
            raise ToolError(f"platform {stack} still hosts pairing stack(s) {', '.join(live)}: destroy them first "
                            f"({'; '.join(f'make destroy STACK={p}' for p in live)})")
    destroyed = subprocess.run(["pulumi", "destroy", "--stack", stack], cwd=PROJECT_DIR).returncode
    if destroyed != 0:
        print(f"pulumi destroy --stack {stack} exited with {destroyed}; sweeping {spec.region} anyway", file=sys.stderr)
    swept = sweep.sweep(stack)
    return 1 if destroyed or swept else 0


def main(argv: list[str] | None = None) -> int:
    return stack_tool("destroy", __doc__, destroy, argv)


if __name__ == "__main__":
    sys.exit(main())
