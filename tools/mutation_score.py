"""The mutation score of the last `mutmut run` (`make mutate`), and whether it passes.

    score = detected / (mutants - equivalents)

detected: killed by a test, or timed out (the mutant made the tests hang, e.g. an endless
loop: a hanging suite fails as surely as a failing one). equivalents: survivors listed in
docs/mutation-equivalents.md, each entry with its file, function, one-line change and why no
input can tell it from the original. An entry is keyed by (file, function, change), not by
mutmut's mutant number, which moves whenever a function is edited: a surviving mutant is
equivalent when an entry has its file and function (derived from its name) and its change (from
mutmut's diff). One entry covers every mutant of that function making the same change. Each
source folder (stackconfig/, benchmark/, reporting/) is scored on its own. Exits 1 when a folder's score is
below 90 %, when equivalents are more than 5 % of a folder's mutants, or when that file is stale
or incomplete: an entry that no surviving mutant makes (its line was edited, or its function
renamed or moved to another file), one whose file, function and change are also those of a
mutant that did not survive (killed, timed out, not run), one without a reason, or one listed
twice.

Reads `mutmut results --all true` and mutmut's own diff of each mutant that is not detected or
is in a listed function (mutmut 3.8.1, pinned in requirements-mutate.txt); run it from the
project root after `mutmut run`.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "docs" / "mutation-equivalents.md"
MIN_SCORE = 0.90
MAX_EQUIVALENT_SHARE = 0.05
DETECTED = ("killed", "timeout")
_RESULT = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+?)\s*$")
_CELL = re.compile(r"(?<!\\)\|")  # a cell border: a pipe that is not written `\|`
_FILE = re.compile(r"^`?(?P<file>[\w./-]+\.py)`?$")
_FUNCTION = re.compile(r"^`?(?P<function>\w+(?:\.\w+)?)`?$")
_CLASS = "ǁ"  # mutmut's separator in a method's mutant name: x<sep>Class<sep>method


@dataclass(frozen=True)
class Equivalent:
    file: str  # the source path, stackconfig/naming.py
    function: str  # as written in the source: slug, or _Section._get for a method
    change: str  # one_line_change() of the mutant's diff
    why: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.file, self.function, self.change

    @property
    def folder(self) -> str:
        """The source folder, as by_folder() names it: stackconfig/naming.py is in `stackconfig`."""
        return self.file.split("/", 1)[0].removesuffix(".py")

    def __str__(self) -> str:
        return f"{self.file} {self.function} {self.change}"


def parse_results(text: str) -> dict[str, str]:
    """`mutmut results --all true` lines ("    <mutant>: <status>") as mutant -> status."""
    results = {}
    for line in text.splitlines():
        match = _RESULT.match(line)
        if match:
            results[match["name"]] = match["status"]
    return results


def parse_equivalents(markdown: str) -> list[Equivalent]:
    """The table rows of docs/mutation-equivalents.md: | `file.py` | `function` | change | why |,
    with `\\|` in a cell read as `|`. Other lines, the header and separator rows among them, are
    not entries."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in _CELL.split(line[1:-1])]
        if len(cells) != 4:
            continue
        file, function = _FILE.match(cells[0]), _FUNCTION.match(cells[1])
        if file and function:
            rows.append(Equivalent(file["file"], function["function"], cells[2], cells[3]))
    return rows


def source_of(name: str) -> tuple[str, str]:
    """A mutant's source file and function, from its name: `stackconfig.naming.x_slug__mutmut_15`
    is in stackconfig/naming.py, function slug; `stackconfig.parse.reader.xǁ_Sectionǁ_get__mutmut_3`
    in stackconfig/parse/reader.py, method _Section._get. (mutmut drops `__init__` from a package's module
    name: such a mutant is in the package's __init__.py when there is no module file of that name.)"""
    mangled = name.partition("__mutmut_")[0]
    module, _, key = mangled.rpartition(".")
    if key.startswith("x" + _CLASS):
        _, class_name, method = key.split(_CLASS)
        function = f"{class_name}.{method}"
    else:
        function = key.removeprefix("x_")
    path = module.replace(".", "/")
    if not (ROOT / f"{path}.py").exists() and (ROOT / path / "__init__.py").exists():
        return f"{path}/__init__.py", function
    return f"{path}.py", function


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


def stale(entry: Equivalent) -> str:
    """The problem with an entry that names no surviving mutant."""
    return (f"no surviving mutant of {entry.file} {entry.function} makes the change {entry.change}; "
            "remove it or fix it")


def matches(results: dict[str, str], equivalents: list[Equivalent], change_of) -> dict[tuple[str, str, str], list[str]]:
    """The mutants (of `results`) each entry's (file, function, change) names. Only mutants of a
    listed file and function are diffed."""
    functions = {(e.file, e.function) for e in equivalents}
    keys = {e.key for e in equivalents}
    found: dict[tuple[str, str, str], list[str]] = {}
    for name in sorted(results):
        source = source_of(name)
        if source in functions and (key := (*source, change_of(name))) in keys:
            found.setdefault(key, []).append(name)
    return found


def score(results: dict[str, str], equivalents: list[Equivalent], change_of) -> tuple[Score, list[str]]:
    """The score, and every problem with the equivalents file (each one fails the run).
    `change_of(mutant)` gives a mutant's one-line change. A surviving mutant is equivalent when an
    entry has its file, function and change; an entry with a problem counts no mutant."""
    problems = []
    listed = Counter(e.key for e in equivalents)
    for entry in {e.key: e for e in reversed(equivalents)}.values():
        if listed[entry.key] > 1:
            problems.append(f"{entry} is listed {listed[entry.key]} times")
    found = matches(results, equivalents, change_of)
    accepted = 0
    for entry in {e.key: e for e in reversed(equivalents)}.values():  # each key once (its first row)
        names = found.get(entry.key, [])
        caught = [name for name in names if results[name] != "survived"]
        if not names:
            problems.append(stale(entry))
        elif caught:
            problems.extend(f"{entry} is listed as equivalent but {name} was {results[name]}: remove it" for name in caught)
        elif not entry.why:
            problems.append(f"{entry} has no reason why it is equivalent")
        else:
            accepted += len(names)
    counts = Counter(results.values())
    detected = sum(counts[status] for status in DETECTED)
    return Score(total=len(results), detected=detected, equivalents=accepted, counts=counts), problems


def mutmut_results() -> dict[str, str]:
    output = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], check=True,
                            capture_output=True, text=True).stdout
    return parse_results(output)


@cache  # main() asks for a mutant's change more than once
def mutmut_change(name: str) -> str:
    from mutmut.mutation.diff_apply import (
        get_diff_for_mutant,  # installed by requirements-mutate.txt
    )

    return one_line_change(get_diff_for_mutant(name))


def by_folder(results: dict[str, str]) -> dict[str, dict[str, str]]:
    """Results grouped by the source folder a mutant is in (its name's first part: `stackconfig`,
    `benchmark`, `reporting`), so that each folder is held to the bar on its own."""
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
    listed = {e.key for e in equivalents}
    for name in sorted(n for n, s in results.items() if s not in DETECTED):
        if (*source_of(name), mutmut_change(name)) not in listed:
            print(f"  {results[name]}: {name}  {mutmut_change(name)}")
    failed = False
    folders = by_folder(results)
    for folder, folder_results in folders.items():
        result, problems = score(folder_results, [e for e in equivalents if e.folder == folder], mutmut_change)
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
        if entry.folder not in folders:
            print(f"equivalents file: {stale(entry)}", file=sys.stderr)
            failed = True
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
