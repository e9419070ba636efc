"""One typed view of a stack for every operator tool: where it runs and what it deployed.

Tools act on the stack they are given, never on the shell's current kubectl context or AWS
region: the region comes from the stack file's `aws:region`, the cluster, namespace, bucket and
kubeconfig from `pulumi stack output`. This module is the only place that knows how a stack's
config and outputs map to tool inputs, so a stack kind whose pairings share a cluster changes
this file and no tool.

What the operator has to fix (a missing CLI, no login, no credentials, a stack not deployed)
raises ToolError with one line saying what is missing and how to get it; `run_tool` prints it
without a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from stackconfig import ConfigError, PlatformSpec, StackSpec
from stackconfig.source import PROJECT_DIR, load_stack, stack_argument

INSTALL_HINTS = {
    "pulumi": "install the Pulumi CLI (https://www.pulumi.com/docs/iac/download-install/) and run `pulumi login`",
    "kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
    # The stack's kubeconfig runs `aws eks get-token` for every kubectl call (pulumi-eks
    # generateKubeconfig, pulumi/pulumi-eks@7bf0c1b nodejs/eks/cluster/cluster.ts).
    "aws": "install the AWS CLI version 2 (https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html)",
}
CREDENTIALS_HINT = ("run `aws configure` or `aws sso login`, or set AWS_PROFILE (or AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY)")
# An AWS call that failed: botocore's own errors (no credentials, no endpoint), the service's
# (AccessDenied, throttling), and an answer that is no AWS response at all, such as a proxy's HTML
# page (botocore.parsers.ResponseParserError is not a BotoCoreError).
AWS_ERRORS = (BotoCoreError, ClientError, ResponseParserError)
# Outputs __main__.py exports that the tools read.
REQUIRED_OUTPUTS = ("region", "clusterName", "kubeconfig", "workloadNamespace", "modelBucket", "benchmarkCronJob")


class ToolError(Exception):
    """Something the operator has to fix, said in one line."""

    exit_code = 1


class StackFileError(ToolError):
    """The stack file is missing or invalid (its message lists every problem)."""

    exit_code = 2


def one_line(error: BaseException, limit: int = 240) -> str:
    """An exception as a single line (botocore messages can span several and quote whole HTML
    error pages), cut at `limit` characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def stack_spec(stack: str) -> StackSpec | PlatformSpec:
    """The stack's typed config from stacks/Pulumi.<stack>.yaml: a pairing, or a platform."""
    try:
        return load_stack(stack).spec()
    except FileNotFoundError as error:
        raise StackFileError(f"{error}") from None
    except ConfigError as error:
        raise StackFileError(str(error)) from None


def pairing_spec(stack: str) -> StackSpec:
    """A pairing stack's typed config; a platform stack has no servers, benchmark or results."""
    spec = stack_spec(stack)
    if isinstance(spec, PlatformSpec):
        raise ToolError(f"stack {stack} is a platform (stackKind: platform): it serves and benchmarks nothing; "
                        f"name one of the pairing stacks on it (their stack files say platform: .../{stack})")
    return spec


def require_cli(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolError(f"`{name}` not found on PATH: {INSTALL_HINTS[name]}")
    return path


def aws_session(region: str) -> boto3.Session:
    """A session pinned to the stack's region, with credentials from the standard chain.

    boto3 reads AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> itself (botocore 1.44.5
    configprovider.py, EndpointConfigProvider.provide), so every client made from it honours them.
    """
    try:
        session = boto3.Session(region_name=region)
        credentials = session.get_credentials()
    except BotoCoreError as error:  # e.g. AWS_PROFILE names a profile that does not exist
        raise ToolError(f"AWS credentials: {one_line(error)}: {CREDENTIALS_HINT}") from None
    if credentials is None:
        raise ToolError(f"no AWS credentials found: {CREDENTIALS_HINT}")
    return session


def pulumi_outputs(stack: str) -> dict[str, Any]:
    """`pulumi stack output --json --show-secrets`: every output, secrets in plain text. The
    result is never printed; errors quote only Pulumi's stderr, which carries no output values."""
    require_cli("pulumi")
    # --non-interactive: with output captured, a passphrase prompt would wait unseen; Pulumi fails
    # with a message instead (CLI reference: "Disable interactive mode for all commands").
    result = subprocess.run(["pulumi", "stack", "output", "--json", "--show-secrets", "--non-interactive", "--stack", stack],
                            capture_output=True, text=True, cwd=PROJECT_DIR)
    if result.returncode != 0:
        reason = next((line.strip() for line in result.stderr.splitlines() if line.strip()), f"exit code {result.returncode}")
        raise ToolError(f"`pulumi stack output --stack {stack}` failed ({reason}): run `pulumi login`, and "
                        f"`make up STACK={stack}` if the stack does not exist yet")
    try:
        outputs = json.loads(result.stdout or "{}")
    except json.JSONDecodeError:
        raise ToolError(f"`pulumi stack output --json --stack {stack}` did not print JSON; check the Pulumi CLI version") from None
    if not outputs:
        raise ToolError(f"stack {stack} has no outputs: it is not deployed; run `make up STACK={stack}`")
    return outputs


@dataclass(frozen=True)
class DeployedStack:
    """What the tools act on, from the stack file and the stack's outputs."""

    stack: str
    region: str
    cluster_name: str
    namespace: str
    bucket: str
    benchmark_cron_job: str
    kubeconfig: str = field(repr=False)
    """A secret: written only to a private temporary file (kubeconfig_file), never printed."""


def deployed_stack(stack: str, spec: StackSpec) -> DeployedStack:
    outputs = pulumi_outputs(stack)
    missing = [name for name in REQUIRED_OUTPUTS if name not in outputs]
    if missing:
        raise ToolError(f"stack {stack} has no output {', '.join(missing)}: deployed by an older version of this "
                        f"program; run `make up STACK={stack}`")
    if outputs["region"] != spec.region:
        raise ToolError(f"stack {stack} is deployed in {outputs['region']} but its stack file says aws:region "
                        f"{spec.region}: restore aws:region, or `make destroy` and `make up` again")
    kubeconfig = outputs["kubeconfig"]
    return DeployedStack(
        stack=stack,
        region=spec.region,
        cluster_name=outputs["clusterName"],
        namespace=outputs["workloadNamespace"],
        bucket=outputs["modelBucket"],
        benchmark_cron_job=outputs["benchmarkCronJob"],
        kubeconfig=kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig),
    )


def bucket_of(stack: str) -> str:
    """The model bucket (benchmark results live under results/): the `modelBucket` output."""
    outputs = pulumi_outputs(stack)
    if "modelBucket" not in outputs:
        raise ToolError(f"stack {stack} has no modelBucket output; pass BUCKET=<name> or run `make up STACK={stack}`")
    return outputs["modelBucket"]


def cluster_name_of(spec: StackSpec) -> str:
    """The EKS cluster a stack creates. From config, not outputs: the sweep runs after `pulumi
    destroy`, when the outputs are gone (the program names the cluster the same way)."""
    return spec.cluster_name


@contextmanager
def kubeconfig_file(deployed: DeployedStack) -> Iterator[Path]:
    """The stack's kubeconfig in a file only the user can read, removed afterwards.

    tempfile.mkstemp creates the file "readable and writable only by the creating user ID"
    (Python docs, tempfile.mkstemp), i.e. mode 0600, before anything is written to it.
    """
    descriptor, name = tempfile.mkstemp(prefix=f"kubeconfig-{deployed.stack}-", suffix=".json")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(deployed.kubeconfig)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def kubectl(deployed: DeployedStack, kubeconfig: Path, *args: str) -> list[str]:
    """A kubectl command bound to the stack's cluster and namespace, never the current context."""
    return ["kubectl", "--kubeconfig", str(kubeconfig), "--namespace", deployed.namespace, *args]


def stack_tool(command: str, doc: str, action: Callable[[str], int], argv: list[str] | None) -> int:
    """`python -m tools <command>` whose only argument is `--stack`: parse it and run `action(stack)` with run_tool."""
    parser = argparse.ArgumentParser(prog=f"python -m tools {command}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, type=stack_argument)
    args = parser.parse_args(argv)
    return run_tool(lambda: action(args.stack))


def run_tool(action: Callable[[], int]) -> int:
    """Run a tool; what the operator must fix is printed as one line on stderr, never a traceback."""
    try:
        return action()
    except ToolError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except AWS_ERRORS as error:
        print(f"error: AWS: {one_line(error)}", file=sys.stderr)
        return 1

