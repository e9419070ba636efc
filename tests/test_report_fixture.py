"""The report built from a fixed results folder is byte-identical to the one stored in
tests/data/report-fixture/expected (written before the load generators moved behind a seam)."""
import shutil
from pathlib import Path

from reporting import report

FIXTURE = Path(__file__).resolve().parent / "data" / "report-fixture"
FILES = ("report.md", "report.json", "report.csv", "report.png")


def test_the_report_of_a_fixed_results_folder_is_unchanged(tmp_path, capsys):
    results = Path(shutil.copytree(FIXTURE / "results", tmp_path / "results"))
    report.write_report(results)
    changed = [name for name in FILES if (results / name).read_bytes() != (FIXTURE / "expected" / name).read_bytes()]
    assert changed == []
