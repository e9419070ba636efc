"""`make plan`: files, determinism, redaction and the exit code on bad config."""
import gc
import json

import yaml

from offline import plan
from stackconfig.source import PROJECT_DIR, STACKS_DIR

from .helpers import plan_copy, project_copy


def run_plan(tmp_path, stack):
    return plan.main(["--stack", stack, "--out", str(tmp_path)])


def test_plan_writes_resources_and_is_deterministic(tmp_path, capsys):
    stack = "llama3.1-8b-llama3.2-1b"
    assert run_plan(tmp_path / "a", stack) == 0
    assert run_plan(tmp_path / "b", stack) == 0
    first = (tmp_path / "a" / stack / "resources.json").read_bytes()
    assert first == (tmp_path / "b" / stack / "resources.json").read_bytes()
    entries = json.loads(first)
    required = {"urn", "type", "name", "parent", "inputs", "dependencies"}
    assert entries and all(required <= set(e) <= required | {"aliases", "read"} for e in entries)
    assert any("aliases" in e for e in entries)
    out = capsys.readouterr().out
    assert "trn2 nodes" in out and "TP 4" in out and "placeholder" in out
    assert gc.isenabled()  # the plan pauses the collector (offline/collector.py) and gives it back
    for manifest in (tmp_path / "a" / stack / "manifests").glob("*.yaml"):
        assert manifest.read_bytes() == (tmp_path / "b" / stack / "manifests" / manifest.name).read_bytes()


def test_each_program_run_in_one_process_parents_to_its_own_stack():
    """plan-all (and the suite's recordings) run every stack in one process: a resource without a
    parent belongs to the stack being run, not to the first one this process ran."""
    import pulumi

    from offline.engine import run_program

    def program():
        pulumi.ComponentResource("test:index:Thing", "thing")

    for stack in ("first", "second"):
        (thing,) = run_program("proj", stack, {"aws:region": "us-east-2"}, [], program).resources
        assert thing.parent == f"urn:pulumi:{stack}::proj::pulumi:pulumi:Stack::proj-{stack}"


def test_secrets_never_reach_the_plan(tmp_path, capsys):
    stack = "llama3.1-8b-llama3.2-1b"
    assert run_plan(tmp_path, stack) == 0
    everything = capsys.readouterr().out + "".join(p.read_text() for p in (tmp_path / stack).rglob("*") if p.is_file())
    assert "hf_offline_plan_placeholder" not in everything
    assert "[secret]" in everything


def test_bad_stack_file_exits_2_with_every_problem_from_the_command_line(tmp_path):
    project = project_copy(tmp_path / "project")
    config = yaml.safe_load((project / "stacks" / "Pulumi.qwen3-32b-qwen3-1.7b.yaml").read_text())
    config["config"]["sd-trn2:serving"]["devicesPerVariant"] = 3
    config["config"]["sd-trn2:serving"]["maxNumSeqz"] = 4
    (project / "stacks" / "Pulumi.zz-broken-test.yaml").write_text(yaml.safe_dump(config))
    result = plan_copy(project, "zz-broken-test", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert "serving.devicesPerVariant" in result.stderr and "serving.maxNumSeqz" in result.stderr
    assert "Traceback" not in result.stderr


def test_project_file_is_valid_for_the_pulumi_cli():
    """The CLI runs the program with the venv's Python and finds the stacks where stackConfigDir
    says. Pulumi.yaml declares no config: its schema types declarations only as string, integer,
    boolean or array, and a declared key without a default becomes required for every stack; the
    program validates every key itself (stackconfig/parse/)."""
    project = yaml.safe_load((PROJECT_DIR / "Pulumi.yaml").read_text())
    assert project["runtime"]["name"] == "python" and project["runtime"]["options"]["virtualenv"] == ".venv"
    assert (PROJECT_DIR / project["stackConfigDir"]) == STACKS_DIR and any(STACKS_DIR.glob("Pulumi.*.yaml"))
    assert "config" not in project
