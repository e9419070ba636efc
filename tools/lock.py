"""Pin every model a stack serves to a hub commit: `python -m tools lock --stack S [--ref MODEL=REF ...]`
(`make lock STACK=S [REFS="MODEL=REF ..."]`).

Each model left on `main` (no commit in `modelRevisions`), and each one named by --ref, is resolved
through the hub's API to the commit its ref points to now (GET {endpoint}/api/models/<repo>/revision/<ref>,
modelstore/hub.py), and that commit is written into the stack file's `sd-trn2:modelRevisions`: its
preparation then downloads exactly that commit, on every platform, until the stack file changes.
A model already pinned keeps its commit unless --ref names it. HF_ENDPOINT (default
https://huggingface.co) and HF_TOKEN (a gated repository's metadata may need it) come from the
environment.

Exit codes: 0 pinned (or nothing to pin); 1 the hub could not be asked (network, 5xx, a refused
token); 2 bad input, nothing written: an unknown or invalid stack, a --ref for a model the stack does
not serve, or a ref that is neither a 40-hex commit nor a ref the hub knows (`modelRevisions.<model>`
named).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from modelstore.hub import DEFAULT_ENDPOINT, Hub, HubError
from stackconfig import StackSpec, source
from stackconfig.source import PROJECT
from stackconfig.store import UNPINNED_REVISION, is_commit
from tools.stack import StackFileError, stack_spec

KEY = "modelRevisions"
REF = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
"""A branch or tag name as git allows the common ones (no `..`, no spaces or control characters)."""


class BadInput(Exception):
    """Exit 2: the message names the key."""


def wanted_refs(spec: StackSpec, refs: list[str]) -> dict[str, str]:
    """model -> the ref to resolve: --ref's, else `main` for each unpinned model."""
    served = {m.model: m.revision for m in spec.prepared_models}
    chosen = {model: UNPINNED_REVISION for model, revision in served.items() if revision == UNPINNED_REVISION}
    problems = []
    for item in refs:
        model, _, ref = item.partition("=")
        if model not in served:
            problems.append(f"--ref {item}: {model!r} is not a model the stack serves ({', '.join(sorted(served))})")
        elif not (is_commit(ref) or REF.match(ref)):
            problems.append(f"{KEY}.{model}: {ref!r} is neither a 40-hex commit nor a branch or tag name")
        else:
            chosen[model] = ref
    if problems:
        raise BadInput("; ".join(problems))
    return chosen


def resolve(hub: Hub, refs: dict[str, str]) -> dict[str, str]:
    """model -> the commit its ref points to now. A ref the hub does not know is bad input."""
    commits = {}
    for model, ref in sorted(refs.items()):
        try:
            commits[model] = hub.revision(model, ref).commit
        except HubError as error:
            if "HTTP 404" in str(error):
                raise BadInput(f"{KEY}.{model}: {ref!r} is not a commit or ref the hub knows for {model} ({error})") from None
            raise
    return commits


def write_revisions(path: Path, pinned: dict[str, str]) -> None:
    """Set `sd-trn2:modelRevisions` in the stack file, a text edit that keeps every comment: the
    block is replaced where it is, or added at the end of `config:`."""
    lines = path.read_text().splitlines()
    header = f"  {PROJECT}:{KEY}:"
    block = [header] + [f"    {model}: {commit}" for model, commit in sorted(pinned.items())]
    if header in lines:
        start = lines.index(header)
        end = start + 1
        while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[start:end] = block
    else:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += block
    path.write_text("\n".join(lines) + "\n")


def lock(stack: str, refs: list[str], hub: Hub) -> list[str]:
    """Pin the stack's models; returns what it says. Raises BadInput, StackFileError or HubError."""
    spec = stack_spec(stack)
    if not isinstance(spec, StackSpec):
        raise BadInput(f"stack {stack} is a platform: it serves no models")
    commits = resolve(hub, wanted_refs(spec, refs))
    if not commits:
        return [f"{stack}: every model is pinned already ({KEY})"]
    current = source.FILES.config(stack).get(f"{PROJECT}:{KEY}") or {}
    path = source.FILES.path(stack)
    before = path.read_text()
    write_revisions(path, {**current, **commits})
    try:
        stack_spec(stack)
    except StackFileError:
        path.write_text(before)
        raise
    return [f"{stack}: {model} pinned at {commit}" for model, commit in sorted(commits.items())]


def main(argv: list[str] | None = None, hub: Hub | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools lock", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, type=source.stack_argument)
    parser.add_argument("--ref", action="append", default=[], metavar="MODEL=REF",
                        help="resolve this model at REF (a branch, a tag or a commit) instead of main")
    args = parser.parse_args(argv)
    hub = hub or Hub(os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT), os.environ.get("HF_TOKEN") or None)
    try:
        for line in lock(args.stack, args.ref, hub):
            print(line)
    except (BadInput, StackFileError) as error:
        print(f"lock: {error}", file=sys.stderr)
        return 2
    except HubError as error:
        print(f"lock: the hub could not be asked: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
