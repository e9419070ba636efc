"""rehearse/venv.py: when pip cannot install the rehearsal's requirements, the error says what to
set for PyTorch's CPU build, which PyPI does not carry. pip here is a stand-in that fails as pip
does when no index offers the wheel: nothing is installed."""
from __future__ import annotations

import sys

import pytest

from rehearse import venv

FAKE_PYTHON = """#!/bin/sh
# A stand-in Python: `-m venv --clear DIR` makes DIR/bin/python (itself); `-m pip ...` logs its
# arguments and fails as pip does when no index offers torch's CPU build.
if [ "$2" = venv ]; then mkdir -p "$4/bin" && cp "$0" "$4/bin/python" && exit 0; fi
echo "$@" >> "$(dirname "$0")/../pip.log"
echo "ERROR: Could not find a version that satisfies the requirement torch==2.13.0+cpu (from versions: 2.13.0)" >&2
echo "ERROR: No matching distribution found for torch==2.13.0+cpu" >&2
exit 1
"""


def test_a_failed_install_names_what_to_set_for_torchs_cpu_build(tmp_path, monkeypatch):
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    target = tmp_path / "venv"
    with pytest.raises(venv.VenvError) as failed:
        venv.ensure(target, say=lambda message: None)
    message = str(failed.value)
    assert "No matching distribution found for torch==2.13.0+cpu" in message  # pip's own words, kept
    assert ("torch==2.13.0+cpu is not on PyPI: set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu "
            "(PyTorch's CPU wheel index) or PIP_FIND_LINKS=<a folder holding its wheel>, then run again") in message
    assert "--require-hashes" in (target / "pip.log").read_text()
    assert not (target / venv.STAMP).exists()


def test_the_torch_it_names_is_the_one_the_requirements_pin(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.17.0 \\\n    --hash=sha256:ab\ntorch==9.9.9+cpu \\\n    --hash=sha256:cd\n")
    assert venv.torch_pin(requirements) == "torch==9.9.9+cpu"
    assert venv.torch_pin() == "torch==2.13.0+cpu"
