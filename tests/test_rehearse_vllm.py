"""Whole rehearsals against a real vLLM on CPU (docs/rehearsal.md): minutes each, so marked
`rehearsal` (deselected by default, pytest.ini) and skipped unless the rehearsal's virtualenv exists
(`make rehearse` builds it; the normal suite never installs its 3.4 GB):

    .venv/bin/python -m pytest -m rehearsal tests/test_rehearse_vllm.py
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rehearse.cli import LABEL
from rehearse.venv import STAMP
from stackconfig.source import PROJECT_DIR

VENV = PROJECT_DIR / ".venv-rehearse"
pytestmark = [pytest.mark.rehearsal,
              pytest.mark.skipif(not (VENV / STAMP).exists(), reason="no .venv-rehearse: run `make rehearse STACK=...` once")]
STACK = "qwen3-32b-qwen3-1.7b"
SMALL = ["--requests", "2", "--output-tokens", "32", "--test-cases", "counting,sonnets"]


STUDY = "qwen3-32b-study"


def rehearse(tmp_path, *args: str, stack: str = STACK, shape: tuple[str, ...] = tuple(SMALL)) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "rehearsal"
    result = subprocess.run([sys.executable, "-m", "tools", "rehearse", "--stack", stack, "--out", str(out), *shape, *args],
                            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=40 * 60)
    checks = {c["check"]: c for c in json.loads((out / "outcomes.json").read_text())} if (out / "outcomes.json").exists() else {}
    return result, {"out": out, "checks": checks}


def test_the_seed_pairing_rehearses_end_to_end(tmp_path):
    result, run = rehearse(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = run["out"]
    assert all(c["ok"] for c in run["checks"].values())
    report = json.loads((out / "report.json").read_text())
    assert report["label"] == LABEL and (out / "report.md").read_text().startswith(f"> **{LABEL}.**")
    assert "LLMPerf stand-in" in report["rehearsal"]["loadGenerator"]
    events = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    sd = [e for e in events if e["subject"].startswith("vllm-sd-") and e["kind"] in ("container-start", "container-stop")]
    # The publisher (native sidecar) started before the server and stopped after it.
    assert [(e["kind"], e["subject"].rsplit("/", 1)[1]) for e in sd] == [
        ("container-start", "publisher"), ("container-start", "vllm"), ("container-stop", "vllm"), ("container-stop", "publisher")]
    # Real speculative-decoding counters from vLLM's /metrics reached the results.
    specdecode = json.loads(next((out / "results").glob("*/sd/counting/specdecode.json")).read_text())
    assert specdecode["after"]["draft_tokens"] > specdecode["before"].get("draft_tokens", 0)


@pytest.mark.parametrize("fault", ["healthy-before-compile-complete", "server-crash", "s3-5xx", "emptydir-over-limit",
                                   "compile-fails", "prep-killed-mid-upload"])
def test_each_fault_ends_in_its_documented_outcome(tmp_path, fault):
    result, run = rehearse(tmp_path, "--faults", fault)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert any(name.startswith(f"fault {fault}") and c["ok"] for name, c in run["checks"].items())


def test_the_study_rehearses_in_its_small_shape_and_leaves_the_labelled_tuning_report(tmp_path):
    result, run = rehearse(tmp_path, stack=STUDY, shape=("--requests", "2", "--output-tokens", "32"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = run["out"]
    assert all(c["ok"] for c in run["checks"].values()) and "study servers scaled one configuration at a time" in run["checks"]
    assert (out / "tuning.md").read_text().startswith(f"> **{LABEL}.**")
    assert json.loads((out / "tuning.json").read_text())["rehearsal"]["configurations"] == ["qwen3-0-6b-k5", "qwen3-0-6b-k7"]


@pytest.mark.parametrize("fault", ["tuner-killed", "two-tuners"])
def test_each_tuner_fault_ends_in_its_documented_outcome(tmp_path, fault):
    result, run = rehearse(tmp_path, "--faults", fault, "--configurations", "qwen3-0-6b-k5", stack=STUDY,
                           shape=("--requests", "2", "--output-tokens", "32"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert any(name.startswith(f"fault {fault}") and c["ok"] for name, c in run["checks"].items())


DISTRIBUTED = "llama3.1-8b-distributed"


@pytest.mark.parametrize("faults", [(), ("--faults", "target-restart")], ids=["plain", "target-restart"])
def test_the_distributed_stack_rehearses_its_three_variants_beside_seed_002(tmp_path, faults):
    """Seed 002's stack: the vLLM baseline and fused variants and the distributed target and draft
    pods, measured by one benchmark; with target-restart, the draft fails the request it held."""
    result, run = rehearse(tmp_path, *faults, stack=DISTRIBUTED, shape=("--requests", "2", "--output-tokens", "32"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert all(c["ok"] for c in run["checks"].values()), run["checks"]
    assert {"distributed/target's compiled set committed once and in place",
            "distributed/draft's compiled set committed once and in place"} <= set(run["checks"])
    report = json.loads((run["out"] / "report.json").read_text())
    (measured,) = report["runs"].values()
    assert report["label"] == LABEL and [v["name"] for v in measured["variants"]] == ["base", "fused", "distributed"]
    assert measured["seedComparison"] and all(set(by_variant) == {"base", "fused", "distributed"}
                                                  for by_variant in measured["cases"].values())
    if faults:
        assert any(name.startswith("fault target-restart") for name in run["checks"])
        assert 'distributed_requests_total{outcome="failed"}' in (run["out"] / "draft-metrics.txt").read_text()
