"""The README and the docs pages: what they show that comes from code stays equal to the code (the
version table every pin of stackconfig/versions.py, the configuration table every key the parser
accepts, the cold-path and study tables the program's estimates)."""
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


def section(page: str, title: str) -> str:
    """The '## title' section of a page (README.md or docs/<page>), up to the next heading of its level."""
    text = (PROJECT_DIR / page).read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_the_versions_table_shows_every_pin():
    table = section("docs/versions.md", "Pins")
    header = next([cell.strip() for cell in line.split("|")] for line in table.splitlines() if line.startswith("| what |"))
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

    table = section("docs/configuration.md", "Keys")
    rows = {line.split("|")[1].strip().strip("`"): line.split("|", 2)[2] for line in table.splitlines()
            if line.startswith("| `")}
    assert set(parse.PAIRING_KEYS) | set(parse.PLATFORM_KEYS) | {"aws:region"} <= set(rows)
    for section_key, keys in (("cluster", parse.CLUSTER_KEYS), ("capacity", parse.CAPACITY_KEYS),
                              ("serving", parse.SERVING_KEYS), ("variants", parse.VARIANT_KEYS),
                              ("benchmark", parse.BENCHMARK_KEYS), ("models", parse.MODEL_KEYS)):
        undocumented = sorted(k for k in keys if not re.search(rf"\b{k}\b", rows[section_key]))
        assert undocumented == [], section_key


def test_the_cold_path_table_is_the_programs_estimate():
    """docs/models.md's cold-path figures are stackconfig/timeline.py's, for every pairing stack."""
    from offline.stacks import load_stack
    from stackconfig import StackSpec
    from stackconfig.source import stack_names
    from stackconfig.timeline import cold_path, describe

    table = section("docs/models.md", "The cold path, per stack")
    rows = {line.split("|")[1].strip().strip("`"): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| `")}
    pairings = {s for s in stack_names() if isinstance(load_stack(s).spec(), StackSpec)}
    assert set(rows) == pairings
    for stack in pairings:
        assert rows[stack] == [describe(step) for step in cold_path(load_stack(stack).spec())], stack


def test_the_study_cost_table_is_the_plans_estimate():
    """docs/study.md's time and cost per mode are stackconfig/timeline.py's, to the two significant
    figures the plan prints (ModeEstimate.cost)."""
    from offline.stacks import load_stack
    from stackconfig.source import stack_names
    from stackconfig.timeline import study_modes

    table = section("docs/study.md", "What it costs")
    rows, stack = [], None
    for line in table.splitlines():
        if line.startswith("| `") or line.startswith("| |"):
            cells = [c.strip() for c in line.split("|")[1:-1]]
            stack = cells[0].split("`")[1] if cells[0] else stack
            rows.append((stack, *cells[1:]))
    studies = {s for s in stack_names() if getattr(load_stack(s).spec(), "study", None)}
    assert {r[0] for r in rows} == studies and len(rows) == 2 * len(studies)
    for stack, mode, nodes, first, compiled in rows:
        estimate = next(e for e in study_modes(load_stack(stack).spec()) if e.mode == mode)
        assert nodes == str(estimate.nodes)
        assert (first, compiled) == (estimate.cost(estimate.first_hours), estimate.cost(estimate.repeat_hours))


README_LIMIT_BYTES = 15 * 1024
"""The README is the front door (issue 30): what it is, the quickstart, the stacks, cost, clean-up
and links; everything else lives in a docs page."""

PAGES = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a markdown link is a link."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"(?ms)^```.*?^```", "", text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_the_readme_is_a_front_door():
    assert (PROJECT_DIR / "README.md").stat().st_size <= README_LIMIT_BYTES


def test_the_readme_links_every_docs_page():
    linked = {(PROJECT_DIR / target.split("#")[0]).resolve()
              for target in LINK.findall(prose((PROJECT_DIR / "README.md").read_text()))}
    assert sorted(p.name for p in PAGES[1:] if p.resolve() not in linked) == []


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append((page.name, target))
            elif anchor and (destination.suffix != ".md" or anchor not in anchors(destination.read_text())):
                broken.append((page.name, target))
    assert broken == []


def test_the_anchor_rule_is_githubs():
    assert anchors("# A\n## Capacity: why a static NodePool\n## What `make plan` writes\n## A\n```\n# not a heading\n```\n") == {
        "a", "capacity-why-a-static-nodepool", "what-make-plan-writes", "a-1"}


def benchmarked() -> dict[str, tuple[str, str]]:
    """docs/benchmarks.md's one figure per command: {command: (wall, CPU)} as written there."""
    rows = {}
    for line in (PROJECT_DIR / "docs" / "benchmarks.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) >= 4 and cells[0].startswith("`") and re.fullmatch(r"[\d.]+ s", cells[2]):
            rows[cells[0].split("`")[1]] = (cells[2], cells[3].split(" (")[0])
    return rows


DURATION = re.compile(r"\b(\d+(?:\.\d+)?)\s*(s|sec|seconds?|min|minutes?|h|hours?)\b(?! ?/)")


def statements(text: str) -> list[str]:
    """A page cut where a claim ends: each table row and code line alone, prose by sentence."""
    cut = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if block.lstrip().startswith(("|", "```")):
            cut += lines
        else:
            cut += re.split(r"(?<=[.!?])\s+(?=[A-Z`(\[*])", " ".join(line.strip() for line in lines))
    return cut


def test_no_page_contradicts_the_timings():
    """A command's time is measured once, in docs/benchmarks.md. A sentence elsewhere that names a
    measured command (as that table writes it) may give a duration only if it is one of that row's
    figures, wall or CPU; "make test (~80 s)" beside a measured 164 s fails."""
    rows = benchmarked()
    assert {"make test", "make rehearse STACK=qwen3-32b-qwen3-1.7b", "make setup"} <= set(rows)
    contradicted = []
    for page in PAGES:
        if page.name == "benchmarks.md":
            continue
        for statement in statements(page.read_text()):
            figures = {figure for command, row in rows.items() if command in statement for figure in row}
            stated = {f"{number} s" if unit.startswith("s") else f"{number} {unit}" for number, unit in DURATION.findall(statement)}
            if figures and stated - figures:
                contradicted.append((page.name, sorted(stated - figures), statement))
    assert contradicted == []


def test_the_readme_quotes_the_timings_of_its_two_commands():
    rows = benchmarked()
    quickstart = section("README.md", "Quickstart")
    for command in ("make rehearse STACK=qwen3-32b-qwen3-1.7b", "make test"):
        assert f"{rows[command][0]} wall, {rows[command][1]} CPU" in quickstart, command


def test_ci_runs_the_readmes_quickstart():
    """.ci/run runs the README's own commands: each command of its Quickstart block is a line of it."""
    block = re.search(r"(?ms)^```bash\n(.*?)^```", section("README.md", "Quickstart")).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    ci = {line.strip() for line in (PROJECT_DIR / ".ci" / "run").read_text().splitlines()}
    assert commands and [c for c in commands if c not in ci] == []


def test_the_stacks_tables_are_the_stack_files():
    """Every stack is in the README's Stacks section, and each table row says what its stack file
    derives: engine, devices, TP, sequences, length, nodes and hourly cost for a pairing; engine,
    mode, repeats and nodes (sequential, and parallel where it differs) for a study."""
    from offline.stacks import load_stack
    from stackconfig.source import stack_names

    text = section("README.md", "Stacks")
    assert {s for s in stack_names() if f"(stacks/Pulumi.{s}.yaml)" not in text} == set()
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| [`")]
    assert len(rows) >= 7
    for cells in rows:
        spec = load_stack(cells[0].split("`")[1]).spec()
        hourly = f"~{spec.capacity.shape.approx_hourly_usd * spec.node_count + spec.platform.approximate_usd_per_hour:,.1f}"
        assert cells[2] == " ".join(sorted({v.engine for v in spec.variants})), cells[0]
        if spec.study is None:
            devices, tp, seqs, length, nodes, cost = cells[5:]
            assert devices == " ".join(sorted({str(v.devices) for v in spec.variants})), cells[0]
            assert tp == " ".join(sorted({str(v.tensor_parallel_size) for v in spec.variants})), cells[0]
            assert (seqs, length) == (str(spec.serving.max_num_seqs), str(spec.serving.max_model_len)), cells[0]
        else:
            mode, repeats, nodes, cost = cells[4:]
            assert (mode, repeats) == (spec.study.mode, str(spec.study.repeats)), cells[0]
            other = ("(either mode)" if spec.sequential_node_count == spec.parallel_node_count
                     else f"(parallel: {spec.parallel_node_count})")
            assert nodes == f"{spec.node_count} {other}", cells[0]
        assert nodes.split()[0] == str(spec.node_count) and cost == hourly, cells[0]


def test_the_cost_the_readme_quotes_is_the_catalogs():
    from offline.stacks import load_stack

    platform = load_stack("platform").spec().approximate_usd_per_hour
    trn2 = load_stack("qwen3-32b-qwen3-1.7b-shared").spec().capacity.shape.approx_hourly_usd
    stacks, cost = section("README.md", "Stacks"), section("README.md", "Cost")
    assert f"**${trn2:,.2f}/h**" in cost and f"~${platform:,.2f}/h for a platform" in cost
    assert f"~${platform:,.2f}/h)" in stacks and f"~${trn2:,.1f}/h for its one node" in stacks
