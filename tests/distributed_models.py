"""Small models for the distributed/ tests, built in the process (no files, no downloads)."""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import torch

from distributed.cpu import CpuDraft, CpuTarget
from distributed.tiny import VOCAB_SIZE, build_model, build_tokenizer

MAX_CONTEXT = 256


@functools.lru_cache(maxsize=None)
def target_model(vocab_size: int = VOCAB_SIZE, init_std: float = 0.02):
    return build_model(vocab_size, seed=1, init_std=init_std, max_positions=MAX_CONTEXT)


@functools.lru_cache(maxsize=None)
def unrelated_model(vocab_size: int = VOCAB_SIZE, init_std: float = 0.02):
    return build_model(vocab_size, seed=2, init_std=init_std, max_positions=MAX_CONTEXT)


@functools.lru_cache(maxsize=None)
def nearby_model(vocab_size: int = VOCAB_SIZE, init_std: float = 0.02, noise: float = 0.01):
    """The target with Gaussian noise on every weight: agrees with it often, not always (a draft
    whose acceptance lies strictly between 0 and gamma)."""
    model = copy.deepcopy(target_model(vocab_size, init_std))
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * noise)
    return model


def target(model=None, *, speculation_length: int = 5) -> CpuTarget:
    return CpuTarget(model if model is not None else target_model(), name="target", tokenizer_sha256="t",
                     speculation_length=speculation_length, max_context=MAX_CONTEXT)


def draft(model) -> CpuDraft:
    return CpuDraft(model, name="draft", tokenizer_sha256="t", max_context=MAX_CONTEXT)


def write_models(directory: Path) -> dict[str, Path]:
    """On disk, as the servers read them: the target, an unrelated draft with the same tokenizer,
    and a draft whose tokenizer differs (a smaller vocabulary learnt from the same text)."""
    tokenizer = build_tokenizer()
    paths = {}
    for name, seed, vocab in (("target", 1, tokenizer), ("draft", 2, tokenizer), ("other-tokenizer", 2, build_tokenizer(300))):
        model = build_model(len(vocab), seed=seed, max_positions=1024, bos_token_id=vocab.bos_token_id,
                            eos_token_id=vocab.eos_token_id)
        paths[name] = directory / name
        model.save_pretrained(paths[name])
        vocab.save_pretrained(paths[name])
    return paths
