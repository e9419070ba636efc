"""The command-line tools a real deployment needs, with their versions.

pulumi runs the stack; kubectl the operator commands; the AWS CLI is what the stack's kubeconfig
runs for a token on every Kubernetes call, the Pulumi Kubernetes provider's included
(pulumi-eks generateKubeconfig: `aws eks get-token`; tools/stack.py INSTALL_HINTS).
"""
from __future__ import annotations

import shutil
import subprocess

from tools.stack import INSTALL_HINTS

from .result import Result

CHECK = "CLIs"
VERSION_COMMANDS = {
    "pulumi": ["pulumi", "version"],
    "kubectl": ["kubectl", "version", "--client"],
    # AWS CLI v1 printed its version on stderr, v2 prints it on stdout.
    "aws": ["aws", "--version"],
}


def version(argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"version unknown ({type(error).__name__})"
    lines = [line.strip() for line in (result.stdout + "\n" + result.stderr).splitlines() if line.strip()]
    return lines[0] if lines else f"version unknown (exit code {result.returncode})"


def check_clis() -> Result:
    """Each CLI on PATH, and the AWS CLI at major version 2: `aws eks get-token`, which every
    kubeconfig of this program runs, and the commands docs/operations.md gives are the v2 CLI's ("aws-cli/2.x" in
    `aws --version`; v1 printed "aws-cli/1.x")."""
    missing = [name for name in VERSION_COMMANDS if shutil.which(name) is None]
    if missing:
        return Result("FAIL", CHECK, f"not on PATH: {', '.join(missing)}",
                      "; ".join(INSTALL_HINTS[name] for name in missing))
    versions = {name: version(argv) for name, argv in VERSION_COMMANDS.items()}
    found = "; ".join(f"{name} {text}" for name, text in versions.items())
    if not versions["aws"].startswith("aws-cli/2."):
        return Result("FAIL", CHECK, f"the AWS CLI is not version 2 ({versions['aws']}); {found}", INSTALL_HINTS["aws"])
    return Result("PASS", CHECK, found)
