"""Karpenter, the static trn2 NodePool, the Neuron DRA driver and its claim templates."""
import json
from pathlib import Path

import pytest

from components.pairing.trn2_nodes import node_pool_spec
from offline.stacks import load_stack, run_stack
from stackconfig import ConfigError

from .helpers import assert_least_privilege, child, role_documents, trust_condition


def test_karpenter_controller_trust_is_pinned_to_its_service_account(recording):
    trust, _ = role_documents(recording, "karpenter-controller")
    condition = trust_condition(trust)
    subs = [v for k, v in condition.items() if k.endswith(":sub")]
    auds = [v for k, v in condition.items() if k.endswith(":aud")]
    assert subs == ["system:serviceaccount:kube-system:karpenter"] and auds == ["sts.amazonaws.com"]


def test_karpenter_controller_policy_is_scoped(recording, spec):
    _, policy = role_documents(recording, "karpenter-controller")
    assert assert_least_privilege(policy) >= 15
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    node_role = recording.one("aws:iam/role:Role", "karpenter-node")
    queue = recording.one("aws:sqs/queue:Queue")
    assert by_sid["AllowPassingInstanceRole"]["Resource"] == node_role.outputs["arn"]
    assert "ec2.amazonaws.com" in by_sid["AllowPassingInstanceRole"]["Condition"]["StringEquals"]["iam:PassedToService"]
    assert by_sid["AllowInterruptionQueueActions"]["Resource"] == queue.outputs["arn"]
    owned = f"aws:ResourceTag/kubernetes.io/cluster/{spec.cluster_name}"
    for sid in ("AllowScopedDeletion", "AllowScopedEC2LaunchTemplateAccessActions", "AllowScopedInstanceProfileActions"):
        assert by_sid[sid]["Condition"]["StringEquals"][owned] == "owned", sid
    assert by_sid["AllowRegionalReadActions"]["Condition"]["StringEquals"]["aws:RequestedRegion"] == spec.region
    assert by_sid["AllowAPIServerEndpointDiscovery"]["Resource"].endswith(f":cluster/{spec.cluster_name}")
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    for needed in ("ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:TerminateInstances",
                   "ec2:DeleteLaunchTemplate", "ec2:DescribeInstanceTypes", "ssm:GetParameter", "pricing:GetProducts",
                   "iam:PassRole", "iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
                   "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile",
                   "sqs:ReceiveMessage", "eks:DescribeCluster"):
        assert needed in actions, needed


def test_node_role_has_the_three_policies_a_node_uses_and_an_ec2_linux_access_entry(recording):
    role = recording.one("aws:iam/role:Role", "karpenter-node")
    attached = sorted(r.inputs["policyArn"].rsplit("/", 1)[-1] for r in recording.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if r.parent == role.urn)
    assert attached == ["AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy"]
    entry = recording.one("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["type"] == "EC2_LINUX" and entry.inputs["principalArn"] == role.outputs["arn"]


def test_interruption_queue_is_encrypted_tls_only_and_fed_by_eventbridge(recording):
    queue = recording.one("aws:sqs/queue:Queue")
    assert queue.inputs["messageRetentionSeconds"] == 300 and queue.inputs["sqsManagedSseEnabled"] is True
    policy = json.loads(recording.one("aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    deny = next(s for s in policy["Statement"] if s["Effect"] == "Deny")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = recording.of_type("aws:cloudwatch/eventRule:EventRule")
    detail_types = {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules}
    assert {"AWS Health Event", "EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation",
            "EC2 Instance State-change Notification", "EC2 Capacity Reservation Instance Interruption Warning"} == detail_types
    targets = recording.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == len(rules) and all(t.inputs["arn"] == queue.outputs["arn"] for t in targets)


def test_karpenter_helm_values(recording, spec):
    release = recording.one("kubernetes:helm.sh/v3:Release", "karpenter")
    inputs = release.inputs
    assert (inputs["name"], inputs["namespace"], inputs["version"]) == ("karpenter", "kube-system", "1.15.0")
    assert inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    values = inputs["values"]
    assert values["settings"]["clusterName"] == spec.cluster_name
    assert values["settings"]["interruptionQueue"] == spec.cluster_name
    assert values["settings"]["featureGates"]["staticCapacity"] is True
    _, _ = role_documents(recording, "karpenter-controller")
    role = child(recording, recording.one("sdtrn2:iam:WorkloadRole", "karpenter-controller"), "aws:iam/role:Role")
    assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] == role.outputs["arn"]
    assert values["nodeSelector"] == {"sd-trn2/node-role": "system"}
    assert values["controller"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}


def test_static_node_pool_sized_from_the_variants(recording, spec):
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs["spec"]
    assert pool["replicas"] == spec.node_count == pool["limits"]["nodes"]
    assert pool["limits"] == {"nodes": spec.node_count}
    template = pool["template"]["spec"]
    assert {"key": "aws.amazon.com/neuron", "effect": "NoSchedule"} in template["taints"]
    requirements = {r["key"]: r["values"] for r in template["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == [spec.capacity.instance_type]
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    # Replacing a node loses its weight cache and compiled graphs: nodes live as long as the stack.
    assert template["expireAfter"] == "Never"
    assert pool["disruption"] == {"consolidateAfter": "Never"}


def test_replacement_headroom_lets_the_node_pool_go_one_node_over_its_replicas_and_no_more():
    """Karpenter's static drift replaces a drifted node only under limits.nodes (staticdrift.go):
    with headroom 1 the limit is one above the replicas; the replicas never change."""
    spec = load_stack("qwen3-32b-qwen3-0.6b", {"sd-trn2:capacity": {"replacementHeadroomNodes": 1}}).spec()
    pool = node_pool_spec("pool", spec.capacity, spec.node_count, {}, {"key": "k", "effect": "NoSchedule"})
    assert (pool["replicas"], pool["limits"]) == (2, {"nodes": 3})
    with pytest.raises(ConfigError, match="replacementHeadroomNodes: 2 is outside 0..1"):
        load_stack("qwen3-32b-qwen3-0.6b", {"sd-trn2:capacity": {"replacementHeadroomNodes": 2}}).spec()


def test_ec2_node_class(recording, spec):
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs["spec"]
    (alias,) = node_class["amiSelectorTerms"]
    assert alias["alias"].startswith("al2023@v") and "latest" not in alias["alias"]
    assert node_class["instanceStorePolicy"] == "RAID0"
    (root,) = node_class["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and int(root["ebs"]["volumeSize"].rstrip("Gi")) >= 100
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    discovery = [{"tags": {"karpenter.sh/discovery": spec.cluster_name}}]
    assert node_class["subnetSelectorTerms"] == discovery == node_class["securityGroupSelectorTerms"]
    assert node_class["tags"]["stack"] == spec.stack
    # Keys Karpenter reserves for itself (CEL rules in the CRD, not checked by the schema test).
    for key in node_class["tags"]:
        assert key not in {"eks:eks-cluster-name", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim"}
        assert not key.startswith("kubernetes.io/cluster")
    assert node_class["role"] == recording.one("aws:iam/role:Role", "karpenter-node").outputs["name"]
    assert "capacityReservationSelectorTerms" not in node_class


def test_capacity_reservations_flow_into_node_class_and_pool():
    stack_input = load_stack("qwen3-32b-qwen3-1.7b", {
        "sd-trn2:capacity": {"capacityType": "reserved", "reservationIds": ["cr-0abc123def4567890"]},
        "sd-trn2:cluster": {"availabilityZones": ["us-east-2b", "us-east-2c"]}})
    recording = run_stack(stack_input)
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs["spec"]
    assert node_class["capacityReservationSelectorTerms"] == [{"id": "cr-0abc123def4567890"}]
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs["spec"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in pool["template"]["spec"]["requirements"]


@pytest.mark.parametrize("overrides, key", [
    ({"sd-trn2:capacity": {"reservationIds": ["cr-0abc123def4567890"]}}, "capacity.capacityType"),
    ({"sd-trn2:capacity": {"instanceType": "trn2.3xlarge"}}, "serving.devicesPerVariant"),
])
def test_invalid_capacity_settings_fail_clearly(overrides, key):
    with pytest.raises(ConfigError) as caught:
        load_stack("qwen3-32b-qwen3-1.7b", overrides).spec()
    assert key in dict(caught.value.problems)


def test_neuron_dra_driver_release(recording):
    release = recording.one("kubernetes:helm.sh/v3:Release", "neuron-dra")
    inputs = release.inputs
    assert inputs["chart"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    assert inputs["version"] and inputs["version"][0].isdigit()
    values = inputs["values"]
    assert values["draDriver"]["enabled"] is True and values["devicePlugin"]["enabled"] is False
    assert values["npd"]["enabled"] is False and values["scheduler"]["enabled"] is False
    assert "tolerations" not in values["draDriver"]


def test_the_dra_driver_keeps_the_charts_tolerations_which_tolerate_the_trn2_taint(recording):
    """A tolerations value would replace the chart's three defaults (the earlier override kept one),
    so none is given; the defaults tolerate the taint the trn2 nodes carry. Read from the chart's
    values at 1.9.0 (tests/data); the pinned 1.10.0's could not be read."""
    import yaml

    defaults = yaml.safe_load((Path(__file__).parent / "data" / "neuron-helm-chart-1.9.0-dra-tolerations.yaml").read_text())
    taint = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs["spec"]["template"]["spec"]["taints"][0]
    tolerating = [t for t in defaults["draDriver"]["tolerations"] if t["key"] == taint["key"]
                  and t.get("effect") in (None, taint["effect"]) and t["operator"] == "Exists"]
    assert len(tolerating) == 1 and len(defaults["draDriver"]["tolerations"]) == 3


def test_exactly_one_thing_creates_the_dra_driver_namespace(recording):
    """The chart renders its own Namespace (draDriver.namespaceOverride); the release must not
    live in it with create_namespace, or Helm creates it first and then fails on the chart's copy."""
    inputs = recording.one("kubernetes:helm.sh/v3:Release", "neuron-dra").inputs
    assert inputs["namespace"] == "kube-system"
    assert not inputs.get("createNamespace")
    assert inputs["values"]["draDriver"]["namespaceOverride"] == "neuron-dra-driver"
    namespaces = [o.inputs["metadata"]["name"] for o in recording.kubernetes_objects() if o.inputs["kind"] == "Namespace"]
    assert "neuron-dra-driver" not in namespaces and "kube-system" not in namespaces
    creators = [r for r in recording.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("createNamespace")]
    assert creators == []


def test_karpenter_crds_come_from_their_own_chart(recording):
    """Helm never upgrades a chart's crds/: the CRDs are a release of karpenter-crd at the same
    version, and the controller release skips its own copy."""
    crds = recording.one("kubernetes:helm.sh/v3:Release", "karpenter-crd")
    controller = recording.one("kubernetes:helm.sh/v3:Release", "karpenter")
    assert crds.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert (crds.inputs["name"], crds.inputs["namespace"]) == ("karpenter-crd", "kube-system")
    assert crds.inputs["version"] == controller.inputs["version"] == "1.15.0"
    assert controller.inputs["skipCrds"] is True and not crds.inputs.get("skipCrds")
    assert crds.urn in controller.dependencies
    for kind in ("kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"):
        for node_object in recording.of_type(kind):  # the trn2 nodes and the preparation nodes
            assert crds.urn in node_object.dependencies, node_object.name


def test_one_claim_template_per_device_group_size(recording, spec):
    templates = recording.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    assert sorted(t.inputs["metadata"]["name"] for t in templates) == sorted(
        f"neuron-{n}-device{'s' if n > 1 else ''}" for n in spec.device_group_sizes)
    for template in templates:
        devices = int(template.inputs["metadata"]["labels"]["sd-trn2/devices"])
        claim = template.inputs["spec"]["spec"]["devices"]
        (request,) = claim["requests"]
        assert request["exactly"] == {
            "deviceClassName": "neuron.aws.com", "allocationMode": "ExactCount", "count": devices,
            "selectors": [{"cel": {"expression": f"device.attributes['neuron.aws.com'].instanceType == '{spec.capacity.instance_type}'"}}],
        }
        group = min(size for size in (1, 4, 8, 16) if size >= devices)
        assert claim["constraints"] == [{"requests": [request["name"]], "matchAttribute": f"resource.aws.com/devicegroup{group}_id"}]
        (config,) = claim["config"]
        assert config["opaque"]["parameters"]["logicalNeuronCore"] == spec.serving.logical_neuron_cores
        assert config["opaque"]["driver"] == "neuron.aws.com"


def test_destroy_order_nodepool_before_karpenter_before_cluster(recording):
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool")
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass")
    karpenter = recording.one("kubernetes:helm.sh/v3:Release", "karpenter")
    cluster = recording.one("eks:index:Cluster")
    system_nodes = recording.one("eks:index:ManagedNodeGroup")
    # Pulumi deletes dependents first: pool, then class, then Karpenter, then the cluster.
    assert karpenter.urn in pool.dependencies and node_class.urn in pool.dependencies
    assert karpenter.urn in node_class.dependencies
    assert cluster.urn in karpenter.dependencies and system_nodes.urn in karpenter.dependencies
    assert not recording.depends_on(karpenter, pool)


# Real sizes: every disk figure derives from the checkpoints' recorded sizes (stackconfig/catalog.py).

GIB = 2 ** 30


def pairing_stacks() -> list[str]:
    from stackconfig import StackSpec
    from stackconfig.source import stack_names

    return sorted(s for s in stack_names() if isinstance(load_stack(s).spec(), StackSpec))


@pytest.mark.parametrize("stack", pairing_stacks())
def test_every_server_fits_its_share_of_the_instance_store_and_every_preparation_its_request(stack):
    from components.pairing.model_preparation import job_spec
    from components.platform.preparation_nodes import MIN_LOCAL_NVME_GIB
    from stackconfig.catalog import karpenter_allocatable_ephemeral_gib
    from stackconfig.server import compiled_set_bytes, node_cache_gib
    from stackconfig.store import PREPARATION_STREAMS

    # Karpenter may launch any preparation node with this much NVMe (instance-local-nvme, in GiB).
    smallest_node = karpenter_allocatable_ephemeral_gib(MIN_LOCAL_NVME_GIB * 2 ** 30 / 10 ** 9)
    spec = load_stack(stack).spec()
    shape = spec.capacity.shape
    for variant in spec.variants:
        weights = sum(m.checkpoint_bytes for m in variant.prepared_models)
        share = shape.allocatable_ephemeral_gib * variant.devices // shape.neuron_devices
        assert weights + compiled_set_bytes(variant) < node_cache_gib(variant) * GIB <= share * GIB, variant.name
    for model in spec.prepared_models:
        pod = job_spec(model, "bucket", spec.region, "code", {}, {"key": "k"}, None)["template"]["spec"]
        (container,) = pod["containers"]
        request = int(container["resources"]["requests"]["ephemeral-storage"].removesuffix("Gi"))
        scratch = next(v for v in pod["volumes"] if v["name"] == "scratch")["emptyDir"]["sizeLimit"]
        assert model.scratch_bytes <= int(scratch.removesuffix("Gi")) * GIB < request * GIB <= smallest_node * GIB, model.model
        command = container["command"][2]
        assert f"--scratch-bytes {model.scratch_bytes} --parallel {PREPARATION_STREAMS}" in command


# (attention heads, KV heads, TP degree) -> the attention and KV heads of each layer in the sharded
# checkpoint (NxD Inference gqa.py get_shardable_head_counts); all but the first two are synthetic.
@pytest.mark.parametrize("attention_heads, kv_heads, tp, attention, kv", [
    (128, 8, 64, 128, 64),  # GQA, TP a multiple of the KV heads: replicated to the TP degree (405B at TP 64)
    (16, 8, 32, 32, 32),    # the same, and 16 attention heads zero-padded to 32 (a Qwen3 draft at TP 32)
    (64, 16, 8, 64, 16),    # GQA, KV heads a multiple of TP: as they are
    (40, 40, 32, 64, 64),   # MHA: the KV heads padded with the attention heads
    (40, 10, 32, 64, 64),   # GQA, TP not a multiple of 10: one KV head per attention head, padded (CONVERT_TO_MHA)
    (48, 12, 8, 48, 48),    # GQA, more KV heads than TP but not a multiple of it: CONVERT_TO_MHA, no padding
    (8, 8, 32, 32, 32),     # MHA with fewer heads than ranks: padded to one per rank
])
def test_the_sharded_checkpoint_counts_replicated_and_zero_padded_heads(attention_heads, kv_heads, tp, attention, kv):
    from stackconfig.catalog import Architecture, Checkpoint, ModelInfo
    from stackconfig.server import sharded_checkpoint_bytes
    from stackconfig.store import PreparedModel

    arch = Architecture(hidden_size=5120, layers=3, intermediate_size=1, attention_heads=attention_heads, kv_heads=kv_heads,
                        vocab_size=1, head_dim=128)
    model = PreparedModel("example/synthetic", "0" * 40, "hub", ModelInfo("llama3", False, 1.0, checkpoint=Checkpoint(10**9, "computed"),
                                                                             architecture=arch))
    # Per layer, a q and an o weight per added attention head and a k and a v weight per added KV
    # head, each hidden x head_dim, in BF16.
    added = (attention - attention_heads) + (kv - kv_heads)
    assert sharded_checkpoint_bytes(model, tp) == 10**9 + 3 * 2 * 5120 * 128 * added * 2


def test_seed_004s_three_405b_servers_hold_the_real_checkpoints_with_replicated_kv_heads():
    """FP8 405B keeps attention, embeddings, the head and two MLPs in BF16: ~454 GiB, not 1 byte per
    parameter (~377 GiB). At TP 64 NxD Inference replicates the 8 KV heads 8 times in the sharded
    checkpoint: 126 layers x 2 x 16384 x 1024 BF16 k/v weights = ~7.9 GiB, seven extra copies."""
    from stackconfig.server import compiled_set_bytes, node_cache_gib

    spec = load_stack("llama3.1-405b-llama3.2-1b").spec()
    bf16, fp8, sd = (spec.variant(name) for name in ("base-bf16", "fp8", "sd-fp8"))
    assert 450 * GIB < fp8.prepared_target.checkpoint_bytes < 458 * GIB
    assert 750 * GIB < bf16.prepared_target.checkpoint_bytes < 760 * GIB
    replicated_kv = 7 * 126 * 2 * 16384 * 1024 * 2
    for variant in (bf16, fp8, sd):
        target = variant.prepared_target.checkpoint_bytes
        assert compiled_set_bytes(variant) >= target + replicated_kv
        assert node_cache_gib(variant) * GIB > 2 * target + replicated_kv
    assert sd.prepared_draft.model == "meta-llama/Llama-3.2-1B-Instruct" and 2 * GIB < sd.prepared_draft.checkpoint_bytes < 3 * GIB
    assert compiled_set_bytes(sd) > compiled_set_bytes(fp8) + sd.prepared_draft.checkpoint_bytes  # the fused draft is saved too
    # Each preparation streams: its local disk is a few shards, not the checkpoint (~907 GiB for FP8 before).
    assert fp8.prepared_target.disk_gib < 50 and bf16.prepared_target.disk_gib < 25
