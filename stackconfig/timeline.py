"""A stack's cold path: how long from `pulumi up` to the first benchmark result when nothing is
prepared or compiled yet, step by step, with the rate each step assumes and where that rate comes
from. Every figure is an estimate; the steps log the rates they reach (modelstore/progress.py,
serve.sh), which is how to replace an assumption with a measurement.

    prepare   each model the variants load, by its own Job on a preparation node, in parallel,
              file by file: download from the hub, rescale (FP8), upload to the store, the
              stages of the files in flight overlapping
    copy      each server copies its prepared models from the store to its node's NVMe
    compile   the engine compiles: not modelled (no source publishes compile times for these
              shapes); the startup probe's budget bounds it (Variant.startup_budget_seconds)
    publish   the publisher uploads the compiled set, then commits (the benchmark waits for it)
    benchmark test cases x requests x variants (x repeats in a study), each request's output tokens
              at 50 ms per token, `concurrency` at a time

A study (study_modes) adds up the same terms per configuration for each mode, in the tuner's design
(benchmark/tuner.py blocks): repeats interleaved across configurations, the baseline measured again
in every configuration's block. Sequential starts each configuration once per repeat on the nodes
of its largest server (it compiles on its first start; later starts copy its models and compiled
set again), the baseline once where a pair fits (it stays up) and once per repeat where it does
not; parallel starts all at once on the nodes packing needs. Either measures one server after
another (one benchmark pod), the baseline once per block.
"""
from __future__ import annotations

from dataclasses import dataclass

from .model import StackSpec, Variant
from .server import compiled_set_gib
from .store import PREPARATION_STREAMS

GBIT = 1e9 / 8
"""Bytes per second in one Gbit/s."""


@dataclass(frozen=True)
class Rate:
    bytes_per_second: float
    source: str


HUB_DOWNLOAD = Rate(4 * GBIT, f"assumed: 4 Gbit/s from the hub with {PREPARATION_STREAMS} files at a time; the hub publishes no figure")
RESCALE = Rate(4 * GBIT, "assumed: 0.5 GB/s of FP8 shards through numpy on one core")
PREPARATION_UPLOAD = Rate(10 * GBIT, "assumed: 10 Gbit/s to S3, below the preparation nodes' 25 Gbit/s floor "
                                     "(components/platform/preparation_nodes.py)")
STORE_TO_NVME = Rate(10 * GBIT, "assumed: 10 Gbit/s through Mountpoint with 16 reads at a time, a twentieth of its "
                                "200 Gbit/s throughput target (components/pairing/model_volume.py)")
PUBLISHER_UPLOAD = Rate(4 * GBIT, "assumed: 4 Gbit/s, the publisher hashing on its one core")
SECONDS_PER_OUTPUT_TOKEN = 0.050
"""Above every per-token latency the seeds publish (the slowest, seed 004's Llama-3.1-405B BF16
baseline, has a p50 inter-token latency of 37.9 ms per Llama-2 token, ~45 ms per model token;
docs/facts.md, "The source documents"), so the benchmark term errs long."""


@dataclass(frozen=True)
class Step:
    name: str
    gib: float | None
    """Data the step moves (None: not a transfer)."""
    minutes: float
    assumes: str


def _transfer_minutes(gib: float, *rates: Rate) -> float:
    return sum(gib * 2 ** 30 / rate.bytes_per_second for rate in rates) / 60


def _streamed_minutes(gib: float, *stages: Rate) -> float:
    """A preparation streams file by file with several files in flight, so its stages overlap: the
    slowest sets the pace (plus one shard's pass through the others, negligible here)."""
    return max(_transfer_minutes(gib, stage) for stage in stages)


def cold_path(spec: StackSpec) -> list[Step]:
    models = spec.prepared_models
    preparing = [(m.checkpoint_gib, _streamed_minutes(m.checkpoint_gib, HUB_DOWNLOAD, PREPARATION_UPLOAD,
                                                      *((RESCALE,) if m.form == "neuron-fp8" else ()))) for m in models]
    slowest_model = max(preparing, key=lambda p: p[1])
    per_variant = [sum(m.checkpoint_gib for m in v.prepared_models) for v in spec.variants]
    b = spec.benchmark
    requests = sum(_requests(spec) for _ in spec.variants)
    publish_gib = max(compiled_set_gib(v) for v in spec.variants)
    return [
        Step("prepare", slowest_model[0], slowest_model[1],
             f"the slowest of {len(models)} models, in parallel, its stages overlapping file by file: {HUB_DOWNLOAD.source}; "
             f"{PREPARATION_UPLOAD.source}"
             + (f"; FP8: {RESCALE.source}" if any(m.form == "neuron-fp8" for m in models) else "")),
        Step("copy", max(per_variant), _transfer_minutes(max(per_variant), STORE_TO_NVME), STORE_TO_NVME.source),
        Step("compile", None, max(v.startup_budget_seconds for v in spec.variants) / 60,
             "an upper bound, the startup probe's budget (no source publishes compile times for these shapes)"),
        Step("publish", publish_gib, _transfer_minutes(publish_gib, PUBLISHER_UPLOAD), PUBLISHER_UPLOAD.source),
        Step("benchmark", None, requests * b.output_tokens * SECONDS_PER_OUTPUT_TOKEN / b.concurrency / 60,
             f"{requests} requests x {b.output_tokens} output tokens x {SECONDS_PER_OUTPUT_TOKEN * 1000:.0f} ms, "
             f"{b.concurrency} at a time"),
    ]


def describe(step: Step) -> str:
    """A step as docs/models.md's cold-path table and the plan print it."""
    if step.name == "publish" and not step.gib:
        return "graphs only (size not published)"
    return (f"{step.gib:,.0f} GiB, " if step.gib else "") + f"{step.minutes:,.0f} min"


def _requests(spec: StackSpec) -> int:
    """Requests one variant is sent: every test case, every repeat of a study."""
    b = spec.benchmark
    return len(b.test_cases) * b.requests_per_test_case * (spec.study.repeats if spec.study else 1)


def _benchmark_minutes(spec: StackSpec) -> float:
    b = spec.benchmark
    return _requests(spec) * b.output_tokens * SECONDS_PER_OUTPUT_TOKEN / b.concurrency / 60


def _start_minutes(variant: Variant, compiled: bool) -> float:
    """Copy, compile (its startup budget, an upper bound; nothing once compiled) and publish."""
    gib = sum(m.checkpoint_gib for m in variant.prepared_models)
    compile_minutes = 0.0 if compiled else variant.startup_budget_seconds / 60
    publish = 0.0 if compiled else _transfer_minutes(compiled_set_gib(variant), PUBLISHER_UPLOAD)
    return _transfer_minutes(gib, STORE_TO_NVME) + compile_minutes + publish


@dataclass(frozen=True)
class ModeEstimate:
    mode: str
    nodes: int
    first_hours: float
    """A first study: every configuration compiles (upper bound: each startup budget in full)."""
    repeat_hours: float
    """The same study again: every compiled set is in the store."""
    usd_per_node_hour: float | None
    terms: str = ""
    """What the hours add up, said once."""

    def usd(self, hours: float) -> float | None:
        return None if self.usd_per_node_hour is None else self.nodes * hours * self.usd_per_node_hour


def study_modes(spec: StackSpec) -> list[ModeEstimate]:
    """Time and trn2 cost of the stack's study in each mode (the plan prints both)."""
    bench = _benchmark_minutes(spec)  # one server: every test case, every repeat
    repeats = spec.study.repeats if spec.study else 1
    price = spec.capacity.shape.approx_hourly_usd or None
    compared = [v for v in spec.variants if v.baseline]
    roots = [v for v in spec.variants if not v.baseline]
    estimates = []
    for mode, nodes in (("sequential", spec.sequential_node_count), ("parallel", spec.parallel_node_count)):
        beside = mode == "parallel" or spec.pairs_fit_together
        # Measured per repeat: each configuration, and the baseline beside each (or once, alone).
        measuring = bench * (len(compared) * (2 if beside else 1) + (0 if beside else len(roots)))
        # Started again in later repeats: each configuration, and the baseline where it cannot stay up.
        restarted = compared + ([] if beside else roots)
        restart = (repeats - 1) * sum(_start_minutes(v, True) for v in restarted) if mode == "sequential" else 0.0
        hours = []
        for compiled in (False, True):
            starts = [_start_minutes(v, compiled) for v in spec.variants]
            hours.append(((sum(starts) if mode == "sequential" else max(starts)) + restart + measuring) / 60)
        servers = len(compared) * (2 if beside else 1) + (0 if beside else len(roots))
        terms = (f"measuring {servers} server(s) per repeat ({len(compared)} compared with a baseline"
                 + (", the baseline beside each" if beside else f", {len(roots)} baseline(s) alone") + f") x {bench / repeats:,.0f} min"
                 f" x {repeats} repeats = {measuring / 60:,.1f} h ({SECONDS_PER_OUTPUT_TOKEN * 1000:.0f} ms per output token, "
                 "assumed)" + (f"; {len(restarted)} server(s) started again in each later repeat: {restart / 60:,.1f} h of copying"
                               if restart else ""))
        estimates.append(ModeEstimate(mode, nodes, hours[0], hours[1], price, terms))
    return estimates
