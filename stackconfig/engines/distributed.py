"""distributed: seed 002's distributed architecture (docs/distributed.md). The draft model runs in
a pod of its own (distributed/draft_server.py, the OpenAI-compatible endpoint the benchmark
measures) and calls a target verification server in another pod (distributed/target_server.py)
over gRPC once per speculation step. Both run distributed/'s Neuron backend: NxD Inference
0.6.10598 on the legacy image, the version distributed/neuron.py is written against (NOT RUN
HERE: no Trainium on the machine that built it). Not vLLM: the engine's "server arguments" are
the target server's (target_arguments), the draft's are draft_arguments.
"""
from __future__ import annotations

from typing import Any

from ..versions import ENGINE_IMAGES
from .base import EngineInfo, Server, Setting, Variant
from .failure import FIRST_START, EngineFailure, Signature

NAME = "distributed"
TARGET_PORT = 50051
"""The target's gRPC port (distributed/config.py target_settings default)."""
DRAFT_DEVICES = 1
"""The draft's device group: the smallest the Neuron DRA driver hands out (docs/facts.md, "Neuron DRA
driver"). A 1B draft in BF16 is ~2.5 GB, far below one device's 96 GiB of HBM."""
LOGICAL_CORES_PER_DEVICE = 8
"""Physical NeuronCores of a trn2 device (stackconfig/model.py ServingSettings.tensor_parallel_size)."""


def speculation_length(variant: Variant) -> int:
    """What the target is compiled to score in one forward: variants[].speculationLength, else
    gamma + 1 (gamma drafts and the bonus position; seed 002: gamma 4, speculation length 5)."""
    return variant.speculation_length or (variant.num_speculative_tokens or 0) + 1


def max_gamma(length: int) -> int:
    """The most draft tokens one verify forward of a target compiled for `length` positions can
    score: gamma drafts and the bonus position (distributed/config.py check_pairing)."""
    return length - 1


def draft_tensor_parallel(variant: Variant) -> int:
    return DRAFT_DEVICES * (LOGICAL_CORES_PER_DEVICE // variant.serving.logical_neuron_cores)


def servers(variant: Variant) -> tuple[Server, ...]:
    """The target on the variant's devices; the draft on its own group, on the target's node or
    another one (variants[].placement)."""
    apart = variant.placement == "separate-node"
    return (Server("target", variant.devices, 0, endpoint=False), Server("draft", DRAFT_DEVICES, 1 if apart else 0, endpoint=True))


def neuron_config(variant: Variant) -> dict[str, Any]:
    """What distributed/neuron.py compiles each model with (its _Compiled NeuronConfig): batch 1,
    the stack's maxModelLen as context, no fused speculation, logits to the host. The target
    scores speculation_length positions per forward; the draft is a plain decoder."""
    common = {"batch_size": 1, "seq_len": variant.serving.max_model_len, "max_context_length": variant.serving.max_model_len,
              "enable_fused_speculation": False, "on_device_sampling_config": None, "torch_dtype": "bfloat16"}
    return {"target": {**common, "tp_degree": variant.tensor_parallel_size, "speculation_length": speculation_length(variant)},
            "draft": {**common, "tp_degree": draft_tensor_parallel(variant), "speculation_length": 0}}


def speculative_config(variant: Variant, config: dict[str, Any]) -> dict[str, Any]:
    """Recorded in the compile settings (the artifact path): gamma and the compiled length."""
    return {**config, "speculation_length": speculation_length(variant)}


def target_arguments(variant: Variant, model_dir: str, compiled_dir: str, health_port: int) -> list[str]:
    """`python3 -m distributed.target_server ...` (distributed/config.py target_settings). One
    session at a time: the Neuron backend's models are compiled for batch 1."""
    return ["-m", "distributed.target_server", "--backend", "neuron", "--model", model_dir, "--compiled-dir", compiled_dir,
            "--host", "0.0.0.0", "--port", str(TARGET_PORT), "--health-port", str(health_port),
            "--speculation-length", str(speculation_length(variant)), "--max-context", str(variant.serving.max_model_len),
            "--max-sessions", "1", "--max-concurrent-rpcs", "2", "--tp-degree", str(variant.tensor_parallel_size)]


def draft_arguments(variant: Variant, model_dir: str, compiled_dir: str, port: int, target: str) -> list[str]:
    """`python3 -m distributed.draft_server ...` (distributed/config.py draft_settings): gamma
    drafts per step, the target at `target` (host:port), answering to the target's model name as
    the vLLM servers do (Variant.served_model_name). It waits for the target as long as a first
    start may take (the target compiles meanwhile)."""
    return ["-m", "distributed.draft_server", "--backend", "neuron", "--model", model_dir, "--compiled-dir", compiled_dir,
            "--host", "0.0.0.0", "--port", str(port), "--target", target, "--gamma", str(variant.num_speculative_tokens),
            "--max-concurrency", "1", "--served-model-name", variant.served_model_name,
            "--target-wait-s", str(variant.startup_budget_seconds), "--tp-degree", str(draft_tensor_parallel(variant))]


def server_arguments(variant: Variant, common: list[str], speculative: list[str]) -> list[str]:
    """Not a `vllm serve`: the pods' arguments come from target_arguments and draft_arguments, with
    the paths of each pod (components/pairing/distributed_variant.py)."""
    return []


# The Neuron runtime's LNC (as nxdi-legacy sets it, NEURON_RT_VIRTUAL_CORE_SIZE).
ENVIRONMENT: dict[str, Setting] = {
    "NEURON_RT_VIRTUAL_CORE_SIZE": lambda v: str(v.serving.logical_neuron_cores),
}


INVALID_SETTINGS = "invalid settings: "
"""What the servers print before the bad keys when their settings are refused, exiting 2
(distributed/config.py ConfigError)."""
SIGNATURES = {
    "target-unreachable": Signature("the target at {target} did not answer within {seconds} s: {error}",
                                    "distributed/draft_server.py", "main"),
    "gamma-above-speculation-length": Signature(
        "--gamma: {gamma}: the target scores {length} positions per forward (its speculation length), so gamma is at most {most}",
        "distributed/config.py", "check_pairing"),
    "tokenizer-mismatch": Signature("--model: the draft's tokenizer (vocabulary sha256 {draft}) differs from the target's "
                                    "({target}): the same ids would be different tokens", "distributed/config.py", "check_pairing"),
    "vocabulary-mismatch": Signature("--model: the draft's vocabulary has {draft} entries, the target's {target}",
                                     "distributed/config.py", "check_pairing"),
    "context-within-speculation-length": Signature("--max-context: {context}: must exceed --speculation-length",
                                                   "distributed/config.py", "target_settings"),
    "request-failed": Signature("request {request} failed: {error}", "distributed/draft_server.py", "_Handler._serve"),
    "target-failed": Signature("target {code}: {message}", "distributed/target_client.py", "TargetFailed"),
    "session-lost": Signature("{session} is not held here (the target restarted, or the session was released or evicted); "
                              "its cached_length {length} is lost", "distributed/cpu.py", "CpuTarget._session"),
    "lock-not-installed": Signature("FATAL: pip could not install distributed/{lock}", "distributed/pod.py", "install_script"),
}
"""What the two servers print when they fail, in their own words: refused settings (exit 2), a
target the draft cannot reach at start, a request the target failed (logged by the draft, which
counts it in distributed_requests_total{outcome="failed"} and serves the next), the session a
restarted target lost, the pod's lock not installed. tests/test_distributed_failures.py makes the
code print each one and matches it here, so a reworded message fails there; the rehearsal's
target-restart fault finds "request-failed" in the draft's log (rehearse/outcomes.py)."""


def failures(variant: Variant, args: list[str]) -> list[EngineFailure]:
    """What the two servers refuse at start given the rendered arguments (target_arguments,
    draft_arguments), in their words: distributed/config.py target_settings and check_pairing. Both
    starts check the same (no saved configuration is read back), so the first start stands for both.
    The tokenizers are not known here: validation refuses a draft of another tokenizer family
    (stackconfig/parse/serving.py) and the draft server compares their vocabularies at start."""
    found = []
    length, context, gamma = speculation_length(variant), variant.serving.max_model_len, variant.num_speculative_tokens or 0
    if context <= length:
        signature = SIGNATURES["context-within-speculation-length"]
        found.append(EngineFailure(FIRST_START, "max_context_length", INVALID_SETTINGS + signature.format(context=context), signature))
    if gamma + 1 > length:
        signature = SIGNATURES["gamma-above-speculation-length"]
        found.append(EngineFailure(FIRST_START, "speculation_length",
                                   INVALID_SETTINGS + signature.format(gamma=gamma, length=length, most=length - 1), signature))
    return found


def serves_greedily(variant: Variant, request: dict[str, Any]) -> bool:
    """The draft server applies each request's temperature and top_p on both sides (distributed/
    sampling.py); temperature 0 is greedy."""
    return request.get("temperature", 1.0) == 0


def check_variant(variant: Variant) -> list[tuple[str, str]]:
    """Problems under the variant's keys: an sd variant only (a target alone is its baseline's job),
    and gamma within what the target scores in one forward (the draft server would refuse it at
    start: distributed/config.py check_pairing)."""
    problems: list[tuple[str, str]] = []
    if not variant.is_speculative:
        problems.append(("role", f"a {NAME} variant drafts for a remote target: role sd, compared with a baseline "
                                 f"on {ENGINE.compared_with}"))
    if variant.serving.neuron_config:
        problems.append(("engine", f"serving.neuronConfig ({', '.join(sorted(variant.serving.neuron_config))}) would not reach "
                                   f"this {NAME} variant: distributed/neuron.py compiles with its own settings"))
    if variant.serving.max_num_seqs != 1:
        problems.append(("engine", f"serving.maxNumSeqs is {variant.serving.max_num_seqs}; a {NAME} variant serves one request "
                                   "at a time (its models are compiled for batch 1: distributed/neuron.py), so set it to 1"))
    gamma, length = variant.num_speculative_tokens, speculation_length(variant)
    if gamma and gamma > max_gamma(length):
        problems.append(("numSpeculativeTokens", f"gamma {gamma} is above the target's compiled speculation length {length} - 1 "
                                                 "(speculationLength): one verify forward scores gamma + 1 positions"))
    return problems


def refused_neuron_config(config: dict[str, Any]) -> dict[str, str]:
    """distributed/neuron.py compiles with its own NeuronConfig (neuron_config above) and takes no other key."""
    return {name: f"{NAME} compiles with distributed/neuron.py's settings only (docs/distributed.md)" for name in config}


ENGINE = EngineInfo(
    name=NAME,
    image=ENGINE_IMAGES[NAME].version,
    methods=("draft_model",),
    neuron_config_fields="nxdi-0.6.10598-neuron-config-fields.json",
    support="this project's own servers (distributed/) on NxD Inference 0.6.10598; not run on Trainium yet",
    # NxD Inference's span on Trn2, as nxdi-legacy (its support ends with Neuron 2.34).
    sdks=((2, 26), (2, 33)),
    program_keys=frozenset({"tp_degree", "batch_size", "seq_len", "max_context_length", "speculation_length",
                            "enable_fused_speculation", "on_device_sampling_config", "torch_dtype"}),
    neuron_config=neuron_config,
    speculative_config=speculative_config,
    server_arguments=server_arguments,
    environment=ENVIRONMENT,
    failures=failures,
    serves_greedily=serves_greedily,
    refused_neuron_config=refused_neuron_config,
    check_variant=check_variant,
    draft_max_model_len_refused="the draft server compiles its draft for the target's context (distributed/neuron.py)",
    beyond_newest=" (distributed/neuron.py runs on NxD Inference, whose support on Trn2 ends with Neuron 2.34: docs/distributed.md)",
    servers=servers,
    compared_with="nxdi-legacy",
    variant_keys=frozenset({"placement", "speculationLength"}),
    program="python3",
    workload="distributed",
)
