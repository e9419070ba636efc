"""A stack's cold path: how long from `pulumi up` to the first benchmark result when nothing is
prepared or compiled yet, step by step, with the rate each step assumes and where that rate comes
from; and what a tuning study costs in each mode, term by term. Every figure is an estimate; the
steps log the rates they reach (modelstore/progress.py, serve.sh), which is how to replace an
assumption with a measurement.

    prepare   each model the variants load, by its own Job on a preparation node, in parallel,
              file by file: download from the hub, rescale (FP8), upload to the store, the
              stages of the files in flight overlapping
    copy      each server copies its prepared models from the store to its node's NVMe
    compile   the engine compiles: not modelled (no source publishes compile times for these
              shapes); the startup probe's budget bounds it (Variant.startup_budget_seconds)
    publish   the publisher uploads the compiled set, then commits (the benchmark waits for it)
    benchmark test cases x requests x variants (x repeats in a study), each request's output tokens
              at the variant's time per output token (seconds_per_token: measured in a previous
              run, else published for that configuration, else assumed), at every load level
              (BenchmarkSettings.seconds), plus the load generator's start for every case and level

A study (study_modes) adds up the same terms per configuration for each mode, in the tuner's design
(benchmark/tuner.py blocks): repeats interleaved across configurations, the baseline measured again
in every configuration's block (the paired design's cost, stated as a term of its own). Sequential
starts each configuration once per repeat on the nodes of its largest server (it compiles on its
first start; later starts copy its models and compiled set again, and load them), the baseline
once where a pair fits (it stays up) and once per repeat where it does not; parallel starts all at
once on the nodes packing needs. Either measures one server after another (one benchmark pod).
Time to first token is left out: with these shapes' inputs it is a few per cent of a request.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reporting.seeds import PUBLISHED_CHOICES, SEEDS

from .catalog import MODELS
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
_LOAD_GUIDE_MODEL = "meta-llama/Llama-3.1-405B-Instruct"
_LOAD_GUIDE_BYTES = MODELS[_LOAD_GUIDE_MODEL].checkpoint.bytes
_LOAD_GUIDE_SECONDS = 187.3972628650372
NEURON_LOAD = Rate(
    _LOAD_GUIDE_BYTES / _LOAD_GUIDE_SECONDS,
    f"derived: Neuron's weights sharding guide loads {_LOAD_GUIDE_MODEL} BF16 ({_LOAD_GUIDE_BYTES / 1e9:,.0f} GB, the "
    f"catalog's checkpoint) onto a trn2.48xlarge from NVMe in {_LOAD_GUIDE_SECONDS:.0f} s with shard on load (108 s "
    "pre-sharded; aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/weights-sharding-guide.rst): the "
    f"slower, ~{_LOAD_GUIDE_BYTES / _LOAD_GUIDE_SECONDS / 1e9:.1f} GB/s")
"""Weights from the node's NVMe onto the devices, as a server starts."""
SECONDS_PER_OUTPUT_TOKEN = 0.050
"""The time per output token of a variant with no figure of its own or of its baseline: above every
per-token latency the seeds publish (the slowest, seed 004's Llama-3.1-405B BF16 baseline, has a
p50 inter-token latency of 37.9 ms per Llama-2 token, ~45 ms per model token; docs/facts.md, "The
source documents"), so such a term errs long."""


@dataclass(frozen=True)
class Figure:
    """One input of an estimate and where it comes from; the source starts with how it is known:
    measured, published, derived, assumed, or an upper bound."""

    value: float
    source: str

    @property
    def kind(self) -> str:
        return self.source.split(":", 1)[0]


FALLBACK_TOKEN = Figure(SECONDS_PER_OUTPUT_TOKEN, "assumed: above every per-token latency the seeds publish "
                                                  "(stackconfig/timeline.py SECONDS_PER_OUTPUT_TOKEN)")
LOAD_GENERATOR_START = Figure(30, "assumed: Python, a local Ray instance and the tokenizer, every case (LLMPerf starts "
                                  "afresh per case); not measured: the driver allows 600 s (benchmark/driver.py)")
"""Seconds before a case's first request."""
SERVER_START = Figure(120, "assumed: the pod scheduled and its container started (the image on the node after its "
                           "first pull), then up to a minute each of the startup probe's and the tuner's 60 s polls")
"""Seconds a server's start takes beyond copying, loading and compiling."""


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


def approx(value: float, digits: int = 2) -> str:
    """`value` to `digits` significant figures (thousands separated): what the estimate's inputs
    (assumed rates, rounded published figures) support, and no more."""
    if value == 0:
        return "0"
    rounded = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{rounded:,.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"


STATISTICS = {"p50": "median", "approx": "approximate", "value": "one figure"}
"""How a seed states a figure (reporting/seeds.py Published.values), in words."""


def duration(hours: float) -> str:
    """A span of the estimate: minutes below an hour, else hours; two significant figures."""
    return f"{approx(hours * 60)} min" if hours < 1 else f"{approx(hours)} h"


def _seed_figure(spec: StackSpec, variant: Variant) -> Figure | None:
    """The per-token latency the stack's seed publishes for this variant's configuration (the seed's
    baseline target, or its draft at its window), the largest where it publishes several."""
    seed = SEEDS.get(spec.benchmark.seed or "")
    if seed is None:
        return None
    shape = seed.shape
    if variant.is_speculative:
        role = "sd" if (variant.draft, variant.num_speculative_tokens) == (shape.draft, shape.speculative_tokens) else None
    else:
        role = "baseline" if variant.target == shape.target else None
    rows = [(row.values[stat], stat, row) for row in seed.figures if row.metric == "inter_token_latency_s" and row.role == role
            for stat in [next((s for s in ("p50", "approx", "value") if s in row.values), None)] if stat]
    if not rows:
        return None
    value, stat, row = max(rows, key=lambda r: r[0])
    return Figure(value, f"published: seed {seed.id} ({seed.title}), {row.cite}, {STATISTICS[stat]}"
                  + (f", {row.derived}" if row.derived else "") + (f"; the largest of its {len(rows)} figures" if len(rows) > 1 else ""))


def _choice_figure(spec: StackSpec, variant: Variant) -> Figure | None:
    """The TPOT a source document publishes for the configuration it chose (reporting/seeds.py
    PUBLISHED_CHOICES): for that draft at that window, and for the baseline of a stack that
    measures that draft beside it."""
    for choice in PUBLISHED_CHOICES:
        if not {"tpot_base_ms", "tpot_sd_ms"} <= set(choice.figures) or variant.target != choice.target:
            continue
        if variant.is_speculative and (variant.draft, variant.num_speculative_tokens) == (choice.draft, choice.window):
            return Figure(choice.figures["tpot_sd_ms"] / 1000, f"published: {choice.document}, k = {choice.window}, median TPOT")
        if not variant.is_speculative and any(v.baseline == variant.name and v.draft == choice.draft for v in spec.variants):
            return Figure(choice.figures["tpot_base_ms"] / 1000, f"published: {choice.document}, its baseline's median TPOT")
    return None


def seconds_per_token(spec: StackSpec, measured: dict[str, Figure] | None = None) -> dict[str, Figure]:
    """Each variant's time per output token: measured in a previous run (`measured`, by variant
    name: measured_seconds_per_token), else published for its configuration, else its baseline's
    (labelled assumed), else SECONDS_PER_OUTPUT_TOKEN."""
    figures: dict[str, Figure] = {}

    def resolve(variant: Variant) -> Figure:
        if variant.name not in figures:
            found = (measured or {}).get(variant.name) or _seed_figure(spec, variant) or _choice_figure(spec, variant)
            if found is None and variant.baseline:
                base = resolve(spec.variant(variant.baseline))
                found = Figure(base.value, f"assumed: as its baseline {variant.baseline} ({base.kind}); no figure of its own")
            figures[variant.name] = found or FALLBACK_TOKEN
        return figures[variant.name]

    return {v.name: resolve(v) for v in spec.variants}


class PreviousRunError(ValueError):
    """A previous run's file is not a report this program wrote."""


def measured_seconds_per_token(report: Any, label: str) -> dict[str, Figure]:
    """Each variant's time per output token in a previous run, from what `make results` wrote:
    report.json (a run: runs.<run>.cases.<test case>.<variant>.tpot_s.p50) or tuning.json (a study:
    <study>.table.<test case>.<configuration>.tpot_s, over its repeats); the mean over every run
    and test case in the file, since a case's time grows with its TPOT."""
    samples: dict[str, list[float]] = {}
    try:
        if isinstance(report, dict) and isinstance(report.get("runs"), dict):
            rows = [(name, (figures.get("tpot_s") or {}).get("p50")) for run in report["runs"].values()
                    for by_variant in run["cases"].values() for name, figures in by_variant.items()]
        else:
            rows = [(name, row.get("tpot_s")) for study in report.values() for scope, table in study["table"].items()
                    if scope != "overall" for name, row in table.items()]
    except (AttributeError, KeyError, TypeError) as error:
        raise PreviousRunError(f"{label}: not a report.json or tuning.json of `make results` ({type(error).__name__}: {error})") \
            from error
    for name, value in rows:
        if isinstance(value, (int, float)) and value > 0:
            samples.setdefault(name, []).append(float(value))
    if not samples:
        raise PreviousRunError(f"{label}: no variant's time per output token in it")
    return {name: Figure(sum(values) / len(values), f"measured: {label}, the mean of {len(values)} test case median(s)")
            for name, values in samples.items()}


def _case_minutes(spec: StackSpec, seconds_per_token: float) -> float:
    """Measuring one test case at one load level on one server, on average over the levels: its
    requests' output tokens at every level (BenchmarkSettings.seconds), shared by the levels."""
    b = spec.benchmark
    return b.seconds(b.requests_per_test_case, seconds_per_token) / b.load_levels / 60


def _cases(spec: StackSpec) -> int:
    """Cases one server is measured in per repeat: every test case at every load level."""
    return len(spec.benchmark.test_cases) * spec.benchmark.load_levels


def _repeats(spec: StackSpec) -> int:
    return spec.study.repeats if spec.study else 1


def _load_bytes(variant: Variant) -> int:
    return sum(m.checkpoint_bytes for m in variant.prepared_models)


def _start_minutes(variant: Variant, compiled: bool) -> float:
    """Copy, load and start; on a first start also compile (its startup budget, an upper bound) and publish."""
    gib = sum(m.checkpoint_gib for m in variant.prepared_models)
    first = 0.0 if compiled else variant.startup_budget_seconds / 60 + _transfer_minutes(compiled_set_gib(variant), PUBLISHER_UPLOAD)
    return (_transfer_minutes(gib, STORE_TO_NVME) + _load_bytes(variant) / NEURON_LOAD.bytes_per_second / 60
            + SERVER_START.value / 60 + first)


def cold_path(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[Step]:
    models = spec.prepared_models
    preparing = [(m.checkpoint_gib, _streamed_minutes(m.checkpoint_gib, HUB_DOWNLOAD, PREPARATION_UPLOAD,
                                                      *((RESCALE,) if m.form == "neuron-fp8" else ()))) for m in models]
    slowest_model = max(preparing, key=lambda p: p[1])
    per_variant = [sum(m.checkpoint_gib for m in v.prepared_models) for v in spec.variants]
    b = spec.benchmark
    tokens = seconds_per_token(spec, measured)
    cases = _cases(spec) * _repeats(spec)
    publish_gib = max(compiled_set_gib(v) for v in spec.variants)
    spread = sorted({approx(f.value * 1000) for f in tokens.values()}, key=float)
    return [
        Step("prepare", slowest_model[0], slowest_model[1],
             f"the slowest of {len(models)} models, in parallel, its stages overlapping file by file: {HUB_DOWNLOAD.source}; "
             f"{PREPARATION_UPLOAD.source}"
             + (f"; FP8: {RESCALE.source}" if any(m.form == "neuron-fp8" for m in models) else "")),
        Step("copy", max(per_variant), _transfer_minutes(max(per_variant), STORE_TO_NVME), STORE_TO_NVME.source),
        Step("compile", None, max(v.startup_budget_seconds for v in spec.variants) / 60,
             "an upper bound, the startup probe's budget (no source publishes compile times for these shapes)"),
        Step("publish", publish_gib, _transfer_minutes(publish_gib, PUBLISHER_UPLOAD), PUBLISHER_UPLOAD.source),
        Step("benchmark", None, benchmark_minutes(spec, measured),
             f"{cases * len(spec.variants)} cases x {b.requests_per_test_case} requests x {b.output_tokens} output tokens at "
             f"{' to '.join(dict.fromkeys([spread[0], spread[-1]]))} ms per token (the estimate's terms) "
             f"and {LOAD_GENERATOR_START.value:.0f} s (assumed) to start each, {b.describe_loads()}"),
    ]


def benchmark_minutes(spec: StackSpec, measured: dict[str, Figure] | None = None) -> float:
    """One pass of the benchmark over every variant (every repeat of a study): each case measured,
    and the load generator started for it."""
    tokens = seconds_per_token(spec, measured)
    cases = _cases(spec) * _repeats(spec)
    return sum(cases * (_case_minutes(spec, tokens[v.name].value) + LOAD_GENERATOR_START.value / 60) for v in spec.variants)


def describe(step: Step) -> str:
    """A step as docs/models.md's cold-path table and the plan print it."""
    if step.name == "publish" and not step.gib:
        return "graphs only (size not published)"
    return (f"{step.gib:,.0f} GiB, " if step.gib else "") + f"{step.minutes:,.0f} min"


@dataclass(frozen=True)
class Term:
    """A row of the estimate's table: what, how much, and where the figure comes from."""

    name: str
    value: str
    source: str


def _span(values: list[float], unit: str) -> str:
    shown = list(dict.fromkeys(approx(v) for v in sorted(values)))
    return f"{shown[0]}{' to ' + shown[-1] if len(shown) > 1 else ''} {unit}"


def terms(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[Term]:
    """The inputs every estimate of the stack adds up, each with its source (the plan prints them)."""
    rows = [Term(f"time per output token, {name}", f"{approx(figure.value * 1000)} ms", figure.source)
            for name, figure in seconds_per_token(spec, measured).items()]
    variants = spec.variants
    return rows + [
        Term("load generator start, per case", f"{LOAD_GENERATOR_START.value:.0f} s", LOAD_GENERATOR_START.source),
        Term("copy to the node, per start", _span([sum(m.checkpoint_gib for m in v.prepared_models) for v in variants], "GiB"),
             STORE_TO_NVME.source),
        Term("model load, per start", _span([_load_bytes(v) / NEURON_LOAD.bytes_per_second for v in variants], "s"), NEURON_LOAD.source),
        Term("server start, per start", f"{SERVER_START.value / 60:.0f} min", SERVER_START.source),
        Term("compile, a first start", "<= " + _span([v.startup_budget_seconds / 60 for v in variants], "min"),
             "upper bound: the startup probe's budget, 3 to 12 h by model size (no source publishes compile times for these shapes)"),
        Term("publish, a first start", _span([_transfer_minutes(compiled_set_gib(v), PUBLISHER_UPLOAD) for v in variants], "min"),
             PUBLISHER_UPLOAD.source),
    ]


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
    baseline_beside_hours: float = 0.0
    """Of the measuring, the baseline measured again in every configuration's block (the paired design)."""
    load_generator_hours: float = 0.0

    def usd(self, hours: float) -> float | None:
        return None if self.usd_per_node_hour is None else self.nodes * hours * self.usd_per_node_hour

    def cost(self, hours: float) -> str:
        """Time and node cost to the precision the estimate has, as the plan and the README print them."""
        usd = self.usd(hours)
        return f"~{approx(hours)} h" + (f", ~${approx(usd)}" if usd is not None else "")


def study_modes(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[ModeEstimate]:
    """Time and trn2 cost of the stack's study in each mode (the plan prints both)."""
    tokens = seconds_per_token(spec, measured)
    repeats, cases = _repeats(spec), _cases(spec)
    price = spec.capacity.shape.approx_hourly_usd or None
    compared = [v for v in spec.variants if v.baseline]
    roots = [v for v in spec.variants if not v.baseline]
    estimates = []
    for mode, nodes in (("sequential", spec.sequential_node_count), ("parallel", spec.parallel_node_count)):
        beside = mode == "parallel" or spec.pairs_fit_together
        # Measured in each repeat: each configuration, and its baseline beside it (or the baselines once, alone).
        servers = compared + ([spec.variant(v.baseline) for v in compared] if beside else roots)
        measuring = repeats * cases * sum(_case_minutes(spec, tokens[v.name].value) for v in servers)
        paired = repeats * cases * sum(_case_minutes(spec, tokens[v.baseline].value) for v in compared) if beside else 0.0
        generator = repeats * cases * len(servers) * LOAD_GENERATOR_START.value / 60
        # Started again in later repeats: each configuration, and the baseline where it cannot stay up.
        restarted = (compared + ([] if beside else roots)) if mode == "sequential" else []
        restart = (repeats - 1) * sum(_start_minutes(v, True) for v in restarted)
        hours = []
        for compiled in (False, True):
            starts = [_start_minutes(v, compiled) for v in spec.variants]
            hours.append(((sum(starts) if mode == "sequential" else max(starts)) + restart + measuring + generator) / 60)
        compiling = hours[0] - hours[1]
        started = (f"{len(spec.variants) + (repeats - 1) * len(restarted)} server starts one after another"
                   if mode == "sequential" else f"{len(spec.variants)} server starts at once")
        text = (f"{repeats * cases * len(servers)} cases ({len(servers)} servers measured: {len(compared)} compared"
                + (", the baseline beside each" if beside else f", {len(roots)} baseline(s) alone")
                + f"; x {len(spec.benchmark.test_cases)} test cases x {spec.benchmark.load_levels} load level(s) x {repeats} repeats): "
                f"measuring {duration(measuring / 60)}" + (f" (the baseline beside each: {duration(paired / 60)})" if paired else "")
                + f" + load generator starts {duration(generator / 60)} + {started} {duration(hours[1] - (measuring + generator) / 60)}; "
                f"a first run adds compiling (upper bound) and publishing: {duration(compiling)}")
        estimates.append(ModeEstimate(mode, nodes, hours[0], hours[1], price, text, paired / 60, generator / 60))
    return estimates
