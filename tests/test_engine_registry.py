"""An engine is a module behind a registry keyed by its name (stackconfig/engines/): no code outside
the engine modules tests which engine it has, a stack whose engine is not registered is refused at
plan by key, and a third engine is one module, its image pin and its fields file, registered without
touching any other module."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stackconfig import engines
from stackconfig.engines import ENGINES, EngineInfo
from stackconfig.engines.failure import FIRST_START, EngineFailure, Source
from stackconfig.semantics import engine_failures, serves_greedily
from stackconfig.server import arguments, environment
from stackconfig.source import PROJECT_DIR
from tools import __main__ as cli

from .stackconfig_helpers import PLUGIN, SMALL, edited, parse, problem_list

ENGINE_MODULES = PROJECT_DIR / "stackconfig" / "engines"
NOT_SOURCE = {"tests", "build", "mutants"}
NAME = r"""["'][a-z0-9-]+["']"""
ENGINE_TESTS = re.compile(
    rf"""\bengine\w*\s*(?:==|!=)\s*{NAME}"""  # engine == "vllm-neuron", variant.engine != "nxdi-legacy"
    rf"""|{NAME}\s*(?:==|!=)\s*\w*\.?engine\b"""  # "vllm-neuron" == engine
    rf"""|\bengine\w*\s+(?:not\s+)?in\s*[(\[{{]\s*{NAME}"""  # engine in ("nxdi-legacy", ...)
    r"""|(?:==|!=)\s*["'](?:nxdi-legacy|vllm-neuron)["']""")  # whatever the left side is called


def engine_tests_in(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if ENGINE_TESTS.search(line)]


def test_the_pattern_finds_each_form_of_a_test_on_an_engine_name():
    lines = ['if self.engine == "vllm-neuron":', "if variant.engine != 'nxdi-legacy':", 'if engine in ("a", "b"):',
             'x = "vllm-neuron" == engine', 'if kind == "nxdi-legacy":']
    assert engine_tests_in("\n".join(lines)) == lines
    assert engine_tests_in('engine = s.string("engine", DEFAULT_ENGINE)\nif v.engine != baseline.engine:') == []


def test_no_code_outside_the_engine_modules_tests_which_engine_it_has():
    """A branch on an engine's name means "the other engine" for any third one: its module says
    instead (before this, stackconfig/model.py gave every engine but vllm-neuron NxDI's config)."""
    files = [p for p in PROJECT_DIR.rglob("*.py")
             if not ({p.relative_to(PROJECT_DIR).parts[0]} & NOT_SOURCE or p.relative_to(PROJECT_DIR).parts[0].startswith("."))]
    found = {str(p.relative_to(PROJECT_DIR)): hits for p in files
             if ENGINE_MODULES not in p.parents and (hits := engine_tests_in(p.read_text()))}
    assert len(files) > 50 and found == {}


@pytest.fixture
def registry_order():
    """The registry as it was, in its order, after a test took an engine out: monkeypatch puts a
    deleted key back at the end, and messages list the engines in the registry's order."""
    saved = dict(ENGINES)
    yield
    ENGINES.clear()
    ENGINES.update(saved)


@pytest.mark.parametrize(("engine", "stack"), [("vllm-neuron", "llama3.1-8b-instruct-eagle3"), ("nxdi-legacy", "qwen3-32b-qwen3-1.7b")])
def test_a_stack_whose_engine_is_taken_out_of_the_registry_is_refused_at_plan(monkeypatch, registry_order, capsys, tmp_path, engine,
                                                                              stack):
    """The first names its engine (serving.engine); the second runs the default engine, unnamed."""
    monkeypatch.delitem(ENGINES, engine)
    assert cli.main(["plan", "--stack", stack, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "serving.engine" in err and repr(engine) in err and "Traceback" not in err, err


def test_taking_one_engine_out_leaves_the_other_ones_stacks_valid(monkeypatch, registry_order):
    monkeypatch.delitem(ENGINES, "vllm-neuron")
    assert {v.engine for v in parse(SMALL).variants} == {"nxdi-legacy"}
    assert ("serving.engine", "'vllm-neuron' is not one of nxdi-legacy, distributed") in problem_list(PLUGIN)


# ---------------------------------------------------------------------------------------------
# A third engine: what its module would hold, its pin and its fields file, and nothing else.

DUMMY = "dummy-engine"
DUMMY_IMAGE = "registry.example/dummy-engine:1.0-sdk2.32.0@sha256:" + "0" * 64
"""Its pin (in the program: stackconfig/versions.py ENGINE_IMAGES)."""
DUMMY_SOURCE = Source("example/dummy-engine", "v1.0", "0" * 40, "dummy/config.py", "1-2")


def dummy_failures(variant: Any, args: list[str]) -> list[EngineFailure]:
    config = json.loads(args[args.index("--dummy-config") + 1])
    return [EngineFailure(FIRST_START, "dummy_knob", "ValueError: dummy_knob above 5", DUMMY_SOURCE)] if config.get("dummy_knob", 0) > 5 else []


def dummy_engine(fields_file: Path) -> EngineInfo:
    """The module stackconfig/engines/dummy_engine.py would define."""
    return EngineInfo(
        name=DUMMY, image=DUMMY_IMAGE, methods=("eagle3",), neuron_config_fields=str(fields_file), support="a test's",
        sdks=((2, 32), None), program_keys=frozenset({"dummy_batch"}),
        neuron_config=lambda v: {"dummy_batch": v.serving.max_num_seqs, **v.serving.neuron_config, **v.neuron_config_extra},
        speculative_config=lambda v, config: {"method": v.speculation_method, **config},
        server_arguments=lambda v, common, speculative: common + ["--dummy-config", json.dumps(v.neuron_config)] + speculative,
        environment={"DUMMY_CACHE": lambda v: f"/node-cache/{v.artifact_path}"},
        failures=dummy_failures,
        serves_greedily=lambda v, request: request.get("temperature") == 0,
    )


@pytest.fixture
def dummy(monkeypatch, tmp_path) -> str:
    fields = tmp_path / "dummy-engine-1.0-neuron-config-fields.json"
    fields.write_text(json.dumps({"source": {"commit": "0" * 40}, "fields": ["dummy_batch", "dummy_knob"]}))
    monkeypatch.setitem(ENGINES, DUMMY, dummy_engine(fields))
    return DUMMY


def test_a_third_engine_registers_with_its_module_its_pin_and_its_fields_file(dummy):
    values = edited(edited(PLUGIN, "serving.engine", dummy), "serving.neuronConfig", {"dummy_knob": 2})
    spec = parse(values)
    baseline, sd = spec.variants
    assert {v.engine for v in spec.variants} == {dummy} and baseline.image == DUMMY_IMAGE
    assert sd.neuron_config == {"dummy_batch": 4, "dummy_knob": 2}
    assert sd.speculative_config == {"method": "eagle3", "model": sd.draft, "num_speculative_tokens": 3}
    args = arguments(sd)
    assert json.loads(args[args.index("--dummy-config") + 1]) == sd.neuron_config and "--speculative-config" in args
    assert "--override-neuron-config" not in args and "--additional-config" not in args
    assert environment(sd)["DUMMY_CACHE"] == f"/node-cache/{sd.artifact_path}" and "VLLM_CACHE_ROOT" not in environment(sd)
    assert sd.compile_settings["engine"] == dummy and sd.compile_settings["maxNumBatchedTokens"] is None
    assert engine_failures(sd) == [] and not serves_greedily(baseline, {"temperature": 1})


def test_a_third_engine_refuses_by_its_own_rules(dummy):
    base = edited(PLUGIN, "serving.engine", dummy)
    assert problem_list(edited(base, "serving.neuronConfig", {"num_seqs_buckets": [4]})) == [
        ("serving.neuronConfig.num_seqs_buckets", f"is not a {dummy} neuron config field")]
    assert problem_list(edited(base, "serving.neuronConfig", {"dummy_batch": 2})) == [
        ("serving.neuronConfig.dummy_batch", f"is set by the program from typed config for {dummy}; remove it")]
    (key, message), = problem_list(edited(base, "serving.neuronConfig", {"dummy_knob": 6}))
    assert key == "serving.neuronConfig.dummy_knob" and "ValueError: dummy_knob above 5" in message and DUMMY_SOURCE.repository in message
    (key, message), = problem_list(edited(SMALL, "serving.engine", dummy))
    assert key == "variants[1].draft" and "'draft_model' on nxdi-legacy or distributed only, not on dummy-engine" in message


def test_the_registry_is_the_engines_modules():
    assert set(ENGINES) == {"nxdi-legacy", "vllm-neuron", "distributed"} and engines.DEFAULT_ENGINE in ENGINES
    for name, engine in ENGINES.items():
        assert engine.name == name and engines.neuron_config_fields(name) and engine.program_keys
