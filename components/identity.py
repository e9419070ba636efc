"""Workload identity: how a pod's Kubernetes service account gets an IAM role.

Two mechanisms, chosen once per cluster (`cluster.workloadIdentity`):
- IRSA: the role trusts the cluster's OIDC provider for one service account (`:sub` and `:aud`
  pinned), and the service account carries the `eks.amazonaws.com/role-arn` annotation.
- EKS Pod Identity: the role trusts `pods.eks.amazonaws.com` (sts:AssumeRole + sts:TagSession)
  for the session tags of one cluster, namespace and service account, and an EKS
  PodIdentityAssociation binds it to that service account; nothing is annotated,
  because an IRSA annotation would win over Pod Identity in the AWS SDKs' and the Mountpoint
  driver's credential order (docs/facts.md, "Mountpoint for Amazon S3 CSI driver", "Workload identity").

A role's permissions are the same in both modes; only `trust_policy` and the binding differ,
and both live in this module.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from .iam import policy_document, render_policy

Mechanism = Literal["irsa", "pod-identity"]
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
SKIP_CONTAINERS_ANNOTATION = "eks.amazonaws.com/skip-containers"
"""A pod annotation, a comma-separated list of container names: the EKS pod identity webhook gives
every other container (init containers included) the service account's AWS credentials, and these
none. It applies in both modes: the webhook's IRSA (web identity) and Pod Identity (container
credentials) branches take the same skip list (aws/amazon-eks-pod-identity-webhook README, "skip-containers";
pkg/handler/handler.go getContainersToSkip and buildPodPatchConfig, at 3bf80a34). A skipped container
gets neither the token file nor the variables, and the Pod Identity agent answers no request
without that token."""
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
STS_AUDIENCE = "sts.amazonaws.com"


@dataclass(frozen=True)
class WorkloadIdentity:
    """The cluster's identity mechanism and what its trust policies are built from."""

    mechanism: Mechanism
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str] | None = None
    """IRSA only: the IAM OIDC provider of the cluster."""
    oidc_issuer: pulumi.Input[str] | None = None
    """IRSA only: the issuer host and path *without* `https://`, as IAM condition keys spell it.
    pulumi-eks `Cluster.oidc_issuer` is documented as "OIDC Provider URL without leading
    `https://`"; `oidc_provider_url` carries the scheme and can never match (docs/facts.md, "pulumi-eks outputs and add-ons")."""

    def __post_init__(self) -> None:
        if self.mechanism == "irsa" and (self.oidc_provider_arn is None or self.oidc_issuer is None):
            raise ValueError("IRSA needs the cluster's OIDC provider ARN and issuer")

    def trust_policy(self, namespace: str, service_account: str) -> pulumi.Output[str]:
        """The assume-role policy that lets exactly one service account use the role."""
        if self.mechanism == "pod-identity":
            # Without a condition any Pod Identity association in the account could name the role.
            # EKS Pod Identity adds session tags to its AssumeRole request (EKS user guide, "Grant
            # Pods access to AWS resources based on tags", list of session tags: eks-cluster-name,
            # kubernetes-namespace, kubernetes-service-account, ...), and the trust policy may
            # require them as aws:RequestTag/<key> (EKS user guide, "Create IAM role with trust policy
            # required by EKS Pod Identity", "Setting Conditions": its example pins the namespace and
            # service account the same way). Only those documented keys are used: an undocumented
            # one would lock every pod out. Associations keep session tags on (the default).
            return render_policy(policy_document([{
                "Sid": "EksPodIdentityAssumes",
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {
                    "aws:RequestTag/eks-cluster-name": self.cluster_name,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }},
            }]))
        return pulumi.Output.all(self.oidc_provider_arn, self.oidc_issuer).apply(
            lambda values: json.dumps(policy_document([{
                "Sid": "AssumeFromOneServiceAccount",
                "Effect": "Allow",
                "Principal": {"Federated": values[0]},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {
                    f"{values[1]}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                    f"{values[1]}:aud": STS_AUDIENCE,
                }},
            }]), sort_keys=True))

    def annotations(self, role_arn: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
        """Service-account annotations that bind the role: IRSA's, or none for Pod Identity."""
        return {IRSA_ANNOTATION: role_arn} if self.mechanism == "irsa" else {}


@dataclass(frozen=True)
class WorkloadRoleArgs:
    identity: WorkloadIdentity
    namespace: str
    service_account: str
    """The one service account that may use the role. It is created elsewhere (a Helm release,
    an EKS add-on or a ServiceAccount object); IRSA binds by its annotation, Pod Identity here."""
    policy: Any = None
    """Inline policy document: a dict, or an Output of one; None when only managed policies apply."""
    managed_policy_arns: tuple[str, ...] = ()
    """AWS managed policies to attach, for agents whose permissions AWS defines and maintains."""
    tags: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.policy is None and not self.managed_policy_arns:
            raise ValueError(f"role for {self.namespace}/{self.service_account} grants nothing")


class WorkloadRole(pulumi.ComponentResource):
    """An IAM role for one Kubernetes service account, bound by the cluster's mechanism."""

    arn: pulumi.Output[str]
    name: pulumi.Output[str]
    annotations: dict[str, pulumi.Input[str]]
    """What the service account must carry (IRSA), or {} (Pod Identity)."""

    def __init__(self, name: str, args: WorkloadRoleArgs, opts: pulumi.ResourceOptions | None = None):
        # Was "sdtrn2:iam:IrsaRole" before Pod Identity existed; the alias keeps existing stacks'
        # roles in place (tests/test_urn_stability.py).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_="sdtrn2:iam:IrsaRole")]))
        super().__init__("sdtrn2:iam:WorkloadRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(name, assume_role_policy=args.identity.trust_policy(args.namespace, args.service_account),
                            tags=args.tags, opts=child)
        if args.policy is not None:
            aws.iam.RolePolicy(name, role=role.id, policy=render_policy(args.policy), opts=child)
        for arn in args.managed_policy_arns:
            aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[-1]}", role=role.name, policy_arn=arn, opts=child)
        if args.identity.mechanism == "pod-identity":
            aws.eks.PodIdentityAssociation(name, cluster_name=args.identity.cluster_name, namespace=args.namespace,
                                           service_account=args.service_account, role_arn=role.arn, tags=args.tags,
                                           opts=child)
        self.arn = role.arn
        self.name = role.name
        self.annotations = args.identity.annotations(role.arn)
        self.register_outputs({"arn": self.arn})
