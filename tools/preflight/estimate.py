"""How long one run of a stack keeps its nodes up: the one estimate that reservations and cost use.

    provisioning  ~25 min: the first `pulumi up` (docs/operations.md, "Watching it come up": 20-25 minutes)
    start         the slowest variant's startup budget (stackconfig/model.py
                  Variant.startup_budget_seconds: download + compile + load, 3-12 h), an upper bound
    benchmark     test cases x requests x variants, each request output tokens x 50 ms, run
                  `concurrency` at a time

50 ms per output token: stackconfig/timeline.py says why. The result is an estimate and is labelled
one wherever it is shown.
"""
from __future__ import annotations

from dataclasses import dataclass

from stackconfig import StackSpec
from stackconfig.timeline import SECONDS_PER_OUTPUT_TOKEN

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
    b = spec.benchmark
    requests = len(b.test_cases) * b.requests_per_test_case * len(spec.variants)
    benchmark_seconds = requests * b.output_tokens * SECONDS_PER_OUTPUT_TOKEN / b.concurrency
    return RunEstimate(
        provisioning_hours=PROVISIONING_HOURS,
        startup_hours=max(v.startup_budget_seconds for v in spec.variants) / 3600,
        benchmark_hours=benchmark_seconds / 3600,
    )
