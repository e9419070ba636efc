"""Parse a stack's raw config into a StackSpec, or fail with every problem at once.

Nothing here touches Pulumi: the input is the project's config as plain data, so the same
function serves `pulumi up`, the offline plan and the tests. Each section's rules are in a
module of its own; this one reads the top level and calls them in order.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..engines import ENGINES
from ..model import PlatformSpec, StackSpec
from ..naming import name_problems
from ..server import node_cache_gib
from ..versions import DEFAULT_KUBERNETES_VERSION
from .benchmark import BENCHMARK_KEYS, _check_dashboard_metrics, _check_metric_dimensions, _parse_benchmark
from .models import _declared_models, _model_revisions
from .platform import (
    _PLATFORM_REFERENCE,
    CAPACITY_KEYS,
    PlatformConfigReader,
    _check_against_platform,
    _parse_capacity,
    _parse_platform,
    _split_namespaces,
    _tags,
)
from .reader import ConfigError, _raise_if, _Section
from .serving import (
    SERVING_KEYS,
    _check_engine_wide,
    _check_placements,
    _engine_problems,
    _parse_serving,
    _parse_variants,
    _resolve_baselines,
    _variant_entries,
)
from .study import STUDY_KEYS, _parse_study

HUGGING_FACE_TOKEN_KEY = "huggingFaceToken"


STACK_KINDS = ("pairing", "platform")


PLATFORM_KEYS = {"stackKind", "cluster", "capacity", "modelStore", "tags"}
"""A platform stack: the cluster and what every pairing on it shares."""


PAIRING_KEYS = {"stackKind", "platform", "cluster", "capacity", "serving", "variants", "benchmark", "modelStore", "tags",
                "modelRevisions", "study",
                "models", HUGGING_FACE_TOKEN_KEY}


PLATFORM_OWNED = ("cluster", "modelStore")
"""Keys a shared pairing must leave to its platform stack."""


def parse_stack_config(project: str, stack: str, config: Mapping[str, Any],
                       read_stack: PlatformConfigReader | None = None,
                       is_secret: Callable[[str], bool] | None = None) -> StackSpec | PlatformSpec:
    """Validate a stack's config into a StackSpec (a pairing) or a PlatformSpec (`stackKind: platform`).

    `config` is what Pulumi hands the program: "namespace:key" -> value, structured values
    already decoded. A shared pairing (`platform: org/project/stack`) reads its platform's stack
    file through `read_stack` and is checked against it. `is_secret` tells whether a "namespace:key"
    was stored encrypted (the engine knows: pulumi.runtime.is_config_secret); given, a token stored
    in plaintext is refused. Raises ConfigError naming every bad key; never registers anything.
    """
    problems: list[tuple[str, str]] = []
    raw, region = _split_namespaces(project, config, problems)
    kind = raw.get("stackKind", "pairing")
    if kind not in STACK_KINDS:  # then read as a pairing: only "platform" selects the platform path
        problems.append(("stackKind", f"{kind!r} is not one of {', '.join(STACK_KINDS)}"))
    for problem in name_problems(stack):
        problems.append(("stack name", problem))
    top = _Section("", raw, problems, PLATFORM_KEYS if kind == "platform" else PAIRING_KEYS)
    tags = _tags(top)
    if kind == "platform":
        platform = _parse_platform(top, project, stack, region, raw, tags)
        _raise_if(stack, problems)
        return platform
    reference = top.string("platform", None, pattern=_PLATFORM_REFERENCE, hint="<organization>/<project>/<stack>")
    if reference:
        platform = _read_platform(top, project, reference, read_stack)
        for key in PLATFORM_OWNED:
            if key in raw:
                top.problem(key, f"belongs to the platform stack {reference}; set it there")
    else:
        platform = _parse_platform(top, project, stack, region, raw, tags)
    kubernetes_version = platform.cluster.kubernetes_version if platform else DEFAULT_KUBERNETES_VERSION
    capacity = _parse_capacity(_Section("capacity", raw.get("capacity"), problems, CAPACITY_KEYS), kubernetes_version)
    if platform is not None:
        _check_against_platform(top, region, capacity, platform, reference)
    models = _declared_models(top)
    serving = _parse_serving(_Section("serving", raw.get("serving"), problems, SERVING_KEYS), capacity, models)
    benchmark = _parse_benchmark(_Section("benchmark", raw.get("benchmark"), problems, BENCHMARK_KEYS), stack, serving,
                                 study_view="study" in raw)
    revisions = _model_revisions(top, raw)
    entries = _variant_entries(top, raw.get("variants"))
    study, grid_entries = _parse_study(_Section("study", raw.get("study"), problems, STUDY_KEYS), models, raw.get("variants")) \
        if "study" in raw else (None, [])
    keys = [key for key, _ in entries + grid_entries]
    variants = _resolve_baselines(_parse_variants(entries + grid_entries, problems, serving, benchmark, models, revisions),
                                  keys, problems, study.drafts_alone if study else None)
    if serving.max_num_seqs and serving.max_model_len:  # else reported: no limits for buckets to fit
        for key, variant in zip(keys, variants):
            if variant.engine in ENGINES:  # else reported: serving.engine
                problems += [(f"{key}.{name}", message) for name, message in ENGINES[variant.engine].check_variant(variant)]
    _check_placements(keys, variants, capacity, problems)
    _check_metric_dimensions(benchmark, variants, problems)
    _check_dashboard_metrics(benchmark, variants, study, problems)
    _check_engine_wide(serving, benchmark, variants, problems)
    gated = sorted({m for v in variants for m in v.gated_models})
    if gated and not raw.get(HUGGING_FACE_TOKEN_KEY):
        top.problem(HUGGING_FACE_TOKEN_KEY, f"is required for the gated model(s) {', '.join(gated)}: pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_...")
    if is_secret is not None and raw.get(HUGGING_FACE_TOKEN_KEY) is not None and not is_secret(f"{project}:{HUGGING_FACE_TOKEN_KEY}"):
        top.problem(HUGGING_FACE_TOKEN_KEY, "is stored in plaintext in the stack file; store it encrypted instead: "
                                            f"pulumi config rm {HUGGING_FACE_TOKEN_KEY} && pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_... "
                                            "(and revoke the token if the file was ever shared)")
    _raise_if(stack, problems)

    spec = StackSpec(
        project=project,
        stack=stack,
        region=region,
        platform=platform,
        platform_reference=reference,
        capacity=capacity,
        serving=serving,
        variants=tuple(variants),
        benchmark=benchmark,
        tags=tags,
        study=study,
    )
    paths = [v.artifact_path for v in spec.variants]
    for path in sorted({p for p in paths if paths.count(p) > 1}):
        problems.append(("variants", f"two variants compile into the same path {path}; they would overwrite each other"))
    shape = spec.capacity.shape
    for key, variant in zip(keys, spec.variants):
        # Each server's cache is an emptyDir on the node's instance store: its share of it, by devices.
        share = shape.allocatable_ephemeral_gib * variant.devices // shape.neuron_devices
        if node_cache_gib(variant) > share:
            problems.append((key, f"its weights and compiled set need {node_cache_gib(variant)} GiB of the node's "
                                                   f"instance store; its share of a {spec.capacity.instance_type} is {share} GiB "
                                                   "(give it more devices: serving.devicesPerVariant)"))
    semantic = [problem for key, variant in zip(keys, spec.variants) for problem in _engine_problems(key, variant)]
    problems += sorted(set(semantic), key=semantic.index)  # a serving-wide setting: once, not per variant
    _raise_if(stack, problems)
    return spec


def _read_platform(top: _Section, project: str, reference: str, read_stack: PlatformConfigReader | None) -> PlatformSpec | None:
    """The shared platform's spec, parsed from its stack file with the same rules."""
    match = _PLATFORM_REFERENCE.match(reference)
    if match["project"] != project:
        top.problem("platform", f"{reference} is a stack of project {match['project']!r}; a platform must be a stack of {project!r}")
        return None
    platform_stack = match["stack"]
    if read_stack is None:
        top.problem("platform", "shared pairings need the platform's stack file, and none can be read here")
        return None
    try:
        platform = parse_stack_config(project, platform_stack, read_stack(platform_stack))
    except FileNotFoundError as error:
        top.problem("platform", f"{reference}: {error}")
        return None
    except ConfigError as error:
        top.problem("platform", f"{reference} has configuration problems of its own: "
                                + "; ".join(f"{key}: {message}" for key, message in error.problems))
        return None
    if not isinstance(platform, PlatformSpec):
        top.problem("platform", f"{reference} is a pairing stack; set `sd-trn2:stackKind: platform` in the platform's stack file")
        return None
    return platform
