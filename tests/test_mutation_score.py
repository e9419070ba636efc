"""tools/mutation_score.py: how `make mutate` reads mutmut's results and the equivalents file, and
when it fails. mutmut itself is not needed: its output and diffs are given as text."""
from __future__ import annotations

import pytest

from tools import mutation_score
from tools.mutation_score import (
    Equivalent,
    one_line_change,
    parse_equivalents,
    parse_results,
    score,
    source_of,
)

RESULTS = """    stackconfig.naming.x_slug__mutmut_1: killed
    stackconfig.naming.x_slug__mutmut_2: survived
    stackconfig.parse.reader.xǁ_Sectionǁ_get__mutmut_3: timeout
    stackconfig.parse.models.x_gated_models__mutmut_4: no tests
"""
TABLE = """# Equivalent mutants

| File | Function | Change | Why no input can tell it from the original |
| --- | --- | --- | --- |
| `stackconfig/naming.py` | `slug` | `a \\| b` → `a & b` | both sets are equal here |
| `stackconfig/parse/reader.py` | `_Section._get` | `x = 1` → `x = 2` | x is not read |
| not a row |
| `stackconfig.naming.x_slug__mutmut_2` | `a \\| b` → `a & b` | the old format, keyed by number |
"""
DIFF = """--- stackconfig/naming.py
+++ stackconfig/naming.py
@@ -1,3 +1,3 @@
 def slug(text: str) -> str:
-    return a | b
+    return a & b
"""


def test_results_are_read_per_mutant():
    assert parse_results(RESULTS + "noise\n") == {
        "stackconfig.naming.x_slug__mutmut_1": "killed", "stackconfig.naming.x_slug__mutmut_2": "survived",
        "stackconfig.parse.reader.xǁ_Sectionǁ_get__mutmut_3": "timeout", "stackconfig.parse.models.x_gated_models__mutmut_4": "no tests"}


def test_equivalents_are_the_table_rows_with_pipes_unescaped():
    assert parse_equivalents(TABLE) == [
        Equivalent("stackconfig/naming.py", "slug", "`a | b` → `a & b`", "both sets are equal here"),
        Equivalent("stackconfig/parse/reader.py", "_Section._get", "`x = 1` → `x = 2`", "x is not read")]


def test_a_mutant_name_gives_its_file_and_function():
    assert source_of("stackconfig.naming.x_slug__mutmut_15") == ("stackconfig/naming.py", "slug")
    assert source_of("stackconfig.parse.models.x__declared_models__mutmut_4") == ("stackconfig/parse/models.py", "_declared_models")
    assert source_of("stackconfig.parse.reader.xǁ_Sectionǁ_get__mutmut_3") == ("stackconfig/parse/reader.py", "_Section._get")
    assert source_of("benchmark.proxy.xǁ_Handlerǁdo_POST__mutmut_10") == ("benchmark/proxy.py", "_Handler.do_POST")
    assert source_of("stackconfig.x_helper__mutmut_1") == ("stackconfig/__init__.py", "helper")  # mutmut drops __init__


def test_a_diff_becomes_one_line():
    assert one_line_change(DIFF) == "`return a | b` → `return a & b`"
    two = DIFF.replace("-    return a | b\n", "-    x = 1\n-    return a | b\n")
    assert one_line_change(two) == "`x = 1 / return a | b` → `return a & b`"


AND = "`a | b` → `a & b`"


def changes(name: str) -> str:
    """A mutant's one-line change: any mutant of a function named slug, whatever its number or
    file, makes AND, but number 1, which changes the same line otherwise (a test kills it); every
    other mutant makes a change of its own."""
    if name.endswith("x_slug__mutmut_1"):
        return "`a | b` → `a ^ b`"
    return AND if ".x_slug__" in name else f"`{name}` → `changed`"


def test_detected_is_killed_or_timed_out_and_equivalents_leave_the_denominator():
    result, problems = score(parse_results(RESULTS), parse_equivalents(TABLE)[:1], changes)
    assert problems == []
    assert (result.total, result.detected, result.equivalents) == (4, 2, 1)
    assert result.value == pytest.approx(2 / 3) and result.equivalent_share == 0.25


SLUG = "stackconfig/naming.py", "slug"


@pytest.mark.parametrize("entries, problem", [
    ([Equivalent(*SLUG, "`old` → `new`", "y")],
     "no surviving mutant of stackconfig/naming.py slug makes the change `old` → `new`; remove it or fix it"),
    ([Equivalent("stackconfig/naming.py", "other", AND, "y")], "no surviving mutant of stackconfig/naming.py other makes"),
    ([Equivalent(*SLUG, "`a | b` → `a ^ b`", "y")],
     ("stackconfig/naming.py slug `a | b` → `a ^ b` is listed as equivalent but "
      "stackconfig.naming.x_slug__mutmut_1 was killed: remove it")),
    ([Equivalent(*SLUG, AND, "")], "stackconfig/naming.py slug `a | b` → `a & b` has no reason"),
    ([Equivalent(*SLUG, AND, "y")] * 2, "stackconfig/naming.py slug `a | b` → `a & b` is listed 2 times"),
], ids=["other-change", "other-function", "killed", "no-reason", "twice"])
def test_a_stale_or_unexplained_entry_is_a_problem_and_not_counted(entries, problem):
    result, problems = score(parse_results(RESULTS), entries, changes)
    assert any(problem in p for p in problems), problems
    assert result.equivalents == (1 if len(entries) == 2 else 0)


def test_a_renumbered_mutant_is_still_matched_by_its_file_function_and_change():
    """slug was edited: the mutant that was number 2 is now number 7, and the entry still counts it."""
    renumbered = {"stackconfig.naming.x_slug__mutmut_1": "killed", "stackconfig.naming.x_slug__mutmut_7": "survived"}
    result, problems = score(renumbered, [Equivalent(*SLUG, AND, "y")], changes)
    assert problems == [] and result.equivalents == 1


def test_a_moved_function_is_not_matched_and_its_entry_is_stale():
    """slug moved to stackconfig/text.py: its mutant makes the same change, but in another file."""
    moved = {"stackconfig.text.x_slug__mutmut_2": "survived"}
    result, problems = score(moved, [Equivalent(*SLUG, AND, "y")], changes)
    assert result.equivalents == 0
    assert problems == [f"no surviving mutant of stackconfig/naming.py slug makes the change {AND}; remove it or fix it"]


def test_a_method_is_matched_by_class_and_name():
    results = {"stackconfig.parse.reader.xǁ_Sectionǁ_get__mutmut_3": "survived",
               "stackconfig.parse.reader.xǁOtherǁ_get__mutmut_3": "survived"}
    result, problems = score(results, [Equivalent("stackconfig/parse/reader.py", "_Section._get", "`x` → `y`", "z")],
                             lambda name: "`x` → `y`")
    assert problems == [] and result.equivalents == 1


def test_an_entry_whose_change_a_killed_mutant_makes_is_a_problem_even_if_another_survives():
    """The same line twice in slug: the mutant of one survives, the same change of the other is killed."""
    both = {"stackconfig.naming.x_slug__mutmut_2": "survived", "stackconfig.naming.x_slug__mutmut_5": "killed"}
    result, problems = score(both, [Equivalent(*SLUG, AND, "y")], changes)
    assert result.equivalents == 0
    assert problems == [(f"stackconfig/naming.py slug {AND} is listed as equivalent but "
                         "stackconfig.naming.x_slug__mutmut_5 was killed: remove it")]


def test_one_entry_counts_every_surviving_mutant_making_its_change():
    """The same line twice in slug, both mutants surviving: one entry covers both."""
    both = {"stackconfig.naming.x_slug__mutmut_2": "survived", "stackconfig.naming.x_slug__mutmut_5": "survived",
            "stackconfig.naming.x_slug__mutmut_1": "killed"}
    result, problems = score(both, [Equivalent(*SLUG, AND, "y")], changes)
    assert problems == [] and result.equivalents == 2


def run_main(monkeypatch, tmp_path, results: str, table: str) -> int:
    monkeypatch.setattr(mutation_score, "mutmut_results", lambda: parse_results(results))
    monkeypatch.setattr(mutation_score, "mutmut_change", changes)
    monkeypatch.setattr(mutation_score, "EQUIVALENTS", tmp_path / "equivalents.md")
    (tmp_path / "equivalents.md").write_text(table)
    return mutation_score.main([])


def test_the_run_passes_at_90_percent_with_at_most_5_percent_equivalents(monkeypatch, tmp_path, capsys):
    lines = [f"    m.x_f__mutmut_{i}: killed" for i in range(18)] + ["    m.x_f__mutmut_18: survived",
                                                                     "    m.x_slug__mutmut_19: survived"]
    low = [line.replace("_17: killed", "_17: survived") for line in lines]
    assert run_main(monkeypatch, tmp_path, "\n".join(low), "") == 1           # 17 / 20
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), "") == 0         # 18 / 20
    row = "| `m.py` | `slug` | `a \\| b` → `a & b` | reason |"
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 0        # 18 / 19, 1 of 20 equivalent
    out = capsys.readouterr().out
    assert "m/: score: 18 detected / (20 - 1) = 94.7%" in out and out.rstrip().endswith("PASS")
    assert "survived: m.x_f__mutmut_18  `m.x_f__mutmut_18` → `changed`" in out
    assert out.count("survived: m.x_slug__mutmut_19") == 2                    # listed only while no entry has it


def test_the_run_fails_with_more_than_5_percent_equivalents(monkeypatch, tmp_path, capsys):
    lines = [f"    m.x_f__mutmut_{i}: killed" for i in range(9)] + ["    m.x_slug__mutmut_9: survived"]
    row = "| `m.py` | `slug` | `a \\| b` → `a & b` | reason |"
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 1
    assert "= 10.0% of the mutants" in capsys.readouterr().out


def test_each_folder_is_held_to_the_bar_on_its_own(monkeypatch, tmp_path, capsys):
    """95 % overall, but one folder at 85 %: the run fails and says which."""
    good = [f"    a.x_f__mutmut_{i}: killed" for i in range(100)]
    poor = [f"    b.x_f__mutmut_{i}: {'killed' if i < 17 else 'survived'}" for i in range(20)]
    assert run_main(monkeypatch, tmp_path, "\n".join(good + poor), "") == 1
    out = capsys.readouterr().out
    assert "a/: score: 100 detected / (100 - 0) = 100.0%" in out and "b/: score: 17 detected / (20 - 0) = 85.0%" in out
    assert out.rstrip().endswith("FAIL")


def test_an_entry_for_a_folder_that_was_not_mutated_is_stale(monkeypatch, tmp_path, capsys):
    lines = [f"    a.x_f__mutmut_{i}: killed" for i in range(20)]
    row = "| `b/c.py` | `slug` | `a \\| b` → `a & b` | reason |"
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 1
    assert "no surviving mutant of b/c.py slug makes the change `a | b` → `a & b`" in capsys.readouterr().err


def test_a_killed_entry_fails_the_run(monkeypatch, tmp_path, capsys):
    lines = [f"    m.x_f__mutmut_{i}: killed" for i in range(19)] + ["    m.x_slug__mutmut_1: killed"]
    row = "| `m.py` | `slug` | `a \\| b` → `a ^ b` | reason |"
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 1
    assert "but m.x_slug__mutmut_1 was killed: remove it" in capsys.readouterr().err


def test_no_results_is_a_failure(monkeypatch, tmp_path):
    assert run_main(monkeypatch, tmp_path, "", "") == 1


def test_the_projects_equivalents_file_parses_and_explains_every_entry():
    markdown = mutation_score.EQUIVALENTS.read_text()
    entries = parse_equivalents(markdown)
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert len(entries) == len(rows) == len({entry.key for entry in entries})
    for entry in entries:
        assert entry.file.startswith(("stackconfig/", "benchmark/", "reporting/")) and (mutation_score.ROOT / entry.file).exists(), entry
        assert entry.change.startswith("`") and " → `" in entry.change and len(entry.why) > 20, entry
