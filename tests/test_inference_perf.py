"""inference-perf (the installed 0.7.0 of benchmark/requirements-inference-perf.lock, in the
virtualenv `make test` makes) driven by the driver through the measuring proxy against the local
test servers, beside the LLMPerf stand-in against the same servers: the proxy's TPOT of the two
agrees within 2 %, and a sweep of two concurrency levels is measured and compared level by level."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark import driver
from benchmark.loadgen import inference_perf
from reporting import analysis, report

from .fake_vllm import FakeVllm, Speculation
from .local_tokenizer import write_tokenizer
from .test_benchmark_truth import STANDIN, run_config

REPOSITORY = Path(__file__).resolve().parents[1]
VENV = REPOSITORY / os.environ.get("INFERENCE_PERF_VENV", ".venv-inference-perf")
PROMPT = "Repeat the next line exactly 50 times"
SYNTHETIC_HEADER = "Pick as many lines as you can from these poem lines:"
"""What inference-perf's synthetic generator puts before the corpus (datagen/synthetic/synthetic_datagen.py)."""
AGREE = 0.02  # the tolerance


@pytest.fixture
def generator_dir(tmp_path):
    """inference-perf as the pod's setup leaves it (benchmark/podsetup.py link_installed): its
    program in bin/, a tokenizer folder beside it."""
    program = VENV / "bin" / "inference-perf"
    assert program.exists(), f"{program} is missing: `make test` installs inference-perf there first"
    folder = tmp_path / "inference-perf"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "inference-perf").symlink_to(program)
    write_tokenizer(folder / inference_perf.TOKENIZER_DIR, [PROMPT, SYNTHETIC_HEADER])
    return folder


@pytest.fixture(autouse=True)
def prompt_thread_switches():
    """As in test_benchmark_truth: servers, proxy and driver share this interpreter."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(previous)


def tpot_p50(report: dict, key: str, variant: str) -> float:
    return report["cases"][key][variant]["tpot_s"]["p50"]


def test_both_generators_tpot_at_the_proxy_agree_and_inference_perf_sweeps(tmp_path, generator_dir):
    llmperf = Path(shutil.copytree(STANDIN, tmp_path / "llmperf"))
    hooks = driver.Hooks(healthy=lambda url: True, python=sys.executable)
    with FakeVllm(step_s=0.01) as base, FakeVllm(step_s=0.02, speculation=Speculation(4, (4, 2, 3, 0, 4, 1))) as sd:
        config = run_config(base, sd, concurrency=2, requests=4, test_cases={"structured": PROMPT})
        with_llmperf = driver.run_benchmark(config, tmp_path / "llmperf-results", "run-1", llmperf, hooks)
        sweep = {**config, "loadGenerator": "inference-perf", "loads": [{"concurrency": 1}, {"concurrency": 2}],
                 "shape": {**config["shape"], "concurrency": None}}
        with_inference_perf = driver.run_benchmark(sweep, tmp_path / "ip-results", "run-2", generator_dir, hooks)
    assert with_llmperf["status"] == with_inference_perf["status"] == "complete", with_inference_perf["reason"]
    measured = analysis.compare_run(tmp_path / "llmperf-results", "run-1")
    swept = analysis.compare_run(tmp_path / "ip-results", "run-2")
    assert swept["sweep"] == {"kind": "concurrency", "levels": [1, 2],
                              "cases": {"structured": ["structured/concurrency-1", "structured/concurrency-2"]}}
    for variant in ("base", "sd"):
        by_llmperf, by_inference_perf = tpot_p50(measured, "structured", variant), tpot_p50(swept, "structured/concurrency-2", variant)
        assert abs(by_inference_perf - by_llmperf) <= AGREE * by_llmperf, (variant, by_llmperf, by_inference_perf)
        for key in swept["sweep"]["cases"]["structured"]:
            figures = swept["cases"][key][variant]
            # Every request inference-perf sent went through the proxy, with the server's own counts.
            assert (figures["completed"], figures["failed"], figures["output_tokens_mean"]) == (4, 0, 96)
            assert figures["token_source"] == "server usage"
            # Its own summary, read for the report's reference column: it too counted every request;
            # its token counts are its own (the proxy keeps the server's usage chunk from it).
            own = figures["llmperf"]
            assert own["completed"] == 4 and None not in (own["itl_p50_s"], own["output_tokens_p50"]), own
    # inference-perf sends no sampling parameters: the proxy added the run's (temperature 0) to
    # every request it forwarded, on the completions path; LLMPerf's chat requests carry their own.
    asked = [s.request for server in (base, sd) for s in server.sent]
    assert len(asked) == 2 * (5 + 4 + 4) and all(r["temperature"] == 0 for r in asked)
    assert sum("prompt" in r for r in asked) == 2 * 8 and sum("messages" in r for r in asked) == 2 * 5
    # The same prompts (a fixed seed) at every variant: SD answers as the baseline does.
    lossless = swept["cases"]["structured/concurrency-2"]["sd"]["vs_baseline"]["lossless"]
    assert lossless["checked"] and lossless["compared"] == 4 and lossless["matching"] == 4
    case = tmp_path / "ip-results" / "run-2" / "sd" / "structured" / "concurrency-1"
    assert (case / inference_perf.CONFIG_FILE).exists() and (case / "summary_lifecycle_metrics.json").exists()
    # The run recorded the version that ran (the one installed from the lock), and the report's
    # header names it; the LLMPerf run's header names LLMPerf at its commit.
    installed = subprocess.run([str(VENV / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('inference-perf'))"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert with_inference_perf["loadGeneratorPin"] == swept["loadGeneratorPin"] == installed
    assert f", inference-perf {installed}; " in report.markdown({"runs": {"run-2": swept}})
    assert "| inference-perf: completed, ITL p50 (per token), out tokens p50 |" in report.markdown({"runs": {"run-2": swept}})
    assert f", LLMPerf {config['llmperfCommit'][:12]}; " in report.markdown({"runs": {"run-1": measured}})
