"""`make benchmark STACK=<s>`: run the benchmark again, without touching the stack.

Creates a Job from the suspended `llmperf` CronJob the stack deploys. Each run writes its
results under its own run id, so earlier runs are kept. Needs kubectl pointed at the cluster
(README: `pulumi stack output kubeconfig --show-secrets`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import datetime, timezone

from components.benchmark import CRONJOB_NAME
from offline.stacks import load_stack


def command(now: datetime, namespace: str) -> list[str]:
    job = f"llmperf-manual-{now.strftime('%Y%m%d-%H%M%S')}"
    return ["kubectl", "--namespace", namespace, "create", "job", job, f"--from=cronjob/{CRONJOB_NAME}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, help="for the message only: kubectl acts on its current context")
    args = parser.parse_args(argv)
    namespace = load_stack(args.stack).spec().namespace
    argv_ = command(datetime.now(timezone.utc), namespace)
    print(f"{args.stack}: {' '.join(argv_)}")
    result = subprocess.run(argv_)
    if result.returncode == 0:
        print(f"follow it with: kubectl -n {namespace} logs -f job/{argv_[5]}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
