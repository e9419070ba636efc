"""What a model store pod is given and how it starts: its modules and lock (a ConfigMap), where they
are mounted, and the shell that installs the lock into a writable volume and runs a module, as a
non-root user on a read-only root file system. The Pulumi components build the pods from these
facts (components/pairing/model_preparation.py, components/pairing/vllm_variant.py)."""
from __future__ import annotations

import shlex
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
POD_MODULES = ("__init__.py", "layout.py", "progress.py", "objects.py", "hub.py", "fp8.py", "prepare.py", "publish.py")
LOCK = "requirements.lock"
CODE_MOUNT = "/opt/modelstore"
DEPS_MOUNT = "/opt/deps"
"""An emptyDir the lock is installed into (pip --target): the root file system stays read-only."""
TMP_MOUNT = "/tmp"
RUN_AS = 65532
"""A user id with no account in the image: the pods need none (HOME is /tmp)."""


def pod_code() -> dict[str, str]:
    """ConfigMap data: every module the pods run, and the lock."""
    return {name: (PACKAGE_DIR / name).read_text() for name in POD_MODULES + (LOCK,)}


def code_items() -> list[dict[str, str]]:
    """Where each ConfigMap key is mounted under CODE_MOUNT (as the package modelstore/)."""
    return [{"key": name, "path": f"modelstore/{name}"} for name in POD_MODULES + (LOCK,)]


def environment() -> dict[str, str]:
    return {"PYTHONPATH": f"{DEPS_MOUNT}:{CODE_MOUNT}", "HOME": TMP_MOUNT, "PYTHONUNBUFFERED": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}


def start_script(module: str, arguments: list[str]) -> str:
    """Install the hash-locked dependencies, then run `python -m modelstore.<module>`. A failed
    install ends the pod with one FATAL line and a non-zero exit. Arguments may name environment
    variables ("$BUCKET"); everything else is quoted."""
    quoted = " ".join(a if a.startswith("$") else shlex.quote(a) for a in arguments)
    return "\n".join([
        "set -euo pipefail",
        f"pip install --quiet --require-hashes --no-deps --target {DEPS_MOUNT} -r {CODE_MOUNT}/modelstore/{LOCK}"
        f" || {{ echo 'FATAL: pip could not install modelstore/{LOCK}' >&2; exit 2; }}",
        f'exec python -m modelstore.{module} {quoted}',
    ])


def security_context() -> dict:
    """The Kubernetes "restricted" Pod Security Standard, container level."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
