"""Parse a stack's raw config into a StackSpec, or fail with every problem at once.

Nothing here touches Pulumi: the input is the project's config as plain data, so the same
function serves `pulumi up`, the offline plan and the tests.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import replace
from typing import Any, Callable, Mapping

from benchmark.podsetup import llmperf_commits
from benchmark.seeds import SEEDS

from .catalog import (
    CAPACITY_TYPES,
    DEFAULT_TEST_CASES,
    DEVICE_GROUP_SIZES,
    INSTANCE_SHAPES,
    LOGICAL_NEURON_CORE_SIZES,
    MIN_KUBERNETES_VERSION,
    MODELS,
    SPECULATIVE_TOKENS_RANGE,
    WORKLOAD_IDENTITIES,
    known_regions,
)
from .model import (
    BenchmarkSettings,
    CapacitySettings,
    ClusterSettings,
    ServingSettings,
    StackSpec,
    Variant,
    slug,
)

HUGGING_FACE_TOKEN_KEY = "huggingFaceToken"

DEFAULT_VLLM_IMAGE = (
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
)
# Python 3.11: the version benchmark/requirements-pod.lock was resolved and install-tested for
# (research llmperf.md section 4.2); LLMPerf runs unchanged on 3.11 from src/ (FACTS.md "LLMPerf,
# measured"). Tag listed in docker-library/official-images library/python (3.11.14-slim-bookworm);
# public.ecr.aws/docker/library mirrors the Docker official images.
DEFAULT_BENCHMARK_IMAGE = "public.ecr.aws/docker/library/python:3.11.14-slim-bookworm"
LLMPERF_COMMIT = "f1d6bed47e4501b0e371082b41601b59ab55269f"
DEFAULT_SAMPLING_PARAMS = {"temperature": 0}
MIN_INPUT_TOKENS = 40
# Request fields the benchmark itself sets: LLMPerf sends model, messages, stream and max_tokens
# (the shape), and the measuring proxy adds stream_options (research llmperf.md section 2.1).
RESERVED_SAMPLING_KEYS = ("max_tokens", "messages", "model", "stream", "stream_options")

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
_AMI_ALIAS = re.compile(r"^al2023@v\d{8}$")
_RELATIVE_PATH = re.compile(r"^(?!/)(?!.*\.\.)[A-Za-z0-9._/-]+$")
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
            problems.append((self.key(key), f"unknown key; allowed: {', '.join(sorted(allowed))}"))

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

    def string(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None, pattern: re.Pattern | None = None, hint: str = ""):
        def check(value: str) -> str | None:
            if choices is not None and value not in choices:
                return f"{value!r} is not one of {', '.join(choices)}"
            if pattern is not None and not pattern.match(value):
                return f"{value!r} is not valid{': ' + hint if hint else ''}"
            return None

        return self._get(name, default, str, "a string", check)

    def boolean(self, name: str, default: Any = _MISSING):
        return self._get(name, default, bool, "true or false", None)

    def listing(self, name: str, default: Any = _MISSING):
        return self._get(name, default, list, "a list", None)

    def mapping(self, name: str, default: Any = _MISSING):
        return self._get(name, default, dict, "an object", None)

    def model(self, name: str, default: Any = _MISSING):
        return self._get(
            name, default, str, "a Hugging Face model id",
            lambda v: None if v in MODELS else f"{v!r} is not a known model; known: {', '.join(sorted(MODELS))}",
        )


TOP_LEVEL_KEYS = {"cluster", "capacity", "serving", "variants", "benchmark", "modelStore", "tags", HUGGING_FACE_TOKEN_KEY}


def parse_stack_config(project: str, stack: str, config: Mapping[str, Any]) -> StackSpec:
    """Validate a stack's config into a StackSpec.

    `config` is what Pulumi hands the program: "namespace:key" -> value, structured values
    already decoded. Raises ConfigError naming every bad key; never registers anything.
    """
    problems: list[tuple[str, str]] = []
    raw, region = _split_namespaces(project, config, problems)
    top = _Section("", raw, problems, TOP_LEVEL_KEYS)

    capacity = _parse_capacity(_Section("capacity", raw.get("capacity"), problems, {"instanceType", "capacityType", "reservationIds", "amiAlias", "rootVolumeGiB"}))
    cluster = _parse_cluster(_Section("cluster", raw.get("cluster"), problems, {"kubernetesVersion", "systemNodeInstanceType", "systemNodeCount", "vpcCidr", "availabilityZoneCount", "availabilityZones", "workloadIdentity"}), region, capacity)
    serving = _parse_serving(_Section("serving", raw.get("serving"), problems, {"image", "target", "devicesPerVariant", "logicalNeuronCores", "tensorParallelSize", "maxNumSeqs", "maxModelLen", "nodeCachePath"}), capacity)
    benchmark = _parse_benchmark(_Section("benchmark", raw.get("benchmark"), problems, {"inputTokens", "outputTokens", "concurrency", "requestsPerTestCase", "requestTimeoutSeconds", "testCases", "image", "llmperfCommit", "metricsNamespace", "samplingParams", "seed"}), stack, serving)
    variants = _resolve_baselines(_parse_variants(top, raw.get("variants"), problems, serving, benchmark), problems)
    model_store = _Section("modelStore", raw.get("modelStore"), problems, {"retainOnDestroy"})
    retain = model_store.boolean("retainOnDestroy", False)
    tags = top.mapping("tags", {})
    if tags and not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        top.problem("tags", "must map strings to strings")
    gated = sorted({m for v in variants for m in (v.target, v.draft) if m in MODELS and MODELS[m].gated})
    if gated and not raw.get(HUGGING_FACE_TOKEN_KEY):
        top.problem(HUGGING_FACE_TOKEN_KEY, f"is required for the gated model(s) {', '.join(gated)}: pulumi config set --secret {HUGGING_FACE_TOKEN_KEY} hf_...")
    if problems:
        raise ConfigError(stack, problems)

    spec = StackSpec(
        project=project,
        stack=stack,
        region=region,
        cluster=cluster,
        capacity=capacity,
        serving=serving,
        variants=tuple(variants),
        benchmark=benchmark,
        retain_model_store=retain,
        tags=dict(tags),
    )
    paths = [v.artifact_path for v in spec.variants]
    for path in sorted({p for p in paths if paths.count(p) > 1}):
        problems.append(("variants", f"two variants compile into the same path {path}; they would overwrite each other"))
    if problems:
        raise ConfigError(stack, problems)
    return spec


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


def _parse_cluster(s: _Section, region: str, capacity: CapacitySettings) -> ClusterSettings:
    version = s.string("kubernetesVersion", "1.34", pattern=re.compile(r"^1\.\d+$"), hint='a "1.N" version')
    if version and tuple(int(p) for p in version.split(".")) < MIN_KUBERNETES_VERSION:
        s.problem("kubernetesVersion", f"{version} is below 1.34, the first version the Neuron DRA driver supports")
    zones = s.listing("availabilityZones", [])
    for index, zone in enumerate(zones or []):
        if not isinstance(zone, str) or not _AVAILABILITY_ZONE.match(zone) or (region and not zone.startswith(region)):
            s.problem(f"availabilityZones[{index}]", f"{zone!r} is not an availability zone of {region or 'the region'} (e.g. {region or 'us-east-2'}a)")
    if zones and len(set(zones)) != len(zones):
        s.problem("availabilityZones", "lists a zone twice")
    if zones and len(zones) < 2:
        s.problem("availabilityZones", "needs at least two zones: EKS requires subnets in two availability zones")
    zone_count = s.integer("availabilityZoneCount", len(zones) if zones else 2, low=2, high=6)
    if zones and zone_count != len(zones):
        s.problem("availabilityZoneCount", f"{zone_count} disagrees with the {len(zones)} availabilityZones listed; omit it")
    if capacity.reservation_ids and not zones:
        # A reservation launches only in its own AZ, and Karpenter only into the subnets the
        # network created; the AZ must be named so the network includes it (make preflight checks it).
        s.problem("availabilityZones", "are required with capacity.reservationIds: list the reservation's availability zone and a second one")
    return ClusterSettings(
        kubernetes_version=version or "",
        system_node_instance_type=s.string("systemNodeInstanceType", "m7i.xlarge"),
        system_node_count=s.integer("systemNodeCount", 2, low=2, high=10),
        vpc_cidr=s.string("vpcCidr", "10.64.0.0/16", pattern=re.compile(r"^10\.\d{1,3}\.0\.0/16$"), hint="a 10.x.0.0/16 block"),
        availability_zone_count=zone_count or 2,
        availability_zones=tuple(zones or ()),
        workload_identity=s.string("workloadIdentity", "irsa", choices=WORKLOAD_IDENTITIES) or "irsa",
    )


def _parse_capacity(s: _Section) -> CapacitySettings:
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
        ami_alias=s.string("amiAlias", "al2023@v20260828", pattern=_AMI_ALIAS, hint="al2023@vYYYYMMDD, pinned (not @latest)"),
        root_volume_gib=s.integer("rootVolumeGiB", 200, low=100, high=2000),
    )


def _parse_serving(s: _Section, capacity: CapacitySettings) -> ServingSettings:
    devices = s.integer("devicesPerVariant", allowed=DEVICE_GROUP_SIZES)
    node_devices = INSTANCE_SHAPES[capacity.instance_type].neuron_devices
    if devices and devices > node_devices:
        s.problem("devicesPerVariant", f"{devices} devices do not fit on a {capacity.instance_type} ({node_devices} devices)")
    lnc = s.integer("logicalNeuronCores", 2, allowed=LOGICAL_NEURON_CORE_SIZES)
    serving = ServingSettings(
        image=s.string("image", DEFAULT_VLLM_IMAGE, pattern=re.compile(r"^[^\s:]+:[^\s:]+$"), hint="an image with a pinned tag"),
        target=s.model("target"),
        devices_per_variant=devices or 0,
        logical_neuron_cores=lnc or 2,
        max_num_seqs=s.integer("maxNumSeqs", low=1, high=256),
        max_model_len=s.integer("maxModelLen", low=128, high=131072),
        node_cache_path=s.string("nodeCachePath", "/mnt/k8s-disks/0/model-cache", pattern=re.compile(r"^/[A-Za-z0-9._/-]+$"), hint="an absolute host path"),
    )
    tp = s.integer("tensorParallelSize", None, low=1)
    if tp is not None and devices and lnc and tp != serving.tensor_parallel_size:
        s.problem("tensorParallelSize", f"{tp} does not match devicesPerVariant x (8 / logicalNeuronCores) = {devices} x {8 // lnc} = {serving.tensor_parallel_size}; omit it to derive it")
    return serving


def _parse_benchmark(s: _Section, stack: str, serving: ServingSettings) -> BenchmarkSettings:
    test_cases = s.mapping("testCases", dict(DEFAULT_TEST_CASES))
    for case_slug, prompt in (test_cases or {}).items():
        if not isinstance(case_slug, str) or not _DNS_LABEL.match(case_slug):
            s.problem(f"testCases.{case_slug}", "test case names must be lowercase DNS labels (they become the TestCase dimension)")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            s.problem(f"testCases.{case_slug}", "prompt must be a non-empty string, or null for LLMPerf's own sonnets")
    if test_cases == {}:
        s.problem("testCases", "needs at least one test case")
    input_tokens = s.integer("inputTokens", low=1)
    if input_tokens and input_tokens < MIN_INPUT_TOKENS:
        # LLMPerf redraws a prompt length until it covers its own prompt template; with the
        # driver's stddev 0 a shorter target never does and LLMPerf spins without sending a
        # request (seen running f1d6bed). It warns below 40 itself (research llmperf.md 1.2).
        s.problem("inputTokens", f"{input_tokens} is below {MIN_INPUT_TOKENS}: LLMPerf's prompt template alone is longer, and it would never start")
    output_tokens = s.integer("outputTokens", low=2)
    if input_tokens and output_tokens and serving.max_model_len and input_tokens + output_tokens > serving.max_model_len:
        s.problem("outputTokens", f"inputTokens + outputTokens = {input_tokens + output_tokens} exceeds serving.maxModelLen {serving.max_model_len}")
    concurrency = s.integer("concurrency", 1, low=1)
    if concurrency and serving.max_num_seqs and concurrency > serving.max_num_seqs:
        s.problem("concurrency", f"{concurrency} exceeds serving.maxNumSeqs {serving.max_num_seqs}; extra requests would queue and skew latency")
    namespace = s.string("metricsNamespace", f"LLMPerf/{slug(stack)}", pattern=re.compile(r"^(?!AWS/)[A-Za-z0-9._/#:-]{1,255}$"), hint="CloudWatch namespaces must not start with AWS/")
    return BenchmarkSettings(
        input_tokens=input_tokens or 0,
        output_tokens=output_tokens or 0,
        concurrency=concurrency or 1,
        requests_per_test_case=s.integer("requestsPerTestCase", 10, low=1, high=1000),
        request_timeout_s=s.integer("requestTimeoutSeconds", 3600, low=60),
        test_cases=dict(test_cases or {}),
        image=s.string("image", DEFAULT_BENCHMARK_IMAGE, pattern=re.compile(r"^[^\s:]+:[^\s:]+$"), hint="an image with a pinned tag"),
        llmperf_commit=s.string("llmperfCommit", LLMPERF_COMMIT, choices=llmperf_commits()) or LLMPERF_COMMIT,
        metrics_namespace=namespace or "",
        sampling_params=_sampling_params(s),
        seed=s.string("seed", None, choices=tuple(SEEDS)),
    )


def _sampling_params(s: _Section) -> dict[str, Any]:
    params = s.mapping("samplingParams", dict(DEFAULT_SAMPLING_PARAMS))
    for key in sorted(set(params or {}) & set(RESERVED_SAMPLING_KEYS)):
        s.problem(f"samplingParams.{key}", f"is set by the benchmark itself; not allowed here ({', '.join(RESERVED_SAMPLING_KEYS)})")
    temperature = (params or {}).get("temperature")
    if "temperature" in (params or {}) and (isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0):
        s.problem("samplingParams.temperature", f"must be a number >= 0, got {temperature!r}")
    return dict(params or {})


VARIANT_KEYS = {"name", "role", "target", "baseline", "draft", "numSpeculativeTokens", "draftMaxModelLen", "speculationMethod", "quantization", "weightsPath"}


def _parse_variants(top: _Section, raw: Any, problems: list, serving: ServingSettings, benchmark: BenchmarkSettings) -> list[Variant]:
    if not isinstance(raw, list) or not raw:
        top.problem("variants", "must be a non-empty list of variants (at least one baseline and one sd)")
        return []
    variants: list[Variant] = []
    for index, entry in enumerate(raw):
        s = _Section(f"variants[{index}]", entry, problems, VARIANT_KEYS)
        name = s.string("name", pattern=_DNS_LABEL, hint="a lowercase DNS label of at most 32 characters")
        role = s.string("role", choices=("baseline", "sd"))
        target = s.model("target", serving.target)
        draft = s.model("draft", None)
        tokens = s.integer("numSpeculativeTokens", None, low=SPECULATIVE_TOKENS_RANGE[0], high=SPECULATIVE_TOKENS_RANGE[1])
        draft_len = s.integer("draftMaxModelLen", None, low=128)
        method = s.string("speculationMethod", None, choices=("draft_model", "eagle"))
        quantization = s.string("quantization", "none", choices=("none", "fp8"))
        weights_path = s.string("weightsPath", None, pattern=_RELATIVE_PATH, hint="a bucket-relative folder without '..' or a leading '/'")
        baseline = s.string("baseline", None)
        if role == "baseline":
            for key, value in (("draft", draft), ("numSpeculativeTokens", tokens), ("draftMaxModelLen", draft_len), ("speculationMethod", method), ("baseline", baseline)):
                if value is not None:
                    s.problem(key, "is only allowed on an sd variant")
        if role == "sd":
            if draft is None and "draft" not in s.raw:
                s.problem("draft", "is required on an sd variant")
            if tokens is None and "numSpeculativeTokens" not in s.raw:
                s.problem("numSpeculativeTokens", f"is required on an sd variant ({SPECULATIVE_TOKENS_RANGE[0]}..{SPECULATIVE_TOKENS_RANGE[1]})")
            if draft and target and MODELS[draft].tokenizer_family != MODELS[target].tokenizer_family:
                s.problem("draft", f"{draft} uses the {MODELS[draft].tokenizer_family} tokenizer but the target {target} uses {MODELS[target].tokenizer_family}; speculative decoding needs a shared tokenizer")
            needed = benchmark.input_tokens + benchmark.output_tokens + (tokens or 0)
            if draft_len is None:
                draft_len = serving.max_model_len
            elif serving.max_model_len and draft_len > serving.max_model_len:
                # vLLM's SpeculativeConfig._maybe_override_draft_max_model_len raises "cannot be
                # larger than target_max_model_len" (FACTS.md, "vLLM on Neuron").
                s.problem("draftMaxModelLen", f"{draft_len} is above serving.maxModelLen {serving.max_model_len}; vLLM refuses a draft longer than its target")
            elif benchmark.input_tokens and draft_len < needed:
                s.problem("draftMaxModelLen", f"{draft_len} is smaller than the longest benchmark sequence plus the speculation window ({needed})")
            if draft:
                method = _speculation_method(s, draft, target, method)
        if target and quantization == "fp8":
            if MODELS[target].checkpoint_dtype != "fp8":
                s.problem("quantization", f"fp8 needs an FP8 checkpoint as target; {target} is {MODELS[target].checkpoint_dtype}")
            if weights_path is None:
                s.problem("weightsPath", "is required with fp8: Neuron needs the FP8 weights rescaled first (README, 'Preparing FP8 weights')")
        if target and quantization == "none" and MODELS[target].checkpoint_dtype == "fp8":
            s.problem("quantization", f"{target} is an FP8 checkpoint; set quantization: fp8")
        variants.append(
            Variant(
                name=name or f"variant-{index}",
                role=role or "baseline",
                target=target or serving.target or "",
                serving=serving,
                baseline=baseline,
                draft=draft,
                num_speculative_tokens=tokens,
                draft_max_model_len=draft_len if role == "sd" else None,
                speculation_method=method,
                quantization=quantization or "none",
                weights_path=weights_path,
            )
        )
    return variants


def _speculation_method(s: _Section, draft: str, target: str | None, method: str | None) -> str | None:
    """The vLLM speculation method for `draft`, checked against what the draft is: a plain draft
    model runs as draft_model (no method), an EAGLE head only as eagle, for its own target."""
    kind = MODELS[draft].kind
    wanted = "eagle" if kind == "eagle-head" else "draft_model"
    if method is not None and method != wanted:
        what = "an EAGLE head" if kind == "eagle-head" else "a full model, not an EAGLE head"
        s.problem("speculationMethod", f"{method!r} does not fit {draft}, which is {what}; use {wanted!r} or omit the key")
    return wanted


def _resolve_baselines(variants: list[Variant], problems: list[tuple[str, str]]) -> list[Variant]:
    """Check names and roles, and point every SD variant at the baseline it is compared with."""
    names = [v.name for v in variants]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(("variants", f"variant name {name!r} is used more than once"))
    baselines = [v.name for v in variants if v.role == "baseline"]
    if not baselines or len(baselines) == len(variants):
        problems.append(("variants", "needs at least one baseline and one sd variant to compare"))
    resolved = []
    for index, variant in enumerate(variants):
        baseline = variant.baseline
        if variant.role == "sd" and baseline is None:
            if len(baselines) == 1:
                baseline = baselines[0]
            else:
                problems.append((f"variants[{index}].baseline", f"is required when there are several baselines: {', '.join(baselines)}"))
        elif variant.role == "sd" and baseline not in baselines:
            problems.append((f"variants[{index}].baseline", f"{baseline!r} is not a baseline variant; baselines: {', '.join(baselines) or 'none'}"))
        resolved.append(replace(variant, baseline=baseline))
    return resolved
