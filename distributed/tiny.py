"""Small randomly initialised Llama models and a tokenizer, built here: the CPU backend's models.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a few lines written below (so
any text encodes), the models are transformers' Llama architecture (Llama-3.2-1B and 3.1-8B's
own) with a few layers and a tiny hidden size, initialised from a seed. Random weights make
random text; what the tests check is the algorithm, not the prose.

    python -m distributed.tiny OUT_DIR --seed 1 [--layers 2 --hidden 64]

writes a model and its tokenizer that `from_pretrained` reads (the servers' --model).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
CORPUS = (
    "The history of AI can be traced back to the 1950s with the advent of the computer.",
    "Speculative decoding drafts tokens with a small model and verifies them with a large one.",
    "Shall I compare thee to a summer's day? Thou art more lovely and more temperate.",
    "counting numbers from 1 2 3 4 5 6 7 8 9 10, hello world, the cat sat on the mat.",
    "Output valid JSON with fixed keys. Write a simple Python function skeleton.",
)
VOCAB_SIZE = 320
"""The 256 byte-level symbols, the two special tokens, and merges learnt from CORPUS."""
CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
"""Llama-3's template needs its header tokens; this one has the same shape in plain words."""


def build_tokenizer(vocab_size: int = VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Deterministic: the same corpus and settings give the same vocabulary."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS)
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(vocab_size: int, seed: int, *, layers: int = 2, hidden: int = 64, init_std: float = 0.02,
                bos_token_id: int | None = None, eos_token_id: int | None = None, max_positions: int = 1024) -> LlamaForCausalLM:
    """A Llama with `layers` layers of width `hidden`, weights drawn from N(0, init_std) with `seed`.
    A larger init_std gives peakier, more distinct distributions (the sampling tests use that)."""
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                         initializer_range=init_std, tie_word_embeddings=False,
                         bos_token_id=bos_token_id, eos_token_id=eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


def write_pair(directory: Path, seed: int, *, layers: int = 2, hidden: int = 64) -> Path:
    """A model and the shared tokenizer in `directory`, readable by from_pretrained."""
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), seed, layers=layers, hidden=hidden,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    print(write_pair(args.directory, args.seed, layers=args.layers, hidden=args.hidden))


if __name__ == "__main__":
    main()
