"""`serving` and `variants`: the servers' settings, each variant's model, draft, engine and
image, and what each engine would refuse or break.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import replace
from typing import Any, Mapping

from ..catalog import DEVICES_PER_VARIANT, INSTANCE_SHAPES, KIND_NAMES, LOGICAL_NEURON_CORE_SIZES, SPECULATIVE_TOKENS_RANGE, ModelInfo
from ..engines import (
    DEFAULT_ENGINE,
    DFLASH_TENSOR_PARALLEL,
    ENGINES,
    KV_SEGMENT_SIZES,
    METHOD_DRAFT_KIND,
    PLACEMENTS,
    SINGLE_SHOT_PREFILL_MAX,
    image_sdk,
    neuron_config_fields,
    sdk_text,
)
from ..model import BenchmarkSettings, CapacitySettings, ServingSettings, Variant
from ..semantics import engine_failures
from ..server import LINUX_CAPABILITIES, NEVER_ADDED, RESERVED_ENVIRONMENT
from ..store import UNPINNED_REVISION
from .reader import _DNS_LABEL, _pinned_image, _Section

UNKNOWN_MODEL = ModelInfo("", gated=False, params_billion=0)
"""Stands in for a model id already reported as unknown, so parsing can go on collecting problems."""


def _check_placements(keys: list[str], variants: list[Variant], capacity: CapacitySettings,
                      problems: list[tuple[str, str]]) -> None:
    """A variant that runs several servers (stackconfig/engines/ EngineInfo.servers): those that
    share a node (placement same-node) must fit on it together (a study's tuner scales them
    together: benchmark/tuner.py)."""
    shape = INSTANCE_SHAPES.get(capacity.instance_type)
    for key, variant in zip(keys, variants):
        if variant.engine not in ENGINES or len(variant.servers) < 2:
            continue
        for node in sorted({server.node for server in variant.servers}):
            together = [server for server in variant.servers if server.node == node]
            if shape and len(together) > 1 and sum(server.devices for server in together) > shape.neuron_devices:
                needs = " + ".join(f"{server.part} {server.devices}" for server in together)
                problems.append((f"{key}.placement", f"{variant.placement}: its servers need {needs} devices on one node; a "
                                                     f"{capacity.instance_type} has {shape.neuron_devices} (separate-node, "
                                                     "or fewer devices: serving.devicesPerVariant)"))


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
                                   "not a host path (docs/security.md, 'Pods'); remove it")
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


ENGINE_VARIANT_KEYS = frozenset(k for engine in ENGINES.values() for k in engine.variant_keys)
"""Variant keys some engine reads (EngineInfo.variant_keys): placement, speculationLength."""
VARIANT_KEYS = {"name", "role", "target", "baseline", "draft", "numSpeculativeTokens", "draftMaxModelLen", "speculationMethod",
                "quantization", "weightsPath", "engine", "image", "neuronConfig", *ENGINE_VARIANT_KEYS}


SPECULATION_KEYS = ("draft", "numSpeculativeTokens", "draftMaxModelLen", "speculationMethod")


def _variant_entries(top: _Section, raw: Any) -> list[tuple[str, Any]]:
    """The hand-written variants, each with the key its problems are reported under."""
    if not isinstance(raw, list) or not raw:
        top.problem("variants", "must be a non-empty list of variants (at least one baseline and one sd)")
        return []
    return [(f"variants[{index}]", entry) for index, entry in enumerate(raw)]


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
        placement = s.string("placement", "same-node", choices=PLACEMENTS) or "same-node"
        speculation_length = s.integer("speculationLength", None, low=2, high=SPECULATIVE_TOKENS_RANGE[1] + 1)
        for name in sorted(ENGINE_VARIANT_KEYS & set(s.raw) - (rules.variant_keys if rules else set())):
            readers = [e for e, info in ENGINES.items() if name in info.variant_keys]
            s.problem(name, f"is read by the {' and '.join(readers)} engine only; this variant runs on {engine}")
        if "weightsPath" in s.raw:
            s.problem("weightsPath", "is no longer needed: the program prepares every model in the store itself, FP8 rescaled "
                                     "for Neuron included (docs/models.md, 'Models prepared once'); remove it")
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
                placement=placement,
                speculation_length=speculation_length,
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
        compared_with = (ENGINES[variant.engine].compared_with or variant.engine) if variant.engine in ENGINES else variant.engine
        if baseline is not None and by_name[baseline].engine != compared_with:
            problems.append((f"{key}.engine", f"{variant.engine} differs from its baseline {baseline!r}'s "
                                                          f"{by_name[baseline].engine}; compare like with like"
                                                          + (f" (a {variant.engine} variant is compared with a {compared_with} baseline)"
                                                             if compared_with != variant.engine else "")))
        resolved.append(replace(variant, baseline=baseline))
    return resolved
