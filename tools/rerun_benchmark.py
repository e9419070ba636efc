"""`make benchmark STACK=<s>`: run the benchmark again, without touching the stack.

Creates a Job from the suspended CronJob the stack deploys (its `benchmarkCronJob` output), in
the stack's own cluster and namespace: kubectl gets the stack's kubeconfig in a private
temporary file, never the shell's current context. Each run writes its results under its own run
id, so earlier runs are kept. On a study stack it refuses while a study runs (its tuner holds
the lease benchmark/lease.py describes), naming it. Needs kubectl, the AWS CLI (the kubeconfig runs `aws eks
get-token`), AWS credentials and the Pulumi CLI logged in to the stack's backend.
"""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

from benchmark import lease

from .stack import (
    DeployedStack,
    ToolError,
    aws_session,
    deployed_stack,
    kubeconfig_file,
    kubectl,
    pairing_spec,
    require_cli,
    stack_tool,
)


def job_name(now: datetime) -> str:
    return f"llmperf-manual-{now.strftime('%Y%m%d-%H%M%S')}"


def rerun(stack: str, now: datetime) -> int:
    spec = pairing_spec(stack)
    aws_session(spec.region)  # kubectl's token comes from `aws eks get-token`: fail here, in one line
    require_cli("kubectl")
    require_cli("aws")
    deployed: DeployedStack = deployed_stack(stack, spec)
    job = job_name(now)
    with kubeconfig_file(deployed) as kubeconfig:
        if spec.study:
            refuse_while_a_study_runs(deployed, kubeconfig, now)
        argv = kubectl(deployed, kubeconfig, "create", "job", job, f"--from=cronjob/{deployed.benchmark_cron_job}")
        print(f"{stack}: kubectl --namespace {deployed.namespace} create job {job} "
              f"--from=cronjob/{deployed.benchmark_cron_job} (cluster {deployed.cluster_name}, {deployed.region})")
        result = subprocess.run(argv)
    if result.returncode != 0:
        raise ToolError(f"kubectl could not create job {job} in cluster {deployed.cluster_name} (exit code {result.returncode}, its message above)")
    print(f"follow it with: (umask 077; pulumi stack output kubeconfig --show-secrets --stack {stack} > kubeconfig) && "
          f"kubectl --kubeconfig kubeconfig -n {deployed.namespace} logs -f job/{job}")
    return 0


def refuse_while_a_study_runs(deployed: DeployedStack, kubeconfig, now: datetime) -> None:
    """A study stack's Job runs a tuner, and one tuner at a time may scale its servers: while the
    running study's tuner holds its lease (benchmark/lease.py), a second Job would only wait."""
    argv = kubectl(deployed, kubeconfig, "get", "lease", lease.NAME, "--ignore-not-found", "--output", "json")
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolError(f"kubectl could not read lease {lease.NAME} in {deployed.namespace} (exit code {result.returncode}): "
                        f"{result.stderr.strip()}")
    current = json.loads(result.stdout) if result.stdout.strip() else None
    holder = lease.holder(current, now.timestamp())
    if holder:
        raise ToolError(f"a study is running in {deployed.namespace}: {holder} holds lease {lease.NAME} (renewed "
                        f"{current['spec']['renewTime']}); wait for it to end, or delete its Job to stop it")


def main(argv: list[str] | None = None) -> int:
    return stack_tool("benchmark", __doc__, lambda stack: rerun(stack, datetime.now(timezone.utc)), argv)


if __name__ == "__main__":
    sys.exit(main())
