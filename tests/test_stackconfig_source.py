"""Reading config the way Pulumi hands it over (stackconfig/source.py): the runtime's entries with
structured values decoded, the Hugging Face token as a secret, and the project's stack files read
as the CLI would, every unreadable file a ConfigError naming the file. Files live in tmp_path."""
from __future__ import annotations

import contextvars
import json
from pathlib import Path

import pytest
from pulumi.runtime import config as runtime_config
from pulumi.runtime.sync_await import _sync_await

from components.runtime import hugging_face_token, stack_config
from stackconfig import ConfigError
from stackconfig.source import StackFiles


def in_runtime(config: dict, secret_keys: list[str], read):
    """Call `read` with the Pulumi runtime's config set to `config`, leaving the process's alone."""
    def run():
        runtime_config.set_all_config(config, secret_keys)
        return read()
    return contextvars.copy_context().run(run)


def test_stack_config_merges_both_sources_and_decodes_structured_values(monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"sd-trn2:old": "from the environment", "sd-trn2:both": "environment",
                                                    "sd-trn2:number": 3, "sd-trn2:list": ["a"]}))
    config = in_runtime({
        "aws:region": "us-east-2",
        "sd-trn2:serving": '{"target": "Qwen/Qwen3-32B"}',
        "sd-trn2:variants": '[{"name": "base"}]',
        "sd-trn2:broken": "{not json",
        "sd-trn2:text": "plain [text]",
        "sd-trn2:empty": "",
        "sd-trn2:both": "engine",
    }, [], stack_config)
    assert config == {
        "sd-trn2:old": "from the environment",
        "sd-trn2:number": 3,                            # not text: kept as it is
        "sd-trn2:list": ["a"],
        "sd-trn2:both": "engine",                       # set_all_config wins over PULUMI_CONFIG
        "aws:region": "us-east-2",
        "sd-trn2:serving": {"target": "Qwen/Qwen3-32B"},
        "sd-trn2:variants": [{"name": "base"}],
        "sd-trn2:broken": "{not json",                  # not JSON after all: kept as text
        "sd-trn2:text": "plain [text]",
        "sd-trn2:empty": "",
    }


def test_the_token_is_a_secret_output_of_the_named_project(monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    config = {"other:huggingFaceToken": "hf_example", "other:key": "x"}

    def read():
        token = hugging_face_token("other", "huggingFaceToken")
        return _sync_await(token.future()), _sync_await(token.is_secret()), hugging_face_token("other", "unset")

    assert in_runtime(config, ["other:huggingFaceToken"], read) == ("hf_example", True, None)


def project(tmp_path: Path, pulumi_yaml: str = "name: demo\nstackConfigDir: stacks\n", **stacks: str) -> StackFiles:
    (tmp_path / "Pulumi.yaml").write_text(pulumi_yaml)
    (tmp_path / "stacks").mkdir(exist_ok=True)
    for name, text in stacks.items():
        (tmp_path / "stacks" / f"Pulumi.{name}.yaml").write_text(text)
    return StackFiles(tmp_path)


def test_stack_files_live_in_the_projects_stack_config_dir(tmp_path):
    files = project(tmp_path, b="config: {}\n", a="config: {}\n")
    (tmp_path / "stacks" / "notes.yaml").write_text("not a stack\n")
    assert (files.project, files.directory) == ("demo", tmp_path / "stacks")
    assert files.path("a") == tmp_path / "stacks" / "Pulumi.a.yaml"
    assert files.names() == ["a", "b"]


def test_without_stack_config_dir_the_stack_files_sit_next_to_pulumi_yaml(tmp_path):
    (tmp_path / "Pulumi.one.yaml").write_text("config: {}\n")
    files = project(tmp_path, "name: flat\n")
    assert files.directory == tmp_path
    assert files.names() == ["one"]


def test_values_are_read_as_written_and_encrypted_ones_as_none(tmp_path):
    files = project(tmp_path, demo="""config:
  aws:region: us-east-2
  demo:count: 3
  demo:list: [1, 2]
  demo:object: {secure: x, other: y}
  demo:token:
    secure: AAABAKxyz
  7: numeric key
""")
    assert files.config("demo") == {
        "aws:region": "us-east-2", "demo:count": 3, "demo:list": [1, 2], "demo:object": {"secure": "x", "other": "y"},
        "demo:token": None, "7": "numeric key"}


@pytest.mark.parametrize("text", ["", "# only a comment\n", "config:\n", "config: {}\n"])
def test_a_stack_file_without_config_has_no_values(tmp_path, text):
    assert project(tmp_path, empty=text).config("empty") == {}


def test_a_missing_stack_file_names_the_stacks_there_are(tmp_path):
    files = project(tmp_path, b="config: {}\n", a="config: {}\n")
    with pytest.raises(FileNotFoundError) as caught:
        files.config("c")
    assert str(caught.value) == "no stack file Pulumi.c.yaml in stacks/; stacks: a, b"


@pytest.mark.parametrize("text, key, message", [
    ("- config\n", "Pulumi.bad.yaml", "must be a mapping with a `config:` key, got a list"),
    ("just text\n", "Pulumi.bad.yaml", "must be a mapping with a `config:` key, got a str"),
    ("config:\n  - aws:region\n", "Pulumi.bad.yaml config", 'must map "namespace:key" to values, got a list'),
    ("config: 7\n", "Pulumi.bad.yaml config", 'must map "namespace:key" to values, got a int'),
    # PyYAML's problem, not its context ("while parsing a flow mapping"), with its 1-based position.
    ("config:\n  aws:region: {us-east-2\n", "Pulumi.bad.yaml",
     "is not valid YAML at line 3, column 1: expected ',' or '}', but got '<stream end>'"),
    ("config:\n\taws:region: us-east-2\n", "Pulumi.bad.yaml",
     "is not valid YAML at line 2, column 1: found character '\\t' that cannot start any token"),
    # A reader error carries no position and no problem: the first line of its message.
    ("config: \x07\n", "Pulumi.bad.yaml", "is not valid YAML: unacceptable character #x0007: special characters are not allowed"),
])
def test_an_unreadable_stack_file_is_a_config_error_naming_the_file(tmp_path, text, key, message):
    files = project(tmp_path, bad=text)
    with pytest.raises(ConfigError) as caught:
        files.config("bad")
    assert (caught.value.stack, caught.value.problems) == ("bad", [(key, message)])


def test_an_unreadable_project_file_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError) as caught:
        project(tmp_path, "name: [demo\n")
    assert caught.value.stack == "Pulumi"
    assert caught.value.problems == [("Pulumi.yaml", "is not valid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'")]


def test_the_deep_nesting_error_names_the_keys_and_list_positions_leading_there():
    """A value nested past what the YAML loader can recurse through is reported under its keys,
    list positions included where a key follows them (read without recursion)."""
    from stackconfig.source import _key_of_deep_nesting

    deep = "[" * 300 + "]" * 300
    assert _key_of_deep_nesting(f"config:\n  aws:region: {deep}\n") == "config.aws:region"
    variants = f"config:\n  sd-trn2:variants:\n    - {{name: a}}\n    - name: b\n      neuronConfig: {{kernels: {deep}}}\n"
    assert _key_of_deep_nesting(variants) == "config.sd-trn2:variants[1].neuronConfig.kernels"
    assert _key_of_deep_nesting(deep) == ""
