"""Byte-compile what the operator commands import: the packages of requirements.txt and everything
they depend on, found in the virtualenv's own metadata (`make setup` runs it after pip).

`make setup` installs every package without bytecode (pip --no-compile) and then this, because only
these need it on disk. The operator commands (make plan, make results, ...) run in whatever
environment the user has, and CI may set PYTHONDONTWRITEBYTECODE: without bytecode on disk each plan
would compile the modules of the Pulumi SDKs it imports again, every time. The test tools, torch and
transformers need none here: `make test` keeps its processes' bytecode in build/pycache (Makefile).

Compiles on every core (a process per core); files whose bytecode is up to date are skipped, so a
second run is quick.
"""
from __future__ import annotations

import compileall
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def requirements(path: Path) -> list[Requirement]:
    """The requirement lines of a pip requirements file (comments and blank lines skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def closure(roots: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions of `roots` and of everything they require, each once. A
    requirement's markers are evaluated for this interpreter and the extras asked of it."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(root, frozenset(root.extras)) for root in roots]
    while todo:
        requirement, extras = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = distribution = metadata.distribution(requirement.name)
        for line in distribution.requires or []:
            dependency = Requirement(line)
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": extra}) for extra in extras | {""}):
                todo.append((dependency, frozenset(dependency.extras)))
    return list(found.values())


def sources(distributions: list[metadata.Distribution]) -> list[str]:
    """Every Python source file the distributions installed (their RECORD)."""
    return sorted(str(distribution.locate_file(file)) for distribution in distributions
                  for file in distribution.files or [] if file.suffix == ".py")


def compile_file(path: str) -> bool:
    return bool(compileall.compile_file(path, quiet=2))


def main() -> int:
    files = sources(closure(requirements(REQUIREMENTS)))
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        failed = [path for path, ok in zip(files, pool.map(compile_file, files, chunksize=64)) if not ok]
    for path in failed:
        print(f"could not byte-compile {path}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
