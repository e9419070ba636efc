"""What the model store's tests share: the bucket the models_bucket fixture makes (tests/conftest.py),
a compiled artifact's key, and a compile directory as serve.sh leaves it."""
from __future__ import annotations

from pathlib import Path

from modelstore import publish

BUCKET = "models"
ARTIFACT = "compiled/qwen-qwen3-32b/bs4-len1024-tp32-0123456789"


def compiled(tmp_path: Path, name: str, graph: bytes | str) -> Path:
    """A compile directory as serve.sh leaves it after a local compile that answered /health: the
    graph, the neuron config and the marker publish.py requires before it publishes."""
    directory = tmp_path / name
    (directory / "graphs").mkdir(parents=True)
    (directory / "graphs" / "model.neff").write_bytes(graph if isinstance(graph, bytes) else graph.encode())
    (directory / "neuron_config.json").write_text("{}")
    (directory / publish.LOCAL_COMPLETE).touch()
    return directory
