"""The repository stands on its own: a user who clones it has no folder beside it, so nothing in it
points outside it, and every citation of a docs page names a section that exists."""
from __future__ import annotations

import re
import subprocess

from stackconfig.source import PROJECT_DIR


def tracked_text_files() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=PROJECT_DIR, capture_output=True, text=True, check=True).stdout.split()
    files = {}
    for name in names:
        path = PROJECT_DIR / name
        if path.suffix in {".png", ".gz"} or not path.is_file():
            continue
        files[name] = path.read_text(errors="replace")
    return files


def test_nothing_points_outside_the_repository():
    outside = re.compile(r"\.\./shared|\bFACTS\.md\b|shared/(seeds|schemas)|\b00[0-4]_[0-9a-f]{16}\.txt")
    found = {name: [line for line in text.splitlines() if outside.search(line)]
             for name, text in tracked_text_files().items() if name != "tests/test_repository.py"}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_every_docs_citation_names_a_section_of_its_page():
    """A citation `docs/<page>.md, "<Section>"` (docs/facts.md, the pages the README links, an error
    message's pointer) names a heading of that page."""
    headings = {page.name: {re.sub(r"\s+", " ", h).strip() for h in re.findall(r"^#{1,6} (.+)$", page.read_text(), flags=re.M)}
                for page in (PROJECT_DIR / "docs").glob("*.md")}
    cited = {}
    for name, text in tracked_text_files().items():
        text = text.replace("\\", "")  # a citation inside a Python string escapes its quotes
        for page, section in re.findall(r'docs/([a-z0-9_-]+\.md),?\s+["\']([^"\']+)["\']', text):
            section = re.sub(r"\s+(#\s+)?", " ", section).strip()  # a citation may wrap across comment lines
            if section != "<Section>":
                cited.setdefault((page, section), set()).add(name)
    assert len([page for page, _ in cited if page == "facts.md"]) >= 10
    assert {"configuration.md", "operations.md", "security.md", "models.md", "study.md"} <= {page for page, _ in cited}
    assert {c: sorted(files) for c, files in cited.items() if c[1] not in headings.get(c[0], set())} == {}


OWN_README_CITATION = re.compile(r'(?:^|[(;:#]|""")\s*README(?:\.md)?,?\s+["\']([^"\']+)["\']', flags=re.M)
"""This repository's README cited by section: `(README, "Security")`, `; README 'Engines'`. Another
project's README is cited with its name before it ("the choral-spec README, '...'")."""


def test_the_readme_citation_pattern_tells_ours_from_another_projects():
    assert OWN_README_CITATION.findall('x (README, "Security").\n# README "Tuning study"\nsource: README, \'Models\'') == [
        "Security", "Tuning study", "Models"]
    assert OWN_README_CITATION.findall("the choral-spec README, 'Distributed'; the EKS sample's README, 'Speculative'") == []


def test_every_readme_citation_names_a_section_of_the_readme():
    """The README is a front door; the sections code used to cite moved to docs pages, and a
    citation of one that is no longer there would send a user nowhere."""
    headings = set(re.findall(r"^#{1,6} (.+)$", (PROJECT_DIR / "README.md").read_text(), flags=re.M))
    cited = {(name, section) for name, text in tracked_text_files().items() if name != "tests/test_repository.py"
             for section in OWN_README_CITATION.findall(text.replace("\\", ""))}
    assert sorted(c for c in cited if c[1] not in headings) == []


def test_every_cited_docs_page_exists():
    cited = {name: set(re.findall(r"\bdocs/([a-z0-9_-]+\.md)\b", text)) for name, text in tracked_text_files().items()}
    pages = {page for pages in cited.values() for page in pages}
    assert {"facts.md", "engines.md"} <= pages
    assert sorted(page for page in pages if not (PROJECT_DIR / "docs" / page).is_file()) == []
