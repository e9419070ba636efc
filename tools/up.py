"""`python -m tools up --stack S [--skip-preflight] [--allow-open-endpoint]` (make up STACK=S): preflight,
then `pulumi up`, then the commands to follow what it started.

A stack that creates a cluster whose public API endpoint is open to 0.0.0.0/0 (cluster.publicAccessCidrs,
open by default) is asked about first: at a terminal, a yes/no question; without one, it is refused
unless `--allow-open-endpoint` (make up ... ALLOW_OPEN_ENDPOINT=1) says yes. A FAIL in the preflight
stops before anything is created (exit 1); `--skip-preflight` goes straight to `pulumi up`. Exits 0
when `pulumi up` succeeds, 1 when it or the preflight fails or the open endpoint is not confirmed, 2
when the stack file is invalid.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from stackconfig import PlatformSpec, StackSpec
from stackconfig.source import PROJECT_DIR, stack_argument

from .preflight import run as preflight
from .stack import require_cli, run_tool, stack_spec


def next_steps(stack: str, spec: StackSpec | PlatformSpec) -> str:
    """What to run after a successful `pulumi up`: the stack's kubeconfig, then where its servers
    and benchmark can be followed (docs/operations.md, "Watching it come up")."""
    kubeconfig = f"(umask 077; pulumi stack output kubeconfig --show-secrets --stack {stack} > kubeconfig)"
    if isinstance(spec, PlatformSpec):
        return "\n".join([
            f"Platform {stack} is up. Next:",
            f"  {kubeconfig}",
            "  export KUBECONFIG=$PWD/kubeconfig",
            "  kubectl get nodes                                  # the system nodes",
            f"  make up STACK=<pairing>                            # a pairing whose stack file says platform: .../{stack}",
        ])
    sd = next((v.name for v in spec.variants if v.is_speculative), spec.variants[0].name)
    return "\n".join([
        f"Stack {stack} is up; its servers now download, compile and load (minutes to hours). Next:",
        f"  {kubeconfig}",
        f"  export KUBECONFIG=$PWD/kubeconfig NS={spec.namespace}",
        "  kubectl get nodepools,nodeclaims                   # the trn2 nodes coming up",
        "  kubectl -n $NS get pods -w                         # vllm-<variant> pods, then llmperf-<hash>",
        f"  kubectl -n $NS logs -f deploy/vllm-{sd}             # compiling, or loading from the model store",
        "  kubectl -n $NS logs -f job/$(kubectl -n $NS get jobs -o name | grep llmperf- | head -1 | cut -d/ -f2)",
        f"  make results STACK={stack}                         # the report, once the benchmark has run",
    ])


OPEN_TO_ALL = "0.0.0.0/0"


def open_endpoint_confirmed(stack: str, spec: StackSpec | PlatformSpec, allowed: bool) -> bool:
    """False when the stack would create a cluster whose public endpoint anyone may reach and the
    operator has not said yes (a shared pairing creates no cluster: nothing to ask)."""
    platform = spec if isinstance(spec, PlatformSpec) else None if spec.shared else spec.platform
    if platform is None or OPEN_TO_ALL not in platform.cluster.public_access_cidrs:
        return True
    warning = (f"The cluster's public API endpoint will accept connections from anywhere ({OPEN_TO_ALL}, "
               f"cluster.publicAccessCidrs in stacks/Pulumi.{stack}.yaml); nodes use the private endpoint either way.")
    if allowed:
        print(f"{warning} Allowed (--allow-open-endpoint).")
        return True
    if not sys.stdin.isatty():
        print(f"{warning} Not confirmed (no terminal to ask on): narrow cluster.publicAccessCidrs, or run "
              f"`make up STACK={stack} ALLOW_OPEN_ENDPOINT=1`.", file=sys.stderr)
        return False
    return input(f"{warning}\nCreate it open? [y/N] ").strip().lower() in ("y", "yes")


def up(stack: str, skip_preflight: bool, allow_open_endpoint: bool = False) -> int:
    spec = stack_spec(stack)
    require_cli("pulumi")
    if not open_endpoint_confirmed(stack, spec, allow_open_endpoint):
        return 1
    if skip_preflight:
        print("preflight skipped (--skip-preflight)")
    else:
        checked = preflight.main(["--stack", stack])
        if checked != 0:
            print(f"preflight failed: fix what it names, or run `make up STACK={stack} SKIP_PREFLIGHT=1`", file=sys.stderr)
            return checked
    if subprocess.run(["pulumi", "up", "--stack", stack], cwd=PROJECT_DIR).returncode != 0:
        return 1
    print(next_steps(stack, spec))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools up", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, type=stack_argument)
    parser.add_argument("--skip-preflight", action="store_true", help="go straight to `pulumi up`")
    parser.add_argument("--allow-open-endpoint", action="store_true",
                        help="create a cluster whose public endpoint is open to 0.0.0.0/0 without asking")
    args = parser.parse_args(argv)
    return run_tool(lambda: up(args.stack, args.skip_preflight, args.allow_open_endpoint))


if __name__ == "__main__":
    sys.exit(main())
