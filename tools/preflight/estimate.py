"""How long one run of a stack keeps its nodes up: the one estimate that reservations and cost use.

    provisioning  ~25 min: the first `pulumi up` (docs/operations.md, "Watching it come up": 20-25 minutes)
    start         the slowest variant's startup budget (stackconfig/model.py
                  Variant.startup_budget_seconds: download + compile + load, 3-12 h), an upper bound
    benchmark     test cases x requests x variants (x repeats of a study), each request's output
                  tokens at the variant's time per output token, `concurrency` at a time, and the
                  load generator's start per case (stackconfig/timeline.py benchmark_minutes, the
                  plan's cold path: each figure published, or assumed and labelled so)

The result is an estimate and is labelled one wherever it is shown.
"""
from __future__ import annotations

from dataclasses import dataclass

from stackconfig import StackSpec
from stackconfig.timeline import benchmark_minutes

PROVISIONING_HOURS = 25 / 60


@dataclass(frozen=True)
class RunEstimate:
    provisioning_hours: float
    startup_hours: float
    benchmark_hours: float

    @property
    def hours(self) -> float:
        return self.provisioning_hours + self.startup_hours + self.benchmark_hours

    def describe(self) -> str:
        return (f"~{self.hours:.1f} h (estimate: {self.provisioning_hours:.1f} h up, {self.startup_hours:.1f} h "
                f"compile/start budget, {self.benchmark_hours:.1f} h benchmark)")


def run_estimate(spec: StackSpec) -> RunEstimate:
    return RunEstimate(
        provisioning_hours=PROVISIONING_HOURS,
        startup_hours=max(v.startup_budget_seconds for v in spec.variants) / 3600,
        benchmark_hours=benchmark_minutes(spec) / 60,
    )
