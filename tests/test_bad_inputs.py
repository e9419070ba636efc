"""Every bad input is a clear error before anything is written: `make plan` exits 2, names the
offending key (or file, or stack name) and raises nothing, and a failed plan leaves no stale
plan behind. Each case edits a copy of a real stack file in a temporary project directory."""
from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline import plan
from stackconfig import source as stack_source
from stackconfig.source import PROJECT_DIR, StackFiles

QWEN, LLAMA = "qwen3-32b-qwen3-1.7b", "llama3.1-8b-llama3.2-1b"
P = "sd-trn2:"


def edit(path: tuple, value: Any = None, delete: bool = False):
    """A change to a stack's `config:` at `path` (keys, or indexes into lists)."""
    def apply(config: dict) -> dict:
        config = copy.deepcopy(config)
        node = config
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        if delete:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        return config
    return apply


def text(content: str):
    return content


CASES = [
    # The file itself.
    ("unclosed-brace", QWEN, text("config:\n  aws:region: {us-east-2\n"), "is not valid YAML"),
    ("tab-indent", QWEN, text("config:\n\taws:region: us-east-2\n"), "is not valid YAML"),
    ("top-level-list", QWEN, text("- config\n"), "must be a mapping"),
    ("config-list", QWEN, text("config:\n  - aws:region\n"), "config"),
    ("empty-file", QWEN, text(""), "aws:region"),
    ("deep-nesting", QWEN, text("config:\n  aws:region: " + "[" * 3000 + "]" * 3000 + "\n"),
     "Pulumi.deep-nesting.yaml config.aws:region: is nested too deeply"),
    ("deep-nesting-in-a-section", QWEN, text("config:\n  aws:region: us-east-2\n  sd-trn2:serving:\n    neuronConfig: {kernels: "
                                               + "[" * 3000 + "]" * 3000 + "}\n"),
     "config.sd-trn2:serving.neuronConfig.kernels: is nested too deeply"),
    ("not-utf8", QWEN, b"config:\n  aws:region: us-east-2\xff\n", "is not UTF-8 text: byte 0xff"),
    ("duplicate-key", QWEN, text("config:\n  aws:region: us-east-2\n  sd-trn2:serving:\n    devicesPerVariant: 8\n"
                                 "    devicesPerVariant: 16\n"), "key 'devicesPerVariant' appears twice (lines 4 and 5)"),
    # Namespaces and region.
    ("no-region", QWEN, edit(("aws:region",), delete=True), "aws:region"),
    ("unknown-region", QWEN, edit(("aws:region",), "us-west-9"), "aws:region"),
    ("region-not-string", QWEN, edit(("aws:region",), 12), "aws:region"),
    ("region-without-trn2", QWEN, edit(("aws:region",), "us-west-2"), "aws:region us-west-2"),
    ("namespace-typo", QWEN, edit(("sdtrn2:serving",), {"target": "Qwen/Qwen3-32B"}), "sdtrn2:serving"),
    ("unknown-namespace", QWEN, edit(("kubernetes:context",), "x"), "kubernetes:context"),
    # Top level.
    ("unknown-top-key", QWEN, edit((P + "servng",), {}), "servng"),
    # A study: its keys, its grid's points under their own names, a YAML string where a list belongs.
    ("study-window-out-of-range", "qwen3-32b-study", edit((P + "study", "windows"), [5, 16]), "study.windows[1]"),
    ("study-not-a-mapping", "qwen3-32b-study", edit((P + "study",), ["sequential"]), "study: must be an object"),
    ("study-drafts-a-string", "qwen3-32b-study", edit((P + "study", "drafts"), "Qwen/Qwen3-0.6B"), "study.drafts: must be a list"),
    ("study-point-refused", "qwen3-32b-study", edit((P + "study", "draftMaxModelLen"), 64),
     "study(draft Qwen/Qwen3-0.6B, window 5).draftMaxModelLen"),
    ("bad-stack-kind", QWEN, edit((P + "stackKind",), "cluster"), "stackKind"),
    ("bad-platform-ref", QWEN, edit((P + "platform",), "platform"), "platform"),
    ("platform-ref-climbs", "qwen3-32b-qwen3-1.7b-shared", edit((P + "platform",), "organization/sd-trn2/.."),
     "platform: organization/sd-trn2/..: '..' is not a stack name"),
    # Cluster.
    ("cidr-octet", QWEN, edit((P + "cluster", "vpcCidr"), "10.999.0.0/16"), "cluster.vpcCidr"),
    ("cidr-public", QWEN, edit((P + "cluster", "vpcCidr"), "8.8.0.0/16"), "cluster.vpcCidr"),
    ("cidr-size", QWEN, edit((P + "cluster", "vpcCidr"), "10.64.0.0/20"), "cluster.vpcCidr"),
    ("k8s-too-old", QWEN, edit((P + "cluster", "kubernetesVersion"), "1.33"), "cluster.kubernetesVersion"),
    ("k8s-too-new", QWEN, edit((P + "cluster", "kubernetesVersion"), "1.40"), "cluster.kubernetesVersion"),
    ("k8s-unpinned", QWEN, edit((P + "cluster", "kubernetesVersion"), "1.37"), "cluster.kubernetesVersion"),
    ("k8s-latest", QWEN, edit((P + "cluster", "kubernetesVersion"), "latest"), "cluster.kubernetesVersion"),
    ("one-system-node", QWEN, edit((P + "cluster", "systemNodeCount"), 1), "cluster.systemNodeCount"),
    ("one-zone", QWEN, edit((P + "cluster", "availabilityZones"), ["us-east-2a"]), "cluster.availabilityZones"),
    ("zone-elsewhere", QWEN, edit((P + "cluster", "availabilityZones"), ["us-west-2a", "us-east-2b"]), "cluster.availabilityZones[0]"),
    ("identity-enum", QWEN, edit((P + "cluster", "workloadIdentity"), "kiam"), "cluster.workloadIdentity"),
    ("public-cidr-host-bits", QWEN, edit((P + "cluster", "publicAccessCidrs"), ["203.0.113.7/24"]), "cluster.publicAccessCidrs[0]"),
    ("public-cidr-ipv6", QWEN, edit((P + "cluster", "publicAccessCidrs"), ["2001:db8::/32"]), "cluster.publicAccessCidrs[0]"),
    ("public-cidr-empty", QWEN, edit((P + "cluster", "publicAccessCidrs"), []), "cluster.publicAccessCidrs"),
    ("public-cidr-string", QWEN, edit((P + "cluster", "publicAccessCidrs"), "0.0.0.0/0"), "cluster.publicAccessCidrs"),
    # The token, in plaintext where `pulumi config set --secret` would have encrypted it.
    ("plaintext-token", LLAMA, edit((P + "huggingFaceToken",), "hf_pasted_in_plaintext"), "huggingFaceToken: is stored in plaintext"),
    # Capacity.
    ("instance-type", QWEN, edit((P + "capacity",), {"instanceType": "p5.48xlarge"}), "capacity.instanceType"),
    ("capacity-type", QWEN, edit((P + "capacity",), {"capacityType": "spot"}), "capacity.capacityType"),
    ("reservation-id", QWEN, edit((P + "capacity",), {"capacityType": "reserved", "reservationIds": ["r-1"]}), "capacity.reservationIds[0]"),
    ("ami-latest", QWEN, edit((P + "capacity",), {"amiAlias": "al2023@latest"}), "capacity.amiAlias"),
    ("root-volume", QWEN, edit((P + "capacity",), {"rootVolumeGiB": 10}), "capacity.rootVolumeGiB"),
    # Serving.
    ("devices", QWEN, edit((P + "serving", "devicesPerVariant"), 3), "serving.devicesPerVariant"),
    ("lnc", QWEN, edit((P + "serving", "logicalNeuronCores"), 4), "serving.logicalNeuronCores"),
    ("tp-mismatch", QWEN, edit((P + "serving", "tensorParallelSize"), 64), "serving.tensorParallelSize"),
    ("unknown-model", QWEN, edit((P + "serving", "target"), "Qwen/Qwen9-1T"), "serving.target"),
    ("image-latest", QWEN, edit((P + "serving", "image"), "public.ecr.aws/neuron/vllm:latest"), "serving.image"),
    ("image-untagged", QWEN, edit((P + "serving", "image"), "public.ecr.aws/neuron/vllm"), "serving.image"),
    ("max-len-string", QWEN, edit((P + "serving", "maxModelLen"), "1024"), "serving.maxModelLen"),
    # Variants.
    ("variants-not-list", QWEN, edit((P + "variants",), {"name": "base"}), "variants"),
    ("duplicate-names", QWEN, edit((P + "variants", 1, "name"), "base"), "variants"),
    ("name-not-dns", QWEN, edit((P + "variants", 1, "name"), "SD_1"), "variants[1].name"),
    ("too-many-tokens", QWEN, edit((P + "variants", 1, "numSpeculativeTokens"), 16), "variants[1].numSpeculativeTokens"),
    ("tokenizer-mismatch", QWEN, edit((P + "variants", 1, "draft"), "meta-llama/Llama-3.2-1B"), "variants[1].draft"),
    ("draft-longer", QWEN, edit((P + "variants", 1, "draftMaxModelLen"), 2048), "variants[1].draftMaxModelLen"),
    ("draft-not-smaller", QWEN, edit((P + "variants", 1, "draft"), "Qwen/Qwen3-32B"), "variants[1].draft"),
    ("eagle-plain-draft", QWEN, edit((P + "variants", 1, "speculationMethod"), "eagle"), "variants[1].speculationMethod"),
    ("unknown-baseline", QWEN, edit((P + "variants", 1, "baseline"), "nope"), "variants[1].baseline"),
    # Benchmark.
    ("too-long", QWEN, edit((P + "benchmark", "outputTokens"), 1000), "benchmark.outputTokens"),
    ("over-concurrent", QWEN, edit((P + "benchmark", "concurrency"), 8), "benchmark.concurrency"),
    ("aws-namespace", QWEN, edit((P + "benchmark", "metricsNamespace"), "AWS/Mine"), "benchmark.metricsNamespace"),
    ("unknown-generator", QWEN, edit((P + "benchmark", "loadGenerator"), "guidellm"), "benchmark.loadGenerator"),
    ("empty-load-list", QWEN, edit((P + "benchmark", "concurrency"), []), "benchmark.concurrency"),
    ("unsorted-load-list", QWEN, edit((P + "benchmark", "concurrency"), [2, 1]), "benchmark.concurrency"),
    ("rate-and-concurrency", QWEN, lambda config: edit((P + "benchmark", "rate"), [0.5, 1])(
        edit((P + "benchmark", "loadGenerator"), "inference-perf")(config)), "benchmark.rate"),
    ("input-below-the-generators-minimum", QWEN, lambda config: edit((P + "benchmark", "inputTokens"), 1)(
        edit((P + "benchmark", "loadGenerator"), "inference-perf")(config)), "benchmark.inputTokens: 1 is below 2: inference-perf"),
    ("dashboard-widgets", QWEN, edit((P + "benchmark", "testCases"), {f"case-{i}": "x" for i in range(130)}), "benchmark.testCases"),
    ("configmap-size", QWEN, edit((P + "benchmark", "testCases"), {"huge": "x" * (600 * 1024)}), "benchmark.testCases"),
    ("case-name", QWEN, edit((P + "benchmark", "testCases"), {"Not A Label": "x"}), "benchmark.testCases.Not A Label"),
    # Models: a declared model's size, a pinned revision.
    ("model-size-unknown", QWEN, edit((P + "models",), {"example/Draft": {"tokenizerFamily": "qwen3", "gated": False,
                                                                          "paramsBillion": 0.5}}), "models.example/Draft.checkpointBytes"),
    ("revision-not-a-commit", QWEN, edit((P + "modelRevisions", "Qwen/Qwen3-32B"), "main"), "modelRevisions.Qwen/Qwen3-32B"),
    # Sampling parameters: finite, in vLLM's ranges, known keys only, of their own types
    # (stackconfig/sampling.py); a bad one used to plan and fail only at the first request.
    ("sampling-nan", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": float("nan")}),
     "benchmark.samplingParams.temperature: must be a finite number"),
    ("sampling-inf", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": float("inf")}),
     "benchmark.samplingParams.temperature: must be a finite number"),
    ("sampling-top-p-string", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "top_p": "banana"}),
     "benchmark.samplingParams.top_p: must be a number in (0, 1], got 'banana'"),
    ("sampling-top-p-zero", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "top_p": 0}),
     "benchmark.samplingParams.top_p: must be a number in (0, 1], got 0"),
    ("sampling-top-p-above-one", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "top_p": 1.5}),
     "benchmark.samplingParams.top_p"),
    ("sampling-top-k-below", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "top_k": -2}),
     "benchmark.samplingParams.top_k: must be an integer >= -1"),
    ("sampling-top-k-float", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "top_k": 2.5}),
     "benchmark.samplingParams.top_k: must be an integer >= -1, got 2.5"),
    ("sampling-bool-number", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": True}),
     "benchmark.samplingParams.temperature: must be a number in [0, 2], got True"),
    ("sampling-unknown-key", QWEN, edit((P + "benchmark", "samplingParams"), {"temprature": 0}),
     "benchmark.samplingParams.temprature: unknown key (did you mean temperature?)"),
    ("sampling-min-tokens-over-max", QWEN, edit((P + "benchmark", "samplingParams"), {"temperature": 0, "min_tokens": 601}),
     "benchmark.samplingParams.min_tokens"),
    # Tags.
    ("aws-tag", QWEN, edit((P + "tags",), {"aws:team": "ml"}), "tags.aws:team"),
    ("karpenter-tag", QWEN, edit((P + "tags",), {"karpenter.sh/nodepool": "x"}), "tags.karpenter.sh/nodepool"),
    ("long-tag", QWEN, edit((P + "tags",), {"k" * 129: "v"}), "tags.kkkk"),
    ("tag-not-string", QWEN, edit((P + "tags",), {"team": 1}), "tags.team"),
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the project's stack files; stackconfig.source reads from it."""
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(stack_source.STACKS_DIR, tmp_path / "stacks")
    monkeypatch.setattr(stack_source, "FILES", StackFiles(tmp_path))
    return tmp_path


def write_case(project: Path, name: str, base: str, change) -> None:
    path = project / "stacks" / f"Pulumi.{name}.yaml"
    if isinstance(change, bytes):
        path.write_bytes(change)
        return
    if isinstance(change, str):
        path.write_text(change)
        return
    document = yaml.safe_load((project / "stacks" / f"Pulumi.{base}.yaml").read_text())
    document["config"] = change(document["config"])
    path.write_text(yaml.safe_dump(document))


def test_the_table_is_long_enough():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name, base, change, key", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_exits_2_naming_its_key_and_leaves_no_stale_plan(project, capsys, name, base, change, key):
    stale = project / "out" / name / "resources.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("[]")
    write_case(project, name, base, change)
    assert plan.main(["--stack", name, "--out", str(project / "out")]) == 2
    err = capsys.readouterr().err
    assert key in err, err
    assert "Traceback" not in err
    assert not stale.exists()


def test_a_stack_name_too_long_for_its_derived_names(project, capsys):
    name = "qwen3-32b-qwen3-1-7b-" + "x" * 50
    write_case(project, name, QWEN, lambda config: config)
    assert plan.main(["--stack", name, "--out", str(project / "out")]) == 2
    assert "stack name" in capsys.readouterr().err


def test_a_gated_stack_with_another_problem_is_not_told_its_token_is_missing(project, capsys):
    write_case(project, "llama-broken", LLAMA, edit((P + "serving", "devicesPerVariant"), 3))
    assert plan.main(["--stack", "llama-broken", "--out", str(project / "out")]) == 2
    err = capsys.readouterr().err
    assert "serving.devicesPerVariant" in err and "huggingFaceToken" not in err


def test_the_dashboard_rule_counts_what_the_dashboard_draws():
    from benchmark.pod import DASHBOARD_WIDGETS_PER_TEST_CASE
    from components.pairing.dashboard import dashboard_body
    from offline.stacks import load_stack

    spec = load_stack(QWEN).spec()
    widgets = dashboard_body(spec, spec.region)["widgets"]
    assert len(widgets) == 1 + DASHBOARD_WIDGETS_PER_TEST_CASE * len(spec.benchmark.test_cases)
    # A study adds its header and a widget per test case (benchmark/pod.py STUDY_DASHBOARD_WIDGETS).
    study = load_stack("qwen3-32b-study").spec()
    cases = len(study.benchmark.test_cases)
    assert len(dashboard_body(study, study.region)["widgets"]) == 1 + 1 + (DASHBOARD_WIDGETS_PER_TEST_CASE + 1) * cases


def test_the_largest_allowed_prompts_fit_the_config_map():
    """Guards TEST_CASE_PROMPTS_MAX_BYTES: at the limit, the benchmark ConfigMap is under 1 MiB."""
    import json

    from benchmark.pod import CLOUDWATCH_DIMENSION_VALUE_MAX, DASHBOARD_WIDGETS_PER_TEST_CASE, pod_code
    from components.pairing.benchmark import run_config
    from offline.stacks import load_stack
    from stackconfig.catalog import CONFIG_MAP_MAX_BYTES, DASHBOARD_MAX_WIDGETS, TEST_CASE_PROMPTS_MAX_BYTES

    spec = load_stack(QWEN).spec()

    def config_map_bytes(cases: dict, dimensions: str) -> int:
        benchmark = type(spec.benchmark)(**{**spec.benchmark.__dict__, "test_cases": cases, "metric_dimensions": dimensions})
        big = type(spec)(**{**spec.__dict__, "benchmark": benchmark})
        data = {**pod_code(spec.benchmark.llmperf_commit),
                "run-config.json": json.dumps(run_config(big, {v.name: "http://x" for v in spec.variants}), indent=2)}
        return sum(len(v.encode()) for v in data.values())

    assert config_map_bytes({f"case-{i}": "x" * (TEST_CASE_PROMPTS_MAX_BYTES // 8) for i in range(8)}, "names") < CONFIG_MAP_MAX_BYTES
    # With the EKS sample's dimensions each prompt is also a TestCase value, at most 1024
    # characters (validation), for as many test cases as the dashboard holds.
    most = (DASHBOARD_MAX_WIDGETS - 1) // DASHBOARD_WIDGETS_PER_TEST_CASE
    cases = {f"case-{i}": f"{i:03d}" + "x" * (CLOUDWATCH_DIMENSION_VALUE_MAX - 3) for i in range(most)}
    assert config_map_bytes(cases, "eks-sample") < CONFIG_MAP_MAX_BYTES
