"""The report names the load generator that ran, with its pin, in a run's header and in a failed
case's flag (tests/test_report_fixture.py keeps an LLMPerf run's report byte-identical)."""
import json
import re

from benchmark import driver
from benchmark.loadgen import inference_perf
from reporting import report, study

from .results_files import SHAPE, VARIANTS, record, write_case
from .test_tuning_report import STUDY_ID, write_study

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
    config = {"stack": "qwen3-32b-qwen3-0.6b", "shape": SHAPE, "testCases": {"counting": "counting numbers from 1 ", "own-text": None},
              "variants": VARIANTS, "seed": None, "llmperfCommit": LLMPERF_COMMIT, "dimensions": None,
              "loadGenerator": inference_perf.NAME, "loads": [{"concurrency": 1}]}
    run = {**driver.run_record(config, RUN_ID), "status": "complete", "finishedAt": "2026-11-27T13:30:00Z"}
    (results_dir / RUN_ID).mkdir(parents=True)
    (results_dir / RUN_ID / "run.json").write_text(json.dumps(run))
    error = "httpx.ReadTimeout: timed out"
    for test_case, variant, code, records in (
            ("counting", "base", 0, [record(0.2, 5.0, 512, start=1_795_000_000.0 + i) for i in range(10)]),
            ("counting", "sd", 1, [record(0.2, 2.0, 512, start=1_795_000_100.0 + i) for i in range(4)]),
            ("own-text", "base", 0, [record(0.3, 6.0, 512, start=1_795_000_200.0 + i) for i in range(10)]),
            ("own-text", "sd", 0, [record(0.3, 3.0, 512, start=1_795_000_300.0 + i) for i in range(10)])):
        folder = write_case(results_dir, RUN_ID, variant, test_case, records, asked=10, exit_code=code)
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
    # The figures' source and a test case without a prompt name the generator that ran, too.
    assert "timed by the measuring proxy beside inference-perf in the benchmark pod" in text
    assert "### own-text\n\nPrompt: inference-perf's Shakespeare\n" in text


def test_a_studys_short_case_names_the_generator_that_ran(tmp_path):
    """The tuning report lists a short case with its generator's exit code, named (here inference-perf's)."""
    write_study(tmp_path)
    short = tmp_path / STUDY_ID / "repeat-3" / "d1-k4" / "b" / "case.json"
    short.write_text(json.dumps({**json.loads(short.read_text()), "generator": inference_perf.NAME}))
    assert "d1-k4 / b / repeat 3: 1 of 2 completed, inference-perf exit 0" in study.build(tmp_path)[STUDY_ID]["excluded"]
