"""Parse a stack's raw config into a StackSpec, or fail with every problem at once.

Nothing here touches Pulumi: the input is the project's config as plain data, so the same
function serves `pulumi up`, the offline plan and the tests.
"""
from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import replace
from typing import Any, Callable, Mapping

from benchmark.pod import (
    CLOUDWATCH_DIMENSION_VALUE_MAX,
    DASHBOARD_ROWS,
    DASHBOARD_WIDGETS_PER_TEST_CASE,
    DEFAULT_SAMPLING_PARAMS,
    METRIC_DIMENSION_STYLES,
    MIN_INPUT_TOKENS,
    RESERVED_SAMPLING_KEYS,
    SAMPLE_TEST_CASES,
    STUDY_DASHBOARD_WIDGETS,
    metric_dimensions,
)
from benchmark.podsetup import llmperf_commits
from benchmark.seeds import SEEDS

from .catalog import (
    CAPACITY_TYPES,
    DASHBOARD_MAX_WIDGETS,
    DASHBOARD_METRICS_PER_WIDGET,
    DEVICES_PER_VARIANT,
    INSTANCE_SHAPES,
    KARPENTER_RESERVED_TAGS,
    KIND_NAMES,
    LOG_RETENTION_DAYS,
    LOGICAL_NEURON_CORE_SIZES,
    MIN_KUBERNETES_VERSION,
    MODEL_KINDS,
    MODELS,
    NEWEST_EKS_VERSION,
    SPECULATIVE_TOKENS_RANGE,
    SUPPORT_TYPES,
    TAG_KEY_MAX,
    TAG_VALUE_MAX,
    TEST_CASE_PROMPTS_MAX_BYTES,
    WORKLOAD_IDENTITIES,
    Checkpoint,
    ModelInfo,
    known_regions,
)
from .engines import (
    DEFAULT_ENGINE,
    DFLASH_TENSOR_PARALLEL,
    ENGINES,
    KV_SEGMENT_SIZES,
    METHOD_DRAFT_KIND,
    SINGLE_SHOT_PREFILL_MAX,
    image_sdk,
    neuron_config_fields,
    sdk_text,
)
from .load import GENERATORS, LOAD_KEYS, parse_loads
from .model import (
    BenchmarkSettings,
    CapacitySettings,
    ClusterSettings,
    GridPoint,
    PlatformSpec,
    ServingSettings,
    StackSpec,
    StudySettings,
    Variant,
)
from .naming import name_problems, slug, stack_slug
from .sampling import SAMPLING_PARAMS
from .semantics import engine_failures
from .server import LINUX_CAPABILITIES, NEVER_ADDED, RESERVED_ENVIRONMENT, node_cache_gib
from .store import UNPINNED_REVISION, is_commit
from .versions import AMI_ALIASES, DEFAULT_KUBERNETES_VERSION, EKS_ADDONS, LLMPERF_COMMIT

HUGGING_FACE_TOKEN_KEY = "huggingFaceToken"

UNKNOWN_MODEL = ModelInfo("", gated=False, params_billion=0)
"""Stands in for a model id already reported as unknown, so parsing can go on collecting problems."""
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
_AMI_ALIAS = re.compile(r"^al2023@v\d{8}$")
_AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
REGION_KEY = "aws:region"
# Namespaces besides the project's that a stack file may hold: the AWS provider's own settings
# (profile, assumeRole, ...; the provider validates those) and Pulumi's.
OTHER_NAMESPACES = ("aws", "pulumi")


class ConfigError(ValueError):
    """Invalid stack configuration. `problems` maps each offending key to what is allowed."""

    def __init__(self, stack: str, problems: list[tuple[str, str]]):
        self.stack = stack
        self.problems = problems
        lines = [f"  - {key}: {message}" for key, message in problems]
        super().__init__(
            f"Stack '{stack}' has {len(problems)} configuration problem(s):\n" + "\n".join(lines)
        )


_MISSING = object()


class _Section:
    """Reads one config object, recording problems instead of raising."""

    def __init__(self, path: str, raw: Any, problems: list[tuple[str, str]], allowed: set[str]):
        self.path = path
        self.problems = problems
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            problems.append((path, f"must be an object with keys {sorted(allowed)}, got {type(raw).__name__}"))
            raw = {}
        self.raw = raw
        for key in sorted(set(raw) - allowed, key=str):
            near = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            problems.append((self.key(key), f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}"))

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, message: str) -> None:
        self.problems.append((self.key(name), message))

    def _get(self, name: str, default: Any, kind: type | tuple, kind_name: str, check: Callable[[Any], str | None] | None):
        value = self.raw.get(name, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                self.problem(name, f"is required ({kind_name})")
                return None
            return default
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            self.problem(name, f"must be {kind_name}, got {value!r}")
            return None
        if check is not None:
            message = check(value)
            if message:
                self.problem(name, message)
                return None
        return value

    def integer(self, name: str, default: Any = _MISSING, low: int | None = None, high: int | None = None, allowed: tuple[int, ...] | None = None):
        def check(value: int) -> str | None:
            if allowed is not None and value not in allowed:
                return f"{value} is not one of {', '.join(map(str, allowed))}"
            if low is not None and value < low or high is not None and value > high:
                bounds = f"{low}..{high}" if high is not None else f">= {low}"
                return f"{value} is outside {bounds}"
            return None

        return self._get(name, default, int, "an integer", check)

    def string(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None, pattern: re.Pattern | None = None,
               hint: str = "", check: Callable[[str], str | None] | None = None):
        extra = check

        def check(value: str) -> str | None:
            if choices is not None and value not in choices:
                return f"{value!r} is not one of {', '.join(choices)}"
            if pattern is not None and not pattern.match(value):
                return f"{value!r} is not valid{': ' + hint if hint else ''}"
            return extra(value) if extra else None

        return self._get(name, default, str, "a string", check)

    def boolean(self, name: str, default: Any = _MISSING):
        return self._get(name, default, bool, "true or false", None)

    def listing(self, name: str, default: Any = _MISSING):
        return self._get(name, default, list, "a list", None)

    def mapping(self, name: str, default: Any = _MISSING):
        return self._get(name, default, dict, "an object", None)

    def model(self, name: str, models: Mapping[str, ModelInfo], default: Any = _MISSING):
        return self._get(
            name, default, str, "a Hugging Face model id",
            lambda v: None if v in models else (f"{v!r} is not a known model: declare it under `models` "
                                                f"(README, 'Models'); known: {', '.join(sorted(models))}"),
        )


STACK_KINDS = ("pairing", "platform")
PLATFORM_KEYS = {"stackKind", "cluster", "capacity", "modelStore", "tags"}
"""A platform stack: the cluster and what every pairing on it shares."""
PAIRING_KEYS = {"stackKind", "platform", "cluster", "capacity", "serving", "variants", "benchmark", "modelStore", "tags",
                "modelRevisions", "study",
                "models", HUGGING_FACE_TOKEN_KEY}
PLATFORM_OWNED = ("cluster", "modelStore")
"""Keys a shared pairing must leave to its platform stack."""
CLUSTER_KEYS = {"kubernetesVersion", "supportType", "logRetentionDays", "systemNodeInstanceType", "systemNodeCount",
                "vpcCidr", "availabilityZoneCount", "availabilityZones", "workloadIdentity", "publicAccessCidrs"}
OPEN_TO_ALL = "0.0.0.0/0"
MAX_PUBLIC_ACCESS_CIDRS = 40
"""EKS's limit on a cluster's public-endpoint CIDR blocks (Amazon EKS service quotas: "Public
endpoint access CIDR ranges per cluster")."""
BENCHMARK_KEYS = {"inputTokens", "outputTokens", "requestsPerTestCase", "requestTimeoutSeconds", "testCases",
                  "image", "llmperfCommit", "metricsNamespace", "metricDimensions", "samplingParams", "seed", *LOAD_KEYS}
CAPACITY_KEYS = {"instanceType", "capacityType", "reservationIds", "amiAlias", "rootVolumeGiB", "replacementHeadroomNodes"}
_PLATFORM_REFERENCE = re.compile(r"^(?P<org>[A-Za-z0-9_.-]+)/(?P<project>[A-Za-z0-9_.-]+)/(?P<stack>[A-Za-z0-9_.-]+)$")

PlatformConfigReader = Callable[[str], Mapping[str, Any]]
"""Reads a stack file of this project by stack name: "namespace:key" -> value. Raises
FileNotFoundError when there is none, ConfigError when it cannot be read."""


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
    _check_metric_dimensions(benchmark, variants, problems)
    _check_dashboard_metrics(variants, study, problems)
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


def _check_engine_wide(serving: ServingSettings, benchmark: BenchmarkSettings, variants: list[Variant],
                       problems: list[tuple[str, str]]) -> None:
    """Settings that only some engines read, and engines that decode every request greedily."""
    budgeted = [name for name, engine in ENGINES.items() if engine.prefill_budget]
    if serving.max_num_batched_tokens and not any(v.engine in budgeted for v in variants):
        problems.append(("serving.maxNumBatchedTokens", f"only {' or '.join(budgeted) or 'no'} variants use it; "
                                                        f"no variant runs on {' or '.join(budgeted) or 'such an engine'}"))
    if benchmark.sampling_params.get("temperature") == 0:
        return
    for name, engine in ENGINES.items():
        greedy = [v.name for v in variants if v.engine == name and engine.greedy_only]
        if greedy:
            # Other requests would be decoded greedily all the same and reported as what they asked.
            problems.append(("benchmark.samplingParams.temperature",
                             f"must be 0: the {name} variants ({', '.join(greedy)}) decode greedily ({engine.greedy_only})"))


def _engine_problems(key: str, variant: Variant) -> list[tuple[str, str]]:
    """A server its engine would stop or break (stackconfig/semantics.py), under the config key
    that set the setting: the variant's neuronConfig, else serving.neuronConfig, else the variant
    (a setting the program derives from it). A failure of both starts is reported at the first."""
    found: list[tuple[str, str]] = []
    for failure in engine_failures(variant):
        if failure.setting in variant.neuron_config_extra:
            where = f"{key}.neuronConfig.{failure.setting}"
        elif failure.setting in variant.serving.neuron_config:
            where = f"serving.neuronConfig.{failure.setting}"
        else:
            where = key
        if not any(w == where and failure.error in m for w, m in found):
            found.append((where, f"the {variant.engine} server would fail on the {failure.start}: {failure.error} ({failure.source})"))
    return found


def gated_models(project: str, config: Mapping[str, Any]) -> list[str]:
    """The gated models a stack's config names (target and drafts), read from the raw values
    so that other problems in the config do not hide the answer."""
    raw = {k.partition(":")[2]: v for k, v in config.items() if k.startswith(f"{project}:")}
    named = [(raw.get("serving") or {}).get("target") if isinstance(raw.get("serving"), dict) else None]
    for variant in raw.get("variants") or [] if isinstance(raw.get("variants"), list) else []:
        if isinstance(variant, dict):
            named += [variant.get("target"), variant.get("draft")]
    named += _study_drafts(raw)
    declared = raw.get("models") if isinstance(raw.get("models"), dict) else {}
    gated = {m for m, info in MODELS.items() if info.gated} | {m for m, d in declared.items() if isinstance(d, dict) and d.get("gated") is True}
    return sorted({m for m in named if isinstance(m, str) and m in gated})


def _study_drafts(raw: Mapping[str, Any]) -> list[Any]:
    """The drafts a study's grid names, read from the raw values (a string, or {model: ...})."""
    study = raw.get("study")
    drafts = study.get("drafts") if isinstance(study, dict) else None
    return [d.get("model") if isinstance(d, dict) else d for d in drafts] if isinstance(drafts, list) else []


MODEL_KEYS = {"tokenizerFamily", "gated", "paramsBillion", "kind", "draftFor", "checkpointDtype", "layers", "bf16Modules",
              "checkpointBytes"}
_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _declared_models(top: _Section) -> dict[str, ModelInfo]:
    """`models`: models the catalog does not know, with the facts validation needs."""
    declared = top.mapping("models", {}) or {}
    models: dict[str, ModelInfo] = {}
    for model_id, raw in declared.items():
        s = _Section(f"models.{model_id}", raw, top.problems, MODEL_KEYS)
        if not isinstance(model_id, str) or not _MODEL_ID.match(model_id):
            top.problem(f"models.{model_id}", "model ids look like <organization>/<name> (a Hugging Face repository)")
            continue
        if model_id in MODELS:
            top.problem(f"models.{model_id}", "is already in the catalog (stackconfig/catalog.py); remove it here")
            continue
        kind = s.string("kind", "model", choices=MODEL_KINDS) or "model"
        draft_for = s.listing("draftFor", [])
        for index, target in enumerate(draft_for or []):
            if not isinstance(target, str):
                s.problem(f"draftFor[{index}]", f"{target!r} is not a model id")
        if (kind == "model") == bool(draft_for):
            s.problem("draftFor", "lists the targets a draft head was trained for; full models have none")
        models[model_id] = ModelInfo(
            tokenizer_family=s.string("tokenizerFamily", pattern=re.compile(r"^[a-z0-9_.-]+$"), hint="e.g. llama3") or "",
            gated=s.boolean("gated"),
            params_billion=s._get("paramsBillion", _MISSING, (int, float), "a number of billions",
                                  lambda v: None if 0 < v <= 2000 else f"{v} is outside 0..2000") or 0,
            checkpoint_dtype=s.string("checkpointDtype", "bf16", choices=("bf16", "fp8")) or "bf16",
            kind=kind,
            draft_for=tuple(d for d in draft_for or [] if isinstance(d, str)),
            layers=s.integer("layers", 0, low=1, high=1000) or 0,
            bf16_modules=_module_names(s),
            checkpoint=_declared_checkpoint(s),
        )
    known = {**MODELS, **models}
    for model_id, info in models.items():
        for target in info.draft_for:
            if target not in known:
                top.problem(f"models.{model_id}.draftFor", f"{target!r} is not a known model")
    return known


def _declared_checkpoint(s: _Section) -> Checkpoint | None:
    """A declared model's size, which every disk and time figure derives from: required, never guessed."""
    size = s._get("checkpointBytes", _MISSING, int, "the checkpoint's bytes: metadata.total_size in its "
                  "model.safetensors.index.json at the revision you prepare", lambda v: None if v > 0 else f"{v} is not positive")
    return Checkpoint(size, f"declared in the stack (models.{s.path.split('.', 1)[1]}.checkpointBytes)") if size else None


def _model_revisions(top: _Section, raw: dict) -> dict[str, str]:
    """`modelRevisions`: the hub commit each model is prepared at (a model not named is prepared
    from `main` once, and the commit recorded: stackconfig/store.py). Only models the stack serves."""
    revisions = top.mapping("modelRevisions", {}) or {}
    serving, variants = raw.get("serving"), raw.get("variants")
    candidates = [serving.get("target")] if isinstance(serving, dict) else []
    for variant in variants if isinstance(variants, list) else []:
        if isinstance(variant, dict):
            candidates += [variant.get("target"), variant.get("draft")]
    candidates += _study_drafts(raw)
    named = {m for m in candidates if isinstance(m, str)}
    for model, revision in revisions.items():
        if model not in named:
            top.problem(f"modelRevisions.{model}", "is not a model this stack serves (serving.target, a variant's target or draft)")
        elif not isinstance(revision, str) or not is_commit(revision):
            top.problem(f"modelRevisions.{model}", f"{revision!r} is not a hub commit: 40 lowercase hex characters")
    return {m: r for m, r in revisions.items() if isinstance(r, str) and is_commit(r)}


def _module_names(s: _Section) -> tuple[str, ...]:
    """`bf16Modules`: module names as NxD Inference's modules_to_not_convert takes them."""
    names = s.listing("bf16Modules", []) or []
    for index, name in enumerate(names):
        if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.]+$", name):
            s.problem(f"bf16Modules[{index}]", f"{name!r} is not a module name (e.g. lm_head, layers.0.self_attn)")
    return tuple(n for n in names if isinstance(n, str))


def _raise_if(stack: str, problems: list[tuple[str, str]]) -> None:
    if problems:
        raise ConfigError(stack, problems)


def _tags(top: _Section) -> dict[str, str]:
    """Extra tags for every AWS resource and the trn2 instances (through the EC2NodeClass)."""
    tags = top.mapping("tags", {}) or {}
    for key, value in tags.items():
        problem = _tag_problem(key, value)
        if problem:
            top.problem(f"tags.{key}", problem)
    return {k: v for k, v in tags.items() if not _tag_problem(k, v)}


def _tag_problem(key: Any, value: Any) -> str | None:
    if not isinstance(key, str) or not isinstance(value, str) or not key:
        return "tags map non-empty strings to strings"
    if key.lower().startswith("aws:"):
        return "tag keys starting with aws: are reserved by AWS"
    if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
        return f"AWS allows keys of {TAG_KEY_MAX} and values of {TAG_VALUE_MAX} characters"
    if any(key.startswith(reserved) for reserved in KARPENTER_RESERVED_TAGS):
        return f"Karpenter reserves it (the EC2NodeClass refuses tags matching {', '.join(KARPENTER_RESERVED_TAGS)})"
    return None


def _parse_platform(top: _Section, project: str, stack: str, region: str, raw: Mapping[str, Any],
                    tags: dict[str, str]) -> PlatformSpec:
    """The platform part of a stack's own config (a platform stack, or a standalone pairing)."""
    problems = top.problems
    capacity = _Section("capacity", raw.get("capacity"), [], CAPACITY_KEYS)  # checked in full by the pairing
    if raw.get("stackKind") == "platform":
        capacity = _Section("capacity", raw.get("capacity"), problems, {"instanceType"})
    model_store = _Section("modelStore", raw.get("modelStore"), problems, {"retainOnDestroy"})
    return PlatformSpec(
        project=project,
        stack=stack,
        region=region,
        cluster=_parse_cluster(_Section("cluster", raw.get("cluster"), problems, CLUSTER_KEYS), region),
        instance_type=capacity.string("instanceType", "trn2.48xlarge", choices=tuple(INSTANCE_SHAPES)) or "trn2.48xlarge",
        retain_model_store=model_store.boolean("retainOnDestroy", False),
        tags=tags,
    )


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


def _check_against_platform(top: _Section, region: str, capacity: CapacitySettings, platform: PlatformSpec,
                            reference: str | None) -> None:
    """What a pairing needs from the platform it runs on."""
    where = f"the platform {reference}" if reference else "this stack"
    if reference and region and platform.region != region:
        top.problem(REGION_KEY, f"{region} differs from {where}'s {platform.region}; a pairing runs in its platform's region")
    if reference and capacity.instance_type != platform.instance_type:
        top.problem("capacity.instanceType", f"{capacity.instance_type} differs from {platform.instance_type}, the instance type "
                                             f"{where}'s zones were chosen for; set capacity.instanceType there")
    if capacity.reservation_ids and not platform.cluster.availability_zones:
        # A reservation launches only in its own AZ, and Karpenter only into the subnets the
        # network created: the AZ must be named so the network includes it (make preflight checks it).
        key = "capacity.reservationIds" if reference else "cluster.availabilityZones"
        top.problem(key, f"a capacity reservation needs {where}'s cluster.availabilityZones to list its availability zone")


def _split_namespaces(project: str, config: Mapping[str, Any], problems: list[tuple[str, str]]) -> tuple[dict[str, Any], str]:
    """The project's keys (without "project:") and the region; every other key must belong to
    a namespace this program or its providers read, so a misspelled namespace is named."""
    raw: dict[str, Any] = {}
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        if namespace == project and name:
            raw[name] = value
        elif namespace not in OTHER_NAMESPACES or not name:
            near = difflib.get_close_matches(namespace, [project, *OTHER_NAMESPACES], n=1)
            hint = f" (did you mean {near[0]}:{name}?)" if near else ""
            problems.append((str(key), f"unknown config namespace {namespace!r}{hint}; this program reads {project}:<key> and {REGION_KEY}"))
    region = config.get(REGION_KEY)
    regions = known_regions()
    if region is None:
        problems.append((REGION_KEY, f"is required: the region to deploy to (`pulumi config set {REGION_KEY} us-east-2`); README, 'Regions'"))
    elif not isinstance(region, str) or region not in regions:
        problems.append((REGION_KEY, f"{region!r} is not an AWS region with EKS; known: {', '.join(regions)}"))
    return raw, region if isinstance(region, str) else ""


def _vpc_cidr(value: str) -> str | None:
    """A /16 inside 10.0.0.0/8: private subnets take a /19 per zone, public ones a /24."""
    try:
        network = ipaddress.ip_network(value)
    except ValueError:
        return f"{value!r} is not a CIDR block (e.g. 10.64.0.0/16)"
    if network.prefixlen != 16 or not network.subnet_of(ipaddress.ip_network("10.0.0.0/8")):
        return f"{value!r} is not a /16 inside 10.0.0.0/8 (e.g. 10.64.0.0/16)"
    return None


def _parse_cluster(s: _Section, region: str) -> ClusterSettings:
    version = s.string("kubernetesVersion", DEFAULT_KUBERNETES_VERSION, pattern=re.compile(r"^1\.\d+$"), hint='a "1.N" version')
    minor = tuple(int(p) for p in version.split(".")) if version else None
    if minor and minor < MIN_KUBERNETES_VERSION:
        s.problem("kubernetesVersion", f"{version} is below 1.34, the first version the Neuron DRA driver supports")
    elif minor and minor > NEWEST_EKS_VERSION:
        s.problem("kubernetesVersion", f"{version} is above {'.'.join(map(str, NEWEST_EKS_VERSION))}, the newest EKS version this program knows")
    elif version and version not in EKS_ADDONS:
        s.problem("kubernetesVersion", f"no EKS add-on builds are pinned for {version} (stackconfig/versions.py EKS_ADDONS; "
                                       f"pinned: {', '.join(EKS_ADDONS)}); `aws eks describe-addon-versions --kubernetes-version {version}` lists them")
    zones = s.listing("availabilityZones", [])
    for index, zone in enumerate(zones or []):
        if not isinstance(zone, str) or not _AVAILABILITY_ZONE.match(zone) or (region and not zone.startswith(region)):
            s.problem(f"availabilityZones[{index}]", f"{zone!r} is not an availability zone of {region or 'the region'} (e.g. {region or 'us-east-2'}a)")
    named = [zone for zone in zones or [] if isinstance(zone, str)]  # the others are reported above
    if len(set(named)) != len(named):
        s.problem("availabilityZones", "lists a zone twice")
    if zones and len(zones) < 2:
        s.problem("availabilityZones", "needs at least two zones: EKS requires subnets in two availability zones")
    zone_count = s.integer("availabilityZoneCount", len(zones) if zones else 2, low=2, high=6)
    if zones and zone_count != len(zones):
        s.problem("availabilityZoneCount", f"{zone_count} disagrees with the {len(zones)} availabilityZones listed; omit it")
    return ClusterSettings(
        kubernetes_version=version or "",
        system_node_instance_type=s.string("systemNodeInstanceType", "m7i.xlarge"),
        system_node_count=s.integer("systemNodeCount", 2, low=2, high=10),
        vpc_cidr=s.string("vpcCidr", "10.64.0.0/16", check=_vpc_cidr) or "10.64.0.0/16",
        availability_zone_count=zone_count or 2,
        availability_zones=tuple(zones or ()),
        workload_identity=s.string("workloadIdentity", "irsa", choices=WORKLOAD_IDENTITIES) or "irsa",
        support_type=s.string("supportType", "STANDARD", choices=SUPPORT_TYPES) or "STANDARD",
        log_retention_days=s.integer("logRetentionDays", 14, allowed=LOG_RETENTION_DAYS) or 14,
        public_access_cidrs=_public_access_cidrs(s),
    )


def _public_access_cidrs(s: _Section) -> tuple[str, ...]:
    """Who may reach the public Kubernetes API endpoint: IPv4 blocks, default everyone (as EKS's own
    default; preflight warns). The machine that runs `pulumi up` and kubectl must be inside."""
    cidrs = s.listing("publicAccessCidrs", [OPEN_TO_ALL])
    if cidrs is None:
        return (OPEN_TO_ALL,)
    if not cidrs:
        s.problem("publicAccessCidrs", f"lists no block: nothing, not even `pulumi up`, could reach the cluster (omit it for {OPEN_TO_ALL})")
    if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        s.problem("publicAccessCidrs", f"lists {len(cidrs)} blocks; EKS allows {MAX_PUBLIC_ACCESS_CIDRS}")
    for index, cidr in enumerate(cidrs):
        try:
            network = ipaddress.ip_network(cidr) if isinstance(cidr, str) else None
        except ValueError as error:
            s.problem(f"publicAccessCidrs[{index}]", f"{cidr!r} is not an IPv4 CIDR block ({error}; e.g. 203.0.113.0/24)")
            continue
        if not isinstance(network, ipaddress.IPv4Network):
            s.problem(f"publicAccessCidrs[{index}]", f"{cidr!r} is not an IPv4 CIDR block (the cluster is IPv4-only; e.g. 203.0.113.0/24)")
    return tuple(c for c in cidrs if isinstance(c, str))


def _parse_capacity(s: _Section, kubernetes_version: str) -> CapacitySettings:
    """The pairing's trn2 capacity. The AMI alias defaults to the release pinned for the cluster's
    Kubernetes version (stackconfig/versions.py AMI_ALIASES)."""
    instance_type = s.string("instanceType", "trn2.48xlarge", choices=tuple(INSTANCE_SHAPES))
    capacity_type = s.string("capacityType", "on-demand", choices=CAPACITY_TYPES)
    reservations = s.listing("reservationIds", [])
    for index, rid in enumerate(reservations or []):
        if not isinstance(rid, str) or not _RESERVATION_ID.match(rid):
            s.problem(f"reservationIds[{index}]", f"{rid!r} is not a capacity reservation id (cr-...)")
    if reservations and capacity_type != "reserved":
        s.problem("capacityType", 'must be "reserved" when reservationIds are set (Karpenter launches into reservations only for reserved capacity)')
    if capacity_type == "reserved" and not reservations:
        s.problem("reservationIds", 'are required when capacityType is "reserved"')
    return CapacitySettings(
        instance_type=instance_type or "trn2.48xlarge",
        capacity_type=capacity_type or "on-demand",
        reservation_ids=tuple(reservations or ()),
        ami_alias=s.string("amiAlias", AMI_ALIASES.get(kubernetes_version, AMI_ALIASES[DEFAULT_KUBERNETES_VERSION]).version,
                           pattern=_AMI_ALIAS, hint="al2023@vYYYYMMDD, pinned (not @latest)"),
        root_volume_gib=s.integer("rootVolumeGiB", 200, low=100, high=2000),
        replacement_headroom_nodes=s.integer("replacementHeadroomNodes", 0, low=0, high=1),
    )


_IMAGE = re.compile(r"^(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
                    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")


def _pinned_image(value: str) -> str | None:
    """An image reference with a tag other than `latest`, or a digest: the README promises
    every image is pinned (a moving tag would change what a stack runs without a diff)."""
    match = _IMAGE.match(value)
    if not match:
        return f"{value!r} is not an image reference (registry/repository:tag)"
    if not match["digest"] and (not match["tag"] or match["tag"] == "latest"):
        return f"{value!r} is not pinned: give a version tag (not latest) or a @sha256 digest"
    return None


SERVING_KEYS = {"engine", "image", "target", "devicesPerVariant", "logicalNeuronCores", "tensorParallelSize", "maxNumSeqs",
                "maxModelLen", "maxNumBatchedTokens", "nodeCachePath", "neuronConfig", "environment", "seccompProfile",
                "runAs", "addCapabilities"}
RUN_AS_KEYS = {"user", "group"}
_KUBERNETES_ID_MAX = 2 ** 31 - 1
"""Kubernetes' bound on runAsUser, runAsGroup and fsGroup (API validation: 0 to 2147483647)."""
_ENVIRONMENT_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def _parse_serving(s: _Section, capacity: CapacitySettings, models: Mapping[str, ModelInfo]) -> ServingSettings:
    devices = s.integer("devicesPerVariant", allowed=DEVICES_PER_VARIANT)
    node_devices = INSTANCE_SHAPES[capacity.instance_type].neuron_devices
    if devices and devices > node_devices:
        s.problem("devicesPerVariant", f"{devices} devices do not fit on a {capacity.instance_type} ({node_devices} devices)")
    lnc = s.integer("logicalNeuronCores", 2, allowed=LOGICAL_NEURON_CORE_SIZES)
    engine = s.string("engine", DEFAULT_ENGINE, choices=tuple(ENGINES)) or DEFAULT_ENGINE
    if engine not in ENGINES and "engine" not in s.raw:
        s.problem("engine", f"is not given, and the default {engine!r} is not a registered engine: {', '.join(ENGINES) or 'none'}")
    max_model_len = s.integer("maxModelLen", low=128, high=131072)
    batched = s.integer("maxNumBatchedTokens", None, low=128)
    if batched is not None and max_model_len:
        _check_batched_tokens(s, batched, max_model_len)
    serving = ServingSettings(
        engine=engine,
        image=s.string("image", None, check=_pinned_image),
        target=s.model("target", models),
        devices_per_variant=devices or 0,
        logical_neuron_cores=lnc or 2,
        max_num_seqs=s.integer("maxNumSeqs", low=1, high=256),
        max_model_len=max_model_len,
        neuron_config=_neuron_config(s, "neuronConfig", engine) if engine in ENGINES else {},
        environment=_environment(s),
        max_num_batched_tokens=batched,
        seccomp_runtime_default=s.string("seccompProfile", "RuntimeDefault", choices=("RuntimeDefault", "unset")) != "unset",
        run_as=_run_as(s),
        add_capabilities=_added_capabilities(s),
    )
    if "nodeCachePath" in s.raw:
        s.problem("nodeCachePath", "is no longer used: each server's cache is an emptyDir on the node's instance store, "
                                   "not a host path (README, 'Security'); remove it")
    tp = s.integer("tensorParallelSize", None, low=1)
    if tp is not None and devices and lnc and tp != serving.tensor_parallel_size:
        s.problem("tensorParallelSize", f"{tp} does not match devicesPerVariant x (8 / logicalNeuronCores) = {devices} x {8 // lnc} = {serving.tensor_parallel_size}; omit it to derive it")
    return serving


def _run_as(s: _Section) -> tuple[int, int] | None:
    """serving.runAs: a user and a group, neither root (0), for a non-root server."""
    if s.raw.get("runAs") is None:
        return None
    run_as = _Section(s.key("runAs"), s.raw["runAs"], s.problems, RUN_AS_KEYS)
    user = run_as.integer("user", low=1, high=_KUBERNETES_ID_MAX)
    group = run_as.integer("group", low=1, high=_KUBERNETES_ID_MAX)
    return (user, group) if user and group else None


def _added_capabilities(s: _Section) -> tuple[str, ...]:
    """serving.addCapabilities: Linux capability names, each once, never one the servers may not keep."""
    names = s.listing("addCapabilities", []) or []
    for index, name in enumerate(names):
        key = f"addCapabilities[{index}]"
        if isinstance(name, str) and name.startswith("CAP_"):
            s.problem(key, f"{name!r}: name it without the CAP_ prefix, as Kubernetes does ({name[4:]})")
        elif not isinstance(name, str) or name not in LINUX_CAPABILITIES:
            near = difflib.get_close_matches(str(name), sorted(LINUX_CAPABILITIES), n=1)
            s.problem(key, f"{name!r} is not a Linux capability{f' (did you mean {near[0]}?)' if near else ''}")
        elif name in NEVER_ADDED:
            s.problem(key, f"{name}: {NEVER_ADDED[name]}")
    repeated = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    if repeated:
        s.problem("addCapabilities", f"names {', '.join(repeated)} twice")
    return tuple(n for n in names if isinstance(n, str))


def _check_batched_tokens(s: _Section, batched: int, max_model_len: int) -> None:
    """The plugin's prefill rule (stackconfig/engines/base.py): one shot up to 16384 tokens, else
    segmented, with the budget one of the supported KV segment sizes."""
    if batched < max_model_len and batched not in KV_SEGMENT_SIZES:
        s.problem("maxNumBatchedTokens", f"{batched} is below maxModelLen {max_model_len}, so prefill is segmented and the budget "
                                         f"must be a KV segment size: {', '.join(map(str, KV_SEGMENT_SIZES))}")
    if batched >= max_model_len > SINGLE_SHOT_PREFILL_MAX:
        s.problem("maxNumBatchedTokens", f"single-shot prefill is limited to {SINGLE_SHOT_PREFILL_MAX} tokens; "
                                         f"use a KV segment size: {', '.join(map(str, KV_SEGMENT_SIZES))}")


def _neuron_config(s: _Section, key: str, engine: str) -> dict[str, Any]:
    """Engine settings given in config: only keys the engine defines (its derived field list in
    stackconfig/data), and none the program derives itself. Both engines silently ignore keys
    they do not know (NxDI only warns), so a typo is caught here or never."""
    config = s.mapping(key, {}) or {}
    known, derived = neuron_config_fields(engine), ENGINES[engine].program_keys
    for name in config:
        if name in derived:
            s.problem(f"{key}.{name}", f"is set by the program from typed config for {engine}; remove it")
        elif name not in known:
            near = difflib.get_close_matches(str(name), sorted(known), n=1)
            s.problem(f"{key}.{name}", f"is not a {engine} neuron config field{f' (did you mean {near[0]}?)' if near else ''}")
    for name, why in ENGINES[engine].refused_neuron_config(config).items():
        s.problem(f"{key}.{name}", why)
    return {k: v for k, v in config.items() if k in known and k not in derived}


def _environment(s: _Section) -> dict[str, str]:
    environment = s.mapping("environment", {}) or {}
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENVIRONMENT_NAME.match(name) or not isinstance(value, str):
            s.problem(f"environment.{name}", "must map an UPPER_CASE variable name to a string")
        elif name in RESERVED_ENVIRONMENT:
            s.problem(f"environment.{name}", "is set by the program (stackconfig/server.py)")
    return {k: v for k, v in environment.items() if isinstance(v, str) and k not in RESERVED_ENVIRONMENT}


def _parse_benchmark(s: _Section, stack: str, serving: ServingSettings, study_view: bool = False) -> BenchmarkSettings:
    """`study_view`: the stack has a study, whose dashboard view adds a header and a widget per
    test case (benchmark/pod.py STUDY_DASHBOARD_WIDGETS) to the header and rows every stack has."""
    test_cases = s.mapping("testCases", dict(SAMPLE_TEST_CASES))
    for case_slug, prompt in (test_cases or {}).items():
        if not isinstance(case_slug, str) or not _DNS_LABEL.match(case_slug):
            s.problem(f"testCases.{case_slug}", "test case names must be lowercase DNS labels (they become the TestCase dimension)")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            s.problem(f"testCases.{case_slug}", "prompt must be a non-empty string, or null for LLMPerf's own sonnets")
    if test_cases == {}:
        s.problem("testCases", "needs at least one test case")
    header, per_case = STUDY_DASHBOARD_WIDGETS if study_view else (0, 0)
    per_test_case = DASHBOARD_WIDGETS_PER_TEST_CASE + per_case
    most = (DASHBOARD_MAX_WIDGETS - 1 - header) // per_test_case
    if test_cases and len(test_cases) > most:
        view = (" with the study's view", " with a study") if study_view else ("", "")
        s.problem("testCases", f"{len(test_cases)} test cases need {1 + header + len(test_cases) * per_test_case} dashboard "
                               f"widgets{view[0]}; CloudWatch allows {DASHBOARD_MAX_WIDGETS} (at most {most} test cases{view[1]})")
    prompt_bytes = sum(len(p.encode()) for p in (test_cases or {}).values() if isinstance(p, str))
    if prompt_bytes > TEST_CASE_PROMPTS_MAX_BYTES:
        s.problem("testCases", f"prompts total {prompt_bytes} bytes; the benchmark's ConfigMap (1 MiB at most) leaves "
                               f"{TEST_CASE_PROMPTS_MAX_BYTES} for them")
    input_tokens = s.integer("inputTokens", low=1)
    if input_tokens and input_tokens < MIN_INPUT_TOKENS:  # why: benchmark/pod.py MIN_INPUT_TOKENS
        s.problem("inputTokens", f"{input_tokens} is below {MIN_INPUT_TOKENS}: LLMPerf's prompt template alone is longer, and it would never start")
    output_tokens = s.integer("outputTokens", low=2)
    if input_tokens and output_tokens and serving.max_model_len and input_tokens + output_tokens > serving.max_model_len:
        s.problem("outputTokens", f"inputTokens + outputTokens = {input_tokens + output_tokens} exceeds serving.maxModelLen {serving.max_model_len}")
    load_generator, loads = parse_loads(s, serving.max_num_seqs, study_view)
    namespace = s.string("metricsNamespace", f"LLMPerf/{stack_slug(stack)}", pattern=re.compile(r"^(?!AWS/)[A-Za-z0-9._/#:-]{1,255}$"), hint="a CloudWatch namespace: 1 to 255 letters, digits and . _ / # : -, not starting with AWS/")
    return BenchmarkSettings(
        input_tokens=input_tokens or 0,
        output_tokens=output_tokens or 0,
        load_generator=load_generator,
        loads=loads,
        requests_per_test_case=s.integer("requestsPerTestCase", 10, low=1, high=1000),
        request_timeout_s=s.integer("requestTimeoutSeconds", 3600, low=60),
        test_cases=dict(test_cases or {}),
        image=s.string("image", GENERATORS[load_generator].image, check=_pinned_image),
        llmperf_commit=s.string("llmperfCommit", LLMPERF_COMMIT.version, choices=llmperf_commits()) or LLMPERF_COMMIT.version,
        metrics_namespace=namespace or "",
        sampling_params=_sampling_params(s, output_tokens),
        seed=s.string("seed", None, choices=tuple(SEEDS)),
        metric_dimensions=s.string("metricDimensions", "names", choices=METRIC_DIMENSION_STYLES) or "names",
    )


def _check_metric_dimensions(benchmark: BenchmarkSettings, variants: list[Variant], problems: list[tuple[str, str]]) -> None:
    """The sample's values name a role, not a variant, and a prompt, not a test case: each must
    still name one (variant, test case), within CloudWatch's length (benchmark/pod.py)."""
    if benchmark.metric_dimensions != "eks-sample":
        return
    roles = [v.role for v in variants]
    if sorted(roles) != ["baseline", "sd"]:
        problems.append(("benchmark.metricDimensions", "eks-sample publishes Variant SD or Base, so it needs exactly one baseline "
                                                       f"and one sd variant; this stack has {len(variants)} variants"))
    values = metric_dimensions("eks-sample", [], benchmark.test_cases)["TestCase"]
    for case, value in values.items():
        if len(value) > CLOUDWATCH_DIMENSION_VALUE_MAX:
            problems.append((f"benchmark.testCases.{case}", f"with metricDimensions eks-sample the prompt is the TestCase value, "
                                                            f"at most {CLOUDWATCH_DIMENSION_VALUE_MAX} characters; it has {len(value)}"))
    for value in sorted({v for v in values.values() if list(values.values()).count(v) > 1}):
        cases = [c for c, v in values.items() if v == value]
        problems.append(("benchmark.testCases", f"{', '.join(cases)} publish under the same TestCase {value!r} with metricDimensions eks-sample"))


def _sampling_params(s: _Section, output_tokens: int | None) -> dict[str, Any]:
    """Each key known, of its type and in vLLM's range (stackconfig/sampling.py); min_tokens at
    most the max_tokens the benchmark sends (outputTokens)."""
    params = s.mapping("samplingParams", dict(DEFAULT_SAMPLING_PARAMS)) or {}
    reserved = sorted(set(params) & set(RESERVED_SAMPLING_KEYS), key=str)
    for key in reserved:
        s.problem(f"samplingParams.{key}", f"is set by the benchmark itself; not allowed here ({', '.join(RESERVED_SAMPLING_KEYS)})")
    known = _Section(s.key("samplingParams"), {k: v for k, v in params.items() if k not in reserved}, s.problems,
                     set(SAMPLING_PARAMS))
    for key, value in known.raw.items():
        problem = SAMPLING_PARAMS[key].problem(value) if key in SAMPLING_PARAMS else None
        if problem:
            known.problem(key, problem)
    min_tokens = params.get("min_tokens")
    if output_tokens and type(min_tokens) is int and min_tokens > output_tokens:
        known.problem("min_tokens", f"{min_tokens} exceeds outputTokens {output_tokens}, the max_tokens of every request "
                                    "(vLLM refuses min_tokens above max_tokens)")
    return dict(params)


VARIANT_KEYS = {"name", "role", "target", "baseline", "draft", "numSpeculativeTokens", "draftMaxModelLen", "speculationMethod",
                "quantization", "weightsPath", "engine", "image", "neuronConfig"}
SPECULATION_KEYS = ("draft", "numSpeculativeTokens", "draftMaxModelLen", "speculationMethod")


def _variant_entries(top: _Section, raw: Any) -> list[tuple[str, Any]]:
    """The hand-written variants, each with the key its problems are reported under."""
    if not isinstance(raw, list) or not raw:
        top.problem("variants", "must be a non-empty list of variants (at least one baseline and one sd)")
        return []
    return [(f"variants[{index}]", entry) for index, entry in enumerate(raw)]


STUDY_KEYS = {"mode", "repeats", "drafts", "windows", "baseline", "draftMaxModelLen", "ttftTargetMs", "tpotTargetMs",
              "timeDraftsAlone"}
STUDY_MODES = ("sequential", "parallel")
STUDY_DRAFT_KEYS = {"model", "label"}
MAX_STUDY_REPEATS = 10


def _parse_study(s: _Section, models: Mapping[str, ModelInfo], hand_written: Any) -> tuple[StudySettings, list[tuple[str, Any]]]:
    """`study`: the tuner's mode and repeats, and a grid of drafts x windows, each point
    expanded into an SD variant entry that is then parsed like a hand-written one (its problems
    under `study(draft ..., window ...)`). The variant is named <label>-k<window>; the label is
    the draft's name slugged, or `label` where that name would be too long. With
    `timeDraftsAlone`, each plain draft is also served alone (<label>-alone), as a baseline
    compared with the stack's. Every added variant names its baseline: `study.baseline`, or the
    one hand-written baseline."""
    mode = s.string("mode", "sequential", choices=STUDY_MODES) or "sequential"
    alone = s.boolean("timeDraftsAlone", False)
    repeats = s.integer("repeats", 3, low=1, high=MAX_STUDY_REPEATS) or 3
    targets = [s.integer(key, None, low=1, high=600_000) for key in ("ttftTargetMs", "tpotTargetMs")]
    low, high = SPECULATIVE_TOKENS_RANGE
    given = s.listing("windows", []) or []

    def is_window(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    windows = [w for w in given if is_window(w)]
    for index, window in enumerate(given):
        if not is_window(window):
            s.problem(f"windows[{index}]", f"{window!r} is not a speculative window in {low}..{high}")
    if len(set(windows)) != len(windows):
        s.problem("windows", "lists a window more than once")
    drafts = s.listing("drafts", []) or []
    if bool(drafts) != bool(s.raw.get("windows")):
        s.problem("drafts" if not drafts else "windows", "drafts and windows make the grid together: give both, or neither "
                                                           "(the study then measures the hand-written variants)")
    entries: list[tuple[str, Any]] = []
    grid: list[GridPoint] = []
    labels: list[str] = []
    drafts_alone: dict[str, str] = {}
    baselines = [v.get("name") for v in hand_written if isinstance(v, dict) and v.get("role") == "baseline"] \
        if isinstance(hand_written, list) else []
    baseline = s.string("baseline", None) or (baselines[0] if len(baselines) == 1 else None)
    if drafts and baseline is None and len(baselines) > 1:
        s.problem("baseline", f"is required when there are several baselines: {', '.join(map(str, baselines))}")
    for index, raw in enumerate(drafts):
        entry = _Section(s.key(f"drafts[{index}]"), raw if isinstance(raw, dict) else {"model": raw}, s.problems, STUDY_DRAFT_KEYS)
        model = entry.model("model", models)
        if model is None:
            continue
        label = entry.string("label", slug(model), pattern=_DNS_LABEL, hint="a lowercase DNS label") or slug(model)
        points = {f"{label}-k{w}": w for w in windows}
        alone_name = f"{label}-alone" if alone and models[model].kind == "model" and windows else None
        longest = max([*points, *([alone_name] if alone_name else [])], key=len, default=label)
        if not _DNS_LABEL.match(longest):
            entry.problem("label" if "label" in entry.raw else "model",
                          f"the variants' names ({longest!r}) would not be DNS labels of at most 32 characters: "
                          f"give this draft a short label ({{model: {model}, label: ...}})")
        if label in labels:
            entry.problem("label", f"{label!r} labels another draft too; give each a label of its own")
        labels.append(label)
        for name, window in points.items():
            variant = {"name": name, "role": "sd", "draft": model, "numSpeculativeTokens": window, "baseline": baseline}
            if s.raw.get("draftMaxModelLen") is not None:
                variant["draftMaxModelLen"] = s.raw["draftMaxModelLen"]
            entries.append((f"study(draft {model}, window {window})", variant))
            grid.append(GridPoint(name, model, window))
        if alone_name:
            drafts_alone[alone_name] = model
            entries.append((f"study(draft {model}, alone)", {"name": alone_name, "role": "baseline", "target": model,
                                                              "baseline": baseline}))
    return StudySettings(mode=mode, repeats=repeats, grid=tuple(grid), drafts_alone=drafts_alone,
                         ttft_target_ms=targets[0], tpot_target_ms=targets[1]), entries


def _check_dashboard_metrics(variants: list[Variant], study: StudySettings | None, problems: list[tuple[str, str]]) -> None:
    """No dashboard widget may query more than CloudWatch draws: the stack's rows put every
    variant in each widget, once per metric of the widget; a study's view queries each compared
    configuration and its baseline and divides them."""
    widest = max(len(metrics) for row in DASHBOARD_ROWS for metrics, _ in row) * len(variants)
    compared = [v for v in variants if v.is_speculative and v.baseline]
    study_view = 2 * len(compared) + len({v.baseline for v in compared}) if study is not None else 0
    needed = max(widest, study_view)
    if needed > DASHBOARD_METRICS_PER_WIDGET:
        key = "study" if study is not None else "variants"
        problems.append((key, f"{len(variants)} variants ({len(compared)} SD configurations) need {needed} metrics and expressions "
                              f"in one dashboard widget; CloudWatch allows {DASHBOARD_METRICS_PER_WIDGET}: measure fewer "
                              "configurations at once"))


def _parse_variants(entries: list[tuple[str, Any]], problems: list, serving: ServingSettings, benchmark: BenchmarkSettings,
                    models: Mapping[str, ModelInfo], revisions: Mapping[str, str]) -> list[Variant]:
    variants: list[Variant] = []
    for index, (key, entry) in enumerate(entries):
        s = _Section(key, entry, problems, VARIANT_KEYS)
        name = s.string("name", pattern=_DNS_LABEL, hint="a lowercase DNS label of at most 32 characters")
        role = s.string("role", choices=("baseline", "sd"))
        engine = s.string("engine", serving.engine, choices=tuple(ENGINES)) or serving.engine
        rules = ENGINES.get(engine)  # None: the stack's engine is not registered (reported at serving.engine)
        target = s.model("target", models, serving.target)
        draft = s.model("draft", models, None)
        tokens = s.integer("numSpeculativeTokens", None, low=SPECULATIVE_TOKENS_RANGE[0], high=SPECULATIVE_TOKENS_RANGE[1])
        draft_len = s.integer("draftMaxModelLen", None, low=128)
        method = s.string("speculationMethod", None, choices=tuple(METHOD_DRAFT_KIND))
        quantization = s.string("quantization", "none", choices=("none", "fp8"))
        if "weightsPath" in s.raw:
            s.problem("weightsPath", "is no longer needed: the program prepares every model in the store itself, FP8 rescaled "
                                     "for Neuron included (README, 'Models prepared once'); remove it")
        if role == "baseline":
            for key, value in zip(SPECULATION_KEYS, (draft, tokens, draft_len, method)):
                if value is not None:
                    s.problem(key, "is only allowed on an sd variant")
        if role == "sd":
            # Missing or null: required. Given but refused: s.model/s.integer have said why.
            if draft is None and s.raw.get("draft") is None:
                s.problem("draft", "is required on an sd variant")
            if tokens is None and s.raw.get("numSpeculativeTokens") is None:
                s.problem("numSpeculativeTokens", f"is required on an sd variant ({SPECULATIVE_TOKENS_RANGE[0]}..{SPECULATIVE_TOKENS_RANGE[1]})")
            if draft and target and models[draft].kind == models[target].kind == "model" and models[draft].params_billion >= models[target].params_billion:
                s.problem("draft", f"{draft} ({models[draft].params_billion:g}B) is not smaller than the target {target} "
                                   f"({models[target].params_billion:g}B): a draft pays off only by costing less per token")
            if draft and target and models[draft].tokenizer_family != models[target].tokenizer_family:
                s.problem("draft", f"{draft} uses the {models[draft].tokenizer_family} tokenizer but the target {target} uses {models[target].tokenizer_family}; speculative decoding needs a shared tokenizer")
            needed = benchmark.input_tokens + benchmark.output_tokens + (tokens or 0)
            if draft_len is None:
                draft_len = serving.max_model_len
            elif serving.max_model_len and draft_len > serving.max_model_len:
                # vLLM's SpeculativeConfig._maybe_override_draft_max_model_len raises "cannot be
                # larger than target_max_model_len" (docs/facts.md, "vLLM on Neuron").
                s.problem("draftMaxModelLen", f"{draft_len} is above serving.maxModelLen {serving.max_model_len}; vLLM refuses a draft longer than its target")
            elif benchmark.input_tokens and draft_len < needed:
                s.problem("draftMaxModelLen", f"{draft_len} is smaller than the longest benchmark sequence plus the speculation window ({needed})")
            if rules and rules.draft_max_model_len_refused and "draftMaxModelLen" in s.raw:
                s.problem("draftMaxModelLen", rules.draft_max_model_len_refused)
            if draft and target and rules:
                method = _speculation_method(s, engine, draft, target, method, models)
                if method == "dflash":
                    _check_dflash(s, serving, quantization)
        if target and quantization == "fp8":
            if models[target].checkpoint_dtype != "fp8":
                s.problem("quantization", f"fp8 needs an FP8 checkpoint as target; {target} is {models[target].checkpoint_dtype}")
            if rules and not rules.rescaled_fp8:
                fp8_engines = [name for name, e in ENGINES.items() if e.rescaled_fp8]
                s.problem("quantization", f"fp8 with rescaled weights is an NxD Inference path: use engine {' or '.join(fp8_engines) or '(none registered)'}")
            # The modules NxDI must leave in BF16 (its neuron_config), from the models' facts.
            checks_modules = rules and rules.rescaled_fp8 and models[target].checkpoint_dtype == "fp8"
            if checks_modules and not models[target].bf16_modules:
                s.problem("target", f"{target} does not list the modules its FP8 checkpoint keeps in BF16: set "
                                    f"models.{target}.bf16Modules (NxD Inference's modules_to_not_convert)")
            if checks_modules and draft and models[draft].kind == "model" and not models[draft].layers:
                s.problem("draft", f"{draft} gives no layer count, from which its modules are listed for an FP8 target: set "
                                   f"models.{draft}.layers (num_hidden_layers in its config.json)")
        if target and quantization == "none" and models[target].checkpoint_dtype == "fp8":
            s.problem("quantization", f"{target} is an FP8 checkpoint; set quantization: fp8")
        if target and models[target].kind != "model":
            s.problem("target", f"{target} is {KIND_NAMES[models[target].kind]}, not a model that can be served")
        default_image = serving.image if engine == serving.engine and serving.image else rules.image if rules else ""
        image = s.string("image", default_image, check=_pinned_image) or default_image
        if rules:
            _check_engine_image(s, "image" if "image" in s.raw else None, engine, image, models.get(target) if target else None)
        variants.append(
            Variant(
                name=name or f"variant-{index}",
                role=role or "baseline",
                target=target or serving.target or "",
                serving=serving,
                engine=engine,
                image=image,
                target_info=models.get(target or serving.target or "", UNKNOWN_MODEL),
                baseline=s.string("baseline", None),
                draft=draft,
                draft_info=models.get(draft) if draft else None,
                num_speculative_tokens=tokens,
                draft_max_model_len=draft_len if role == "sd" else None,
                speculation_method=method if role == "sd" else None,
                quantization=quantization or "none",
                target_revision=revisions.get(target or serving.target or "", UNPINNED_REVISION),
                draft_revision=revisions.get(draft or "", UNPINNED_REVISION),
                neuron_config_extra=_neuron_config(s, "neuronConfig", engine) if rules else {},
            )
        )
    return variants


def _check_engine_image(s: _Section, key: str | None, engine: str, image: str, target: ModelInfo | None) -> None:
    """The image's Neuron SDK release, from its tag, within what the engine accepts
    (stackconfig/engines/ EngineInfo.sdks), and the target's family served by that release.
    `key` is "image" when the variant sets it, else None: serving.image. A problem of a serving
    key is said once for all variants."""
    def problem(message: str, variant_key: str | None = key, serving_key: str = "serving.image") -> None:
        entry = (s.key(variant_key) if variant_key else serving_key, message)
        if entry not in s.problems:
            s.problems.append(entry)

    sdk, (oldest, newest) = image_sdk(image), ENGINES[engine].sdks
    if sdk is None:
        problem(f"{image!r} does not name its Neuron SDK release in its tag (...-sdk2.32.0-..., as the Neuron DLC tags do); "
                f"what {engine} accepts depends on it")
        return
    if sdk < oldest or newest and sdk > newest:
        span = f"{sdk_text(oldest)} to {sdk_text(newest)}" if newest else f"{sdk_text(oldest)} or newer"
        why = ENGINES[engine].beyond_newest if newest and sdk > newest else ""
        problem(f"{image!r} is Neuron SDK {sdk_text(sdk)}; {engine} runs on images of Neuron {span}{why}")
    unserved = ENGINES[engine].unserved_family(target, sdk) if target is not None else None
    if unserved:
        problem(unserved, next((k for k in ("target", "engine") if k in s.raw), None), "serving.target")


def _speculation_method(s: _Section, engine: str, draft: str, target: str, method: str | None,
                        models: Mapping[str, ModelInfo]) -> str | None:
    """The speculation method, from what the draft is and what the engine runs: on nxdi-legacy
    a plain model (draft_model) or an EAGLE head (eagle); on vllm-neuron an EAGLE3 head (eagle3)
    or a DFlash head (dflash). A head must have been trained for this target."""
    info = models[draft]
    wanted = next(m for m, kind in METHOD_DRAFT_KIND.items() if kind == info.kind)
    if wanted not in ENGINES[engine].methods:
        runs_on = " or ".join(e for e, i in ENGINES.items() if wanted in i.methods) or "no registered engine"
        why = (" (Neuron's migration guide: vanilla draft-model speculative decoding is not supported; migrate to an "
               "EAGLE3 draft)" if wanted == "draft_model" else "")
        s.problem("draft", f"{draft} is {KIND_NAMES[info.kind]}, which speculates as {wanted!r} on {runs_on} only, not on {engine}{why}")
        return None
    if info.draft_for and target not in info.draft_for:
        s.problem("draft", f"{draft} was trained for {', '.join(info.draft_for)}, not for {target}")
    if method is not None and method != wanted:
        s.problem("speculationMethod", f"{method!r} does not fit {draft}, which is {KIND_NAMES[info.kind]}; use {wanted!r} or omit the key")
    return wanted


def _check_dflash(s: _Section, serving: ServingSettings, quantization: str | None) -> None:
    """DFlash's documented limits (stackconfig/engines/base.py). The TP is checked only when
    serving.devicesPerVariant is valid (else it is 0 and its problem is reported)."""
    if serving.devices_per_variant and serving.tensor_parallel_size not in DFLASH_TENSOR_PARALLEL:
        s.problem("draft", f"DFlash runs at TP {' or '.join(map(str, DFLASH_TENSOR_PARALLEL))}; this stack's TP is "
                           f"{serving.tensor_parallel_size} (serving.devicesPerVariant, serving.logicalNeuronCores)")
    if quantization not in (None, "none"):
        s.problem("quantization", "DFlash is validated with BF16 target, draft and KV cache only")


def _resolve_baselines(variants: list[Variant], keys: list[str], problems: list[tuple[str, str]],
                       drafts_alone: Mapping[str, str] | None = None) -> list[Variant]:
    """Check names and roles, and point every SD variant at the variant it is compared with,
    which must run on the same engine (a speedup compares decoding, not engines). A draft served
    alone (study.timeDraftsAlone) is a baseline no SD variant is compared with by default."""
    names = [v.name for v in variants]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(("variants", f"variant name {name!r} is used more than once"))
    baselines = [v.name for v in variants if v.role == "baseline"]
    if not baselines or len(baselines) == len(variants):
        problems.append(("variants", "needs at least one baseline and one sd variant to compare"))
    by_name = {v.name: v for v in variants}
    resolved = []
    for key, variant in zip(keys, variants):
        baseline = variant.baseline
        candidates = [b for b in baselines if b not in (drafts_alone or {})]
        if variant.role == "sd" and baseline is None:
            if len(candidates) == 1:
                baseline = candidates[0]
            elif candidates:  # none at all is reported above
                problems.append((f"{key}.baseline", f"is required when there are several baselines: {', '.join(candidates)}"))
        elif baseline is not None and (baseline not in baselines or baseline == variant.name):
            problems.append((f"{key}.baseline", f"{baseline!r} is not another baseline variant; baselines: {', '.join(baselines) or 'none'}"))
            baseline = None
        if baseline is not None and by_name[baseline].engine != variant.engine:
            problems.append((f"{key}.engine", f"{variant.engine} differs from its baseline {baseline!r}'s "
                                                          f"{by_name[baseline].engine}; compare like with like"))
        resolved.append(replace(variant, baseline=baseline))
    return resolved
