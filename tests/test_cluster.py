"""The network and EKS cluster every stack gets."""
import ipaddress
import json

import pytest

from offline.stacks import load_stack, run_stack


def test_cluster_version_auth_and_oidc(recording, spec):
    cluster = recording.one("eks:index:Cluster")
    inputs = cluster.inputs
    assert inputs["name"] == spec.cluster_name
    assert tuple(int(p) for p in inputs["version"].split(".")) >= (1, 34)
    assert inputs["authenticationMode"] == "API"
    assert inputs["createOidcProvider"] is True
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["nodeAssociatePublicIpAddress"] is False
    assert inputs["kubeProxyAddonOptions"]["version"].startswith("v")
    assert inputs["vpcCniOptions"]["addonVersion"].startswith("v")


def test_coredns_waits_for_the_system_nodes(recording):
    """pulumi-eks would create CoreDNS with the control plane (CoreDnsAddonOptionsArgs.enabled
    defaults to true); without nodes it stays DEGRADED and fails the first `pulumi up`."""
    assert recording.one("eks:index:Cluster").inputs["corednsAddonOptions"]["enabled"] is False
    (coredns,) = [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "coredns"]
    assert coredns.inputs["addonVersion"].startswith("v") and coredns.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
    assert recording.depends_on(coredns, recording.one("eks:index:ManagedNodeGroup"))


def test_eks_sdk_still_defaults_coredns_on():
    """The reason the option is set explicitly: if pulumi-eks ever stops defaulting it on, this
    says so (the explicit False stays harmless)."""
    import pulumi_eks as eks

    assert eks.CoreDnsAddonOptionsArgs().enabled is True


def test_system_node_group_is_on_demand_with_two_nodes(recording):
    group = recording.one("eks:index:ManagedNodeGroup")
    assert group.inputs["capacityType"] == "ON_DEMAND"
    assert group.inputs["scalingConfig"]["minSize"] >= 2
    assert group.inputs["cluster"]["resourceUrn"] == recording.one("eks:index:Cluster").urn


def test_system_nodes_require_imdsv2_at_hop_limit_1_on_an_encrypted_root_like_the_trn2_nodes(recording):
    template = recording.one("aws:ec2/launchTemplate:LaunchTemplate")
    group = recording.one("eks:index:ManagedNodeGroup").inputs
    assert group["launchTemplate"] == {"id": template.outputs["id"], "version": str(template.outputs["latestVersion"])}
    assert "diskSize" not in group and "enableIMDSv2" not in group  # pulumi-eks refuses them beside a template
    metadata = template.inputs["metadataOptions"]
    trn2 = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs["spec"]["metadataOptions"]
    assert metadata["httpTokens"] == trn2["httpTokens"] == "required"
    assert metadata["httpPutResponseHopLimit"] == trn2["httpPutResponseHopLimit"] == 1
    (root,) = template.inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda" and root["ebs"]["encrypted"] == "true" and root["ebs"]["volumeType"] == "gp3"


def test_private_subnets_span_two_zones_and_carry_discovery_tags(recording, spec):
    private = [r for r in recording.of_type("aws:ec2/subnet:Subnet") if "private" in r.name]
    assert len(private) >= 2
    assert len({s.inputs["availabilityZone"] for s in private}) == len(private)
    for subnet in private:
        assert subnet.inputs["tags"]["karpenter.sh/discovery"] == spec.cluster_name
        assert ipaddress.ip_network(subnet.inputs["cidrBlock"]).subnet_of(ipaddress.ip_network(spec.cluster.vpc_cidr))
    tag = recording.one("aws:ec2/tag:Tag")
    assert (tag.inputs["key"], tag.inputs["value"]) == ("karpenter.sh/discovery", spec.cluster_name)


def test_every_aws_resource_goes_through_the_tagging_provider(recording, spec):
    provider = recording.one("pulumi:providers:aws")
    default_tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert default_tags["stack"] == spec.stack and default_tags["project"] == spec.project
    aws_resources = [r for r in recording.resources if r.custom and r.type.startswith("aws:")]
    assert aws_resources
    for resource in aws_resources:
        assert resource.provider and resource.provider.startswith(provider.urn + "::"), resource.urn


def test_children_are_parented_to_their_component(recording):
    for resource in recording.resources:
        if resource.type.startswith(("aws:", "eks:", "kubernetes:")) and not resource.type.startswith("pulumi:providers"):
            assert resource.parent and "sdtrn2:" in resource.parent, resource.urn


def test_stack_outputs(recording, spec):
    outputs = recording.stack_outputs
    assert outputs["clusterName"] == spec.cluster_name
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["region"] == spec.region


def registered_addons(recording) -> dict[str, str]:
    """Every EKS add-on the program installs with its build: aws.eks.Addon resources plus the two
    pulumi-eks installs with the control plane."""
    cluster = recording.one("eks:index:Cluster").inputs
    addons = {a.inputs["addonName"]: a.inputs["addonVersion"] for a in recording.of_type("aws:eks/addon:Addon")}
    addons["vpc-cni"] = cluster["vpcCniOptions"]["addonVersion"]
    addons["kube-proxy"] = cluster["kubeProxyAddonOptions"]["version"]
    return addons


def eks_default(addon: str, kubernetes_version: str) -> str:
    """What the offline engine answers for EKS's default build: the recorded DescribeAddonVersions
    response (offline/data), read here independently of the fake's own selection."""
    from offline.fakes import ADDON_VERSIONS_DATA, recorded_response

    document = recorded_response(ADDON_VERSIONS_DATA.format(version=kubernetes_version))
    (entry,) = [a for a in document["response"]["addons"] if a["addonName"] == addon]
    (build,) = [v["addonVersion"] for v in entry["addonVersions"]
                if {"clusterVersion": kubernetes_version, "platformVersions": ["*"], "defaultVersion": True} in v["compatibilities"]]
    return build


def test_each_addon_installed_is_its_pin_or_the_eks_default_and_preflight_checks_the_same(recording, spec):
    from stackconfig.versions import stack_addons

    k8s = spec.cluster.kubernetes_version
    pins = stack_addons(k8s, spec.cluster.workload_identity)
    expected = {name: pin.build or eks_default(name, k8s) for name, pin in pins.items()}
    assert registered_addons(recording) == expected
    assert recording.stack_outputs["versions"]["addons"] == expected
    assert expected["kube-proxy"].startswith(f"v{k8s}.")
    assert any(pin.build is None for pin in pins.values()) == (k8s == "1.35")


def test_the_versions_output_says_what_the_platform_runs(recording, spec):
    from stackconfig.versions import KARPENTER, NEURON_HELM_CHART_VERSION

    versions = recording.stack_outputs["versions"]
    assert {k: v for k, v in versions.items() if k != "addons"} == {
        "kubernetes": spec.cluster.kubernetes_version, "supportType": spec.cluster.support_type,
        "karpenter": KARPENTER.version, "neuronHelmChart": NEURON_HELM_CHART_VERSION.version}


def test_kube_proxy_minor_is_the_clusters_for_every_pinned_kubernetes_version():
    """Whether pinned or EKS's default (the recorded response stands in for EKS offline)."""
    from stackconfig.versions import EKS_ADDONS

    for k8s, pins in EKS_ADDONS.items():
        build = pins["kube-proxy"].build or eks_default("kube-proxy", k8s)
        assert build.startswith(f"v{k8s}."), (k8s, build)


def test_an_eks_default_that_breaks_a_requirement_is_refused_before_it_is_installed():
    import pulumi

    from components.platform.addons import checked_build

    assert checked_build("aws-mountpoint-s3-csi-driver", "1.35", "v2.4.1-eksbuild.1") == "v2.4.1-eksbuild.1"
    with pytest.raises(pulumi.RunError, match="v2.4.1 or later"):
        checked_build("aws-mountpoint-s3-csi-driver", "1.35", "v2.4.0-eksbuild.1")
    with pytest.raises(pulumi.RunError, match="aws-mountpoint-s3-csi-driver build for Kubernetes 1.35 is v1.15.0-eksbuild.1"):
        checked_build("aws-mountpoint-s3-csi-driver", "1.35", "v1.15.0-eksbuild.1")
    with pytest.raises(pulumi.RunError, match="needs v1.35"):
        checked_build("kube-proxy", "1.35", "v1.34.6-eksbuild.2")


def test_container_insights_publishes_neuron_metrics_with_the_documented_agent_role(recording, spec):
    """The add-on whose neuron-monitor and agent produce the node_neuroncore_* metrics the
    benchmark reads: its pinned build, after the system nodes, with a role that carries only
    the managed policy AWS documents for it, bound to the agent's service account."""
    (addon,) = [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "amazon-cloudwatch-observability"]
    assert addon.inputs["addonVersion"] == recording.stack_outputs["versions"]["addons"]["amazon-cloudwatch-observability"]
    assert recording.depends_on(addon, recording.one("eks:index:ManagedNodeGroup"))
    role_component = recording.one("sdtrn2:iam:WorkloadRole", "container-insights-agent")
    role = [r for r in recording.of_type("aws:iam/role:Role") if r.parent == role_component.urn][0]
    assert addon.inputs["serviceAccountRoleArn"] == role.outputs["arn"]  # IRSA: the add-on annotates its account
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert [v for k, v in trust.items() if k.endswith(":sub")] == ["system:serviceaccount:amazon-cloudwatch:cloudwatch-agent"]
    attached = [r.inputs["policyArn"] for r in recording.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if r.parent == role_component.urn]
    assert attached == ["arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"]
    assert not [r for r in recording.of_type("aws:iam/rolePolicy:RolePolicy") if r.parent == role_component.urn]


def test_the_cluster_log_groups_are_the_programs_with_retention_and_created_before_their_writers(recording, spec):
    """EKS and Container Insights create the groups they write to when none exists, with no
    retention, and `pulumi destroy` would leave them (and `make sweep` report them). So the
    program creates each, by its exact name, before the cluster and the add-on that write there."""
    groups = {g.inputs["name"]: g for g in recording.of_type("aws:cloudwatch/logGroup:LogGroup")}
    cluster_name = spec.cluster_name
    assert sorted(groups) == sorted([f"/aws/eks/{cluster_name}/cluster", f"/aws/vpc/{cluster_name}/flow-logs"] + [
        f"/aws/containerinsights/{cluster_name}/{kind}" for kind in ("application", "dataplane", "host", "performance")])
    assert {g.inputs["retentionInDays"] for g in groups.values()} == {spec.cluster.log_retention_days} == {14}
    cluster = recording.one("eks:index:Cluster")
    assert recording.depends_on(cluster, groups[f"/aws/eks/{cluster_name}/cluster"])
    (insights,) = [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "amazon-cloudwatch-observability"]
    flow_log = recording.one("aws:ec2/flowLog:FlowLog")
    assert recording.depends_on(flow_log, groups[f"/aws/vpc/{cluster_name}/flow-logs"])
    for name, group in groups.items():
        if "containerinsights" in name:
            assert recording.depends_on(insights, group), name
            assert not recording.depends_on(cluster, group), name  # the control plane need not wait for them


def test_every_cluster_log_group_is_encrypted_with_a_key_only_cloudwatch_logs_uses_for_them(recording, spec):
    """CKV_AWS_158 (`make scan`): each group the program owns names the log key; the key policy lets
    the region's CloudWatch Logs use it for those groups, and for no other group and no other service."""
    from .iam_eval import allows

    key = recording.one("aws:kms/key:Key", "log-key")
    groups = recording.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert sorted(g.inputs["name"] for g in groups) == sorted(spec.platform.log_groups)
    assert {g.inputs.get("kmsKeyId") for g in groups} == {key.outputs["arn"]}
    assert key.inputs["enableKeyRotation"] is True
    policy = json.loads(key.inputs["policy"])
    logs = ("Service", f"logs.{spec.region}.amazonaws.com")
    for group in groups:
        context = {"kms:EncryptionContext:aws:logs:arn": group.outputs["arn"]}
        assert allows(policy, "kms:GenerateDataKey", "*", context, principal=logs), group.name
        assert allows(policy, "kms:Decrypt", "*", context, principal=logs), group.name
        assert not allows(policy, "kms:GenerateDataKey", "*", context, principal=("Service", "s3.amazonaws.com"))
    elsewhere = {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{spec.region}:123456789012:log-group:/aws/lambda/x"}
    assert not allows(policy, "kms:Decrypt", "*", elsewhere, principal=logs)
    assert not allows(policy, "kms:ScheduleKeyDeletion", "*", principal=logs)
    # The account keeps the key's administration through IAM, as with KMS's default key policy.
    assert allows(policy, "kms:PutKeyPolicy", "*", principal=("AWS", "arn:aws:iam::123456789012:root"))


def test_secrets_are_encrypted_with_a_rotated_key_of_the_clusters_own(recording):
    from .iam_eval import allows

    key = recording.one("aws:kms/key:Key", "cluster-secrets")
    assert key.inputs["enableKeyRotation"] is True and key.inputs["deletionWindowInDays"] == 7
    # KMS's default key policy, written out (CKV2_AWS_64): the account's IAM policies decide, no service is named.
    policy = json.loads(key.inputs["policy"])
    assert allows(policy, "kms:CreateGrant", "*", principal=("AWS", "arn:aws:iam::123456789012:root"))
    assert not allows(policy, "kms:Decrypt", "*", principal=("Service", "eks.amazonaws.com"))
    cluster = recording.one("eks:index:Cluster")
    assert cluster.inputs["encryptionConfigKeyArn"] == key.outputs["arn"]
    assert key.parent == recording.one("sdtrn2:cluster:Cluster").urn


def test_the_public_endpoint_takes_its_sources_from_config(recording, spec):
    cluster = recording.one("eks:index:Cluster").inputs
    assert cluster["publicAccessCidrs"] == list(spec.cluster.public_access_cidrs) == ["0.0.0.0/0"]
    assert cluster["endpointPrivateAccess"] is True  # nodes reach the API inside the VPC, whatever the list


def test_a_narrowed_public_endpoint_is_sent_as_given():
    narrowed = run_stack(load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:cluster": {"publicAccessCidrs": ["203.0.113.0/24"]}}))
    assert narrowed.one("eks:index:Cluster").inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_the_support_type_is_explicit(recording, spec):
    """pulumi-eks defaults upgradePolicy.supportType to EXTENDED; the program always sends one."""
    assert recording.one("eks:index:Cluster").inputs["upgradePolicy"] == {"supportType": spec.cluster.support_type}
    assert spec.cluster.support_type == "STANDARD"


def test_pulumi_eks_still_documents_extended_as_its_default():
    """Why the support type is always sent: if pulumi-eks's documented default changes, this says so."""
    import inspect

    import pulumi_eks as eks

    assert 'Defaults to "EXTENDED"' in inspect.getsource(eks.ClusterArgs.__init__)


def test_the_vpc_flow_logs_go_to_a_group_the_program_owns_under_a_role_only_the_service_assumes(recording, spec):
    from .iam_eval import allows

    flow = recording.one("aws:ec2/flowLog:FlowLog").inputs
    vpc = recording.one("aws:ec2/vpc:Vpc")
    group = recording.one("aws:cloudwatch/logGroup:LogGroup", "flow-logs")
    assert flow["vpcId"] == vpc.outputs["id"] and flow["trafficType"] == "ALL"
    assert flow["logDestinationType"] == "cloud-watch-logs" and flow["logDestination"] == group.outputs["arn"]
    assert group.inputs["name"] == spec.platform.flow_log_group and group.inputs["retentionInDays"] == spec.cluster.log_retention_days
    assert spec.platform.flow_log_group in spec.platform.log_groups  # `make sweep` looks for it after a destroy
    role = recording.one("aws:iam/role:Role", "flow-logs")
    assert flow["iamRoleArn"] == role.outputs["arn"]
    (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"} and "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    policy = json.loads(recording.one("aws:iam/rolePolicy:RolePolicy", "flow-logs").inputs["policy"])
    streams = f"{group.outputs['arn']}:log-stream:eni-0123-all"
    assert allows(policy, "logs:PutLogEvents", streams)
    assert not allows(policy, "logs:PutLogEvents", streams.replace("/flow-logs", "/cluster"))
    assert not allows(policy, "logs:DeleteLogGroup", group.outputs["arn"])
    # DescribeLogStreams on the flow-log group only (it takes the log group as its resource).
    assert allows(policy, "logs:DescribeLogStreams", f"{group.outputs['arn']}:*")
    assert not allows(policy, "logs:DescribeLogStreams", f"{group.outputs['arn'].replace('/flow-logs', '/cluster')}:*")


def test_the_vpcs_default_security_group_is_managed_with_no_rules(recording):
    """CKV2_AWS_12 (`make scan`): the group every VPC comes with admits and sends nothing."""
    (group,) = recording.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert group.inputs["vpcId"] == recording.one("aws:ec2/vpc:Vpc").outputs["id"]
    assert group.inputs.get("ingress", []) == [] and group.inputs.get("egress", []) == []
