"""A load sweep publishes each level under `<TestCase value>/<level>` (benchmark/publish.py
dimension_values): the dashboard queries exactly those values, the rule on metrics per dashboard
widget counts every level, and a downloaded sweep is published again level by level."""
import json
from dataclasses import replace

import pytest

from benchmark import publish
from benchmark.loadgen import Level
from benchmark.pod import level_folder
from components.pairing.benchmark import run_config
from components.pairing.dashboard import dashboard_body
from offline.stacks import load_stack

from .results_files import record, write_case, write_run
from .stackconfig_helpers import SMALL, parse, problem_list, with_edits

LOADS = (Level("concurrency", 1), Level("concurrency", 4))


def queried(body: dict) -> set[tuple[str, str, str]]:
    """(TestCase, Variant, label) of every metric the dashboard's widgets query."""
    seen = set()
    for widget in (w for w in body["widgets"] if w["type"] == "metric"):
        for namespace, name, *rest in widget["properties"]["metrics"]:
            dimensions = dict(zip(rest[0:-1:2], rest[1:-1:2]))
            seen.add((dimensions["TestCase"], dimensions["Variant"], rest[-1]["label"]))
    return seen


@pytest.mark.parametrize("dimensions", ["names", "eks-sample"])
def test_a_sweeps_dashboard_queries_every_level_as_published(dimensions):
    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    sweep = replace(spec, benchmark=replace(spec.benchmark, loads=LOADS, metric_dimensions=dimensions))
    config = run_config(sweep, {v.name: "http://x" for v in sweep.variants})
    published = {publish.dimension_values(config, v["name"], test_case, level_folder(LOADS, level))[::-1]
                 for test_case in config["testCases"] for v in config["variants"] for level in LOADS}
    seen = queried(dashboard_body(sweep, sweep.region))
    assert {(case, variant) for case, variant, _ in seen} == published
    assert len(published) == len(LOADS) * len(config["testCases"]) * len(config["variants"])
    # Each line says its level.
    assert {label.rsplit(" at ", 1)[-1] for _, _, label in seen} == {"concurrency 1", "concurrency 4"}


def test_one_levels_dashboard_is_as_before():
    """One level is published under the test case's own value, with no level in the label."""
    spec = load_stack("qwen3-32b-qwen3-1.7b").spec()
    seen = queried(dashboard_body(spec, spec.region))
    assert {case for case, _, _ in seen} == set(spec.metric_dimensions["TestCase"].values())
    assert not any(" at concurrency" in label for _, _, label in seen)


def test_the_metrics_per_widget_rule_counts_every_level(monkeypatch):
    """The widest widget draws two metrics for each variant at each level: SMALL's two variants
    at four levels need 16."""
    from stackconfig.parse import benchmark as benchmark_rules

    monkeypatch.setattr(benchmark_rules, "DASHBOARD_METRICS_PER_WIDGET", 15)
    parse(with_edits(SMALL, {"benchmark.concurrency": 4}))
    assert problem_list(with_edits(SMALL, {"benchmark.concurrency": [1, 2, 3, 4]})) == [
        ("benchmark.concurrency", "2 variants (1 SD configurations) at 4 load levels need 16 metrics and expressions in one "
                                  "dashboard widget; CloudWatch allows 15: measure fewer configurations or load levels at once")]


def test_a_downloaded_sweep_is_published_again_at_every_level(tmp_path):
    write_run(tmp_path, "r1", {"counting": "counting numbers from 1 "})
    run_file = tmp_path / "r1" / "run.json"
    run_file.write_text(json.dumps({**json.loads(run_file.read_text()), "loads": [level.as_dict() for level in LOADS]}))
    for level in LOADS:
        write_case(tmp_path, "r1", "sd", f"counting/{level.slug}", [record(ttft=0.05, e2e=2.0, tokens=100)])
    data = publish.run_metric_data(tmp_path, "r1")
    assert {tuple(d["Value"] for d in datum["Dimensions"]) for datum in data} == {
        ("sd", "counting/concurrency-1"), ("sd", "counting/concurrency-4")}
