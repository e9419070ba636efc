"""distributed/neuron.py, the NxD Inference backend, is not run here (no Neuron SDK, no device).
What can be checked: the package imports without NxD Inference, building the backend says why it
cannot, every NxD Inference call it makes is listed with file and line at the pinned tag, the tag
is the one the project pins, and the NeuronConfig keys it passes exist at that tag."""
from __future__ import annotations

import ast
import json
import re

import pytest

from distributed import neuron
from distributed.config import ConfigError, draft_settings, target_settings
from stackconfig.source import PROJECT_DIR
from stackconfig.versions import ENGINE_IMAGES
from tests.helpers import parse_python

CALLS = json.loads((PROJECT_DIR / "distributed/data/nxdi-0.6.10598-calls.json").read_text())
FIELDS = json.loads((PROJECT_DIR / "stackconfig/data/nxdi-0.6.10598-neuron-config-fields.json").read_text())
SOURCE = (PROJECT_DIR / "distributed/neuron.py").read_text()


def test_every_nxdi_call_is_listed_with_file_and_line_at_the_pinned_tag():
    marked = set(re.findall(r"# NxDI: (\w+)", SOURCE))
    assert marked == set(CALLS["calls"])
    for key, entry in {**CALLS["calls"], **CALLS["relied_on"]}.items():
        assert entry["path"].startswith("src/neuronx_distributed_inference/"), key
        assert re.fullmatch(r"\d+(-\d+)?", entry["lines"]) and entry["text"] and entry["what"], key


def test_the_tag_is_the_nxdi_the_project_pins():
    assert CALLS["source"] == {key: FIELDS["source"][key] for key in ("repository", "tag", "commit")}
    assert CALLS["source"]["tag"] == "v" + neuron.NXDI_VERSION
    assert f"NxD Inference {neuron.NXDI_VERSION}" in ENGINE_IMAGES["nxdi-legacy"].source


def test_the_neuron_config_keys_it_passes_exist_at_that_tag():
    passed = set()
    for node in ast.walk(parse_python(SOURCE)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "NeuronConfig":
            passed |= {keyword.arg for keyword in node.keywords}
    assert {"speculation_length", "enable_fused_speculation", "tp_degree"} <= passed
    assert sorted(passed - set(FIELDS["fields"])) == []


def test_the_package_imports_without_nxdi_and_the_backend_says_why_it_cannot_run(tmp_path):
    with pytest.raises(RuntimeError, match="not installed here"):
        neuron._Compiled(tmp_path, tmp_path, tp_degree=2, max_context=128, speculation_length=5)


def test_the_neuron_backend_is_refused_beyond_batch_1_and_without_a_compiled_directory(tmp_path):
    with pytest.raises(ConfigError) as target:
        target_settings(["--model", str(tmp_path), "--backend", "neuron", "--max-sessions", "2"])
    assert sorted(target.value.errors) == ["--compiled-dir", "--max-sessions"]
    with pytest.raises(ConfigError) as draft:
        draft_settings(["--model", str(tmp_path), "--backend", "neuron", "--target", "127.0.0.1:1", "--max-concurrency", "2",
                        "--compiled-dir", str(tmp_path)])
    assert sorted(draft.value.errors) == ["--max-concurrency"]
