"""The repository stands on its own: a user who clones it has no folder beside it, so nothing in it
points outside it, and every citation of docs/facts.md names a section that exists."""
from __future__ import annotations

import re
import subprocess

from stackconfig.source import PROJECT_DIR

FACTS = PROJECT_DIR / "docs" / "facts.md"


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


def test_every_facts_citation_names_a_section_of_the_facts_file():
    sections = set(re.findall(r"^## (.+)$", FACTS.read_text(), flags=re.M))
    cited = {}
    for name, text in tracked_text_files().items():
        text = text.replace("\\", "")  # a citation inside a Python string escapes its quotes
        for section in re.findall(r'docs/facts\.md,?\s+["\']([^"\']+)["\']', text):
            section = re.sub(r"\s+(#\s+)?", " ", section).strip()  # a citation may wrap across comment lines
            if section != "<Section>":
                cited.setdefault(section, set()).add(name)
    assert len(cited) >= 10
    assert {s: sorted(files) for s, files in cited.items() if s not in sections} == {}


def test_every_cited_docs_page_exists():
    cited = {name: set(re.findall(r"\bdocs/([a-z0-9_-]+\.md)\b", text)) for name, text in tracked_text_files().items()}
    pages = {page for pages in cited.values() for page in pages}
    assert {"facts.md", "engines.md"} <= pages
    assert sorted(page for page in pages if not (PROJECT_DIR / "docs" / page).is_file()) == []
