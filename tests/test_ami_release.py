"""One home for the AMI release: stackconfig/versions.py AMI_RELEASE. Every other AMI alias, AMI
name and node group release version is derived from it, so a release is bumped in one line.

Three releases were once stated at once (the pin, a catalog comment, a docstring example)."""
from __future__ import annotations

import re
from pathlib import Path

from stackconfig.source import PROJECT_DIR
from stackconfig.versions import AMI_ALIASES, AMI_RELEASE, EKS_ADDONS

HOME = PROJECT_DIR / "stackconfig" / "versions.py"
RELEASE = re.compile(r"\bv?20[2-9]\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\b")
"""An amazon-eks-ami release as written in tags, aliases, AMI names and release versions
("v20260714", "al2023@v20260714", "1.35.6-20260714")."""
SKIPPED = {".git", ".venv", ".venv-scan", ".venv-rehearse", ".venv-inference-perf", "build", "mutants", "tests", "__pycache__"}


def program_files() -> list[Path]:
    """The program's own text: every file outside the tests, the virtualenvs and what builds write."""
    return [p for p in PROJECT_DIR.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml", ".json", ".sh", ".md")
            and not SKIPPED & set(p.relative_to(PROJECT_DIR).parts)]


DOCUMENTATION = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
"""The pages that show the pins to a reader (docs/versions.md's tables): they may state the release."""


def test_no_release_is_written_outside_its_home():
    found = {str(p.relative_to(PROJECT_DIR)): sorted(set(RELEASE.findall(p.read_text(errors="replace"))))
             for p in program_files() if p != HOME and p not in DOCUMENTATION}
    assert {path: releases for path, releases in found.items() if releases} == {}


def test_the_documentation_shows_only_the_pinned_release():
    releases = {str(p.relative_to(PROJECT_DIR)): set(RELEASE.findall(p.read_text())) for p in DOCUMENTATION}
    assert releases["docs/versions.md"] == {AMI_RELEASE.tag}
    assert {page: found for page, found in releases.items() if found - {AMI_RELEASE.tag}} == {}


def test_every_supported_kubernetes_version_has_the_release_and_everything_derives_from_it():
    assert set(AMI_RELEASE.kubernetes_patches) == set(EKS_ADDONS) == set(AMI_ALIASES)
    for version, patch in AMI_RELEASE.kubernetes_patches.items():
        assert patch.startswith(f"{version}.")
        assert AMI_ALIASES[version].version == AMI_RELEASE.alias == f"al2023@{AMI_RELEASE.tag}"
        assert AMI_RELEASE.release_version(version) == f"{patch}-{AMI_RELEASE.tag[1:]}"
        assert AMI_RELEASE.neuron_ami(version) in AMI_ALIASES[version].source
