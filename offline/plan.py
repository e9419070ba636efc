"""`make plan STACK=<name>`: what `pulumi up` would create, without AWS, network or the CLI.

Writes build/plan/<stack>/resources.json and manifests/*.yaml and prints a summary. Exits 2
with the full list of config problems when the stack file is invalid.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.pairing.claim_templates import claim_template_name
from components.pairing.serving import PEER_FLOWS
from components.pairing.vllm_variant import endpoint, workload_name
from stackconfig import ConfigError, PlatformSpec, StackSpec
from stackconfig.engines import ENGINES
from stackconfig.server import compiled_set_gib, node_cache_gib
from stackconfig.store import unpinned
from stackconfig.timeline import Figure, PreviousRunError, cold_path, describe, measured_seconds_per_token, study_modes, terms
from stackconfig.versions import KARPENTER, NEURON_HELM_CHART_VERSION, stack_addons

from .collector import paused_then_frozen
from .engine import Recording
from .stacks import PROJECT_DIR, load_stack, run_stack, stack_argument, stack_names


class PlanFolderError(Exception):
    """The stack's plan folder is not a folder of the plan (or preview) folder: nothing is removed
    or written there."""


def clear_plan(out_dir: Path, root: Path) -> None:
    """Remove an earlier plan of this stack. Only a real folder directly inside `root`, the plan (or
    preview) folder, is removed: never a link (rmtree would refuse, or empty where it points), never
    a folder a name climbed to. The name was checked first (stack_argument); this holds whatever
    path reaches here."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise PlanFolderError(f"{out_dir} is a link or a file, not a plan folder: remove it yourself")
    if out_dir.parent != root or out_dir.resolve().parent != root.resolve():
        raise PlanFolderError(f"{out_dir} is not a folder of the plan folder {root}: nothing removed")
    if out_dir.exists():
        shutil.rmtree(out_dir)


def write_plan(recording: Recording, out_dir: Path) -> None:
    """The plan into `out_dir`, which clear_plan has emptied."""
    manifests = out_dir / "manifests"
    manifests.mkdir(parents=True)
    entries = sorted((r.as_plan_entry() for r in recording.resources), key=lambda e: e["urn"])
    (out_dir / "resources.json").write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    for resource in recording.kubernetes_objects():
        manifest = {k: resource.inputs[k] for k in sorted(resource.inputs)}
        metadata = manifest.get("metadata", {})
        scope = metadata.get("namespace", "cluster")
        filename = f"{manifest['kind']}-{scope}-{metadata.get('name', resource.name)}.yaml".lower()
        (manifests / filename).write_text(yaml.safe_dump(manifest, sort_keys=False, width=120))


def platform_lines(platform: PlatformSpec, reference: str | None) -> list[str]:
    cluster = platform.cluster
    zones = ", ".join(cluster.availability_zones) or f"{cluster.availability_zone_count} offering {platform.instance_type}"
    where = f"shared platform {reference}" if reference else "this stack"
    lines = ["Platform:",
             f"  built by           {where}",
             f"  cluster            {platform.cluster_name} (Kubernetes {cluster.kubernetes_version}, supportType "
             f"{cluster.support_type}, {platform.region})",
             f"  zones              {zones}",
             f"  workload identity  {cluster.workload_identity}"]
    if reference is None:
        looked_up = [name for name, pin in stack_addons(cluster.kubernetes_version, cluster.workload_identity).items()
                     if pin.build is None]
        lines.append(f"  versions           Karpenter {KARPENTER.version}, Neuron Helm chart {NEURON_HELM_CHART_VERSION.version}, "
                     f"log retention {cluster.log_retention_days} days")
        if looked_up:
            lines.append(f"  EKS default builds {', '.join(looked_up)}: looked up at deploy; this offline plan answers from "
                         f"offline/data/eks-describe-addon-versions-{cluster.kubernetes_version}.json (not a capture)")
    return lines


def pairing_lines(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[str]:
    lines = ["Pairing:", f"  namespace          {spec.namespace}", f"  node pool          {spec.node_pool_name}", "",
             "Derived sizes:"]
    shape = spec.capacity.shape
    lines.append(f"  instance type      {spec.capacity.instance_type} ({shape.neuron_devices} devices, {spec.capacity.capacity_type})")
    if spec.sequential:
        at_once = "a baseline and one SD configuration" if spec.pairs_fit_together else "one server"
        lines.append(f"  trn2 nodes         {spec.node_count} (study, sequential: the tuner serves {at_once} at a time)")
    else:
        lines.append(f"  trn2 nodes         {spec.node_count} (all {len(spec.variants)} variants served at once)")
    if shape.approx_hourly_usd:
        nodes = shape.approx_hourly_usd * spec.node_count
        if spec.shared:
            cost = f"~${nodes:,.2f}/hour for its trn2 nodes, plus the platform stack's own"
        else:
            platform = spec.platform.approximate_usd_per_hour
            cost = f"~${nodes + platform:,.2f}/hour: trn2 nodes ${nodes:,.2f} + platform ${platform:,.2f}"
        lines.append(f"  cost while up      {cost} (approximate list prices; `make preflight` prices your region)")
    lines.append(f"  device groups      {', '.join(str(s) for s in spec.device_group_sizes)} device(s)")
    for v in spec.variants:
        extra = f" vs {v.baseline}, draft {v.draft}, k={v.num_speculative_tokens}" if v.is_speculative else ""
        lines.append(f"  variant {v.name:<16} {v.role:<9} {v.target}  devices {v.devices}  TP {v.tensor_parallel_size}  "
                     f"LNC {v.serving.logical_neuron_cores}{extra}")
        lines.append(f"    artifacts        {v.artifact_path}")
        lines.append(f"    benchmark        {endpoint(v, spec.namespace)}")
        if len(v.servers) > 1:
            for server in v.servers:
                first = v.servers[0]
                place = ("" if server == first else
                         f", on the node of {workload_name(v, first)}" if server.node == first.node else
                         f", on another node than {workload_name(v, first)}")
                lines.append(f"    server {workload_name(v, server):<28} {server.part}: {server.devices} device(s) "
                             f"(claim {claim_template_name(server.devices)}){place}")
            for flow in PEER_FLOWS.get(ENGINES[v.engine].workload, lambda _: [])(v):
                lines.append(f"    flow             {workload_name(v, _server(v, flow.source))} -> "
                             f"{workload_name(v, _server(v, flow.destination))} gRPC {flow.port} (network policies {flow.name}-*)")
        lines.append(f"    node cache       {node_cache_gib(v)} GiB: weights {sum(m.checkpoint_gib for m in v.prepared_models)} GiB"
                     f" + compiled set {compiled_set_gib(v)} GiB + graphs and caches, a tenth to spare")
        if v.is_speculative and v.draft_max_model_len and v.draft_max_model_len < v.serving.max_model_len:
            lines.append(f"    note             draft compiled for {v.draft_max_model_len} tokens < maxModelLen "
                         f"{v.serving.max_model_len}: longer requests fail on this variant")
    lines += ["", "Prepared models (one Job each, on the preparation nodes):"]
    for model in spec.prepared_models:
        lines.append(f"  {model.job_name:<44} {model.model}@{model.revision} ({model.form}, ~{model.checkpoint_gib} GiB) -> {model.prefix}")
        lines.append(f"  {'':<44} checkpoint {model.checkpoint_bytes:,} bytes ({model.info.checkpoint.source}); "
                     f"local disk {model.disk_gib} GiB")
    if unpinned(spec.prepared_models):
        lines.append(f"  unpinned           {', '.join(unpinned(spec.prepared_models))}: prepared from main as it is when first "
                     f"prepared; pin them with `make lock STACK={spec.stack}`")
    lines += ["", "Cold path (estimates; each step logs the rate it reaches):"]
    for step in cold_path(spec, measured):
        lines.append(f"  {step.name:<10} {describe(step):<32} {step.assumes}")
    lines += terms_lines(spec, measured)
    if spec.study:
        lines += study_lines(spec, measured)
    return lines


def terms_lines(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[str]:
    """The estimate's inputs as a table: term, value, source (stackconfig/timeline.py terms)."""
    rows = [("term", "value", "source")] + [(t.name, t.value, t.source) for t in terms(spec, measured)]
    width = [max(len(row[i]) for row in rows) for i in (0, 1)]
    return ["", "Estimate terms (a previous run's measured TPOT with `--previous`; else published; else assumed):"] + [
        f"  {name:<{width[0]}}  {value:<{width[1]}}  {source}" for name, value, source in rows]


def _server(variant, selector: dict[str, str]):
    """The variant's server a flow's pod selector picks."""
    return next(s for s in variant.servers if selector.get("sd-trn2/server") == s.part)


def study_lines(spec: StackSpec, measured: dict[str, Figure] | None = None) -> list[str]:
    """The study's configurations and what each mode costs (stackconfig/timeline.py study_modes)."""
    study = spec.study
    sd = [v for v in spec.variants if v.is_speculative]
    lines = ["", f"Tuning study ({study.mode}; {len(sd)} SD configurations x {len(spec.benchmark.test_cases)} test cases "
                 f"x {study.repeats} repeats; docs/study.md, 'What it costs'):"]
    targets = [f"TTFT <= {study.ttft_target_ms} ms" if study.ttft_target_ms else "",
               f"TPOT <= {study.tpot_target_ms} ms" if study.tpot_target_ms else ""]
    lines.append(f"  goodput            {' and '.join(t for t in targets if t) or 'no targets (study.ttftTargetMs, study.tpotTargetMs)'}")
    scaled = [workload_name(v, server) for v in spec.tuned_servers for server in v.servers]  # a distributed configuration's two
    lines.append(f"  tuner scales       {', '.join(scaled) or 'nothing: every server is up'}")
    for estimate in study_modes(spec, measured):
        chosen = " (this stack)" if estimate.mode == study.mode else ""
        lines.append(f"  {estimate.mode + chosen:<18} {estimate.nodes} trn2 node(s), {estimate.cost(estimate.first_hours)} first run "
                     f"(compiles, upper bound) / {estimate.cost(estimate.repeat_hours)} once compiled (trn2 node time)")
        lines.append(f"  {'':<18} {estimate.terms}")
    return lines


def summary(spec: StackSpec | PlatformSpec, recording: Recording, notes: list[str],
            measured: dict[str, Figure] | None = None) -> str:
    kind = "platform" if isinstance(spec, PlatformSpec) else ("shared pairing" if spec.shared else "standalone pairing")
    lines = [f"Plan for stack {spec.stack} (project {spec.project}, {kind})", ""]
    if isinstance(spec, PlatformSpec):
        lines += platform_lines(spec, None)
        lines.append(f"  cost while up      ~${spec.approximate_usd_per_hour:,.2f}/hour (system nodes, NAT gateway, control "
                     f"plane; approximate list prices)")
    else:
        lines += platform_lines(spec.platform, spec.platform_reference) + [""] + pairing_lines(spec, measured)
    components = [r for r in recording.resources if r.type.startswith("sdtrn2:")]
    lines += ["", f"Components ({len(components)}):"]
    lines += [f"  {r.type:<40} {r.name}" for r in sorted(components, key=lambda r: (r.type, r.name))]
    counts = Counter(r.type for r in recording.resources)
    lines += ["", f"Resources by type ({len(recording.resources)} in all):"]
    lines += [f"  {count:>4}  {type_}" for type_, count in sorted(counts.items())]
    lines += ["", f"Kubernetes manifests: {len(recording.kubernetes_objects())}"]
    lines += ["", "Stack outputs:"] + [f"  {k}: {v}" for k, v in recording.stack_outputs.items()]
    if notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None, overrides: dict[str, Any] | None = None) -> int:
    """`overrides`: top-level stack keys replaced (stackconfig/source.py load_stack), as the rehearsal's
    --load-generator and --concurrency change the stack's benchmark."""
    with paused_then_frozen():  # a plan lives until written; the process ends soon after (offline/collector.py)
        return plan(argv, overrides)


def plan(argv: list[str] | None, overrides: dict[str, Any] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools plan", description=__doc__)
    parser.add_argument("--stack", required=True, type=stack_argument, help=f"one of: {', '.join(stack_names())}")
    parser.add_argument("--out", type=Path, help="default: build/plan, or build/preview with --preview")
    parser.add_argument("--preview", action="store_true",
                        help="run as `pulumi preview` does: values a provider computes at create time are unknown")
    parser.add_argument("--previous", type=Path, metavar="REPORT_JSON",
                        help="a previous run's report.json or tuning.json (`make results`): its measured time per "
                             "output token replaces the published or assumed one in the estimate")
    args = parser.parse_args(argv)
    root = args.out or PROJECT_DIR / "build" / ("preview" if args.preview else "plan")
    out_dir = root / args.stack
    try:
        # First: a plan that then fails leaves no earlier plan behind to be mistaken for it.
        clear_plan(out_dir, root)
        stack_input = load_stack(args.stack, overrides)
        spec = stack_input.spec()
        measured = previous_run(args.previous, spec)
        recording = run_stack(stack_input, preview=args.preview)
    except (PlanFolderError, FileNotFoundError, ConfigError, PreviousRunError, pulumi.RunError) as error:
        # RunError: what the program refuses at deploy time (no zone offers the instance type).
        print(error, file=sys.stderr)
        return 2
    write_plan(recording, out_dir)
    print(summary(spec, recording, stack_input.notes, measured))
    print(f"\nWrote {out_dir.relative_to(PROJECT_DIR) if out_dir.is_relative_to(PROJECT_DIR) else out_dir}")
    return 0


def previous_run(path: Path | None, spec: StackSpec | PlatformSpec) -> dict[str, Figure] | None:
    """The measured time per output token of the stack's variants in a previous run's report."""
    if path is None:
        return None
    try:
        report = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PreviousRunError(f"--previous {path}: not a JSON report ({error})") from error
    measured = measured_seconds_per_token(report, str(path))
    variants = [v.name for v in spec.variants] if isinstance(spec, StackSpec) else []
    if not set(measured) & set(variants):
        raise PreviousRunError(f"--previous {path}: measures {', '.join(sorted(measured))}, none of the stack's variants "
                               f"({', '.join(variants) or 'a platform stack has none'})")
    return measured


def plan_all(argv: list[str] | None = None) -> int:
    """Plan every stack of stacks/ (CI plans them twice and compares): a line per stack, the
    first failure's exit code."""
    argparse.ArgumentParser(prog="python -m tools plan-all", description="plan every stack into build/plan").parse_args(argv)
    for stack in stack_names():
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["--stack", stack])
        if code != 0:
            return code
        print(f"planned {stack}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
