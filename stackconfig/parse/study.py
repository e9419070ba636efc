"""`study`: the tuner's mode and repeats, and its grid of drafts x windows expanded into variants.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..catalog import SPECULATIVE_TOKENS_RANGE, ModelInfo
from ..engines import ENGINES
from ..engines.distributed import NAME as DISTRIBUTED
from ..engines.distributed import max_gamma
from ..model import GridPoint, StudySettings
from ..naming import slug
from .reader import _DNS_LABEL, _Section

STUDY_KEYS = {"mode", "repeats", "drafts", "windows", "baseline", "draftMaxModelLen", "ttftTargetMs", "tpotTargetMs",
              "timeDraftsAlone", "engine", "speculationLength"}


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
    engine = s.string("engine", None, choices=tuple(ENGINES))
    length = s.integer("speculationLength", None, low=2, high=high + 1)
    if length is not None and engine != DISTRIBUTED:
        s.problem("speculationLength", f"is the target's compiled speculation length of a {DISTRIBUTED} study "
                                       f"(engine: {DISTRIBUTED}); this study's engine is {engine or 'the serving engine'}")
        length = None
    if length is not None:
        high = min(high, max_gamma(length))

    def is_window(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    windows = [w for w in given if is_window(w)]
    for index, window in enumerate(given):
        if is_window(window):
            continue
        if length is not None and isinstance(window, int) and high < window <= SPECULATIVE_TOKENS_RANGE[1]:
            s.problem(f"windows[{index}]", f"gamma {window} is above the target's compiled speculation length {length} - 1 "
                                           "(study.speculationLength): one verify forward scores gamma + 1 positions")
        else:
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
        points = {f"{label}-{'g' if engine == DISTRIBUTED else 'k'}{w}": w for w in windows}
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
            if engine is not None:
                variant["engine"] = engine
            if engine == DISTRIBUTED:
                variant["speculationLength"] = length or max(windows) + 1
            entries.append((f"study(draft {model}, window {window})", variant))
            grid.append(GridPoint(name, model, window))
        if alone_name:
            drafts_alone[alone_name] = model
            entries.append((f"study(draft {model}, alone)", {"name": alone_name, "role": "baseline", "target": model,
                                                              "baseline": baseline}))
    return StudySettings(mode=mode, repeats=repeats, grid=tuple(grid), drafts_alone=drafts_alone,
                         ttft_target_ms=targets[0], tpot_target_ms=targets[1]), entries
