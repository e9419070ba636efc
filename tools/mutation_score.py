"""The mutation score of the last `mutmut run` (`make mutate`), and whether it passes.

    score = detected / (mutants - equivalents)

detected: killed by a test, or timed out (the mutant made the tests hang, e.g. an endless
loop: a hanging suite fails as surely as a failing one). equivalents: survivors listed in
docs/mutation-equivalents.md, each with its one-line change and why no input can tell it from
the original. Each source folder (stackconfig/, benchmark/) is scored on its own. Exits 1 when a
folder's score is below 90 %, when equivalents are more than 5 % of a folder's mutants, or when
that file is stale: an entry that is no longer a surviving mutant, or whose
recorded change is not the mutant's (mutant numbers move when the source changes).

Reads `mutmut results --all true` and mutmut's own diff of each mutant (mutmut 3.8.1, pinned in
requirements-mutate.txt); run it from the project root after `mutmut run`.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

EQUIVALENTS = Path(__file__).resolve().parent.parent / "docs" / "mutation-equivalents.md"
MIN_SCORE = 0.90
MAX_EQUIVALENT_SHARE = 0.05
DETECTED = ("killed", "timeout")
_RESULT = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+?)\s*$")
_ROW = re.compile(r"^\|\s*`(?P<name>[\w.ǁ]+__mutmut_\d+)`\s*\|(?P<change>.*?[^\\])\|(?P<why>.*)\|\s*$")


@dataclass(frozen=True)
class Equivalent:
    name: str
    change: str
    why: str


def parse_results(text: str) -> dict[str, str]:
    """`mutmut results --all true` lines ("    <mutant>: <status>") as mutant -> status."""
    results = {}
    for line in text.splitlines():
        match = _RESULT.match(line)
        if match:
            results[match["name"]] = match["status"]
    return results


def parse_equivalents(markdown: str) -> list[Equivalent]:
    """The table rows of docs/mutation-equivalents.md: | `mutant` | change | why |."""
    rows = []
    for line in markdown.splitlines():
        match = _ROW.match(line)
        if match:
            rows.append(Equivalent(match["name"], match["change"].strip().replace("\\|", "|"), match["why"].strip()))
    return rows


def one_line_change(diff: str) -> str:
    """A unified diff of one mutant as "`removed` → `added`", each side's lines stripped and
    joined with " / " (a table cell holds one line)."""
    lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    removed = " / ".join(line[1:].strip() for line in lines if line.startswith("-"))
    added = " / ".join(line[1:].strip() for line in lines if line.startswith("+"))
    return f"`{removed}` → `{added}`"


@dataclass(frozen=True)
class Score:
    total: int
    detected: int
    equivalents: int
    counts: Counter

    @property
    def value(self) -> float:
        considered = self.total - self.equivalents
        return self.detected / considered if considered else 0.0

    @property
    def equivalent_share(self) -> float:
        return self.equivalents / self.total if self.total else 0.0


def score(results: dict[str, str], equivalents: list[Equivalent], change_of) -> tuple[Score, list[str]]:
    """The score, and every problem with the equivalents file (each one fails the run).
    `change_of(mutant)` gives a mutant's one-line change."""
    problems = []
    listed = Counter(e.name for e in equivalents)
    for name, count in listed.items():
        if count > 1:
            problems.append(f"{name} is listed {count} times")
    accepted = 0
    for entry in {e.name: e for e in reversed(equivalents)}.values():  # each mutant once (its first row)
        status = results.get(entry.name)
        if status is None:
            problems.append(f"{entry.name} is no mutant of this run: remove it or record the mutant that replaced it")
        elif status != "survived":
            problems.append(f"{entry.name} is listed as equivalent but was {status}: remove it")
        elif change_of(entry.name) != entry.change:
            problems.append(f"{entry.name} is now {change_of(entry.name)}, not the {entry.change} recorded")
        elif not entry.why:
            problems.append(f"{entry.name} has no reason why it is equivalent")
        else:
            accepted += 1
    counts = Counter(results.values())
    detected = sum(counts[status] for status in DETECTED)
    return Score(total=len(results), detected=detected, equivalents=accepted, counts=counts), problems


def mutmut_results() -> dict[str, str]:
    output = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], check=True,
                            capture_output=True, text=True).stdout
    return parse_results(output)


def mutmut_change(name: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant  # installed by requirements-mutate.txt

    return one_line_change(get_diff_for_mutant(name))


def by_folder(results: dict[str, str]) -> dict[str, dict[str, str]]:
    """Results grouped by the source folder a mutant is in (its name's first part: `stackconfig`,
    `benchmark`), so that each folder is held to the bar on its own."""
    folders: dict[str, dict[str, str]] = {}
    for name, status in sorted(results.items()):
        folders.setdefault(name.split(".", 1)[0], {})[name] = status
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    results = mutmut_results()
    if not results:
        print("no mutation results: run `make mutate` (mutmut run) first", file=sys.stderr)
        return 1
    equivalents = parse_equivalents(EQUIVALENTS.read_text())
    listed = {e.name for e in equivalents}
    for name in sorted(n for n, s in results.items() if s not in DETECTED and n not in listed):
        print(f"  {results[name]}: {name}  {mutmut_change(name)}")
    failed = False
    folders = by_folder(results)
    for folder, folder_results in folders.items():
        result, problems = score(folder_results, [e for e in equivalents if e.name.split(".", 1)[0] == folder], mutmut_change)
        counts = ", ".join(f"{status} {count}" for status, count in sorted(result.counts.items()))
        print(f"{folder}/: mutants {result.total}: {counts}")
        print(f"{folder}/: equivalent (docs/mutation-equivalents.md): {result.equivalents} = {result.equivalent_share:.1%} "
              f"of the mutants (at most {MAX_EQUIVALENT_SHARE:.0%})")
        print(f"{folder}/: score: {result.detected} detected / ({result.total} - {result.equivalents}) = {result.value:.1%} "
              f"(at least {MIN_SCORE:.0%})")
        for problem in problems:
            print(f"equivalents file: {problem}", file=sys.stderr)
        failed |= bool(problems) or result.value < MIN_SCORE or result.equivalent_share > MAX_EQUIVALENT_SHARE
    for entry in equivalents:
        if entry.name.split(".", 1)[0] not in folders:
            print(f"equivalents file: {entry.name} is no mutant of this run: remove it", file=sys.stderr)
            failed = True
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
