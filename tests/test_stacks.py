"""The four stacks carry the values of the user's documents, and derived sizes follow from them."""
import pytest

from offline.stacks import load_stack

from .conftest import KINDS, SHARED, STANDALONE

# stack -> (target, draft, devices per variant, TP, max seqs, max model len, spec tokens, nodes)
EXPECTED = {
    "qwen3-32b-qwen3-1.7b": ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", 8, 32, 4, 1024, 7, 1),
    "qwen3-32b-qwen3-0.6b": ("Qwen/Qwen3-32B", "Qwen/Qwen3-0.6B", 16, 64, 1, 6400, 7, 2),
    "llama3.1-405b-llama3.2-1b": ("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 16, 64, 1, 12800, 7, 2),
    "llama3.1-8b-llama3.2-1b": ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B", 1, 4, 1, 1024, 5, 1),
}


def test_every_model_pairing_has_a_stack():
    assert STANDALONE == sorted(EXPECTED)
    assert KINDS["platform"] == "platform" and SHARED == ["qwen3-32b-qwen3-1.7b-shared"]


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_stack_matches_the_user_documents(stack):
    target, draft, devices, tp, seqs, max_len, tokens, nodes = EXPECTED[stack]
    spec = load_stack(stack).spec()
    baseline = next(v for v in spec.variants if v.role == "baseline")
    sd = next(v for v in spec.variants if v.role == "sd")
    assert baseline.target == target
    assert sd.draft == draft and sd.num_speculative_tokens == tokens and sd.baseline == baseline.name
    for variant in spec.variants:
        assert (variant.devices, variant.tensor_parallel_size) == (devices, tp)
        assert (variant.serving.max_num_seqs, variant.serving.max_model_len) == (seqs, max_len)
    assert spec.node_count == nodes
    assert spec.benchmark.input_tokens + spec.benchmark.output_tokens <= max_len
    # vLLM refuses a draft longer than its target; the seeds' drafts are plain models.
    assert sd.draft_max_model_len <= sd.serving.max_model_len
    assert sd.speculation_method == "draft_model" and "method" not in sd.speculative_config


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_stack_files_name_their_region_and_say_why(stack):
    from offline.stacks import STACKS_DIR

    text = (STACKS_DIR / f"Pulumi.{stack}.yaml").read_text()
    assert load_stack(stack).config["aws:region"] == "us-east-2"
    assert "DescribeInstanceTypeOfferings" in text


def test_405b_variants_differ_in_weights_not_only_in_the_draft():
    spec = load_stack("llama3.1-405b-llama3.2-1b").spec()
    baseline, sd = spec.variant("base-bf16"), spec.variant("sd-fp8")
    assert (baseline.quantization, baseline.weights_path) == ("none", None)
    assert sd.quantization == "fp8" and sd.target.endswith("-FP8") and sd.weights_path
    assert sd.override_neuron_config["quantization_type"] == "per_channel_symmetric"


def test_artifact_paths_are_distinct_and_follow_compile_settings():
    from dataclasses import replace

    for stack in STANDALONE + SHARED:
        spec = load_stack(stack).spec()
        paths = {v.artifact_path for v in spec.variants}
        assert len(paths) == len(spec.variants), stack
        sd = next(v for v in spec.variants if v.is_speculative)
        changed = [
            replace(sd, num_speculative_tokens=sd.num_speculative_tokens + 1),
            replace(sd, serving=replace(sd.serving, max_model_len=sd.serving.max_model_len + 128)),
            replace(sd, serving=replace(sd.serving, image=sd.serving.image + "-patched")),
            replace(sd, draft_max_model_len=(sd.draft_max_model_len or 0) + 1),
        ]
        for variant in changed:
            assert variant.artifact_path != sd.artifact_path
            assert variant.artifact_path.startswith("compiled/")
