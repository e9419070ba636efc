"""`models` and `modelRevisions`: the models a stack declares beyond the catalog, the hub commit
each is prepared at, and the gated models a stack names.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..catalog import MODEL_KINDS, MODELS, Checkpoint, ModelInfo
from ..store import is_commit
from .reader import _MISSING, _Section


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
