"""benchmark.loadGenerator and the load levels (benchmark.concurrency / benchmark.rate, one or a
sorted list: a load sweep), and the load generators' registry (benchmark/loadgen/)."""
from __future__ import annotations

import json

import pytest

from benchmark import loadgen
from benchmark.loadgen import Level, LoadGenerator
from benchmark.pod import PACKAGE_DIR

from .stackconfig_helpers import SMALL, edits_id, parse, problem_list, with_edits

STUDY = {"variants": [{"name": "base", "role": "baseline"}], "study": {"drafts": ["Qwen/Qwen3-1.7B"], "windows": [5]}}


@pytest.mark.parametrize("edits, generator, loads", [
    ({}, "llmperf", (Level("concurrency", 1),)),
    ({"benchmark.concurrency": [1, 2, 4]}, "llmperf", tuple(Level("concurrency", c) for c in (1, 2, 4))),
    ({"benchmark.loadGenerator": "inference-perf", "benchmark.concurrency": 3}, "inference-perf", (Level("concurrency", 3),)),
    ({"benchmark.loadGenerator": "inference-perf", "benchmark.rate": [0.5, 2]}, "inference-perf",
     (Level("rate", 0.5), Level("rate", 2))),
], ids=edits_id)
def test_the_generator_and_the_levels_land_in_the_spec(edits, generator, loads):
    benchmark = parse(with_edits(SMALL, edits)).benchmark
    assert (benchmark.load_generator, benchmark.loads) == (generator, loads)


@pytest.mark.parametrize("edits, problems", [
    ({"benchmark.loadGenerator": "guidellm"}, [("benchmark.loadGenerator", "'guidellm' is not one of inference-perf, llmperf")]),
    ({"benchmark.concurrency": []},
     [("benchmark.concurrency", "is an empty list: give one level, or several in ascending order (e.g. [1, 2, 4, 8])")]),
    ({"benchmark.concurrency": [4, 2]}, [("benchmark.concurrency", "[4, 2] is not in ascending order without repeats (e.g. [1, 2, 4, 8])")]),
    ({"benchmark.concurrency": [2, 2]}, [("benchmark.concurrency", "[2, 2] is not in ascending order without repeats (e.g. [1, 2, 4, 8])")]),
    ({"benchmark.concurrency": [1, 0, 2.5, True]}, [("benchmark.concurrency", "0 is not a positive integer (requests in flight); "
                                                                               "2.5 is not a positive integer (requests in flight); "
                                                                               "True is not a positive integer (requests in flight)")]),
    ({"benchmark.concurrency": [1, 8]}, [("benchmark.concurrency", "8 exceeds serving.maxNumSeqs 4; extra requests would queue and skew latency")]),
    ({"benchmark.loadGenerator": "inference-perf", "benchmark.rate": [1, -1, "x"]},
     [("benchmark.rate", "-1 is not a positive number (requests per second); 'x' is not a positive number (requests per second)")]),
    ({"benchmark.loadGenerator": "inference-perf", "benchmark.concurrency": 2, "benchmark.rate": 1},
     [("benchmark.rate", "benchmark.concurrency and benchmark.rate are both given: a run holds a concurrency or a request rate, not both")]),
    ({"benchmark.rate": [1, 2]}, [("benchmark.rate", "LLMPerf cannot hold a rate; loadGenerator inference-perf can")]),
], ids=edits_id)
def test_bad_load_settings_name_the_key(edits, problems):
    assert problem_list(with_edits(SMALL, edits)) == problems


def test_a_study_takes_load_as_its_third_axis():
    """A load list beside a study: every configuration is measured at every level (benchmark/tuner.py)."""
    study = {**SMALL, **STUDY}
    assert parse(with_edits(study, {"benchmark.concurrency": [1, 4]})).benchmark.loads == (Level("concurrency", 1),
                                                                                          Level("concurrency", 4))
    rates = parse(with_edits(study, {"benchmark.loadGenerator": "inference-perf", "benchmark.rate": [0.5, 2]})).benchmark
    assert rates.loads == (Level("rate", 0.5), Level("rate", 2))
    assert parse(with_edits(study, {"benchmark.concurrency": [2]})).benchmark.concurrency == 2


def test_a_study_keeps_its_dashboard_view_within_cloudwatch_at_every_level():
    """The study's view has a widget per test case and level (components/pairing/dashboard.py):
    more levels than CloudWatch's 500 widgets hold are refused, naming the load key."""
    cases = {f"case-{i}": None for i in range(40)}
    study = with_edits({**SMALL, **STUDY}, {"benchmark.testCases": cases, "serving.maxNumSeqs": 64})
    assert len(parse(with_edits(study, {"benchmark.concurrency": [1, 2, 4, 8]})).benchmark.loads) == 4
    assert problem_list(with_edits(study, {"benchmark.concurrency": [1, 2, 4, 8, 16]})) == [
        ("benchmark.concurrency", "5 levels beside a study need 522 dashboard widgets (the study's view has one per test case "
                                  "and level); CloudWatch allows 500: give at most 4 levels, or fewer test cases")]


def test_a_dummy_generator_registers_without_touching_any_other_module(monkeypatch):
    """A third generator is its module and one registry entry: validation then accepts its name, the
    kinds of load it holds and the prompts it can make, and refuses the others, naming it."""
    dummy = LoadGenerator(
        name="dummy", title="Dummy", load_kinds=("rate",), invocation=lambda case: None, prompts=lambda work_dir: None,
        own_text="Dummy's text",
        outcome=lambda stderr: {"dummyError": None}, error_key="dummyError", describe=lambda code, facts: "",
        own_results=lambda folder: (None, []), own_figures=lambda summary: {}, own_itl="per dummy",
        own_source="**Dummy** = Dummy's own summary", min_input_tokens=50, min_input_tokens_why="Dummy's preamble is longer",
        output_name="dummy", image="example.com/dummy:1.0", lock="requirements-dummy.lock",
        setup_flags=lambda commit, deps: [], sends_sampling_params=False, pin=lambda config: "1.0")
    monkeypatch.setitem(loadgen.GENERATORS, "dummy", dummy)
    benchmark = parse(with_edits(SMALL, {"benchmark.loadGenerator": "dummy", "benchmark.rate": [1, 3],
                                         "benchmark.inputTokens": 50})).benchmark
    assert (benchmark.load_generator, benchmark.loads) == ("dummy", (Level("rate", 1), Level("rate", 3)))
    assert problem_list(with_edits(SMALL, {"benchmark.loadGenerator": "dummy", "benchmark.concurrency": 2})) == [
        ("benchmark.concurrency", "Dummy cannot hold a concurrency; loadGenerator inference-perf or llmperf can"),
        ("benchmark.inputTokens", "40 is below 50: Dummy's preamble is longer")]


def test_the_benchmark_time_counts_every_level():
    one = parse(with_edits(SMALL, {"benchmark.concurrency": 2})).benchmark
    sweep = parse(with_edits(SMALL, {"benchmark.concurrency": [1, 2, 4]})).benchmark
    rate = parse(with_edits(SMALL, {"benchmark.loadGenerator": "inference-perf", "benchmark.rate": [0.5, 2]})).benchmark
    decode = 64 * 0.05  # outputTokens x 50 ms
    assert one.seconds(10, 0.05) == pytest.approx(10 * decode / 2)
    assert sweep.seconds(10, 0.05) == pytest.approx(10 * decode * (1 + 1 / 2 + 1 / 4))
    assert rate.seconds(10, 0.05) == pytest.approx(10 / 0.5 + decode + 10 / 2 + decode)
    assert (one.describe_loads(), sweep.describe_loads(), rate.describe_loads()) == (
        "2 at a time", "at concurrency 1, 2, 4", "at 0.5, 2 requests/s")
    assert (one.concurrency, sweep.concurrency, rate.concurrency) == (2, None, None)


def planned(benchmark: dict):
    """The qwen3-32b-qwen3-1.7b pairing planned offline with `benchmark` over its own benchmark settings."""
    from offline.stacks import load_stack, run_stack
    from stackconfig import source

    settings = {**source.FILES.config("qwen3-32b-qwen3-1.7b")["sd-trn2:benchmark"], **benchmark}
    recording = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:benchmark": settings}))
    data = recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    (container,) = recording.one("kubernetes:batch/v1:Job", "benchmark-run").inputs["spec"]["template"]["spec"]["containers"]
    return json.loads(data["run-config.json"]), data, container


def test_a_planned_sweep_shows_its_stages_in_the_run_config_and_the_plans_timeline():
    from offline.stacks import load_stack
    from stackconfig import source
    from stackconfig.timeline import cold_path

    config, data, _ = planned({"concurrency": [1, 2, 4]})
    assert (config["loadGenerator"], config["loads"]) == ("llmperf", [{"concurrency": 1}, {"concurrency": 2}, {"concurrency": 4}])
    assert config["shape"]["concurrency"] is None  # no one concurrency: the driver runs each level in turn
    assert "requirements-pod.lock" in data and "requirements-inference-perf.lock" not in data
    settings = {**source.FILES.config("qwen3-32b-qwen3-1.7b")["sd-trn2:benchmark"], "concurrency": [1, 2, 4]}
    step = next(s for s in cold_path(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:benchmark": settings}).spec())
                if s.name == "benchmark")
    assert step.assumes.endswith("at concurrency 1, 2, 4")  # what `make plan` prints beside the benchmark's minutes


def test_a_planned_inference_perf_stack_installs_its_own_lock_on_its_own_python():
    config, data, container = planned({"loadGenerator": "inference-perf", "rate": [0.5, 1, 2], "concurrency": None})
    assert (config["loadGenerator"], config["loads"]) == ("inference-perf", [{"rate": 0.5}, {"rate": 1}, {"rate": 2}])
    assert data["requirements-inference-perf.lock"] == (PACKAGE_DIR / "requirements-inference-perf.lock").read_text()
    assert "requirements-pod.lock" not in data and data["loadgen-inference_perf.py"]
    assert container["image"] == "public.ecr.aws/docker/library/python:3.12.12-slim-bookworm"
    script = container["command"][-1]
    assert "-r benchmark/requirements-inference-perf.lock" in script
    assert "python -m benchmark.podsetup --link-installed /opt/deps/bin/inference-perf --dest /opt/work/inference-perf " in script
    assert "--generator-dir /opt/work/inference-perf " in script


def test_podsetup_links_an_installed_generator_and_the_tokenizers_snapshot(tmp_path):
    from benchmark import podsetup

    program = tmp_path / "deps" / "bin" / "inference-perf"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    snapshot = podsetup.repo_cache_dir(tmp_path / "hf", podsetup.LLMPERF_TOKENIZER) / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    podsetup.link_installed(program, tmp_path / "work" / "inference-perf", tmp_path / "hf")
    assert (tmp_path / "work" / "inference-perf" / "bin" / "inference-perf").resolve() == program
    assert (tmp_path / "work" / "inference-perf" / "tokenizer").resolve() == snapshot
    (snapshot.parent / "def456").mkdir()
    with pytest.raises(podsetup.SetupError, match="2 snapshot"):
        podsetup.link_installed(program, tmp_path / "again", tmp_path / "hf")


def sweep_results(tmp_path):
    """A sweep of two concurrency levels as the driver writes it: a folder per level, run.json listing them."""
    from .results_files import record, write_case, write_run

    write_run(tmp_path, "r1", {"counting": "c"})
    run = json.loads((tmp_path / "r1" / "run.json").read_text())
    run.update(loadGenerator="inference-perf", loads=[{"concurrency": 1}, {"concurrency": 4}])
    (tmp_path / "r1" / "run.json").write_text(json.dumps(run))
    # TPOT = (e2e - ttft) / (tokens - 1): base 20 and 30 ms, sd 10 and 20 ms; TTFT 50 and 80 ms.
    for level, ttft, base_tpot, sd_tpot in ((1, 0.05, 0.02, 0.01), (4, 0.08, 0.03, 0.02)):
        for variant, tpot in (("base", base_tpot), ("sd", sd_tpot)):
            write_case(tmp_path, "r1", variant, f"counting/concurrency-{level}",
                       [record(ttft, ttft + tpot * 99, 100, start=1_795_000_000.0 + i) for i in range(2)])
    return tmp_path


def test_the_report_of_a_sweep_compares_each_level_and_plots_figures_against_load(tmp_path, capsys):
    from reporting import report

    results = sweep_results(tmp_path)
    built = report.write_report(results)
    run = built["runs"]["r1"]
    assert run["sweep"] == {"kind": "concurrency", "levels": [1, 4],
                            "cases": {"counting": ["counting/concurrency-1", "counting/concurrency-4"]}}
    series = report.sweep_series(run)["counting"]
    assert {v: [round(x, 6) for x in values] for v, values in series["tpot_s"].items()} == {"base": [0.02, 0.03], "sd": [0.01, 0.02]}
    assert {v: [round(x, 6) for x in values] for v, values in series["ttft_s"].items()} == {"base": [0.05, 0.08], "sd": [0.05, 0.08]}
    assert {v: [round(x, 6) for x in values] for v, values in series["speedup_tpot"].items()} == {"sd": [2.0, 1.5]}
    assert set(series["overall_output_throughput"]) == {"base", "sd"}
    assert (results / "report-sweep.png").read_bytes().startswith(b"\x89PNG")
    text = (results / "report.md").read_text()
    assert "Load sweep by inference-perf: concurrency 1, 4;" in text and "### counting/concurrency-4" in text


def test_a_sweep_runs_every_level_of_every_test_case_variant_by_variant_each_in_a_folder_of_its_own(tmp_path, llmperf):
    """LLMPerf (a runner standing in for it) at each level, the levels' cases apart in the results
    and in CloudWatch, and the run says its levels."""
    from benchmark import driver

    from .test_benchmark_driver import SHAPE, config

    calls, published = [], []

    def runner(invocation, stdout_file, stderr_file):
        argv = invocation.argv
        calls.append((argv[argv.index("--num-concurrent-requests") + 1], stderr_file.parent.relative_to(tmp_path).as_posix()))
        return 0

    sweep = {**config(shape={**SHAPE, "concurrency": None, "requestsPerTestCase": 0}),
             "loads": [{"concurrency": 1}, {"concurrency": 8}], "testCases": {"counting": "x"}}
    hooks = driver.Hooks(healthy=lambda url: True, scrape=lambda endpoint: "", runner=runner, sleep=lambda s: None,
                         publish=published.extend)
    run = driver.run_benchmark(sweep, tmp_path, "run-1", llmperf, hooks)
    assert calls == [("1", "run-1/base/counting/concurrency-1"), ("1", "run-1/sd/counting/concurrency-1"),
                     ("8", "run-1/base/counting/concurrency-8"), ("8", "run-1/sd/counting/concurrency-8")]
    assert run["status"] == "complete" and run["loads"] == sweep["loads"] and run["progress"]["total"] == 4
    assert [(c["variant"], c["load"]) for c in run["cases"]] == [
        ("base", {"concurrency": 1}), ("sd", {"concurrency": 1}), ("base", {"concurrency": 8}), ("sd", {"concurrency": 8})]
    case = json.loads((tmp_path / "run-1" / "sd" / "counting" / "concurrency-8" / "case.json").read_text())
    assert (case["load"], case["concurrency"], case["generator"]) == ({"concurrency": 8}, 8, "llmperf")
    test_case_values = {d["Dimensions"][1]["Value"] for d in published}
    assert test_case_values == {"counting_numbers_from_1_/concurrency-1", "counting_numbers_from_1_/concurrency-8"}


INFERENCE_PERF_SUMMARY = {
    "benchmark_time_seconds": 4.25, "load_summary": {"count": 2},
    "successes": {"count": 2,
                  "latency": {"inter_token_latency": {"mean": 0.0191, "min": 0.0, "max": 0.0412, "median": 0.0187, "p90": 0.0305},
                              "time_per_output_token": {"mean": 0.0233, "median": 0.0231}},
                  "output_tokens": {"total": 198.0, "mean": 99.0, "median": 99.0},
                  "throughput": {"output_tokens_per_sec": 46.6}},
    "failures": {"count": 0}}
"""Shaped as inference-perf 0.7.0 writes summary_lifecycle_metrics.json (reportgen/base.py
summarize_requests, its default percentiles: 50 is "median"); every figure unlike the proxy's."""


def test_the_generator_column_of_an_inference_perf_run_names_it_and_shows_its_own_figures(tmp_path):
    """The case table's column of the generator's own summary names the generator that ran and
    reads inference-perf's summary: its completed count, its inter-token latency (per token), its
    output tokens; and the sources say what inference-perf's figures are."""
    from reporting import report

    results = sweep_results(tmp_path)
    for case in (results / "r1").glob("*/counting/*/case.json"):
        case.write_text(json.dumps({**json.loads(case.read_text()), "generator": "inference-perf", "generatorError": None}))
    folder = results / "r1" / "sd" / "counting" / "concurrency-4"
    (folder / "summary_lifecycle_metrics.json").write_text(json.dumps(INFERENCE_PERF_SUMMARY))
    text = report.markdown(report.build_report(results))
    section = text.split("### counting/concurrency-4")[1]
    assert "| inference-perf: completed, ITL p50 (per token), out tokens p50 |" in section
    assert "LLMPerf: completed" not in text
    assert "| 2, 18.70 ms, 99.0 |" in section  # sd: its summary
    assert "| none, n/a, n/a |" in section  # base at this level: no summary written
    assert "**inference-perf** = inference-perf's own summary" in text and "**LLMPerf** =" not in text


@pytest.mark.parametrize("edits, problems", [
    ({"benchmark.inputTokens": 39}, [("benchmark.inputTokens", "39 is below 40: LLMPerf's prompt template alone is longer, "
                                                               "and it would never start")]),
    ({"benchmark.loadGenerator": "inference-perf", "benchmark.inputTokens": 1},
     [("benchmark.inputTokens", "1 is below 2: inference-perf counts the tokenizer's beginning-of-sequence token in a "
                                "prompt's length, so it can make no shorter prompt")]),
], ids=edits_id)
def test_the_input_tokens_minimum_is_the_selected_generators(edits, problems):
    assert problem_list(with_edits(SMALL, edits)) == problems


def test_inference_perf_takes_prompts_shorter_than_llmperfs_template():
    benchmark = parse(with_edits(SMALL, {"benchmark.loadGenerator": "inference-perf", "benchmark.inputTokens": 16})).benchmark
    assert (benchmark.load_generator, benchmark.input_tokens) == ("inference-perf", 16)


def test_the_default_metrics_namespace_does_not_depend_on_the_generator():
    """The namespace holds the proxy's figures, which no generator changes: a stack that switches
    generator keeps its series (and its alarms) where they were (docs/configuration.md)."""
    llmperf = parse(SMALL, stack="qwen3-1.7b").benchmark.metrics_namespace
    inference_perf = parse(with_edits(SMALL, {"benchmark.loadGenerator": "inference-perf"}), stack="qwen3-1.7b").benchmark.metrics_namespace
    assert llmperf == inference_perf == "LLMPerf/qwen3-1-7b-c7b98a"
