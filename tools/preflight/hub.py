"""Can the stack's Hugging Face token read each gated model it serves, is each model pinned, and is
each checkpoint the size the program sized its disks on.

The hub's own check, as huggingface_hub 2.4.0 does it (hf_api.py HfApi.auth_check and
utils/_http.py hf_raise_for_status): GET {endpoint}/api/models/<repo>/auth-check with
`authorization: Bearer <token>`; 200 readable; X-Error-Code GatedRepo: access not granted; 401
with X-Error-Message "Invalid credentials in Authorization header": a bad token; RepoNotFound or
another 401/404: no such repository or not visible to the token. The endpoint is HF_ENDPOINT or
https://huggingface.co (huggingface_hub constants.py). The token never appears in any output:
findings name the repository and the HTTP status only.
"""
from __future__ import annotations

import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from modelstore.hub import Hub, HubError, RemoteFile, wanted
from stackconfig import HUGGING_FACE_TOKEN_KEY, StackSpec
from stackconfig.source import FILES, PROJECT, PROJECT_DIR
from stackconfig.store import SAFETENSORS_HEADER_BYTES, PreparedModel, unpinned

from .result import Result, worst

CHECK = "Hugging Face"
DEFAULT_ENDPOINT = "https://huggingface.co"
INVALID_TOKEN_MESSAGE = "Invalid credentials in Authorization header"
TIMEOUT_SECONDS = 15
SET_TOKEN = f"pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_... --stack {{stack}}"
# Hub tokens start with "hf_": huggingface_hub 2.4.0 tells them from other providers' keys that way
# (inference/_client.py L213, inference/_providers/_common.py L221).
TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]+")


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


@dataclass(frozen=True)
class Token:
    value: str | None
    """The secret itself: sent to the hub, never printed."""
    source: str
    """Where it came from, or why there is none; printable."""
    configured: bool = True
    """False: the stack file sets no token, so `pulumi up` would refuse a gated stack."""

    def __repr__(self) -> str:
        return f"Token(source={self.source!r}, configured={self.configured})"


def stack_token(stack: str) -> Token:
    """The stack's own token (`pulumi config get`, which needs the CLI, a login and the stack's
    secrets provider), else HF_TOKEN from the environment."""
    if f"{PROJECT}:{HUGGING_FACE_TOKEN_KEY}" not in FILES.config(stack):
        return Token(None, f"the stack sets no {HUGGING_FACE_TOKEN_KEY}", configured=False)
    try:
        result = subprocess.run(["pulumi", "config", "get", HUGGING_FACE_TOKEN_KEY, "--non-interactive", "--stack", stack],
                                capture_output=True, text=True, cwd=PROJECT_DIR, timeout=60)
    except FileNotFoundError:
        reason = "the Pulumi CLI is not on PATH"
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = type(error).__name__
    else:
        if result.returncode == 0 and result.stdout.strip():
            return Token(result.stdout.strip(), f"the stack's {HUGGING_FACE_TOKEN_KEY}")
        # Pulumi's stderr names the problem (login, passphrase). Anything token-shaped on it is
        # masked all the same: this line is printed.
        first = next((line.strip() for line in result.stderr.splitlines() if line.strip()), f"exit code {result.returncode}")
        reason = TOKEN_SHAPE.sub("hf_***", first)
    if os.environ.get("HF_TOKEN"):
        return Token(os.environ["HF_TOKEN"], f"HF_TOKEN (the stack's token could not be read: {reason})")
    return Token(None, f"`pulumi config get {HUGGING_FACE_TOKEN_KEY}` failed ({reason}) and HF_TOKEN is not set")


def auth_check(endpoint: str, repo: str, token: str) -> tuple[str, str]:
    """(status, finding) for one repository."""
    request = urllib.request.Request(f"{endpoint}/api/models/{repo}/auth-check",
                                     headers={"authorization": f"Bearer {token}", "user-agent": "sd-trn2-preflight"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS):
            return "PASS", f"{repo} readable"
    except urllib.error.HTTPError as error:
        code, message = error.headers.get("X-Error-Code"), error.headers.get("X-Error-Message")
        if code == "GatedRepo":
            return "FAIL", f"{repo}: access not granted (gated; HTTP {error.code})"
        if error.code == 401 and message == INVALID_TOKEN_MESSAGE:
            return "FAIL", f"{repo}: the token is invalid (HTTP 401)"
        if code == "RepoNotFound" or error.code in (401, 404):
            return "FAIL", f"{repo}: not found or not visible to the token (HTTP {error.code})"
        return "WARN", f"{repo}: could not verify (HTTP {error.code})"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return "WARN", f"{repo}: could not verify ({type(reason).__name__}: {reason})"


def check_hub(spec: StackSpec, read_token: Callable[[], Token]) -> Result:
    """`read_token` runs only when the stack serves a gated model."""
    repos = sorted({m for v in spec.variants for m in v.gated_models})
    if not repos:
        return Result("PASS", CHECK, "not needed: no gated model")
    set_token = SET_TOKEN.format(stack=spec.stack)
    token = read_token()
    if not token.configured:
        return Result("FAIL", CHECK, f"the stack serves gated {', '.join(repos)} but sets no {HUGGING_FACE_TOKEN_KEY}; "
                                     f"`pulumi up` would stop on it", set_token)
    if token.value is None:
        return Result("WARN", CHECK, f"could not verify: {token.source}",
                      "run `pulumi login` (and export PULUMI_CONFIG_PASSPHRASE for a passphrase stack), or set HF_TOKEN")
    endpoint = hub_endpoint()
    checks = [auth_check(endpoint, repo, token.value) for repo in repos]
    status = worst([s for s, _ in checks])
    fix = "" if status == "PASS" else (f"request access on each model's page ({DEFAULT_ENDPOINT}/<repo>) with the token's "
                                       f"account, or set a token that has it: {set_token}")
    return Result(status, CHECK, f"{token.source} at {endpoint}: {'; '.join(f for _, f in checks)}", fix)


REVISIONS = "model revisions"


def check_revisions(spec: StackSpec) -> Result:
    """Every model the stack serves pinned to a hub commit, or each one left on `main` named."""
    left = unpinned(spec.prepared_models)
    if not left:
        return Result("PASS", REVISIONS, "every model is pinned to a hub commit (modelRevisions)")
    return Result("WARN", REVISIONS, f"prepared from main as it is when first prepared: {', '.join(left)}",
                  f"make lock STACK={spec.stack} (pins each to the commit main points to now)")


CHECKPOINTS = "checkpoint sizes"


def compare_checkpoint(model: PreparedModel, files: tuple[RemoteFile, ...]) -> tuple[str, str]:
    """(status, finding): the repository's safetensors at the prepared revision against what the
    program sized every disk and transfer on (stackconfig/catalog.py Checkpoint). A file's size is
    its tensors plus a JSON header, so the listed total may exceed the recorded tensor bytes by at
    most SAFETENSORS_HEADER_BYTES per file."""
    weights = [f for f in files if f.path.endswith(".safetensors")]
    listed, largest = sum(f.size for f in weights), max(weights, key=lambda f: f.size)
    recorded = model.checkpoint_bytes
    where = f"{model.model}@{model.revision[:12]}"
    if largest.size > model.largest_file_bytes:
        return "FAIL", (f"{where}: {largest.path} is {largest.size:,} B, above the {model.largest_file_bytes:,} B a "
                        "preparation stream holds (stackconfig/store.py HUB_SHARD_BYTES): the preparation would refuse it")
    if listed > recorded + len(weights) * SAFETENSORS_HEADER_BYTES:
        return "FAIL", (f"{where}: {len(weights)} safetensors files of {listed / 2**30:,.1f} GiB where the program sized disks "
                        f"on {recorded / 2**30:,.1f} GiB ({model.info.checkpoint.source})")
    if listed < recorded * 0.98:
        return "WARN", (f"{where}: {listed / 2**30:,.1f} GiB listed, {recorded / 2**30:,.1f} GiB recorded: disks are "
                        "sized larger than needed")
    return "PASS", f"{where}: {listed / 2**30:,.1f} GiB as recorded"


def check_checkpoints(spec: StackSpec, read_token: Callable[[], Token]) -> Result:
    """Each prepared model's checkpoint as the hub lists it now, against the recorded size: a
    checkpoint larger than recorded would overflow the disks sized on it (the FP8 405B was once
    sized at 377 GiB for a 454 GiB checkpoint). Only metadata is read, never a file."""
    models = list({(m.model, m.revision): m for m in spec.prepared_models}.values())
    gated = any(m.info.gated for m in models)
    token = read_token() if gated else Token(None, "no gated model")
    if gated and token.value is None:
        return Result("WARN", CHECKPOINTS, f"could not verify: {token.source}",
                      "run `pulumi login` (and export PULUMI_CONFIG_PASSPHRASE for a passphrase stack), or set HF_TOKEN")
    client = Hub(hub_endpoint(), token.value)
    checks = []
    for model in models:
        try:
            checks.append(compare_checkpoint(model, wanted(client.revision(model.model, model.revision).files)))
        except HubError as error:
            checks.append(("WARN", f"{model.model}@{model.revision[:12]}: could not verify ({error})"))
    status = worst([s for s, _ in checks])
    fix = "" if status != "FAIL" else ("record the hub's size: in stackconfig/catalog.py for a catalog model, or "
                                        "models.<id>.checkpointBytes in the stack file for a declared one")
    return Result(status, CHECKPOINTS, "; ".join(f for _, f in checks), fix)
