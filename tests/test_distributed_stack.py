"""distributed as a serving mode (stackconfig/engines/distributed.py, components/pairing/distributed_variant.py):
the seed 002 stack's plan shows the two pods on their own device groups, the one network flow
between them and the benchmark pointed at the draft; bad input exits 2 naming the key."""
from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from components.pairing.distributed_variant import peer_flows
from distributed import pod as distributed_pod
from distributed.config import draft_settings, target_settings
from offline import plan
from stackconfig.engines.distributed import TARGET_PORT
from stackconfig.model import pack_device_groups
from stackconfig.source import PROJECT_DIR, load_stack

from .conftest import recorded
from .helpers import plan_copy, project_copy
from .stackconfig_helpers import edited, parse, problem_list
from .test_network_policy import Pod, allowed, rendered_pods, rendered_policies

STACK = "llama3.1-8b-distributed"
TARGET, DRAFT = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"
PAIRING = {
    "serving": {"target": TARGET, "devicesPerVariant": 1, "logicalNeuronCores": 2, "maxNumSeqs": 1, "maxModelLen": 128},
    "variants": [{"name": "base", "role": "baseline"},
                 {"name": "dist", "role": "sd", "engine": "distributed", "draft": DRAFT, "numSpeculativeTokens": 4}],
    "benchmark": {"inputTokens": 48, "outputTokens": 64, "samplingParams": {"temperature": 0.9, "top_p": 1.0}},
    "huggingFaceToken": "hf_x",
}
"""A baseline on nxdi-legacy and a distributed variant: gamma 4, the target compiled for 5 positions."""


def deployments(recording) -> dict[str, dict]:
    return {d.inputs["metadata"]["name"]: d.inputs for d in recording.of_type("kubernetes:apps/v1:Deployment")}


def services(recording) -> dict[str, dict]:
    return {s.inputs["metadata"]["name"]: s.inputs for s in recording.of_type("kubernetes:core/v1:Service")}


def server(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


# ---------------------------------------------------------------------------------------------
# The stack's plan


def test_the_plan_shows_two_pods_on_their_own_device_groups_behind_a_service_each():
    recording = recorded(STACK)
    pods, svcs = deployments(recording), services(recording)
    target, draft = pods["vllm-distributed-target"], pods["vllm-distributed-draft"]
    for deployment in (target, draft):
        spec = deployment["spec"]["template"]["spec"]
        # Its own claim (one device each here), on the pairing's trn2 nodes.
        assert spec["resourceClaims"] == [{"name": "neurons", "resourceClaimTemplateName": "neuron-1-device"}]
        assert server(deployment)["resources"]["claims"] == [{"name": "neurons"}]
    assert [a for a in server(target)["args"][:2]] == ["-m", "distributed.target_server"]
    assert [a for a in server(draft)["args"][:2]] == ["-m", "distributed.draft_server"]
    assert {"name": "SERVER_PROGRAM", "value": "python3"} in server(target)["env"]
    # The draft finds its target by its Service, on the gRPC port.
    args = server(draft)["args"]
    namespace = load_stack(STACK).spec().namespace
    assert args[args.index("--target") + 1] == f"vllm-distributed-target.{namespace}.svc.cluster.local:{TARGET_PORT}"
    assert svcs["vllm-distributed-target"]["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000},
                                                                {"name": "grpc", "port": TARGET_PORT, "targetPort": TARGET_PORT}]
    assert svcs["vllm-distributed-draft"]["spec"]["ports"][0]["port"] == 8000
    # gamma 4 on a target compiled for 5 positions; one session at a time (batch 1).
    target_args = server(target)["args"]
    assert target_args[target_args.index("--speculation-length") + 1] == "5" and args[args.index("--gamma") + 1] == "4"
    # Each pod loads its own model and publishes its own compiled set.
    env = {d: {e["name"]: e["value"] for e in server(pods[d])["env"]} for d in pods}
    assert "/llama-3-2-1b/" in env["vllm-distributed-draft"]["WEIGHTS_DIR"]
    assert "/llama-3-1-8b/" in env["vllm-distributed-target"]["WEIGHTS_DIR"]
    assert env["vllm-distributed-target"]["COMPILE_DIR"].endswith("/target")
    assert env["vllm-distributed-draft"]["COMPILE_DIR"].endswith("/draft")
    assert "DRAFT_WEIGHTS_DIR" not in env["vllm-distributed-target"]
    # same-node: the draft is placed with its target.
    affinity = draft["spec"]["template"]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["labelSelector"]["matchLabels"]["sd-trn2/server"] == "target"


def test_the_pods_install_the_pinned_lock_with_hashes_from_the_code_config_map():
    recording = recorded(STACK)
    spec = deployments(recording)["vllm-distributed-target"]["spec"]["template"]["spec"]
    install = next(c for c in spec["initContainers"] if c["name"] == "install")
    # Neither the installer nor the server takes the pod's AWS identity; the publisher alone does.
    template = deployments(recording)["vllm-distributed-target"]["spec"]["template"]
    assert template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"] == "vllm,install"
    assert "--require-hashes --no-deps --target /opt/distributed-deps" in install["command"][-1]
    assert install["securityContext"]["runAsNonRoot"] and install["securityContext"]["readOnlyRootFilesystem"]
    code = recording.one("kubernetes:core/v1:ConfigMap", "serving-distributed-code").inputs["data"]
    assert set(code) == {distributed_pod.config_map_key(m) for m in distributed_pod.POD_MODULES} | {distributed_pod.LOCK}
    # Every module the servers import is shipped (a missing one fails only on Trainium).
    for name in distributed_pod.POD_MODULES:
        assert (PROJECT_DIR / "distributed" / name).is_file()
    lock = code[distributed_pod.LOCK]
    assert "grpcio==" in lock and "protobuf==" in lock and "--hash=sha256:" in lock


def test_the_fence_admits_exactly_draft_to_target_grpc():
    recording = recorded(STACK)
    policies, pods = rendered_policies(recording), rendered_pods(recording)
    by_name = {p.name: p for p in pods["vllm"]}
    draft, target, fused = by_name["vllm-distributed-draft"], by_name["vllm-distributed-target"], by_name["vllm-fused"]
    bench = pods["llmperf"][0]
    assert allowed(policies, draft, target, TARGET_PORT)
    assert not allowed(policies, target, draft, TARGET_PORT) and not allowed(policies, draft, target, 8001)
    assert not allowed(policies, fused, target, TARGET_PORT) and not allowed(policies, bench, target, TARGET_PORT)
    # A draft of another variant is not admitted: the flow names this variant's pods.
    other = Pod(draft.namespace, {**draft.labels, "sd-trn2/variant": "other"}, "other-draft")
    assert not allowed(policies, other, target, TARGET_PORT)
    assert allowed(policies, bench, draft, 8000)


def test_the_benchmark_measures_the_drafts_endpoint():
    recording = recorded(STACK)
    data = recording.one("kubernetes:core/v1:ConfigMap", "benchmark-code").inputs["data"]
    variants = {v["name"]: v for v in json.loads(data["run-config.json"])["variants"]}
    namespace = load_stack(STACK).spec().namespace
    assert variants["distributed"]["endpoint"] == f"http://vllm-distributed-draft.{namespace}.svc.cluster.local:8000/v1"
    assert [s["deployment"] for s in variants["distributed"]["servers"]] == ["vllm-distributed-target", "vllm-distributed-draft"]
    assert variants["distributed"]["commitKey"].endswith("/draft/commit.json")
    assert variants["distributed"]["decoding"] == "sampled" and variants["fused"]["decoding"] == "greedy"
    assert set(variants) == {"base", "fused", "distributed"}


def test_the_plan_summary_names_the_pods_groups_flow_and_endpoint(tmp_path, capsys):
    assert plan.main(["--stack", STACK, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "device groups      1 device(s)" in out
    assert "server vllm-distributed-target" in out and "server vllm-distributed-draft" in out
    assert f"flow             vllm-distributed-draft -> vllm-distributed-target gRPC {TARGET_PORT}" in out
    assert "benchmark        http://vllm-distributed-draft." in out
    assert "trn2 nodes         1 " in out


def test_the_distributed_objects_validate_strictly():
    """tests/test_manifests.py validates every object of every stack, this one's included; here the
    distributed variant's own, so a failure names them."""
    objects = [r.inputs for r in recorded(STACK).kubernetes_objects()
               if "distributed" in r.inputs["metadata"]["name"] and r.inputs["kind"] in ("Deployment", "Service", "ConfigMap", "NetworkPolicy")]
    assert {o["kind"] for o in objects} == {"Deployment", "Service", "ConfigMap", "NetworkPolicy"}
    for obj in objects:
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


# ---------------------------------------------------------------------------------------------
# Placement, packing


def test_separate_node_keeps_the_draft_off_the_targets_node_and_counts_a_node_more():
    same = parse(PAIRING)
    apart = parse(edited(PAIRING, "variants[1].placement", "separate-node"))
    assert same.parallel_node_count == 1 and apart.parallel_node_count == 2
    assert [s.node for s in apart.variant("dist").servers] == [0, 1]
    assert same.device_group_sizes == (1,)
    # The packing keeps groups of one key apart even where they would fit together.
    assert pack_device_groups([1, 1], 16, ["v", "v"]) == [[1], [1]]
    assert pack_device_groups([1, 1], 16, [None, None]) == [[1, 1]]


def test_the_draft_is_placed_apart_from_its_target_with_separate_node():
    from components.pairing.distributed_variant import affinity
    variant = parse(edited(PAIRING, "variants[1].placement", "separate-node")).variant("dist")
    draft = next(s for s in variant.servers if s.part == "draft")
    assert "podAntiAffinity" in affinity(variant, draft)


def test_peer_flows_are_per_variant():
    variant = parse(PAIRING).variant("dist")
    (flow,) = peer_flows(variant)
    assert flow.source["sd-trn2/server"] == "draft" and flow.destination["sd-trn2/server"] == "target"
    assert flow.source["sd-trn2/variant"] == flow.destination["sd-trn2/variant"] == "dist" and flow.port == TARGET_PORT


# ---------------------------------------------------------------------------------------------
# Bad input: exit 2, naming the key


def test_a_placement_that_does_not_fit_the_node_is_refused_by_key():
    one_device = edited(PAIRING, "capacity", {"instanceType": "trn2.3xlarge"})
    problems = problem_list(one_device)
    assert [k for k, _ in problems] == ["variants[1].placement"], problems
    assert "target 1 + draft 1" in problems[0][1] and "trn2.3xlarge has 1" in problems[0][1]
    # On another node each fits its own.
    parse(edited(one_device, "variants[1].placement", "separate-node"))


@pytest.mark.parametrize(("edit", "value", "key"), [
    ("variants[1].numSpeculativeTokens", 0, "variants[1].numSpeculativeTokens"),
    ("variants[1].numSpeculativeTokens", 5, "variants[1].numSpeculativeTokens"),
    ("variants[1].placement", "elsewhere", "variants[1].placement"),
    ("variants[1].speculationLength", 1, "variants[1].speculationLength"),
])
def test_bad_gamma_and_placement_are_refused_by_key(edit, value, key):
    values = edited(PAIRING, edit, value)
    if edit.endswith("numSpeculativeTokens") and value == 5:
        values = edited(values, "variants[1].speculationLength", 5)
    assert key in [k for k, _ in problem_list(values)]


def test_gamma_above_the_compiled_speculation_length_is_refused_and_within_it_accepted():
    (key, message), = problem_list(edited(edited(PAIRING, "variants[1].speculationLength", 4), "variants[1].numSpeculativeTokens", 4))
    assert key == "variants[1].numSpeculativeTokens" and "speculation length 4 - 1" in message
    assert parse(edited(PAIRING, "variants[1].speculationLength", 8)).variant("dist").neuron_config["target"]["speculation_length"] == 8


def test_a_draft_whose_tokenizer_differs_from_the_targets_is_refused_by_key():
    problems = problem_list(edited(PAIRING, "variants[1].draft", "Qwen/Qwen3-0.6B"))
    assert any(k == "variants[1].draft" and "tokenizer" in m for k, m in problems), problems


def test_settings_the_neuron_backend_cannot_take_are_refused_by_key():
    problems = problem_list(edited(edited(PAIRING, "serving.maxNumSeqs", 2), "serving.neuronConfig", {"fused_qkv": True}))
    mine = [(k, m) for k, m in problems if k.startswith("variants[1]")]
    assert [k for k, _ in mine] == ["variants[1].engine", "variants[1].engine"]
    assert "serving.neuronConfig (fused_qkv)" in mine[0][1] and "serving.maxNumSeqs is 2" in mine[1][1]
    assert problem_list(edited(PAIRING, "variants[1].neuronConfig", {"fused_qkv": True})) == [
        ("variants[1].neuronConfig.fused_qkv", "distributed compiles with distributed/neuron.py's settings only (docs/distributed.md)")]


def test_placement_on_a_vllm_variant_and_a_distributed_baseline_are_refused():
    problems = problem_list(edited(PAIRING, "variants[0].placement", "same-node"))
    assert [k for k, _ in problems] == ["variants[0].placement"] and "distributed engine only" in problems[0][1]
    problems = dict(problem_list(edited(PAIRING, "variants[0].engine", "distributed")))
    assert "variants[0].role" in problems


def test_the_command_line_exits_2_naming_the_key(tmp_path):
    project = project_copy(tmp_path / "project")
    path = project / "stacks" / f"Pulumi.{STACK}.yaml"
    config = yaml.safe_load(path.read_text())
    config["config"]["sd-trn2:variants"][2]["numSpeculativeTokens"] = 0
    config["config"]["sd-trn2:capacity"] = {"instanceType": "trn2.3xlarge"}
    path.write_text(yaml.safe_dump(config))
    result = plan_copy(project, STACK, tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert "variants[2].numSpeculativeTokens" in result.stderr and "variants[2].placement" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------
# What the pods run parses as the servers' own settings


def test_the_rendered_arguments_are_valid_server_settings(tmp_path):
    recording = recorded(STACK)
    pods = deployments(recording)
    for name, settings in (("vllm-distributed-target", target_settings), ("vllm-distributed-draft", draft_settings)):
        args = server(pods[name])["args"][2:]
        # The model directory exists only on the node: stand one in.
        args[args.index("--model") + 1] = str(tmp_path)
        parsed = settings(args)
        assert parsed.backend == "neuron" and parsed.host == "0.0.0.0"
