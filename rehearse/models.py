r"""The rehearsal's stand-in models: a tiny Llama-architecture target and a draft, randomly
initialised, sharing one byte-level BPE tokenizer trained here on local text (the sonnet LLMPerf
samples its prompts from, and LLMPerf's prompt template). No hub is reached.

    .venv-rehearse/bin/python -m rehearse.models --out DIR

Runs in the rehearsal's own virtualenv (torch, transformers, tokenizers: rehearse/requirements.txt).
Writes DIR/target/ and DIR/draft/, each a model folder as the hub serves one (config.json,
generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
special_tokens_map.json). The draft is the target's first layers with the target's embeddings and
head (a truncated copy), and the target's later layers write a tenth of what random weights would
into the residual stream, so the draft's greedy choice is the target's about three times in four
(measured on random prompts; a plain truncated copy agrees ~6% of the time, two unrelated random
models almost never), roughly what a real small draft achieves, and the acceptance counters move.
Deterministic: a fixed seed.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

STANDIN_LLMPERF = Path(__file__).resolve().parent / "standin_llmperf"
TEXT = STANDIN_LLMPERF / "src" / "llmperf" / "sonnet.txt"
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>")
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")
"""vLLM's chat endpoint (what LLMPerf calls) needs a template; a plain one will do."""
CHAT_ROLES = "system: user: assistant: "
"""The role names CHAT_TEMPLATE writes into every prompt, trained on with the text."""
MAX_POSITIONS = 16384
"""Above every stack's maxModelLen (vLLM refuses a max-model-len beyond the model's positions)."""
TARGET = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
          "num_key_value_heads": 2}
DRAFT_LAYERS = 2
LATE_LAYER_SCALE = 0.1
"""The target's layers beyond the draft's write this share of their random output (o_proj, down_proj)."""
SEED = 26


def prompt_template() -> str:
    """LLMPerf's prompt template as its stand-in restates it (PROMPT_TEMPLATE), with a number in
    place of {n}. Trained on too, it costs about as many tokens as LLMPerf counts for it: without
    it a 40-token prompt was 109 tokens with the chat template (measured), more than seed 002's
    128-token sequences leave beside 64 output tokens; with it and CHAT_ROLES, about 52."""
    found = re.search(r"^PROMPT_TEMPLATE = (.+)$", (STANDIN_LLMPERF / "token_benchmark_ray.py").read_text(), re.MULTILINE)
    return ast.literal_eval(found[1]).format(n=64)


def train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([TEXT.read_text(), prompt_template(), CHAT_ROLES], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))


def build(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer_dir = out / "tokenizer"
    train_tokenizer(tokenizer_dir)
    vocab = json.loads((tokenizer_dir / "tokenizer.json").read_text())["model"]["vocab"]
    ids = {token: vocab[token] for token in SPECIAL_TOKENS}
    common = {"vocab_size": len(vocab), "max_position_embeddings": MAX_POSITIONS,
              "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"],
              "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    torch.manual_seed(SEED)
    target = LlamaForCausalLM(LlamaConfig(**common, **TARGET)).to(torch.bfloat16)
    with torch.no_grad():
        for layer in target.model.layers[DRAFT_LAYERS:]:
            layer.self_attn.o_proj.weight.mul_(LATE_LAYER_SCALE)
            layer.mlp.down_proj.weight.mul_(LATE_LAYER_SCALE)
    draft = LlamaForCausalLM(LlamaConfig(**common, **{**TARGET, "num_hidden_layers": DRAFT_LAYERS})).to(torch.bfloat16)
    # The draft's every tensor is the target's of the same name (its layers are the target's first ones).
    draft.load_state_dict({k: v for k, v in target.state_dict().items() if k in draft.state_dict()})
    for name, model in (("target", target), ("draft", draft)):
        folder = out / name
        model.save_pretrained(str(folder), safe_serialization=True)
        for file in tokenizer_dir.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
    print(f"built a {TARGET['num_hidden_layers']}-layer target and a {DRAFT_LAYERS}-layer draft "
          f"(hidden {TARGET['hidden_size']}, vocabulary {common['vocab_size']}) in {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearse.models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    build(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
