"""A small word-level tokenizer written as a Hugging Face tokenizer folder (tokenizer.json in the
`tokenizers` library's serialization, model WordLevel, pre-tokenizer Whitespace; tokenizer_config.json
naming PreTrainedTokenizerFast), which transformers' AutoTokenizer loads offline: what inference-perf
cuts its prompts with in the tests, where no hub can be reached."""
from __future__ import annotations

import json
import re
from pathlib import Path

UNKNOWN = "[UNK]"


def words(text: str) -> list[str]:
    """Whitespace pre-tokenization as the `tokenizers` library's Whitespace does: \\w+|[^\\w\\s]+."""
    return re.findall(r"\w+|[^\w\s]+", text)


def write_tokenizer(folder: Path, texts: list[str]) -> Path:
    vocabulary = {UNKNOWN: 0}
    for word in sorted({w for text in texts for w in words(text)}):
        vocabulary[word] = len(vocabulary)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": UNKNOWN, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocabulary, "unk_token": UNKNOWN}}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNKNOWN, "model_max_length": 100000}))
    return folder
