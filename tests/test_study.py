"""A study in the stack file: its grid expanded and validated like hand-written variants, both
study stacks planned offline in both modes (and as `pulumi preview` sees them), the tuner's Role
allowing nothing but scaling its own servers and reading pods, and the plan's cost per mode."""
import json

import pytest

from offline.plan import study_lines
from offline.stacks import load_stack, run_stack
from rehearse.kubeapi import allowed
from stackconfig.timeline import study_modes

from .stackconfig_helpers import PLUGIN, SMALL, problems_for

STUDY_STACKS = ("qwen3-32b-study", "llama3.1-8b-eagle3-study")
ROLE, BINDING = "kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"


def in_mode(stack: str, mode: str):
    raw = load_stack(stack).config
    return load_stack(stack, {"sd-trn2:study": {**raw["sd-trn2:study"], "mode": mode}})


def benchmark_rules(recording) -> list[dict]:
    """Every rule of every Role bound to the benchmark's service account."""
    bound = {b.inputs["roleRef"]["name"] for b in recording.of_type(BINDING)
             if any(s["name"] == "llmperf" for s in b.inputs["subjects"])}
    return [rule for role in recording.of_type(ROLE) if role.inputs["metadata"]["name"] in bound for rule in role.inputs["rules"]]


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
@pytest.mark.parametrize("mode", ["sequential", "parallel"])
@pytest.mark.parametrize("stack", STUDY_STACKS)
def test_study_stacks_plan_in_both_modes(stack, mode, preview):
    stack_input = in_mode(stack, mode)
    spec = stack_input.spec()
    recording = run_stack(stack_input, preview=preview)
    sequential = mode == "sequential"
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs
    assert pool["spec"]["replicas"] == spec.node_count == (spec.sequential_node_count if sequential else spec.parallel_node_count)
    deployments = {d.inputs["metadata"]["name"]: d for d in recording.of_type("kubernetes:apps/v1:Deployment")
                   if d.inputs["metadata"]["name"].startswith("vllm-")}
    assert sorted(deployments) == sorted(f"vllm-{v.name}" for v in spec.variants)
    for deployment in deployments.values():
        assert deployment.inputs["spec"]["replicas"] == (0 if sequential else 1)
        assert deployment.ignore_changes == (["spec.replicas"] if sequential else [])
    rules = benchmark_rules(recording)
    servers = sorted(deployments)
    (role,) = [r for r in recording.of_type(ROLE) if r.inputs["metadata"]["name"] == "llmperf-tuner"]
    lease_rules = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["llmperf-tuner"],
                    "verbs": ["get", "update"]}]
    scale_rules = [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": [f"vllm-{v.name}" for v in spec.variants],
                    "verbs": ["get", "patch"]}]
    assert role.inputs["rules"] == [*lease_rules, *(scale_rules if sequential else []),
                                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    # Whatever the mode, the benchmark's account can change nothing but its servers' replica counts
    # and its own lease (one tuner per study: benchmark/lease.py).
    for server in servers:
        assert allowed(rules, "apps", "deployments/scale", "patch", server) == sequential
    assert allowed(rules, "coordination.k8s.io", "leases", "create", None)
    for verb in ("get", "update"):
        assert allowed(rules, "coordination.k8s.io", "leases", verb, "llmperf-tuner")
        assert not allowed(rules, "coordination.k8s.io", "leases", verb, "kube-controller-manager")
    for verb in ("delete", "patch", "list"):
        assert not allowed(rules, "coordination.k8s.io", "leases", verb, "llmperf-tuner" if verb != "list" else None)
    for verb, group, resource, name in [("patch", "apps", "deployments", servers[0]), ("update", "apps", "deployments/scale", servers[0]),
                                        ("patch", "apps", "deployments/scale", "coredns"), ("delete", "", "pods", None),
                                        ("create", "apps", "deployments", None), ("patch", "apps", "statefulsets/scale", servers[0]),
                                        ("get", "", "secrets", None), ("create", "", "pods/exec", None)]:
        assert not allowed(rules, group, resource, verb, name), (verb, resource, name)
    assert allowed(rules, "", "pods", "list", None)
    # The tuner runs in the benchmark's Job with what it needs to know.
    config = json.loads(recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]["run-config.json"])
    assert config["study"]["scales"] == sequential and config["study"]["repeats"] == 3
    assert config["study"]["id"].startswith("study-") and len(config["study"]["grid"]) == len(spec.variants) - 1
    job = recording.one("kubernetes:batch/v1:Job", "benchmark-run")
    assert job.inputs["spec"]["template"]["spec"]["containers"][0]["command"][-1].splitlines()[-1].startswith("exec python -m benchmark.tuner ")
    # A changed study replaces its Job old-first: two tuners never share the nodes.
    assert job.delete_before_replace
    # Servers Pulumi sizes force their count back from the tuner (leaving sequential mode).
    for deployment in deployments.values():
        assert ("pulumi.com/patchForce" in deployment.inputs["metadata"]["annotations"]) == (not sequential)


def test_the_plan_shows_time_and_cost_of_each_mode():
    spec = load_stack("qwen3-32b-study").spec()
    sequential, parallel = study_modes(spec)
    assert (sequential.mode, sequential.nodes, parallel.mode, parallel.nodes) == ("sequential", 1, "parallel", 5)
    # Sequential starts the nine servers one after another; parallel all at once: parallel is
    # shorter on a first study and costs more nodes; once compiled, the time is the measuring.
    assert sequential.first_hours > parallel.first_hours and sequential.usd(sequential.repeat_hours) < parallel.usd(parallel.repeat_hours)
    lines = "\n".join(study_lines(spec))
    assert "sequential (this stack)" in lines and "parallel " in lines and "5 trn2 node(s)" in lines
    assert "vllm-base, vllm-qwen3-0-6b-k5" in lines and "TTFT <= 1000 ms and TPOT <= 40 ms" in lines


def test_the_405b_stack_needs_one_node_in_sequential_mode():
    spec = load_stack("llama3.1-405b-llama3.2-1b", {"sd-trn2:study": {"mode": "sequential"}}).spec()
    assert (spec.parallel_node_count, spec.node_count, spec.pairs_fit_together) == (3, 1, False)
    assert spec.tuned_servers == spec.variants and spec.study.grid == ()


def test_the_grid_expands_into_named_variants_each_with_its_own_compiled_set():
    spec = load_stack("qwen3-32b-study").spec()
    sd = [v for v in spec.variants if v.is_speculative]
    assert [v.name for v in sd] == [f"qwen3-{d}-k{w}" for d in ("0-6b", "1-7b") for w in (5, 7, 10, 15)]
    assert all(v.baseline == "base" and v.draft_max_model_len == 1024 for v in sd)
    assert len({v.artifact_path for v in spec.variants}) == len(spec.variants)
    # The same configuration by hand compiles into the same path: a study reuses a stack's sets.
    by_hand = load_stack("qwen3-32b-qwen3-1.7b").spec().variant("sd")
    assert spec.variant("qwen3-1-7b-k7").compile_settings == by_hand.compile_settings


GRID = {**SMALL, "variants": [{"name": "base", "role": "baseline"}],
        "study": {"drafts": ["Qwen/Qwen3-1.7B"], "windows": [5, 7]}}


@pytest.mark.parametrize("study, problems", [
    ({"drafts": ["Qwen/Qwen3-1.7B"], "windows": [1, 16, True]},
     {"study.windows[1]": "16 is not a speculative window in 1..15", "study.windows[2]": "True is not a speculative window in 1..15"}),
    ({"drafts": ["Qwen/Qwen3-1.7B"], "windows": [5, 5]}, {"study.windows": "lists a window more than once"}),
    ({"drafts": ["Qwen/Qwen3-1.7B"]}, {"study.windows": "drafts and windows make the grid together"}),
    ({"drafts": ["Qwen/Qwen3-9B"], "windows": [5]}, {"study.drafts[0].model": "'Qwen/Qwen3-9B' is not a known model"}),
    ({"drafts": [{"model": "Qwen/Qwen3-1.7B", "labl": "x"}], "windows": [5]}, {"study.drafts[0].labl": "unknown key"}),
    ({"drafts": ["Qwen/Qwen3-1.7B", {"model": "Qwen/Qwen3-0.6B", "label": "qwen3-1-7b"}], "windows": [5]},
     {"study.drafts[1].label": "labels another draft too"}),
    ({"drafts": [{"model": "Qwen/Qwen3-1.7B", "label": "a-very-long-label-for-this-draft"}], "windows": [5, 15]},
     {"study.drafts[0].label": "'a-very-long-label-for-this-draft-k15'"}),
    ({"repeats": 0, "mode": "serial"}, {"study.repeats": "0 is outside 1..10", "study.mode": "'serial' is not one of sequential, parallel"}),
    ({"drafts": ["Qwen/Qwen3-1.7B"], "windows": [5], "draftMaxModelLen": 4096},
     {"study(draft Qwen/Qwen3-1.7B, window 5).draftMaxModelLen": "4096 is above serving.maxModelLen 1024"}),
])
def test_a_bad_study_names_its_keys(study, problems):
    found = problems_for({**GRID, "study": study})
    for key, message in problems.items():
        assert message in found.get(key, ""), (key, found)


def test_grid_variants_are_checked_like_hand_written_ones():
    # An EAGLE3 head on the legacy engine: refused for each point, under the point's own key.
    found = problems_for({**GRID, "study": {"drafts": ["RedHatAI/Qwen3-32B-speculator.eagle3"], "windows": [3]}})
    assert "speculates as 'eagle3' on vllm-neuron only" in found["study(draft RedHatAI/Qwen3-32B-speculator.eagle3, window 3).draft"]
    # A grid point named like a hand-written variant.
    clash = {**GRID, "variants": [*GRID["variants"], {"name": "qwen3-1-7b-k5", "role": "sd", "draft": "Qwen/Qwen3-1.7B",
                                                       "numSpeculativeTokens": 6}]}
    assert problems_for(clash)["variants"] == "variant name 'qwen3-1-7b-k5' is used more than once"
    # The same configuration twice compiles into one path: said once.
    same = {**GRID, "variants": [*GRID["variants"], {"name": "mine", "role": "sd", "draft": "Qwen/Qwen3-1.7B", "numSpeculativeTokens": 5}]}
    assert "compile into the same path" in problems_for(same)["variants"]


def test_a_study_of_heads_labels_them_and_a_study_without_a_grid_measures_the_hand_written_variants():
    head = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
    found = problems_for({**PLUGIN, "variants": PLUGIN["variants"][:1], "study": {"drafts": [head], "windows": [1, 7]}})
    assert "give this draft a short label" in found["study.drafts[0].model"]
    spec = load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:study": {}}).spec()
    assert (spec.study.mode, spec.study.repeats, spec.study.grid) == ("sequential", 3, ())
    assert [v.name for v in spec.tuned_servers] == ["base", "sd"]


def test_plain_drafts_can_be_timed_alone_at_the_stacks_shape():
    raw = load_stack("qwen3-32b-study").config
    stack_input = load_stack("qwen3-32b-study", {"sd-trn2:study": {**raw["sd-trn2:study"], "timeDraftsAlone": True}})
    spec = stack_input.spec()
    assert spec.study.drafts_alone == {"qwen3-0-6b-alone": "Qwen/Qwen3-0.6B", "qwen3-1-7b-alone": "Qwen/Qwen3-1.7B"}
    alone = spec.variant("qwen3-1-7b-alone")
    # Served like the baseline, with the draft as its model, and compared with the baseline.
    assert (alone.role, alone.target, alone.baseline, alone.tensor_parallel_size) == ("baseline", "Qwen/Qwen3-1.7B", "base", 32)
    assert not alone.is_speculative and alone.artifact_path != spec.variant("base").artifact_path
    recording = run_stack(stack_input)
    config = json.loads(recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]["run-config.json"])
    assert config["study"]["draftsAlone"] == spec.study.drafts_alone
    # An EAGLE3 head cannot run alone (it needs the target's hidden states): none is added.
    head = {**PLUGIN, "variants": PLUGIN["variants"][:1],
            "study": {"drafts": [{"model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "label": "eagle3"}], "windows": [3],
                      "timeDraftsAlone": True}}
    from .stackconfig_helpers import parse
    assert parse(head).study.drafts_alone == {}


def test_with_several_baselines_the_study_names_its_own():
    other = {"name": "other", "role": "baseline", "baseline": "base", "neuronConfig": {"skip_warmup": True}}
    two = {**GRID, "variants": [{"name": "base", "role": "baseline"}, other]}
    assert "is required when there are several baselines: base, other" in problems_for(two)["study.baseline"]
    from .stackconfig_helpers import parse
    spec = parse({**two, "study": {**GRID["study"], "baseline": "other"}})
    assert {v.baseline for v in spec.variants if v.is_speculative} == {"other"}


def test_a_grid_too_large_for_one_dashboard_widget_is_refused():
    """7 drafts x 7 windows = 49 configurations and a baseline: the acceptance widget's 2 x 50 = 100
    metrics fit, the study view's 2 x 49 + 1 = 99 too; 56 configurations do not."""
    drafts = [{"model": "Qwen/Qwen3-1.7B", "label": f"d{i}"} for i in range(7)]
    grid = {**GRID, "study": {"drafts": drafts, "windows": [1, 2, 3, 4, 5, 6, 7]}}
    found = problems_for(grid)
    assert "study" not in found
    grid["study"]["drafts"] = drafts + [{"model": "Qwen/Qwen3-1.7B", "label": "d7"}]
    grid["study"]["windows"] = [1, 2, 3, 4, 5, 6, 7]
    assert problems_for(grid)["study"].startswith("57 variants (56 SD configurations) need 114 metrics and expressions")
    # The stack's acceptance widget draws two metrics per variant, drafts served alone included.
    alone = {**GRID, "study": {"drafts": [{"model": "Qwen/Qwen3-1.7B", "label": f"d{i}"} for i in range(4)],
                               "windows": list(range(1, 13)), "timeDraftsAlone": True}}
    assert problems_for(alone)["study"].startswith("53 variants (48 SD configurations) need 106 metrics")


def test_the_tuner_reads_back_its_own_pairings_results_only():
    """What resuming calls (benchmark/tuner.py: S3Mirror.exists lists a key, recall gets it),
    asked of the runner role's policy: its own results, never another pairing's, never a delete."""
    from .helpers import role_documents
    from .iam_eval import allows

    for stack, resumes in (("qwen3-32b-study", True), ("qwen3-32b-qwen3-1.7b", False)):
        spec = load_stack(stack).spec()
        recording = run_stack(load_stack(stack))
        _, policy = role_documents(recording, "benchmark-runner")
        bucket = recording.one("aws:s3/bucket:Bucket", "model-store").outputs["arn"]
        key = f"{spec.results_prefix}study-0123456789-llmperf-1a2b3c4d/study.json"
        assert allows(policy, "s3:GetObject", f"{bucket}/{key}") == resumes
        assert allows(policy, "s3:ListBucket", bucket, {"s3:prefix": key}) == resumes
        other = "results/another-pairing/study-0123456789/study.json"
        assert not allows(policy, "s3:GetObject", f"{bucket}/{other}")
        assert not allows(policy, "s3:ListBucket", bucket, {"s3:prefix": other})
        assert not allows(policy, "s3:DeleteObject", f"{bucket}/{key}")
        assert allows(policy, "s3:PutObject", f"{bucket}/{key}")


def test_drafts_served_alone_are_no_default_baseline():
    """A hand-written SD variant that names no baseline still gets the stack's one baseline when
    drafts are timed alone (they are baselines too, but nothing is compared with them by default)."""
    from .stackconfig_helpers import parse

    spec = parse({**SMALL, "study": {"drafts": ["Qwen/Qwen3-0.6B"], "windows": [5], "timeDraftsAlone": True}})
    assert spec.variant("sd").baseline == "base" and spec.variant("qwen3-0-6b-alone").baseline == "base"
