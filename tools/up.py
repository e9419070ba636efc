"""`python -m tools up --stack S [--skip-preflight]` (make up STACK=S): preflight, then `pulumi up`,
then the commands to follow what it started.

A FAIL in the preflight stops before anything is created (exit 1); `--skip-preflight` goes straight
to `pulumi up`. Exits 0 when `pulumi up` succeeds, 1 when it or the preflight fails, 2 when the
stack file is invalid.
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
    and benchmark can be followed (README, "Watching it come up")."""
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


def up(stack: str, skip_preflight: bool) -> int:
    spec = stack_spec(stack)
    require_cli("pulumi")
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
    args = parser.parse_args(argv)
    return run_tool(lambda: up(args.stack, args.skip_preflight))


if __name__ == "__main__":
    sys.exit(main())
