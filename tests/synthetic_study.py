"""A tuning study's results folder written from servers whose every figure is known: the truth the
report's figures are held against (tests/test_study_truth.py, tests/test_tuning_report.py).

The servers: the baseline of test case t decodes one token per step of T_t seconds. A draft d at
window k makes one SD step take T_t (1 + c_d k) (the target verifying, at the cost of one plain
step, and the draft drafting k tokens at c_d of a target step each), and accepts position i of the
window with probability a_i = p_1 ... p_i, p_j = p0_{d,t} x DECAY^(j-1) (acceptance falls along the
window), so a step yields L = 1 + a_1 + ... + a_k tokens and TPOT = T_t (1 + c_d k) / L. The true
speedup over the baseline is then L / (1 + c_d k): Leviathan's bound exactly, reached 100 %.

Each case is measured as LLMPerf measures it: `asked` requests counted, and the up to
concurrency - 1 more it sends and discards, which the measuring proxy records like any other
(benchmark/proxy.py). Request i's TPOT is the case's TPOT x SPREAD[i], so the case's median TPOT is
the case's TPOT; a request meets the goodput target when its TPOT does. Every measurement carries
multiplicative noise (one log-normal draw per server, test case and block, seeded), and optionally
drift: everything measured in block b runs drift^b slower. Two designs:
- "paired", the tuner's (benchmark/tuner.py blocks): repeat by repeat, each configuration's block
  measures the baseline beside it (repeat-<r>/beside-<configuration>/base/) and then it;
- "back-to-back", the tuner's before: the baseline's repeats first, in one block, then each
  configuration's repeats together in a block of its own.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

DECAY = 0.95
TTFT_S, TOKENS = 0.05, 65
SPREAD = (0.80, 0.90, 0.95, 0.97, 0.99, 1.0, 1.01, 1.03, 1.05, 1.10, 1.20)
"""Per request, times the case's TPOT, in the order sent; its median is 1."""


@dataclass(frozen=True)
class Truth:
    base_tpot_s: dict[str, float]
    """Test case -> the baseline's TPOT."""
    p0: dict[tuple[str, str], float]
    """(draft, test case) -> acceptance of the first position."""
    c: dict[str, float]
    windows: tuple[int, ...]
    drafts_counted: dict[str, int]
    """Test case -> SD steps its requests take (the counters' drafts): test cases differ in length."""
    repeats: int = 3
    asked: int = 8
    concurrency: int = 4
    noise: float = 0.0
    """Log-normal sigma per (server, test case, repeat)."""
    tpot_target_ms: float | None = None

    @property
    def drafts(self) -> list[str]:
        return sorted(self.c)

    @property
    def test_cases(self) -> list[str]:
        return list(self.base_tpot_s)

    def positions(self, draft: str, test_case: str, k: int) -> list[float]:
        a, out = 1.0, []
        for j in range(k):
            a *= self.p0[(draft, test_case)] * DECAY ** j
            out.append(a)
        return out

    def length(self, draft: str, test_case: str, k: int) -> float:
        return 1 + sum(self.positions(draft, test_case, k))

    def tpot(self, name: str, test_case: str) -> float:
        if name == "base":
            return self.base_tpot_s[test_case]
        draft, k = split(name)
        return self.base_tpot_s[test_case] * (1 + self.c[draft] * k) / self.length(draft, test_case, k)

    def speedup(self, name: str, test_case: str) -> float:
        return self.tpot("base", test_case) / self.tpot(name, test_case)

    def overall_speedup(self, name: str) -> float:
        return math.exp(sum(math.log(self.speedup(name, t)) for t in self.test_cases) / len(self.test_cases))

    def bound(self, name: str, test_case: str) -> float:
        draft, k = split(name)
        return self.length(draft, test_case, k) / (self.c[draft] * k + 1)

    @property
    def sd(self) -> list[str]:
        return [f"{d}-k{k}" for d in self.drafts for k in self.windows]

    @property
    def sent(self) -> int:
        return self.asked + self.concurrency - 1


def split(name: str) -> tuple[str, int]:
    draft, k = name.rsplit("-k", 1)
    return draft, int(k)


@dataclass
class Written:
    root: Path
    study_id: str
    good: dict[tuple[str, str], int] = field(default_factory=dict)
    """(configuration, test case) -> requests meeting the target, over the repeats."""
    sent: dict[tuple[str, str], int] = field(default_factory=dict)


def variant(name: str) -> dict:
    if name == "base":
        return {"name": "base", "role": "baseline", "baseline": None, "target": "Qwen/Qwen3-32B", "draft": None,
                "numSpeculativeTokens": None, "costPerHourUsd": 17.88}
    draft, k = split(name)
    return {"name": name, "role": "sd", "baseline": "base", "target": "Qwen/Qwen3-32B", "draft": draft,
            "numSpeculativeTokens": k, "costPerHourUsd": 17.88}


def write(root: Path, truth: Truth, seed: int = 0, study_id: str = "study-0123456789", drift: float = 1.0,
          design: str = "paired") -> Written:
    """The tuner's layout (benchmark/tuner.py): <study>/repeat-<r>[/beside-<configuration>]/<variant>/<test case>/
    and study.json, measured in the `design`'s order."""
    written = Written(root, study_id)
    _write_cases(written, truth, random.Random(seed), drift, design)
    _write_record(written, truth, [])
    return written


def write_levels(root: Path, truths: dict[int, Truth], seed: int = 0, study_id: str = "study-0123456789") -> Written:
    """A study at several concurrencies (load as its third axis), each level's truth its own: the
    tuner's layout with each level's cases in <test case>/concurrency-<c>/, paired at each level."""
    written, rng = Written(root, study_id), random.Random(seed)
    for concurrency, truth in truths.items():
        _write_cases(written, truth, rng, 1.0, "paired", f"concurrency-{concurrency}")
    _write_record(written, next(iter(truths.values())), [{"concurrency": c} for c in truths])
    return written


def _write_cases(written: Written, truth: Truth, rng: random.Random, drift: float, design: str, level: str = "") -> None:
    root, study_id = written.root, written.study_id
    names = ["base"] + truth.sd
    if design == "paired":
        blocks = [[(repeat, "base", f"/beside-{name}"), (repeat, name, "")] for repeat in range(1, truth.repeats + 1)
                  for name in truth.sd]
    else:
        blocks = [[(repeat, name, "") for repeat in range(1, truth.repeats + 1)] for name in names]
    for block, cases in enumerate(blocks):
        for repeat, name, beside in cases:
            for test_case in truth.test_cases:
                tpot = truth.tpot(name, test_case) * math.exp(rng.gauss(0, truth.noise)) * drift ** block
                good = _write_case(root / study_id / f"repeat-{repeat}{beside}" / name / test_case / level, truth, name,
                                   test_case, tpot)
                written.good[(name, test_case)] = written.good.get((name, test_case), 0) + good
                written.sent[(name, test_case)] = written.sent.get((name, test_case), 0) + truth.sent


def _write_record(written: Written, truth: Truth, loads: list[dict]) -> None:
    names = ["base"] + truth.sd
    record = {"status": "complete", "reason": None, "variants": [variant(n) for n in names],
              "testCases": {t: t for t in truth.test_cases},
              "study": {"id": written.study_id, "mode": "sequential", "repeats": truth.repeats, "ttftTargetMs": None,
                        "tpotTargetMs": truth.tpot_target_ms, "draftsAlone": {}},
              "configurations": {n: {"status": "done", "reason": None} for n in names}, "cases": [],
              **({"loads": loads} if loads else {})}
    (written.root / written.study_id / "study.json").write_text(json.dumps(record))


def _write_case(folder: Path, truth: Truth, name: str, test_case: str, tpot: float) -> int:
    """One case's files; the number of its requests (discarded extras included) meeting the target."""
    folder.mkdir(parents=True)
    records, good = [], 0
    for i in range(truth.sent):
        request_tpot = tpot * SPREAD[i % len(SPREAD)]
        good += truth.tpot_target_ms is not None and request_tpot * 1000 <= truth.tpot_target_ms
        records.append({"start": 1000.0 + i, "ttft_s": TTFT_S, "e2e_s": TTFT_S + request_tpot * (TOKENS - 1), "status": 200,
                        "error": None, "completion_tokens": TOKENS, "prompt_tokens": 64, "content_chunks": TOKENS,
                        "request_sha256": f"q{i}", "response_sha256": f"r{i}"})
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "case.json").write_text(json.dumps({"asked": truth.asked, "concurrency": truth.concurrency, "exitCode": 0,
                                                  "variant": name, "testCase": test_case}))
    if name != "base":
        draft, k = split(name)
        positions = truth.positions(draft, test_case, k)
        zero = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_position": {str(i): 0 for i in range(k)}}
        drafts = truth.drafts_counted[test_case]
        after = {"drafts": drafts, "draft_tokens": drafts * k, "accepted": drafts * sum(positions),
                 "per_position": {str(i): drafts * a for i, a in enumerate(positions)}}
        (folder / "specdecode.json").write_text(json.dumps({"before": zero, "after": after}))
    return good
