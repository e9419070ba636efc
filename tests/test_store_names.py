"""The model store's names (roots, file names, markers) are declared once, in modelstore/layout.py:
a second literal of one of them anywhere in the program (Python or shell) fails here. Read with
`ast` (Python: string constants, docstrings and JSON keys aside) and line by line (shell, comments
aside). The tests keep their literal keys on purpose: they pin the bucket's layout, which a rename
would silently change under stores that already hold prepared models."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from modelstore import layout
from stackconfig.source import PROJECT_DIR
from tests.helpers import parse_python

NAMES = {name: value for name, value in vars(layout).items() if name.isupper() and isinstance(value, str)}
HOME = PROJECT_DIR / "modelstore" / "layout.py"
PROGRAM = ("__main__.py", "benchmark", "components", "modelstore", "offline", "stackconfig", "tools")
OTHER_MEANINGS = {
    ("benchmark/podsetup.py", "manifest.json"): "the benchmark cache's own manifest (cache/, benchmark/podsetup.py), "
                                                "in a package the store's layout cannot be imported into (tests/test_layout.py)",
}


def pattern(value: str) -> re.Pattern:
    """A bare word (files) only as a path segment; a name with a dot or a slash wherever it stands alone."""
    word = re.escape(value)
    if re.fullmatch(r"\w+", value):
        return re.compile(rf"^{word}$|(?<![\w.-]){word}/|/{word}(?![\w.-])")
    return re.compile(rf"(?<![\w.-]){word}(?![\w-])")


PATTERNS = {value: pattern(value) for value in NAMES.values()}


def python_literals(source: str) -> list[tuple[int, str]]:
    """String constants but docstrings (bare string statements) and JSON keys (x["files"], {"files": ..}, x.get("files"))."""
    tree = parse_python(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
        elif isinstance(node, ast.Subscript):
            skipped.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            skipped |= {id(k) for k in node.keys if k is not None}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            skipped.add(id(node.args[0]))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


def shell_lines(source: str) -> list[tuple[int, str]]:
    """Each line without its comment (a `#` that starts a line or follows a blank)."""
    return [(number, re.split(r"(?:^|\s)#", line, maxsplit=1)[0]) for number, line in enumerate(source.splitlines(), 1)]


def second_declarations(path: Path, source: str) -> list[str]:
    relative = path.relative_to(PROJECT_DIR).as_posix()
    texts = python_literals(source) if path.suffix == ".py" else shell_lines(source)
    return [f"{relative}:{line}: {value!r}" for line, text in texts for value, found in PATTERNS.items()
            if found.search(text) and (relative, value) not in OTHER_MEANINGS]


def program_files() -> list[Path]:
    files = []
    for part in PROGRAM:
        root = PROJECT_DIR / part
        files += [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".py", ".sh"))
    return [f for f in files if f != HOME]


def test_the_store_names_are_declared_once():
    found = [d for path in program_files() for d in second_declarations(path, path.read_text())]
    assert found == [], "declare these in modelstore/layout.py and import them (serve.sh: store-layout.sh)"


@pytest.mark.parametrize("path, source", [
    ("modelstore/prepare.py", 'MARKER = ".complete"\n'),
    ("modelstore/publish.py", 'key = f"{artifact}/commit.json"\n'),
    ("stackconfig/store.py", 'ROOTS = ("weights/", "compiled/")\n'),
    ("stackconfig/store.py", 'FILES = "files"\n'),
    ("components/pairing/scripts/serve.sh", 'cp "$store/files/x" . # a comment naming commit.json is fine\n'),
])
def test_the_check_sees_a_second_declaration(path, source):
    assert second_declarations(PROJECT_DIR / path, source) != []


@pytest.mark.parametrize("path, source", [
    ("modelstore/objects.py", '"""Reads manifest.json."""\nfiles = document["files"]\n'),
    ("benchmark/tuner.py", 'names = case.get("files")\nsay("no files left")\n'),
    ("components/pairing/scripts/serve.sh", '# waits for .complete\n'),
])
def test_the_check_leaves_prose_and_json_keys_alone(path, source):
    assert second_declarations(PROJECT_DIR / path, source) == []


def test_serve_sh_sources_the_names_it_reads_from_beside_it():
    """The pod's script directory holds both files, and serve.sh sources the one by its name."""
    from components.pairing.serving import SERVE_SCRIPT, STORE_LAYOUT_SCRIPT, script_files

    files = script_files()
    assert set(files) == {SERVE_SCRIPT.name, STORE_LAYOUT_SCRIPT}
    assert f'source "$(dirname "${{BASH_SOURCE[0]}}")/{STORE_LAYOUT_SCRIPT}"' in files[SERVE_SCRIPT.name]
    assert files[STORE_LAYOUT_SCRIPT].splitlines() == [f"{name}={value}" for name, value in layout.SHELL_NAMES.items()]
