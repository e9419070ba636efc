"""The report names the load generator that ran, with its pin, in a run's header and in a failed
case's flag (tests/test_report_fixture.py keeps an LLMPerf run's report byte-identical)."""
import json
import re

from benchmark import driver
from benchmark.loadgen import inference_perf
from reporting import report

from .results_files import SHAPE, VARIANTS, record, write_case

RUN_ID = "20261127T130000Z-inference-perf"
LLMPERF_COMMIT = "f1d6bed47e4501b0e371082b41601b59ab55269f"
LOCK = inference_perf.GENERATOR.lock


def locked_version() -> str:
    """inference-perf's version as its lock pins it, read here independently of the module."""
    text = (driver.Path(driver.__file__).parent / LOCK).read_text()
    return re.search(r"^inference-perf==(\S+)", text, re.MULTILINE).group(1)


def inference_perf_run(results_dir):
    """A run of inference-perf as the driver records it: run.json from the driver's own record,
    one case clean and one exited 1 with inference-perf's last error line (its case.json keys)."""
    config = {"stack": "qwen3-32b-qwen3-0.6b", "shape": SHAPE, "testCases": {"counting": "counting numbers from 1 "},
              "variants": VARIANTS, "seed": None, "llmperfCommit": LLMPERF_COMMIT, "dimensions": None,
              "loadGenerator": inference_perf.NAME, "loads": [{"concurrency": 1}]}
    run = {**driver.run_record(config, RUN_ID), "status": "complete", "finishedAt": "2026-11-27T13:30:00Z"}
    (results_dir / RUN_ID).mkdir(parents=True)
    (results_dir / RUN_ID / "run.json").write_text(json.dumps(run))
    error = "httpx.ReadTimeout: timed out"
    for variant, code, records in (("base", 0, [record(0.2, 5.0, 512, start=1_795_000_000.0 + i) for i in range(10)]),
                                   ("sd", 1, [record(0.2, 2.0, 512, start=1_795_000_100.0 + i) for i in range(4)])):
        folder = write_case(results_dir, RUN_ID, variant, "counting", records, asked=10, exit_code=code)
        case = json.loads((folder / "case.json").read_text())
        for key in ("llmperfError", "threadDeaths"):
            del case[key]
        case.update(generator=inference_perf.NAME, generatorError=error if code else None)
        (folder / "case.json").write_text(json.dumps(case))
    return error


def test_an_inference_perf_runs_header_and_failure_name_it_and_its_locked_version(tmp_path, capsys):
    error = inference_perf_run(tmp_path)
    report.write_report(tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert f"inference-perf {locked_version()};" in text
    assert f"LLMPerf {LLMPERF_COMMIT[:12]}" not in text
    assert f"- **sd: inference-perf failed** (exit 1): `{error}`" in text
    assert "LLMPerf failed" not in text
