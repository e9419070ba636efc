"""What the benchmark pod is: the code and lock it is given, where it mounts them, the script it
starts with, and what it sends LLMPerf. The Pulumi components (components/pairing/benchmark.py)
build the Job from these facts; validation (stackconfig/parse/) checks config against them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .loadgen import DEFAULT_GENERATOR, GENERATORS, Level

PACKAGE_DIR = Path(__file__).resolve().parent
POD_MODULES = tuple(sorted(path.relative_to(PACKAGE_DIR).as_posix() for path in PACKAGE_DIR.rglob("*.py")))
"""What the pod is given: every module of benchmark/ and its load generators (benchmark/loadgen/)
(standard library + the lock's packages). The operator's side is reporting/, which imports
benchmark/ and never the other way round (tests/test_benchmark_component.py)."""
POD_LOCK = "requirements-pod.lock"
CODE_MOUNT = "/opt/benchmark"
DEPS_MOUNT = "/opt/deps"
"""An emptyDir the lock is installed into (pip --target): the root file system stays read-only."""
WORK_MOUNT = "/opt/work"
"""An emptyDir for LLMPerf and the tokenizer (podsetup replaces LLMPerf's folder, so it is not itself a mount)."""
HF_HOME = f"{WORK_MOUNT}/hf"
RUN_AS = 65532
"""A user id with no account in the image: LLMPerf and Ray need none (HOME is /tmp, USER is set)."""
RUN_CONFIG = "run-config.json"

# The EKS sample's eight LLMPerf test cases (docs/facts.md, "LLMPerf"); the keys become the
# CloudWatch TestCase dimension. None keeps LLMPerf's own sonnet.txt (the "original sonnets" case).
SAMPLE_TEST_CASES: dict[str, str | None] = {
    "counting": "counting numbers from 1 ",
    "sonnets": None,
    "single-letter": "a",
    "hello-world": "hello world ",
    "cat-on-mat": "the cat sat on the mat. ",
    "json-fixed-keys": "Output valid JSON with fixed keys",
    "python-skeleton": "Write a simple Python function skeleton",
    "one-to-twenty": "List numbers from one to twenty",
}

METRIC_DIMENSION_STYLES = ("names", "eks-sample")
SAMPLE_VARIANT_VALUES = {"baseline": "Base", "sd": "SD"}
SAMPLE_SONNETS_VALUE = "__SHAKESPEARE__"
CLOUDWATCH_DIMENSION_VALUE_MAX = 1024
"""CloudWatch: a dimension value is 1 to 1024 characters (PutMetricData, Dimension.Value)."""


def level_folder(levels: Sequence[Level], level: Level) -> str | None:
    """Where a level's cases go under a test case (benchmark/results.py case_dir): a folder per
    level in a sweep, none for one level."""
    return level.slug if len(levels) > 1 else None


def test_case_value(value: str, folder: str | None) -> str:
    """The TestCase value a case is published under: a sweep's level folder follows the test
    case's value after a "/", so levels are never pooled."""
    return f"{value}/{folder}" if folder else value


def metric_dimensions(style: str, variants: Iterable[tuple[str, str]], test_cases: Mapping[str, str | None]) -> dict[str, dict[str, str]]:
    """The values the benchmark publishes a (variant, test case) under, per dimension.

    "names": the variant's and the test case's names. "eks-sample": the EKS sample's own
    (its qwen-llmperf-pod.yaml, as its README's "View Results in CloudWatch" describes): Variant
    "SD" or "Base", TestCase the prompt with every space made an underscore (its `tr ' ' '_'`),
    and "__SHAKESPEARE__" for LLMPerf's own sonnets, so the sample's dashboards and queries
    find this project's metrics."""
    if style == "eks-sample":
        return {"Variant": {name: SAMPLE_VARIANT_VALUES[role] for name, role in variants},
                "TestCase": {case: SAMPLE_SONNETS_VALUE if prompt is None else prompt.replace(" ", "_")
                             for case, prompt in test_cases.items()}}
    return {"Variant": {name: name for name, _ in variants}, "TestCase": {case: case for case in test_cases}}


# The dashboard's layout (components/pairing/dashboard.py), in the metrics publish.py publishes: per
# test case, a row for latency and one beneath it for tokens, acceptance and the Neuron devices,
# each widget (metric names, statistic).
DASHBOARD_ROWS = (
    ((("TimePerOutputToken",), "p50"), (("EndToEndLatency",), "p50"), (("TTFT",), "p50"), (("RequestOutputThroughput",), "p50")),
    ((("OutputTokens",), "p50"), (("AcceptanceRate", "ImpliedAcceptanceRate"), "Average"),
     (("NeuronCoreUtilization",), "Average"), (("NeuronMemoryUsed",), "Maximum")),
)
DASHBOARD_WIDGETS_PER_TEST_CASE = sum(len(row) for row in DASHBOARD_ROWS)
STUDY_DASHBOARD_WIDGETS = (1, 1)
"""What a study's view adds (components/pairing/dashboard.py): a header, and per test case one
widget of every configuration's TPOT speedup over its baseline."""

DEFAULT_SAMPLING_PARAMS = {"temperature": 0}
RESERVED_SAMPLING_KEYS = ("max_tokens", "messages", "model", "stream", "stream_options")
"""Request fields the benchmark sets itself: LLMPerf sends model, messages, stream and max_tokens
(ray-project/llmperf@f1d6bed src/llmperf/ray_clients/openai_chat_completions_client.py
llm_request, max_tokens from token_benchmark_ray.py launch_request), and the measuring proxy adds
stream_options (proxy.py with_usage)."""


def manifest_key(commit: str) -> str:
    """ConfigMap keys allow no "/": the manifest's key, mounted at benchmark/llmperf/<commit>.manifest."""
    return f"llmperf-{commit}.manifest"


def config_map_key(name: str) -> str:
    """ConfigMap keys allow no "/" (a key is [-._a-zA-Z0-9]+): loadgen/llmperf.py is loadgen-llmperf.py."""
    return name.replace("/", "-")


def generator_dir(generator: str) -> str:
    """Where podsetup puts the load generator and the driver finds it (LLMPerf's checkout: podsetup replaces
    the folder, so it is not itself a mount)."""
    return f"{WORK_MOUNT}/{generator}"


def pod_code(llmperf_commit: str, generator: str = DEFAULT_GENERATOR) -> dict[str, str]:
    """The files the pod is given (ConfigMap data): its modules, the generator's lock, the LLMPerf manifest."""
    code = {config_map_key(name): (PACKAGE_DIR / name).read_text() for name in POD_MODULES + (GENERATORS[generator].lock,)}
    code[manifest_key(llmperf_commit)] = (PACKAGE_DIR / "llmperf" / f"{llmperf_commit}.manifest").read_text()
    return code


def code_items(llmperf_commit: str, generator: str = DEFAULT_GENERATOR) -> list[dict[str, str]]:
    """Where each ConfigMap key is mounted under CODE_MOUNT."""
    files = POD_MODULES + (GENERATORS[generator].lock,)
    return [{"key": config_map_key(name), "path": f"benchmark/{name}"} for name in files] + [
        {"key": manifest_key(llmperf_commit), "path": f"benchmark/llmperf/{llmperf_commit}.manifest"},
        {"key": RUN_CONFIG, "path": RUN_CONFIG}]


def setup_script(llmperf_commit: str, entry: str = "driver", generator: str = DEFAULT_GENERATOR) -> str:
    """Install the load generator's hash-locked dependencies, then the generator and its tokenizer
    (podsetup.py: LLMPerf fetched and verified), then run the driver (or a study's tuner, which drives it) offline
    from the hub. Any failed step ends the pod with a FATAL line and a non-zero exit, so the Job fails."""
    lock, where = GENERATORS[generator].lock, generator_dir(generator)
    return "\n".join([
        "set -euo pipefail",
        f"cd {CODE_MOUNT}",
        f'echo "installing the benchmark\'s Python dependencies (benchmark/{lock}, hash-checked)"',
        f"pip install --quiet --no-cache-dir --disable-pip-version-check --require-hashes --no-deps --target {DEPS_MOUNT}"
        f" -r benchmark/{lock}"
        f" || {{ echo 'FATAL: benchmark setup failed: pip could not install benchmark/{lock}' >&2; exit 2; }}",
        f"python -m benchmark.podsetup {' '.join(GENERATORS[generator].setup_flags(llmperf_commit, DEPS_MOUNT))}"
        f" --dest {where} --hf-home {HF_HOME} --bucket \"$RESULTS_BUCKET\" --cache-prefix \"$TOKENIZER_CACHE_PREFIX\"",
        # The token was for the tokenizer download only: the driver and LLMPerf never see its path.
        "unset HF_TOKEN_PATH",
        f"export HF_HOME={HF_HOME} HF_HUB_OFFLINE=1",
        f"exec python -m benchmark.{entry} --config {CODE_MOUNT}/{RUN_CONFIG} --results-dir /results"
        f' --generator-dir {where} --namespace "$METRICS_NAMESPACE" --bucket "$RESULTS_BUCKET" --prefix "$RESULTS_PREFIX"',
    ])


def pod_environment() -> dict[str, str]:
    """What the restricted pod needs to run as a user with no account on a read-only root: its
    dependencies on the path, a writable HOME, and a USER for getpass (Ray asks for one)."""
    return {"PYTHONPATH": f"{DEPS_MOUNT}:{CODE_MOUNT}", "HOME": "/tmp", "USER": "llmperf", "PYTHONUNBUFFERED": "1"}


def security_context() -> dict:
    """The Kubernetes "restricted" Pod Security Standard, container level."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


WRITABLE_VOLUMES = {DEPS_MOUNT: "2Gi", WORK_MOUNT: "2Gi", "/tmp": "4Gi", "/results": "4Gi"}
"""Every path the benchmark writes: its dependencies, LLMPerf and the tokenizer, Ray's session
files and LLMPerf's scratch, the results before upload. /dev/shm is Ray's object store, in memory."""
