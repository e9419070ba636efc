"""What every load generator is described by (LoadGenerator), and what the driver hands one: the
load level it is to hold (Level) and the case it measures (Case). Each generator is a module
beside this one (llmperf.py, inference_perf.py); the registry (benchmark/loadgen/__init__.py
GENERATORS) is keyed by the generator's name, the value of a stack's benchmark.loadGenerator.

The figures never come from a generator: the driver points it at a measuring proxy
(benchmark/proxy.py) that records every request, so a generator owns only how it is started, what
it is told, where its prompt goes, what its own output says when it fails, and its pins.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

LOAD_KINDS = ("concurrency", "rate")
"""How a level is held: `concurrency` requests in flight at once, or `rate` requests sent per second."""


@dataclass(frozen=True)
class Level:
    """One load level: `value` requests in flight (concurrency) or per second (rate)."""

    kind: str
    value: float

    @property
    def slug(self) -> str:
        """The level's folder in a sweep's results (`concurrency-4`, `rate-0.5`)."""
        return f"{self.kind}-{self.value:g}"

    @property
    def label(self) -> str:
        """How reports and the dashboard name the level (`concurrency 4`, `rate 0.5`)."""
        return f"{self.kind} {self.value:g}"

    def as_dict(self) -> dict[str, float]:
        return {self.kind: self.value}

    @classmethod
    def from_dict(cls, data: dict[str, float]) -> "Level":
        (kind, value), = data.items()
        return cls(kind, value)


@dataclass(frozen=True)
class Case:
    """One invocation's inputs: the generator measures `variant` at `level` through the proxy at `base_url`."""

    python: str
    """The interpreter the driver runs on (a generator written in Python runs on it)."""
    work_dir: Path
    """Where the generator is installed in the pod (the driver's --generator-dir)."""
    variant: dict[str, Any]
    shape: dict[str, Any]
    """The run's shape (run-config.json): tokens, requests per test case, timeout, sampling parameters."""
    level: Level
    out_dir: Path
    """The case's results folder; the generator's own files go there."""
    base_url: str
    """The measuring proxy's OpenAI base URL (".../v1")."""
    inherited_path: str | None = None
    """The pod's PYTHONPATH (its locked dependencies live outside site-packages: benchmark/pod.py)."""


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]
    """Added to the pod's environment."""
    cwd: Path
    deadline_s: float
    """The driver stops the generator (and everything it started) after this long."""


@dataclass(frozen=True)
class LoadGenerator:
    name: str
    """The key of the registry and the value of benchmark.loadGenerator."""
    title: str
    """How prose and the driver's log name it."""
    load_kinds: tuple[str, ...]
    """The kinds of Level it can hold (LOAD_KINDS)."""
    invocation: Callable[[Case], Invocation]
    prompts: Callable[[Path], AbstractContextManager[Callable[[str | None], None]]]
    """Around a run: gives the function that makes a test case's prompt (None: the generator's own
    text) the one the generator draws from, and leaves its installation as found afterwards."""
    own_text: str
    """How the report names the generator's own text, what a test case without a prompt is given."""
    outcome: Callable[[str], dict[str, Any]]
    """What the generator's stderr says about how it ended, kept in case.json; `error_key` among them."""
    error_key: str
    """The outcome's key for the last error line (None when there was none)."""
    describe: Callable[[int, dict[str, Any]], str]
    """What the driver's log adds about a case from its exit code and outcome ("" when it ran clean)."""
    own_results: Callable[[Path], tuple[dict[str, Any] | None, list[dict[str, Any]]]]
    """The generator's own summary and per-request records in a case folder (for reference only)."""
    own_figures: Callable[[dict[str, Any]], dict[str, Any]]
    """What the report prints from that summary ({} when there is none), beside the proxy's figures:
    completed, itl_p50_s, output_tokens_p50, overall_output_throughput (None where it has none)."""
    own_itl: str
    """How its inter-token latency is taken, as the report's column names it ("per chunk")."""
    own_source: str
    """What its own figures are, as the report's sources say it."""
    min_input_tokens: int
    """The shortest prompt (benchmark.inputTokens) it can send; validation refuses a shorter one."""
    min_input_tokens_why: str
    """Why, as validation says it after "<inputTokens> is below <min_input_tokens>: "."""
    output_name: str
    """Its stdout and stderr are kept as <output_name>.stdout.txt and .stderr.txt."""
    image: str
    """The benchmark pod's default image, pinned (a stack may pin another with benchmark.image): the
    Python its lock was resolved for."""
    lock: str
    """The hash-locked requirements the pod installs for it (a file in benchmark/)."""
    setup_flags: Callable[[str, str], list[str]]
    """What benchmark/podsetup.py is told to install it, given the stack's LLMPerf commit and the
    folder the lock is installed into (beside --dest, the generator's folder, and the tokenizer's flags)."""
    sends_sampling_params: bool
    """Whether its requests carry the run's sampling parameters; if not, the proxy adds them."""
    pin: Callable[[dict[str, Any]], str]
    """What it runs at, given the run's config (a commit, a version): run.json records it as
    loadGeneratorPin, and the report's header prints it beside the generator's title."""
