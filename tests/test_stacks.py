"""The four stacks carry the values of the user's documents, and derived sizes follow from them."""
import pytest

from offline.stacks import load_stack

from .conftest import KINDS, SHARED, STANDALONE

# stack -> (target, draft, devices per variant, TP, max seqs, max model len, spec tokens, nodes, engine)
EXPECTED = {
    "qwen3-32b-qwen3-1.7b": ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", 8, 32, 4, 1024, 7, 1, "nxdi-legacy"),
    "qwen3-32b-qwen3-0.6b": ("Qwen/Qwen3-32B", "Qwen/Qwen3-0.6B", 16, 64, 1, 6400, 7, 2, "nxdi-legacy"),
    # The seed 000/003 pairing as a load sweep by inference-perf (docs/load-generators.md): eight
    # sequences, so its highest level, concurrency 8, is served at once.
    "qwen3-32b-qwen3-1.7b-sweep": ("Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B", 8, 32, 8, 1024, 7, 1, "nxdi-legacy"),
    "llama3.1-405b-llama3.2-1b": ("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 16, 64, 1, 12800, 7, 3, "nxdi-legacy"),
    "llama3.1-8b-llama3.2-1b": ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B", 1, 4, 1, 1024, 5, 1, "nxdi-legacy"),
    # Seed 002's both architectures: the first SD configuration is the fused one; the distributed
    # variant's two pods share the node (tests/test_distributed_stack.py).
    "llama3.1-8b-distributed": ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B", 1, 4, 1, 128, 5, 1, "nxdi-legacy"),
    # The Neuron EAGLE3 tutorial: TP 8 at LNC 2 is 2 devices.
    "llama3.1-8b-instruct-eagle3": ("meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", 2, 8, 2, 2048, 3, 1, "vllm-neuron"),
    # The tuning studies (docs/study.md): their first SD configuration; the blog's on the
    # sample's shape, sequential on one node; the EAGLE3 tutorial's, all eight servers on one node.
    "qwen3-32b-study": ("Qwen/Qwen3-32B", "Qwen/Qwen3-0.6B", 8, 32, 4, 1024, 5, 1, "nxdi-legacy"),
    "llama3.1-8b-eagle3-study": ("meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", 2, 8, 2, 2048, 1, 1, "vllm-neuron"),
}


@pytest.mark.parametrize("stack", sorted(KINDS))
def test_every_stack_file_is_valid(stack):
    """Each file of stacks/ on its own: a bad one fails here, naming its problems, while the rest
    of the suite runs on the others (conftest.py leaves it out of their parameters)."""
    load_stack(stack).spec()
    assert KINDS[stack] != "invalid"


def test_every_model_pairing_has_a_stack():
    assert STANDALONE == sorted(EXPECTED)
    assert KINDS["platform"] == "platform" and SHARED == ["qwen3-32b-qwen3-1.7b-shared"]


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_stack_matches_the_user_documents(stack):
    target, draft, devices, tp, seqs, max_len, tokens, nodes, engine = EXPECTED[stack]
    spec = load_stack(stack).spec()
    # A distributed variant (two pods) beside them runs on its own engine (tests/test_distributed_stack.py).
    assert {v.engine for v in spec.variants if len(v.servers) == 1} == {engine}
    baseline = next(v for v in spec.variants if v.role == "baseline")
    sd = next(v for v in spec.variants if v.role == "sd")
    assert baseline.target == target
    assert sd.draft == draft and sd.num_speculative_tokens == tokens
    assert sd.baseline in {v.name for v in spec.variants if v.role == "baseline"}
    for variant in spec.variants:
        assert (variant.devices, variant.tensor_parallel_size) == (devices, tp)
        assert (variant.serving.max_num_seqs, variant.serving.max_model_len) == (seqs, max_len)
    assert spec.node_count == nodes
    assert spec.benchmark.input_tokens + spec.benchmark.output_tokens <= max_len
    # vLLM refuses a draft longer than its target; the seeds' drafts are plain models, run as
    # draft_model (no method) on the legacy engine; EAGLE3 heads run as eagle3 on the plugin.
    assert sd.draft_max_model_len <= sd.serving.max_model_len
    if engine == "nxdi-legacy":
        assert sd.speculation_method == "draft_model" and "method" not in sd.speculative_config
    else:
        assert sd.speculation_method == "eagle3" and sd.speculative_config["method"] == "eagle3"


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_stack_files_name_their_region_and_say_why(stack):
    from stackconfig.source import STACKS_DIR

    text = (STACKS_DIR / f"Pulumi.{stack}.yaml").read_text()
    assert load_stack(stack).config["aws:region"] == "us-east-2"
    assert "DescribeInstanceTypeOfferings" in text


def test_405b_separates_the_fp8_gain_from_the_sd_gain():
    spec = load_stack("llama3.1-405b-llama3.2-1b").spec()
    bf16, fp8, sd = spec.variant("base-bf16"), spec.variant("fp8"), spec.variant("sd-fp8")
    assert (bf16.quantization, bf16.prepared_target.form, bf16.baseline) == ("none", "hub", None)
    assert fp8.prepared_target == sd.prepared_target and fp8.prepared_target.form == "neuron-fp8"
    assert (fp8.role, fp8.quantization, fp8.baseline, fp8.draft) == ("baseline", "fp8", "base-bf16", None)
    assert (sd.role, sd.quantization, sd.baseline) == ("sd", "fp8", "fp8") and sd.target == fp8.target
    for variant in (fp8, sd):
        assert variant.neuron_config["quantization_type"] == "per_channel_symmetric"
        assert variant.neuron_config["quantized_mlp_kernel_enabled"] is variant.neuron_config["rmsnorm_quantize_kernel_enabled"] is True


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
            replace(sd, image=sd.image + "-patched"),
            replace(sd, engine="vllm-neuron" if sd.engine == "nxdi-legacy" else "nxdi-legacy"),
        ] + ([replace(sd, draft_max_model_len=(sd.draft_max_model_len or 0) + 1)] if sd.engine == "nxdi-legacy" else [])
        for variant in changed:
            assert variant.artifact_path != sd.artifact_path
            assert variant.artifact_path.startswith("compiled/")


# stack -> seed whose benchmark shape it reproduces by default (reporting/seeds.py). The EAGLE3
# stacks reproduce no seed: no seed ran an EAGLE3 head, so no published figure is theirs to show.
SEED_OF_STACK = {"qwen3-32b-qwen3-1.7b": "003", "qwen3-32b-qwen3-0.6b": "001", "llama3.1-405b-llama3.2-1b": "004",
                 "llama3.1-8b-llama3.2-1b": "002", "qwen3-32b-study": "003", "llama3.1-8b-distributed": "002"}


@pytest.mark.parametrize("stack", sorted(set(EXPECTED) - set(SEED_OF_STACK)))
def test_stacks_without_a_seed_print_no_seed_figures(stack):
    assert load_stack(stack).spec().benchmark.seed is None


@pytest.mark.parametrize("stack", sorted(SEED_OF_STACK))
def test_benchmark_defaults_are_the_seeds_values(stack):
    from reporting.seeds import SEEDS

    benchmark = load_stack(stack).spec().benchmark
    seed = SEEDS[SEED_OF_STACK[stack]]
    assert benchmark.seed == seed.id
    prompts = set(benchmark.test_cases.values())
    if seed.id in ("001", "004"):
        # Same shape, LLMPerf's sonnets only, and the decoding the seed's servers did: seed 001 sent
        # {} (the server's defaults) as this stack does; seed 004 sent {} to servers compiled with
        # top-k 1, greedy whatever a request said, which the requests here ask for instead.
        shape = seed.shape
        assert (benchmark.input_tokens, benchmark.output_tokens, benchmark.concurrency, benchmark.requests_per_test_case) == \
            (shape.input_tokens, shape.output_tokens, shape.concurrency, shape.requests)
        assert shape.sampling_params == {} and prompts == set(shape.prompts) == {None}
        assert benchmark.sampling_params == ({} if seed.id == "001" else {"temperature": 0})
    if seed.id == "003":
        # The sample's shape and eight prompts (seed 000) plus the two the blog analyses, greedy.
        sample = SEEDS["000"].shape
        assert (benchmark.input_tokens, benchmark.output_tokens) == (sample.input_tokens, sample.output_tokens)
        assert prompts == set(sample.prompts) | set(seed.shape.prompts)
        assert benchmark.sampling_params == seed.shape.sampling_params == {"temperature": 0}
    if stack == "llama3.1-8b-distributed":
        # Seed 002's own sampling and 128-token sequences, gamma 4 for the distributed variant.
        spec = load_stack(stack).spec()
        assert benchmark.sampling_params == seed.shape.sampling_params == {"temperature": 0.9, "top_p": 1.0}
        assert spec.serving.max_model_len == 128 and spec.variant("distributed").num_speculative_tokens == seed.shape.speculative_tokens - 1
