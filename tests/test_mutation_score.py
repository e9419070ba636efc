"""tools/mutation_score.py: how `make mutate` reads mutmut's results and the equivalents file, and
when it fails. mutmut itself is not needed: its output and diffs are given as text."""
from __future__ import annotations

import pytest

from tools import mutation_score
from tools.mutation_score import Equivalent, one_line_change, parse_equivalents, parse_results, score

RESULTS = """    stackconfig.naming.x_slug__mutmut_1: killed
    stackconfig.naming.x_slug__mutmut_2: survived
    stackconfig.parse.xǁ_Sectionǁ_get__mutmut_3: timeout
    stackconfig.parse.x_gated_models__mutmut_4: no tests
"""
TABLE = """# Equivalent mutants

| Mutant | Change | Why no input can tell it from the original |
| --- | --- | --- |
| `stackconfig.naming.x_slug__mutmut_2` | `a \\| b` → `a & b` | both sets are equal here |
| not a row |
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
        "stackconfig.parse.xǁ_Sectionǁ_get__mutmut_3": "timeout", "stackconfig.parse.x_gated_models__mutmut_4": "no tests"}


def test_equivalents_are_the_table_rows_with_pipes_unescaped():
    assert parse_equivalents(TABLE) == [
        Equivalent("stackconfig.naming.x_slug__mutmut_2", "`a | b` → `a & b`", "both sets are equal here")]


def test_a_diff_becomes_one_line():
    assert one_line_change(DIFF) == "`return a | b` → `return a & b`"
    two = DIFF.replace("-    return a | b\n", "-    x = 1\n-    return a | b\n")
    assert one_line_change(two) == "`x = 1 / return a | b` → `return a & b`"


def changes(name: str) -> str:
    return "`a | b` → `a & b`"


def test_detected_is_killed_or_timed_out_and_equivalents_leave_the_denominator():
    result, problems = score(parse_results(RESULTS), parse_equivalents(TABLE), changes)
    assert problems == []
    assert (result.total, result.detected, result.equivalents) == (4, 2, 1)
    assert result.value == pytest.approx(2 / 3) and result.equivalent_share == 0.25


@pytest.mark.parametrize("entries, problem", [
    ([Equivalent("stackconfig.naming.x_slug__mutmut_9", "x", "y")], "is no mutant of this run"),
    ([Equivalent("stackconfig.naming.x_slug__mutmut_1", "x", "y")], "is listed as equivalent but was killed: remove it"),
    ([Equivalent("stackconfig.naming.x_slug__mutmut_2", "`old` → `new`", "y")], "is now `a | b` → `a & b`, not the `old` → `new`"),
    ([Equivalent("stackconfig.naming.x_slug__mutmut_2", "`a | b` → `a & b`", "")], "has no reason"),
    ([Equivalent("stackconfig.naming.x_slug__mutmut_2", "`a | b` → `a & b`", "y")] * 2, "is listed 2 times"),
], ids=["unknown", "killed", "other-change", "no-reason", "twice"])
def test_a_stale_or_unexplained_entry_is_a_problem_and_not_counted(entries, problem):
    result, problems = score(parse_results(RESULTS), entries, changes)
    assert any(problem in p for p in problems), problems
    assert result.equivalents == (1 if len(entries) == 2 else 0)


def run_main(monkeypatch, tmp_path, results: str, table: str) -> int:
    monkeypatch.setattr(mutation_score, "mutmut_results", lambda: parse_results(results))
    monkeypatch.setattr(mutation_score, "mutmut_change", changes)
    monkeypatch.setattr(mutation_score, "EQUIVALENTS", tmp_path / "equivalents.md")
    (tmp_path / "equivalents.md").write_text(table)
    return mutation_score.main([])


def test_the_run_passes_at_90_percent_with_at_most_5_percent_equivalents(monkeypatch, tmp_path, capsys):
    lines = [f"    m.x_f__mutmut_{i}: killed" for i in range(18)] + ["    m.x_f__mutmut_18: survived",
                                                                     "    m.x_f__mutmut_19: survived"]
    low = [line.replace("_17: killed", "_17: survived") for line in lines]
    assert run_main(monkeypatch, tmp_path, "\n".join(low), "") == 1           # 17 / 20
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), "") == 0         # 18 / 20
    row = "| `m.x_f__mutmut_19` | `a | b` → `a & b` | reason |".replace("a | b", "a \\| b")
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 0        # 18 / 19, 1 of 20 equivalent
    out = capsys.readouterr().out
    assert "m/: score: 18 detected / (20 - 1) = 94.7%" in out and out.rstrip().endswith("PASS")
    assert "survived: m.x_f__mutmut_18" in out


def test_the_run_fails_with_more_than_5_percent_equivalents(monkeypatch, tmp_path, capsys):
    lines = [f"    m.x_f__mutmut_{i}: killed" for i in range(9)] + ["    m.x_f__mutmut_9: survived"]
    row = "| `m.x_f__mutmut_9` | `a \\| b` → `a & b` | reason |"
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
    row = "| `b.x_f__mutmut_1` | `a \\| b` → `a & b` | reason |"
    assert run_main(monkeypatch, tmp_path, "\n".join(lines), row) == 1
    assert "b.x_f__mutmut_1 is no mutant of this run" in capsys.readouterr().err


def test_no_results_is_a_failure(monkeypatch, tmp_path):
    assert run_main(monkeypatch, tmp_path, "", "") == 1


def test_the_projects_equivalents_file_parses_and_explains_every_entry():
    markdown = mutation_score.EQUIVALENTS.read_text()
    entries = parse_equivalents(markdown)
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    assert len(entries) == len(rows)
    for entry in entries:
        assert entry.name.startswith(("stackconfig.", "benchmark.")) and entry.change.startswith("`") and len(entry.why) > 20, entry
