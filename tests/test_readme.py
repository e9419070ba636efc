"""The README's claims that come from code stay equal to the code: its version table shows every
pin of stackconfig/versions.py, and the configuration table every config key the parser accepts."""
from __future__ import annotations

import re

from stackconfig.source import PROJECT_DIR
from stackconfig.versions import (
    AMI_ALIASES,
    DEFAULT_KUBERNETES_VERSION,
    EKS_ADDONS,
    EKS_SUPPORT,
    KARPENTER,
    NEURON_HELM_CHART_VERSION,
)

README = (PROJECT_DIR / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def test_the_versions_table_shows_every_pin():
    table = section("Versions and upgrades")
    header = [cell.strip() for cell in table.splitlines()[6].split("|")]
    assert f"Kubernetes {DEFAULT_KUBERNETES_VERSION} (default)" in header
    column_of = {cell.split()[1]: index for index, cell in enumerate(header) if cell.startswith("Kubernetes 1.")}
    assert set(column_of) == set(EKS_ADDONS)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert KARPENTER.version in rows["Karpenter (chart and CRD chart)"]
    assert NEURON_HELM_CHART_VERSION.version in rows["Neuron Helm chart (DRA driver)"]
    for version, pin in AMI_ALIASES.items():
        assert pin.version in rows["trn2 AMI alias"], version
    for version, pins in EKS_ADDONS.items():
        for addon, pin in pins.items():
            cell = rows[addon].split("|")[column_of[version]].strip()
            assert cell == pin.build if pin.build else cell.startswith("EKS's default"), (addon, version, cell)
    for version, support in EKS_SUPPORT.items():
        assert str(support.standard_until) in rows["EKS support"] or support.standard_until.strftime("%Y-%m-%d") in table
    assert re.search(r"standard until \*\*2026-12-02\*\*", rows["EKS support"])


def test_the_configuration_table_documents_every_key_the_parser_accepts():
    from stackconfig import parse

    table = section("Configuration")
    rows = {line.split("|")[1].strip().strip("`"): line.split("|", 2)[2] for line in table.splitlines()
            if line.startswith("| `")}
    assert set(parse.PAIRING_KEYS) | set(parse.PLATFORM_KEYS) | {"aws:region"} <= set(rows)
    for section_key, keys in (("cluster", parse.CLUSTER_KEYS), ("capacity", parse.CAPACITY_KEYS),
                              ("serving", parse.SERVING_KEYS), ("variants", parse.VARIANT_KEYS),
                              ("benchmark", parse.BENCHMARK_KEYS), ("models", parse.MODEL_KEYS)):
        undocumented = sorted(k for k in keys if not re.search(rf"\b{k}\b", rows[section_key]))
        assert undocumented == [], section_key


def test_the_cold_path_table_is_the_programs_estimate():
    """The README's cold-path figures are stackconfig/timeline.py's, for every pairing stack."""
    from offline.stacks import load_stack
    from stackconfig import StackSpec
    from stackconfig.source import stack_names
    from stackconfig.timeline import cold_path, describe

    table = section("Models prepared once")
    rows = {line.split("|")[1].strip().strip("`"): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| `")}
    pairings = {s for s in stack_names() if isinstance(load_stack(s).spec(), StackSpec)}
    assert set(rows) == pairings
    for stack in pairings:
        assert rows[stack] == [describe(step) for step in cold_path(load_stack(stack).spec())], stack


def test_the_study_cost_table_is_the_plans_estimate():
    """The README's time and cost per mode are stackconfig/timeline.py's, to the two significant
    figures the plan prints (ModeEstimate.cost)."""
    from offline.stacks import load_stack
    from stackconfig.timeline import study_modes

    table = section("Tuning study")
    rows, stack = [], None
    for line in table.splitlines():
        if line.startswith("| `") or line.startswith("| |"):
            cells = [c.strip() for c in line.split("|")[1:-1]]
            stack = cells[0].split("`")[1] if cells[0] else stack
            rows.append((stack, *cells[1:]))
    assert {r[0] for r in rows} == {"qwen3-32b-study", "llama3.1-8b-eagle3-study"} and len(rows) == 4
    for stack, mode, nodes, first, compiled in rows:
        estimate = next(e for e in study_modes(load_stack(stack).spec()) if e.mode == mode)
        assert nodes == str(estimate.nodes)
        assert (first, compiled) == (estimate.cost(estimate.first_hours), estimate.cost(estimate.repeat_hours))
