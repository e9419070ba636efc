"""Workload identity: IRSA trust keys in the issuer format pulumi-eks documents, and EKS Pod
Identity as a typed alternative with the same role bodies and no IRSA left behind."""
from __future__ import annotations

import functools
import json

import pulumi_eks
import pytest

from offline.engine import Recording
from offline.stacks import load_stack, run_stack

from .conftest import STACKS, recorded
from .helpers import child

ROLE = "sdtrn2:iam:WorkloadRole"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
# Service accounts that EKS add-ons create, with the source that names them:
# awslabs/mountpoint-s3-csi-driver@v2.1.0 charts/aws-mountpoint-s3-csi-driver/values.yaml
# node.serviceAccount.name, installed by the add-on into kube-system (EKS user guide,
# "Mountpoint for Amazon S3 CSI driver").
# aws-observability/helm-charts@amazon-cloudwatch-observability-4.10.2 templates/_helpers.tpl
# cloudwatch-agent.serviceAccountName defaults to "cloudwatch-agent"; the add-on installs into
# amazon-cloudwatch (CloudWatch user guide, "Install the Amazon CloudWatch Observability EKS add-on").
ADDON_SERVICE_ACCOUNTS = {"aws-mountpoint-s3-csi-driver": ("kube-system", "s3-csi-driver-sa"),
                          "amazon-cloudwatch-observability": ("amazon-cloudwatch", "cloudwatch-agent")}
ROLES = 6  # Karpenter's controller, the Mountpoint driver, the CloudWatch agent, the benchmark runner,
#           the model preparation Jobs, the servers' publishers


@functools.lru_cache(maxsize=None)
def pod_identity(stack: str) -> Recording:
    cluster = load_stack(stack).config.get("sd-trn2:cluster", {})
    return run_stack(load_stack(stack, {"sd-trn2:cluster": {**cluster, "workloadIdentity": "pod-identity"}}))


def documents(recording: Recording) -> dict[str, tuple[dict, dict]]:
    """Role component name -> (trust policy, permissions: the inline policy and managed ARNs)."""
    out = {}
    for component in recording.of_type(ROLE):
        role = child(recording, component, "aws:iam/role:Role")
        inline = [r for r in recording.of_type("aws:iam/rolePolicy:RolePolicy") if r.parent == component.urn]
        managed = sorted(r.inputs["policyArn"] for r in recording.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                         if r.parent == component.urn)
        assert len(inline) + len(managed) >= 1 and len(inline) <= 1, component.name
        out[component.name] = (json.loads(role.inputs["assumeRolePolicy"]),
                               {"inline": [json.loads(p.inputs["policy"]) for p in inline], "managed": managed})
    return out


def test_the_sdk_documents_oidc_issuer_without_scheme():
    """The fact the IRSA keys rest on, read from the installed pulumi-eks, not from the engine."""
    assert "without leading `https://`" in pulumi_eks.Cluster.oidc_issuer.__doc__
    assert "without" not in pulumi_eks.Cluster.oidc_provider_url.__doc__


def test_irsa_trust_keys_are_the_issuer_host_without_scheme(recording):
    issuer = recording.one("eks:index:Cluster").outputs["oidcIssuer"]
    assert not issuer.startswith("https://")  # as pulumi_eks.Cluster.oidc_issuer documents
    provider_arn = recording.one("eks:index:Cluster").outputs["oidcProviderArn"]
    roles = documents(recording)
    assert len(roles) == ROLES
    for name, (trust, _) in roles.items():
        (statement,) = trust["Statement"]
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity" and statement["Principal"] == {"Federated": provider_arn}
        condition = statement["Condition"]["StringEquals"]
        assert set(condition) == {f"{issuer}:sub", f"{issuer}:aud"}, name
        assert condition[f"{issuer}:aud"] == "sts.amazonaws.com"
        assert condition[f"{issuer}:sub"].startswith("system:serviceaccount:"), name
        assert all("://" not in key for key in condition), name


@pytest.mark.parametrize("stack", STACKS)
def test_pod_identity_trust_has_no_oidc_and_every_role_has_one_association(stack):
    recording = pod_identity(stack)
    assert recording.one("eks:index:Cluster").inputs["createOidcProvider"] is False
    roles = documents(recording)
    assert len(roles) == ROLES
    for name, (trust, _) in roles.items():
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        assert "Federated" not in json.dumps(trust), name
        component = recording.one(ROLE, name)
        association = child(recording, component, ASSOCIATION)
        assert association.inputs["roleArn"] == child(recording, component, "aws:iam/role:Role").outputs["arn"]


def test_pod_identity_roles_are_assumable_only_for_their_own_service_account_on_their_cluster(stack):
    """The trust is scoped by the session tags EKS Pod Identity adds (EKS user guide, "Create IAM role
    with trust policy required by EKS Pod Identity", "Setting Conditions"): the association's own
    cluster, namespace and service account may assume the role; another service account, another
    namespace, another cluster, or another service principal may not."""
    from .iam_eval import allows

    recording = pod_identity(stack)
    for name, (trust, _) in documents(recording).items():
        association = child(recording, recording.one(ROLE, name), ASSOCIATION).inputs
        assert association.get("disableSessionTags") in (None, False), name  # the tags the trust requires
        tags = {"aws:RequestTag/eks-cluster-name": association["clusterName"],
                "aws:RequestTag/kubernetes-namespace": association["namespace"],
                "aws:RequestTag/kubernetes-service-account": association["serviceAccount"]}
        pods = ("Service", "pods.eks.amazonaws.com")
        for action in ("sts:AssumeRole", "sts:TagSession"):
            assert allows(trust, action, "*", tags, principal=pods), (name, action)
        for key in tags:
            assert not allows(trust, "sts:AssumeRole", "*", {**tags, key: "someone-else"}, principal=pods), (name, key)
            assert not allows(trust, "sts:AssumeRole", "*", {k: v for k, v in tags.items() if k != key}, principal=pods)
        assert not allows(trust, "sts:AssumeRole", "*", tags, principal=("Service", "ec2.amazonaws.com")), name


def service_account_creators(recording: Recording) -> dict[tuple[str, str], object]:
    """(namespace, name) of every service account the plan creates, with what creates it."""
    found = {}
    for obj in recording.kubernetes_objects():
        if obj.inputs["kind"] == "ServiceAccount":
            found[(obj.inputs["metadata"]["namespace"], obj.inputs["metadata"]["name"])] = obj
    for release in recording.of_type("kubernetes:helm.sh/v3:Release"):
        # Charts that name their service account after the release (karpenter's _helpers.tpl).
        if (release.inputs.get("values") or {}).get("serviceAccount", {}).get("create", True) and release.inputs["name"] == "karpenter":
            found[(release.inputs["namespace"], release.inputs["name"])] = release
    for addon in recording.of_type("aws:eks/addon:Addon"):
        if addon.inputs["addonName"] in ADDON_SERVICE_ACCOUNTS:
            found[ADDON_SERVICE_ACCOUNTS[addon.inputs["addonName"]]] = addon
    return found


def pod_templates(obj) -> list[dict]:
    """The pod specs a workload object starts (Deployment, Job; a CronJob's job template)."""
    spec = obj.inputs.get("spec") or {}
    templates = [spec.get("template"), (spec.get("jobTemplate") or {}).get("spec", {}).get("template")]
    return [t["spec"] for t in templates if t]


def consumers(recording: Recording, creator, namespace: str, name: str) -> list:
    """What starts pods under the service account: a chart or add-on itself, or for a plain
    ServiceAccount object every workload whose pods name it."""
    if creator.type != "kubernetes:core/v1:ServiceAccount":
        return [creator]
    return [o for o in recording.kubernetes_objects() if o.inputs["metadata"].get("namespace") == namespace
            and any(t.get("serviceAccountName") == name for t in pod_templates(o))]


@pytest.mark.parametrize("stack", STACKS)
def test_each_association_binds_a_service_account_the_plan_creates_and_pods_start_after_it(stack):
    recording = pod_identity(stack)
    creators = service_account_creators(recording)
    associations = recording.of_type(ASSOCIATION)
    assert len(associations) == ROLES
    for association in associations:
        key = (association.inputs["namespace"], association.inputs["serviceAccount"])
        assert key in creators, key
        users = consumers(recording, creators[key], *key)
        assert users, key
        # Pod Identity credentials are injected when a pod starts: the association comes first.
        for user in users:
            assert recording.depends_on(user, association), (key, user.name)


@pytest.mark.parametrize("stack", STACKS)
def test_no_irsa_annotation_is_left_behind(stack):
    recording = pod_identity(stack)
    for release in recording.of_type("kubernetes:helm.sh/v3:Release"):
        annotations = (release.inputs.get("values") or {}).get("serviceAccount", {}).get("annotations", {})
        assert IRSA_ANNOTATION not in annotations, release.name
    for addon in recording.of_type("aws:eks/addon:Addon"):
        assert not addon.inputs.get("serviceAccountRoleArn"), addon.name
    for obj in recording.kubernetes_objects():
        assert IRSA_ANNOTATION not in obj.inputs["metadata"].get("annotations", {}), obj.name
    assert recording.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider") == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_agent_runs_before_the_workloads_that_need_it(stack):
    recording = pod_identity(stack)
    (agent,) = [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "eks-pod-identity-agent"]
    assert recording.depends_on(agent, recording.one("eks:index:ManagedNodeGroup"))
    assert recording.depends_on(recording.one("kubernetes:helm.sh/v3:Release", "karpenter"), agent)


def test_irsa_clusters_run_no_agent(recording):
    assert not [a for a in recording.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "eks-pod-identity-agent"]
    assert recording.of_type(ASSOCIATION) == []


@pytest.mark.parametrize("stack", STACKS)
def test_role_permissions_are_the_same_in_both_modes(stack):
    irsa, pod = documents(recorded(stack)), documents(pod_identity(stack))
    assert sorted(irsa) == sorted(pod)
    for name in irsa:
        assert irsa[name][1] == pod[name][1], name
        assert irsa[name][0] != pod[name][0], name


def test_preflight_checks_the_pod_identity_agent_when_it_is_installed(stack):
    from stackconfig.versions import stack_addons

    from .test_cluster import registered_addons

    recording = pod_identity(stack)
    version = recording.stack_outputs["versions"]["kubernetes"]
    assert set(registered_addons(recording)) == set(stack_addons(version, "pod-identity"))
    assert "eks-pod-identity-agent" in stack_addons(version, "pod-identity")
    assert "eks-pod-identity-agent" not in stack_addons(version, "irsa")
