"""make preflight: every check has a PASS and a FAIL fixture, and the whole run against a moto
server exits 1 on a region without trn2 and passes offerings in us-east-2.

moto answers what it implements (STS, EC2 offerings, SSM) as a server on 127.0.0.1 reached through
AWS_ENDPOINT_URL; botocore's Stubber answers what it lacks (tests/aws_fixtures.py); a local HTTP
server plays the Hugging Face hub through HF_ENDPOINT; pulumi, kubectl and aws are stand-ins.
"""
from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from datetime import date, timedelta

import boto3
import pytest
from botocore.stub import ANY
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.utils import utcnow
from moto.ssm.models import Parameter, ssm_backends

from offline.stacks import load_stack
from stackconfig import StackSpec
from stackconfig.source import PROJECT_DIR
from stackconfig.versions import AMI_RELEASE, stack_addons
from tools.preflight import account, capacity, clis, cost, hub, platform, run
from tools.preflight.estimate import run_estimate

from . import fake_clis
from .aws_fixtures import (
    NOW,
    addon,
    block_offering,
    eks_entries,
    instance_entry,
    nat_entries,
    other_quota,
    reservation,
    stubbed,
    trn_quota,
)
from .test_cluster import eks_default

QWEN = "qwen3-32b-qwen3-1.7b"          # 1 node, no gated model
PLATFORM, SHARED = "platform", "qwen3-32b-qwen3-1.7b-shared"  # the same pairing on the platform
LLAMA = "llama3.1-8b-llama3.2-1b"      # gated target and draft
ON_1_34 = {"sd-trn2:cluster": {"kubernetesVersion": "1.34"}}
ON_1_36 = {"sd-trn2:cluster": {"kubernetesVersion": "1.36"}}
RESERVED = {"sd-trn2:capacity": {"capacityType": "reserved", "reservationIds": ["cr-0123456789abcdef0"]},
            "sd-trn2:cluster": {"availabilityZones": ["us-east-2a", "us-east-2b"]}}


def spec_of(stack: str = QWEN, **overrides):
    return load_stack(stack, overrides or None).spec()


def in_region(region: str) -> dict:
    return {"aws:region": region}


# --- fixtures: SSM public parameters, the hub, the CLIs ------------------------------------------

def seed_public_parameter(region: str, name: str, value: str) -> None:
    """Publish an AWS public parameter in the moto server's in-process backend.

    moto refuses put_parameter under /aws/ ("No access to reserved parameter name", as AWS does:
    moto/ssm/models.py put_parameter), and loads the public parameters it knows by appending
    Parameter objects to its ParameterDict (ssm/models.py _load_tree_parameters). The fixture does
    the same for the EKS AMI parameter, which moto does not ship; the program is untouched and
    reads it with an ordinary GetParameter over HTTP."""
    ssm_backends[DEFAULT_ACCOUNT_ID][region]._parameters[name].append(Parameter(
        account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String", description=None,
        allowed_pattern=None, keyid=None, last_modified_date=utcnow(), version=1, data_type="text"))


# Tokens the stand-in hub knows, and the gated repositories each may read.
HUB_GRANTS = {"hf_reads_all": {"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"},
              "hf_reads_draft_only": {"meta-llama/Llama-3.2-1B"}}


class HubHandler(http.server.BaseHTTPRequestHandler):
    """GET /api/models/<org>/<repo>/auth-check, answered as huggingface_hub 2.4.0 expects
    (utils/_http.py hf_raise_for_status): 200; 403 with X-Error-Code GatedRepo; 401 with
    X-Error-Message "Invalid credentials in Authorization header"; 404 with X-Error-Code RepoNotFound."""

    seen: list[str] = []

    def do_GET(self):
        HubHandler.seen.append(self.headers.get("authorization", ""))
        parts = self.path.strip("/").split("/")
        token = self.headers.get("authorization", "").removeprefix("Bearer ")
        repo = "/".join(parts[2:4])
        if parts[:2] != ["api", "models"] or parts[4:] != ["auth-check"]:
            self.answer(404, {"X-Error-Code": "RepoNotFound"})
        elif token not in HUB_GRANTS:
            self.answer(401, {"X-Error-Message": "Invalid credentials in Authorization header"})
        elif repo not in HUB_GRANTS[token]:
            self.answer(403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted"})
        else:
            self.answer(200, {})

    def answer(self, code: int, headers: dict[str, str]) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hub_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def hub_endpoint(hub_server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub_server)
    HubHandler.seen.clear()
    return hub_server


@pytest.fixture
def all_clis(tmp_path, fake_bin):
    fake_bin("pulumi", fake_clis.pulumi(tmp_path / "pulumi.log"))
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    fake_bin("aws", fake_clis.AWS_CLI)


# --- credentials (moto STS) ------------------------------------------------------------------------

def test_identity_passes_with_credentials(moto_endpoint):
    result = account.check_identity(boto3.Session().client("sts", region_name="us-east-2"), "us-east-2")
    assert result.status == "PASS" and "account 123456789012" in result.found and "us-east-2" in result.found


def test_clients_honour_the_per_service_endpoint_variables(moto_server, aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_server)
    assert account.check_identity(run.aws_clients("us-east-2").sts, "us-east-2").status == "PASS"
    monkeypatch.delenv("AWS_ENDPOINT_URL_STS")
    assert account.check_identity(run.aws_clients("us-east-2").sts, "us-east-2").status == "WARN"


def test_clients_make_three_attempts_unless_aws_max_attempts_says_otherwise(aws_credentials, monkeypatch):
    assert run.aws_clients("us-east-2").sts.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}
    monkeypatch.delenv("AWS_MAX_ATTEMPTS")
    retries = run.aws_clients("us-east-2").sts.meta.config.retries
    assert retries.get("mode") == "standard" and retries.get("total_max_attempts", 3) == 3


def test_identity_fails_without_credentials(moto_server, no_aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    result = account.check_identity(boto3.Session().client("sts", region_name="us-east-2"), "us-east-2")
    assert result.status == "FAIL" and result.found == "no AWS credentials found" and "aws configure" in result.fix


# --- offerings (moto EC2: trn2.48xlarge in us-east-2 and ap-south-2 only) ---------------------------

def offerings_in(region: str, stack: str = QWEN, **overrides):
    spec = spec_of(stack, **{"aws:region": region, **overrides})
    platform_spec = spec if stack == PLATFORM else spec.platform
    return capacity.check_offerings(platform_spec, capacity.offered_zones(boto3.Session().client("ec2", region_name=region),
                                                                          platform_spec.instance_type),
                                    reservations_possible=stack == PLATFORM)


def test_offerings_pass_in_us_east_2(moto_endpoint):
    result, zones = offerings_in("us-east-2")
    assert result.status == "PASS" and zones == ["us-east-2a", "us-east-2b"]


def test_offerings_fail_in_a_region_without_the_instance_type(moto_endpoint):
    result, zones = offerings_in("us-west-2")
    assert result.status == "FAIL" and zones == []
    assert "trn2.48xlarge" in result.found and "us-west-2" in result.found and "describe-instance-type-offerings" in result.fix


@pytest.mark.parametrize("stack, status", [(QWEN, "FAIL"), (PLATFORM, "WARN")])
def test_named_zones_offering_nothing_on_demand_fail_unless_a_reservation_could_launch_there(moto_endpoint, stack, status):
    # A platform's pairings may bring a capacity reservation in those zones: a warning there.
    result, zones = offerings_in("us-west-2", stack, **{"sd-trn2:cluster": {"availabilityZones": ["us-west-2a", "us-west-2b"]}})
    assert result.status == status and zones == ["us-west-2a", "us-west-2b"] and "no on-demand offering" in result.found


# --- quota (Stubber: moto's Service Quotas knows only vpc) -----------------------------------------

@pytest.mark.parametrize("value, status", [(384.0, "PASS"), (192.0, "PASS"), (0.0, "FAIL")])
def test_quota_covers_the_node_vcpus(value, status):
    quotas, stub = stubbed("service-quotas")
    stub.add_response("list_service_quotas", {"Quotas": [other_quota(), trn_quota(value)]}, {"ServiceCode": "ec2"})
    with stub:
        result = capacity.check_quota(spec_of(), quotas)
    assert result.status == status and f"is {value:g} vCPU" in result.found and "need 192" in result.found
    assert ("request-service-quota-increase" in result.fix) == (status == "FAIL")


def test_quota_two_nodes_need_twice_the_vcpus():
    quotas, stub = stubbed("service-quotas")
    stub.add_response("list_service_quotas", {"Quotas": [trn_quota(192.0)]}, {"ServiceCode": "ec2"})
    with stub:
        result = capacity.check_quota(spec_of("qwen3-32b-qwen3-0.6b"), quotas)
    assert result.status == "FAIL" and "2 x trn2.48xlarge need 384" in result.found and "--desired-value 384" in result.fix


def test_quota_found_by_code_when_not_listed_by_name():
    quotas, stub = stubbed("service-quotas")
    stub.add_response("list_service_quotas", {"Quotas": [other_quota()]}, {"ServiceCode": "ec2"})
    stub.add_response("get_service_quota", {"Quota": trn_quota(0.0)}, {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"})
    with stub:
        assert capacity.check_quota(spec_of(), quotas).status == "FAIL"
    stub.assert_no_pending_responses()


def test_quota_not_needed_for_reserved_capacity():
    quotas, stub = stubbed("service-quotas")
    with stub:  # no call at all
        result = capacity.check_quota(spec_of(**RESERVED), quotas)
    assert result.status == "PASS" and "cr-0123456789abcdef0" in result.found


def test_quota_api_errors_are_could_not_verify():
    quotas, stub = stubbed("service-quotas")
    stub.add_client_error("list_service_quotas", "AccessDeniedException", "not authorized", 400)
    with stub:
        result = run.guarded(capacity.QUOTA, "fix", lambda: capacity.check_quota(spec_of(), quotas))
    assert result.status == "WARN" and result.found.startswith("could not verify: not permitted: An error occurred (AccessDeniedException)")


# --- reservations (Stubber) ------------------------------------------------------------------------

def check_reserved(*reservations, now=NOW):
    spec = spec_of(**RESERVED)
    ec2, stub = stubbed("ec2")
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": list(reservations)}, {})
    with stub:
        return capacity.check_reservations(spec, ec2, ["us-east-2a", "us-east-2b"], run_estimate(spec), now)


def test_an_active_block_with_time_left_passes():
    result = check_reserved(reservation(end=NOW + timedelta(days=2)))
    assert result.status == "PASS" and "1 instance(s) available" in result.found and result.fix == ""


def test_an_expired_reservation_fails():
    result = check_reserved(reservation(state="expired", start=NOW - timedelta(days=3), end=NOW - timedelta(days=1)))
    assert result.status == "FAIL" and "ended 2026-11-21" in result.found and "0 instance(s) usable" in result.found


@pytest.mark.parametrize("changed, says", [
    ({"instance_type": "trn2.3xlarge"}, "reserves trn2.3xlarge"),
    ({"zone": "us-east-2c"}, "outside the stack's zones us-east-2a, us-east-2b"),
    ({"state": "cancelled"}, "state cancelled launches nothing"),
    ({"available": 0}, "0 instance(s) usable across them, 1 needed"),
])
def test_a_reservation_the_stack_cannot_use_fails(changed, says):
    result = check_reserved(reservation(**changed))
    assert result.status == "FAIL" and says in result.found


def test_a_configured_id_the_region_does_not_have_fails():
    result = check_reserved(reservation(rid="cr-0fffffffffffffff0"))
    assert result.status == "FAIL" and "cr-0123456789abcdef0: not found in us-east-2" in result.found


def test_a_block_ending_before_the_run_would_warns():
    result = check_reserved(reservation(end=NOW + timedelta(hours=2)))
    assert result.status == "WARN" and "2.0 h of use" in result.found and "a run takes" in result.found


def test_a_scheduled_block_warns_with_its_start_and_counts_its_total():
    result = check_reserved(reservation(state="scheduled", available=0, total=1, start=NOW + timedelta(days=1),
                                        end=NOW + timedelta(days=3)))
    assert result.status == "WARN" and "starts 2026-11-23 12:00Z" in result.found and "48.0 h of use" in result.found


# --- no reservation: Capacity Block offerings (Stubber) -------------------------------------------

def test_on_demand_without_reservations_warns_and_lists_capacity_blocks():
    spec = spec_of()
    estimate = run_estimate(spec)
    ec2, stub = stubbed("ec2")
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [
        block_offering("cb-0000000000000000b", "us-east-2c", NOW + timedelta(days=2), 24, "1000.00"),
        block_offering("cb-0000000000000000a", "us-east-2a", NOW + timedelta(days=1), 24, "1100.00"),
    ]}, {"InstanceType": "trn2.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 24})
    with stub:
        result = capacity.list_capacity_blocks(spec, ec2, ["us-east-2a", "us-east-2b"], estimate)
    assert result.status == "WARN" and "purchase-capacity-block" in result.fix
    assert result.found.index("cb-0000000000000000a") < result.found.index("cb-0000000000000000b")
    assert "us-east-2a from 2026-11-23 12:00Z for 24 h, 1100.00 USD" in result.found
    assert "us-east-2c (not a stack zone)" in result.found


def test_capacity_block_durations_cover_the_run_in_whole_days_up_to_fourteen():
    spec = spec_of()
    estimate = run_estimate(spec)
    assert capacity.block_hours(estimate) == 24 and 0 < estimate.hours <= 24
    assert capacity.block_hours(type(estimate)(0.5, 30.0, 1.0)) == 48
    assert capacity.block_hours(type(estimate)(0.5, 400.0, 1.0)) == 336


# --- AMI (moto SSM) ----------------------------------------------------------------------------------

def test_the_ami_parameter_is_the_one_karpenter_reads():
    assert platform.ami_parameter(spec_of()) == ("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/"
                                                 f"amazon-eks-node-al2023-x86_64-neuron-1.35-{AMI_RELEASE.tag}/image_id")
    assert platform.ami_parameter(spec_of(**ON_1_34)) == ("/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/neuron/"
                                                          f"amazon-eks-node-al2023-x86_64-neuron-1.34-{AMI_RELEASE.tag}/image_id")


def test_ami_passes_when_the_public_parameter_exists(moto_endpoint):
    spec = spec_of()
    seed_public_parameter("us-east-2", platform.ami_parameter(spec), "ami-0abcdef1234567890")
    result = platform.check_ami(spec, boto3.Session().client("ssm", region_name="us-east-2"))
    assert result.status == "PASS" and "ami-0abcdef1234567890" in result.found


def test_ami_fails_when_the_alias_has_no_parameter(moto_endpoint):
    spec = spec_of()
    seed_public_parameter("us-east-2", platform.ami_parameter(spec), "ami-0abcdef1234567890")
    older = spec_of(**{"sd-trn2:capacity": {"amiAlias": "al2023@v20200101"}})
    result = platform.check_ami(older, boto3.Session().client("ssm", region_name="us-east-2"))
    assert result.status == "FAIL" and "al2023@v20200101" in result.found and "get-parameters-by-path" in result.fix


# --- EKS add-ons (Stubber) --------------------------------------------------------------------------

def addons_answer(spec, answers: dict[str, list[tuple[str, bool]]], deployed: dict[str, str] | None = None):
    """DescribeAddonVersions per add-on the stack installs: (build, default for the version), newest first."""
    eks, stub = stubbed("eks")
    k8s = spec.cluster.kubernetes_version
    for name in stack_addons(k8s, spec.cluster.workload_identity):
        stub.add_response("describe_addon_versions", {"addons": [addon(name, answers[name], k8s)]},
                          {"addonName": name, "kubernetesVersion": k8s})
    with stub:
        result = platform.check_addons(spec, eks, deployed)
    stub.assert_no_pending_responses()
    return result


def offered_as_planned(spec) -> dict[str, list[tuple[str, bool]]]:
    """EKS offering each pin as its default, and for an EKS-default add-on a newer build too."""
    pins = stack_addons(spec.cluster.kubernetes_version, spec.cluster.workload_identity)
    return {name: [("v2.99.0-eksbuild.1" if name == "aws-mountpoint-s3-csi-driver" else "v9.9.9-eksbuild.1", False),
                   (pin.build or eks_default(name, spec.cluster.kubernetes_version), True)]
            for name, pin in pins.items()}


def test_addons_pass_with_each_pin_offered_and_each_default_named():
    spec = spec_of()
    result = addons_answer(spec, offered_as_planned(spec))
    assert result.status == "PASS", result.found
    assert "vpc-cni v1.22.1-eksbuild.2," in result.found and "coredns v1.14.2-eksbuild.4," in result.found
    assert "amazon-cloudwatch-observability v4.10.2-eksbuild.1 (EKS default)" in result.found
    assert "pinned" not in result.found  # every pin is EKS's default here


def test_a_pin_that_is_not_the_eks_default_is_named():
    spec = spec_of()
    answers = offered_as_planned(spec)
    answers["coredns"] = [("v1.14.2-eksbuild.4", False), ("v1.13.2-eksbuild.4", True)]
    result = addons_answer(spec, answers)
    assert result.status == "PASS" and "coredns pinned v1.14.2-eksbuild.4, EKS default v1.13.2-eksbuild.4" in result.found


def test_addons_fail_naming_an_unknown_build():
    spec = spec_of()
    answers = offered_as_planned(spec)
    answers["coredns"] = [("v1.12.4-eksbuild.1", True)]
    result = addons_answer(spec, answers)
    assert result.status == "FAIL" and "coredns v1.14.2-eksbuild.4 is not offered (offered: v1.12.4-eksbuild.1)" in result.found
    assert "vpc-cni" not in result.found


def test_an_eks_default_the_program_cannot_run_fails(monkeypatch):
    """The Mountpoint driver is pinned on 1.35; here it is left to EKS's default, whose build breaks
    its requirement."""
    from stackconfig.versions import AddonPin

    spec = spec_of()
    answers = offered_as_planned(spec)
    answers["aws-mountpoint-s3-csi-driver"] = [("v1.15.0-eksbuild.1", True)]
    answers["amazon-cloudwatch-observability"] = [("v4.10.3-eksbuild.1", False)]
    pins = {**stack_addons("1.35", spec.cluster.workload_identity), "aws-mountpoint-s3-csi-driver": AddonPin(None, "EKS's")}
    monkeypatch.setattr(platform, "stack_addons", lambda *_: pins)
    result = addons_answer(spec, answers)
    assert result.status == "FAIL"
    assert "aws-mountpoint-s3-csi-driver v1.15.0-eksbuild.1 is not v2.4.1 or later" in result.found
    assert "(EKS default)" in result.found
    assert "amazon-cloudwatch-observability: EKS marks no default build and none is pinned" in result.found


@pytest.mark.parametrize("kubernetes, build, allowed", [
    # v2.4.0 (Mountpoint 1.22.0) brought an I/O error race after closing a truncated file; v2.4.1 fixes
    # it (awslabs/mountpoint-s3-csi-driver CHANGELOG.md). 1.35 is tested from v2.4.0, so 1.35 needs v2.4.1;
    # no release is tested on 1.36, which keeps 1.35's floor.
    ("1.35", "v2.4.1-eksbuild.1", True), ("1.35", "v2.9.2-eksbuild.1", True), ("1.35", "v2.4.0-eksbuild.1", False),
    ("1.35", "v2.3.0-eksbuild.1", False), ("1.34", "v2.3.0-eksbuild.1", True), ("1.34", "v2.4.0-eksbuild.1", False),
    ("1.34", "v1.15.0-eksbuild.1", False), ("1.34", "v3.0.0-eksbuild.1", False),
    ("1.36", "v2.4.1-eksbuild.1", True), ("1.36", "v2.7.0-eksbuild.1", True), ("1.36", "v2.4.0-eksbuild.1", False),
    ("1.36", "v2.3.0-eksbuild.1", False), ("1.36", "v3.0.0-eksbuild.1", False)])
def test_a_mountpoint_driver_build_with_the_truncation_race_or_untested_on_the_version_is_refused(kubernetes, build, allowed):
    from stackconfig.versions import addon_requirement

    assert addon_requirement("aws-mountpoint-s3-csi-driver", kubernetes).allows(build) is allowed


@pytest.mark.parametrize("build, allowed", [("v1.20.4-eksbuild.1", True), ("v1.22.1-eksbuild.2", True), ("v1.21.2-eksbuild.2", True),
                                            ("v1.21.1-eksbuild.1", False), ("v1.22.0-eksbuild.1", False), ("v1.13.4-eksbuild.1", False)])
def test_a_vpc_cni_build_whose_network_policy_agent_drops_all_traffic_is_refused(build, allowed):
    from stackconfig.versions import addon_requirement

    assert addon_requirement("vpc-cni", "1.35").allows(build) is allowed


def test_a_build_offered_only_for_another_kubernetes_version_fails():
    spec = spec_of()
    answers = offered_as_planned(spec)
    eks, stub = stubbed("eks")
    for name, builds in answers.items():
        stub.add_response("describe_addon_versions", {"addons": [addon(name, builds, "1.34" if name == "kube-proxy" else "1.35")]},
                          {"addonName": name, "kubernetesVersion": "1.35"})
    with stub:
        result = platform.check_addons(spec, eks)
    assert result.status == "FAIL" and "kube-proxy v1.35.3-eksbuild.2 is not offered (offered: none)" in result.found


def test_a_deployed_stack_is_told_which_addons_the_next_up_moves():
    """The builds a running stack reports (its `versions` output) against what an up would install:
    an upgrade from 1.34 moves every add-on; an unchanged stack moves none."""
    spec = spec_of()
    planned = {name: pin.build or eks_default(name, "1.35") for name, pin in stack_addons("1.35", "irsa").items()}
    assert addons_answer(spec, offered_as_planned(spec), deployed=planned).status == "PASS"
    old = {name: pin.build for name, pin in stack_addons("1.34", "irsa").items()}
    result = addons_answer(spec, offered_as_planned(spec), deployed=old)
    assert result.status == "WARN"
    assert "the next `pulumi up` changes vpc-cni v1.20.4-eksbuild.1 -> v1.22.1-eksbuild.2; kube-proxy" in result.found


def test_the_pod_identity_agent_is_checked_only_when_installed():
    spec = spec_of(**{"sd-trn2:cluster": {"workloadIdentity": "pod-identity"}})
    assert "eks-pod-identity-agent" in stack_addons("1.35", "pod-identity")
    result = addons_answer(spec, offered_as_planned(spec))
    assert result.status == "PASS" and "eks-pod-identity-agent v1.3.10-eksbuild.2 (EKS default)" in result.found
    assert "eks-pod-identity-agent" not in addons_answer(spec_of(), offered_as_planned(spec_of())).found


# --- Kubernetes version support ---------------------------------------------------------------------

@pytest.mark.parametrize("today, status, says", [
    (date(2026, 6, 1), "PASS", "until 2026-12-02, supportType STANDARD"),
    (date(2026, 11, 22), "WARN", "leaves EKS standard support 2026-12-02: EKS then upgrades the control plane to the next "
                                 "version by itself (supportType STANDARD; EXTENDED would bill $0.60/h instead of $0.10/h)"),
    (date(2027, 1, 5), "WARN", "left EKS standard support 2026-12-02: EKS then upgrades"),
    (date(2027, 12, 3), "FAIL", "ended 2027-12-02"),
])
def test_kubernetes_1_34_support_window(today, status, says):
    result = platform.check_kubernetes_support(spec_of(**ON_1_34), today)
    assert result.status == status and says in result.found


@pytest.mark.parametrize("today, status, says", [
    (date(2026, 11, 25), "PASS", "1.36 in EKS standard support until 2027-08-02, supportType STANDARD"),
    (date(2027, 7, 20), "WARN", "leaves EKS standard support 2027-08-02: EKS then upgrades the control plane"),
    (date(2027, 9, 1), "WARN", "left EKS standard support 2027-08-02"),
    (date(2028, 8, 3), "FAIL", "EKS support for 1.36 ended 2028-08-02"),
])
def test_kubernetes_1_36_support_window(today, status, says):
    result = platform.check_kubernetes_support(spec_of(**ON_1_36), today)
    assert result.status == status and says in result.found


def test_on_1_36_the_addons_eks_chooses_are_checked_and_the_pins_must_be_offered():
    """On 1.36 four add-ons are EKS's default; each is held to its requirement (a Mountpoint driver
    below 1.35's floor, a vpc-cni with the broken network policy agent fail), and the coredns and
    kube-proxy pins must be offered for 1.36."""
    spec = spec_of(**ON_1_36)
    planned = offered_as_planned(spec)
    result = addons_answer(spec, planned)
    assert result.status == "PASS", result.found
    assert "kube-proxy v1.36.0-eksbuild.14," in result.found and "coredns v1.14.3-eksbuild.3," in result.found
    assert "aws-mountpoint-s3-csi-driver v2.7.0-eksbuild.1 (EKS default)" in result.found
    broken = {**planned, "aws-mountpoint-s3-csi-driver": [("v2.4.0-eksbuild.1", True)],
              "vpc-cni": [("v1.21.1-eksbuild.1", True)], "kube-proxy": [("v1.35.3-eksbuild.2", True)]}
    result = addons_answer(spec, broken)
    assert result.status == "FAIL"
    assert ("aws-mountpoint-s3-csi-driver v2.4.0-eksbuild.1 is not v2.4.1 or later (no release read here is tested on "
            "1.36") in result.found
    assert "vpc-cni v1.21.1-eksbuild.1 is not v1.14.0 or later" in result.found
    assert "kube-proxy v1.36.0-eksbuild.14 is not offered" in result.found


def control_plane_answer(spec, running: str | None):
    """DescribeCluster for the stack's cluster: its version, or not found (not deployed)."""
    eks, stub = stubbed("eks")
    if running is None:
        stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", 404,
                              expected_params={"name": spec.cluster_name})
    else:
        stub.add_response("describe_cluster", {"cluster": {"name": spec.cluster_name, "version": running}},
                          {"name": spec.cluster_name})
    with stub:
        result = platform.check_control_plane(spec, eks)
    stub.assert_no_pending_responses()
    return result


def test_a_control_plane_eks_upgraded_past_the_stack_file_fails_and_names_the_version_to_set():
    """Under supportType STANDARD EKS upgrades a control plane by itself when its version leaves
    standard support (1.35: after 2027-03-27); a stack file still on the old minor would have the
    next `pulumi up` ask EKS to move the control plane back."""
    spec = spec_of()
    result = control_plane_answer(spec, "1.36")
    assert result.status == "FAIL"
    assert f"{spec.cluster_name} runs Kubernetes 1.36, newer than cluster.kubernetesVersion 1.35" in result.found
    assert result.fix == 'set cluster.kubernetesVersion to "1.36" in the stack file'
    beyond = control_plane_answer(spec, "1.37")
    assert beyond.status == "FAIL" and "this program offers no add-on builds for 1.37 yet" in beyond.fix


@pytest.mark.parametrize("running, status, says", [
    (None, "PASS", "not deployed yet: created at 1.35"),
    ("1.35", "PASS", "runs Kubernetes 1.35, as the stack file says"),
    ("1.34", "PASS", "the next `pulumi up` upgrades it from 1.34 to 1.35"),
    ("1.33", "FAIL", "EKS upgrades a control plane one minor at a time"),
])
def test_the_running_control_plane_is_compared_with_the_stack_file(running, status, says):
    result = control_plane_answer(spec_of(), running)
    assert result.status == status and says in result.found


def test_extended_support_names_the_price_it_bills():
    spec = spec_of(**{"sd-trn2:cluster": {"kubernetesVersion": "1.34", "supportType": "EXTENDED"}})
    result = platform.check_kubernetes_support(spec, date(2026, 11, 25))
    assert result.status == "WARN" and "the control plane then bills extended support, $0.60/h instead of $0.10/h" in result.found


def test_the_default_kubernetes_version_is_in_standard_support_today():
    result = platform.check_kubernetes_support(spec_of(), date(2026, 11, 25))
    assert result.status == "PASS" and result.found.startswith("1.35 in EKS standard support until 2027-03-27")


# --- Hugging Face (local hub server) ---------------------------------------------------------------

def test_hub_passes_when_the_token_reads_every_gated_repo(hub_endpoint):
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.Token("hf_reads_all", "the stack's huggingFaceToken"))
    assert result.status == "PASS" and "meta-llama/Llama-3.1-8B readable" in result.found
    assert HubHandler.seen == ["Bearer hf_reads_all"] * 2 and "hf_reads_all" not in result.line()


def test_hub_fails_naming_the_repo_the_token_cannot_read(hub_endpoint):
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.Token("hf_reads_draft_only", "HF_TOKEN"))
    assert result.status == "FAIL" and "meta-llama/Llama-3.1-8B: access not granted (gated; HTTP 403)" in result.found
    assert "meta-llama/Llama-3.2-1B readable" in result.found and "hf_reads_draft_only" not in result.line()


def test_hub_fails_on_an_invalid_token(hub_endpoint):
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.Token("hf_revoked_token_value", "HF_TOKEN"))
    assert result.status == "FAIL" and "the token is invalid (HTTP 401)" in result.found
    assert "hf_revoked_token_value" not in json.dumps(result.as_json())


def test_hub_fails_when_the_stack_sets_no_token_for_gated_models():
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.stack_token(LLAMA))  # the stack file sets none
    assert result.status == "FAIL" and "sets no huggingFaceToken" in result.found and "pulumi config set --secret" in result.fix


def test_hub_is_not_asked_when_no_model_is_gated():
    def never():
        raise AssertionError("the token was read")
    assert hub.check_hub(spec_of(QWEN), never).status == "PASS"


def test_hub_unreachable_is_could_not_verify(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.Token("hf_reads_all", "HF_TOKEN"))
    assert result.status == "WARN" and "could not verify" in result.found and "hf_reads_all" not in result.line()


def test_the_stack_token_comes_from_pulumi_else_hf_token(tmp_path, fake_bin, monkeypatch):
    # An encrypted value reads as None (StackFiles.config): the key is set, the CLI must decrypt it.
    real = hub.FILES.config
    monkeypatch.setattr(hub.FILES, "config", lambda stack: {**real(stack), "sd-trn2:huggingFaceToken": None})
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log, config={"huggingFaceToken": "hf_from_pulumi"}))
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    token = hub.stack_token(LLAMA)
    assert token.value == "hf_from_pulumi" and "hf_from" not in repr(token)
    assert fake_clis.logged(log) == [["pulumi", "config", "get", "huggingFaceToken", "--non-interactive", "--stack", LLAMA]]
    fake_bin("pulumi", fake_clis.pulumi(log, error="error: failed to decrypt hf_partialSecret0: incorrect passphrase"))
    token = hub.stack_token(LLAMA)
    assert token.value == "hf_from_env" and "incorrect passphrase" in token.source and "hf_partialSecret0" not in token.source
    monkeypatch.delenv("HF_TOKEN")
    result = hub.check_hub(spec_of(LLAMA), lambda: hub.stack_token(LLAMA))
    assert result.status == "WARN" and result.found.startswith("could not verify: `pulumi config get huggingFaceToken` failed")


# --- CLIs -----------------------------------------------------------------------------------------

def test_clis_pass_with_their_versions(all_clis):
    result = clis.check_clis()
    assert result.status == "PASS"
    assert result.found == "pulumi v3.272.0; kubectl Client Version: v1.34.2; aws aws-cli/2.31.0 Python/3.13.7 Linux/6.8.0 exe/x86_64"


def test_clis_fail_naming_the_missing_ones(tmp_path, fake_bin):
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    result = clis.check_clis()
    assert result.status == "FAIL" and result.found == "not on PATH: pulumi, aws" and "Pulumi CLI" in result.fix


# --- cost (Stubber: moto has no Pricing API) -------------------------------------------------------

def pricing_answers(spec, stub, entries: dict[str, list[str]]) -> None:
    """One GetProducts answer per priced item, in the order check_cost asks."""
    for instance_type in (spec.capacity.instance_type, spec.cluster.system_node_instance_type):
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": entries[instance_type]},
                          {"ServiceCode": "AmazonEC2", "Filters": [{"Type": "TERM_MATCH", "Field": k, "Value": v}
                                                                   for k, v in cost.instance_filters(instance_type, spec.region).items()]})
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": entries["nat"]}, {"ServiceCode": "AmazonEC2", "Filters": ANY})
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": entries["eks"]}, {"ServiceCode": "AmazonEKS", "Filters": ANY})


def test_cost_from_the_pricing_api():
    spec = spec_of()
    pricing, stub = stubbed("pricing", "us-east-1")
    pricing_answers(spec, stub, {"trn2.48xlarge": [instance_entry("trn2.48xlarge", "40.0000000000")],
                                 "m7i.xlarge": [instance_entry("m7i.xlarge", "0.2100000000")],
                                 "nat": nat_entries("0.0500000000", "0.0450000000"), "eks": eks_entries("0.1000000000")})
    with stub:
        result = cost.check_cost(spec, pricing, run_estimate(spec), date(2026, 6, 1))
    stub.assert_no_pending_responses()
    assert result.status == "PASS" and "approximate" not in result.found
    assert result.data["hourlyUsd"] == pytest.approx(40.0 + 2 * 0.21 + 0.05 + 0.10)
    assert result.data["perRunUsd"] == pytest.approx(result.data["hourlyUsd"] * run_estimate(spec).hours, abs=0.01)
    assert "NAT gateway $0.050" in result.found and "per run of ~" in result.found and "estimate" in result.found


def test_cost_falls_back_to_cited_prices_labelled_approximate():
    spec = spec_of()
    pricing, stub = stubbed("pricing", "us-east-1")
    for _ in range(4):
        stub.add_client_error("get_products", "AccessDeniedException", "not authorized to perform pricing:GetProducts", 400)
    with stub:
        result = cost.check_cost(spec, pricing, run_estimate(spec), date(2026, 6, 1))
    assert result.status == "WARN" and result.found.startswith("approximate: ")
    assert result.data["hourlyUsd"] == pytest.approx(35.76 + 2 * 0.2016 + 0.045 + 0.10)
    assert result.found.count("AccessDeniedException") == 1 and "pricing:GetProducts" in result.fix


def test_cost_uses_the_extended_support_rate_past_standard_support_only_with_extended_support():
    spec = spec_of(**{"sd-trn2:cluster": {"kubernetesVersion": "1.34", "supportType": "EXTENDED"}})
    pricing, stub = stubbed("pricing", "us-east-1")
    for _ in range(3):  # no question about the standard control-plane rate
        stub.add_client_error("get_products", "ThrottlingException", "slow down", 400)
    with stub:
        result = cost.check_cost(spec, pricing, run_estimate(spec), date(2027, 1, 5))
    stub.assert_no_pending_responses()
    assert "EKS control plane (extended support) $0.600" in result.found
    standard = spec_of(**ON_1_34)  # STANDARD: EKS upgrades the control plane instead of billing more
    pricing, stub = stubbed("pricing", "us-east-1")
    for _ in range(4):
        stub.add_client_error("get_products", "ThrottlingException", "slow down", 400)
    with stub:
        result = cost.check_cost(standard, pricing, run_estimate(standard), date(2027, 1, 5))
    assert "EKS control plane $0.100" in result.found


def approximate_cost(spec):
    pricing, stub = stubbed("pricing", "us-east-1")
    for _ in range(4):
        stub.add_client_error("get_products", "AccessDeniedException", "not authorized", 400)
    with stub:
        return cost.check_cost(spec, pricing, run_estimate(spec) if isinstance(spec, StackSpec) else None,
                               date(2026, 6, 1))


def test_a_shared_pairing_costs_its_nodes_and_the_platform_the_rest():
    standalone, shared, platform_only = (approximate_cost(spec_of(s)) for s in (QWEN, SHARED, PLATFORM))
    assert shared.data["hourlyUsd"] == pytest.approx(35.76)
    assert platform_only.data["hourlyUsd"] == pytest.approx(2 * 0.2016 + 0.045 + 0.10)
    assert standalone.data["hourlyUsd"] == pytest.approx(shared.data["hourlyUsd"] + platform_only.data["hourlyUsd"])
    assert "plus the platform stack organization/sd-trn2/platform's own hourly cost" in shared.found
    assert "NAT gateway" not in shared.found and "trn2" not in platform_only.found
    assert "perRunUsd" in shared.data and "perRunUsd" not in platform_only.data and "per run" not in platform_only.found


def test_price_list_parsing_keeps_only_the_hourly_usage():
    assert cost.hourly_usd(nat_entries("0.05", "0.045"), "NatGateway-Hours") == [0.05]
    assert cost.hourly_usd(eks_entries("0.10"), "AmazonEKS-Hours:perCluster") == [0.10]
    assert cost.hourly_usd([instance_entry("trn2.48xlarge", "0.0000000000")]) == []


# --- the whole run ----------------------------------------------------------------------------------

@pytest.fixture
def preflight_env(moto_endpoint, all_clis, hub_endpoint, monkeypatch):
    """A moto server for AWS, stand-in CLIs, the local hub; `run.stack_spec` is pointed at a
    region override where a test needs one (the stack files all say us-east-2)."""
    def with_region(region: str) -> None:
        monkeypatch.setattr(run, "stack_spec", lambda stack: load_stack(stack, in_region(region)).spec())
    return with_region


def test_a_region_without_trn2_fails_naming_the_instance_type_and_exits_1(preflight_env, capsys):
    preflight_env("us-west-2")
    assert run.main(["--stack", QWEN]) == 1
    out = capsys.readouterr().out
    (offerings,) = [line for line in out.splitlines() if line.startswith("FAIL  offerings")]
    assert "trn2.48xlarge" in offerings and "us-west-2" in offerings


def test_us_east_2_has_no_offerings_failure_and_the_run_passes(preflight_env, capsys):
    spec = spec_of()
    seed_public_parameter("us-east-2", platform.ami_parameter(spec), "ami-0abcdef1234567890")
    assert run.main(["--stack", QWEN]) == 0
    out = capsys.readouterr().out
    assert "PASS  offerings" in out and "FAIL" not in out
    # moto lacks Service Quotas for ec2, EKS add-on versions, Capacity Block offerings and Pricing:
    # those checks say they could not verify, and the cost falls back to approximate prices.
    assert "WARN  quota         could not verify" in out and "WARN  EKS add-ons   could not verify" in out
    assert "WARN  cost          approximate" in out


def test_json_output_for_machines(preflight_env, capsys):
    assert run.main(["--stack", QWEN, "--json"]) == 1  # the AMI parameter is not seeded here
    out = capsys.readouterr().out
    # The in-process moto server prints a line for the Pricing endpoint it lacks; the report follows.
    report = json.loads(out[out.index("\n{") + 1:] if not out.startswith("{") else out)
    assert report["stack"] == QWEN and report["region"] == "us-east-2" and report["ok"] is False
    checks = {r["check"]: r for r in report["results"]}
    assert checks["AMI"]["status"] == "FAIL" and checks["offerings"]["status"] == "PASS"
    assert set(checks) == {"credentials", "CLIs", "offerings", "quota", "reservations", "AMI", "EKS add-ons",
                           "Kubernetes", "control plane", "API endpoint", "Hugging Face", "model revisions", "checkpoint sizes",
                           "cost"}
    assert checks["cost"]["data"]["perRunUsd"] > 0


def test_a_platform_is_checked_for_what_it_builds(preflight_env, capsys):
    assert run.main(["--stack", PLATFORM, "--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[out.index("\n{") + 1:] if not out.startswith("{") else out)
    checks = {r["check"]: r for r in report["results"]}
    assert set(checks) == {"credentials", "CLIs", "offerings", "EKS add-ons", "Kubernetes", "control plane", "API endpoint",
                           "cost"}
    assert checks["control plane"]["status"] == "PASS" and "not deployed yet" in checks["control plane"]["found"]
    assert checks["offerings"]["status"] == "PASS" and "us-east-2a" in checks["offerings"]["found"]


def test_a_config_error_exits_2(capsys):
    assert run.main(["--stack", "no-such-stack"]) == 2
    assert "no stack file" in capsys.readouterr().err


def test_without_credentials_nothing_raises(moto_server, no_aws_credentials, all_clis, hub_endpoint, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    assert run.main(["--stack", QWEN]) == 1
    out = capsys.readouterr().out
    assert "FAIL  credentials   no AWS credentials found" in out and "Traceback" not in out
    assert "WARN  AMI           could not verify: Unable to locate credentials" in out


# --- make up ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("skip, pulumi_runs", [("", False), ("1", True)])
def test_make_up_runs_preflight_first_and_stops_on_a_fail(moto_endpoint, hub_endpoint, tmp_path, fake_bin, skip, pulumi_runs):
    """Against the moto server the AMI parameter is missing: a FAIL, so `pulumi up` never runs,
    unless SKIP_PREFLIGHT=1."""
    make = shutil.which("make", path="/usr/local/bin:/usr/bin:/bin")
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log))
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    fake_bin("aws", fake_clis.AWS_CLI)
    done = subprocess.run([make, "--no-print-directory", "up", f"STACK={QWEN}", f"SKIP_PREFLIGHT={skip}", "ALLOW_OPEN_ENDPOINT=1"],
                          cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (["pulumi", "up", "--stack", QWEN] in fake_clis.logged(log)) == pulumi_runs
    assert (done.returncode == 0) == pulumi_runs
    assert ("FAIL  AMI" in done.stdout) != pulumi_runs
    # After a successful up, what to run next: the kubeconfig, the namespace, the servers' logs.
    namespace = spec_of().namespace
    assert (f"export KUBECONFIG=$PWD/kubeconfig NS={namespace}" in done.stdout) == pulumi_runs
    assert ("kubectl -n $NS logs -f deploy/vllm-sd" in done.stdout) == pulumi_runs


def test_make_up_refuses_an_open_endpoint_it_cannot_ask_about(tmp_path, fake_bin):
    """QWEN's endpoint is open to 0.0.0.0/0 (the default): with no terminal and no
    ALLOW_OPEN_ENDPOINT=1, nothing runs, not even the preflight, and the operator is told both ways out."""
    make = shutil.which("make", path="/usr/local/bin:/usr/bin:/bin")
    log = tmp_path / "pulumi.log"
    fake_bin("pulumi", fake_clis.pulumi(log))
    done = subprocess.run([make, "--no-print-directory", "up", f"STACK={QWEN}", "SKIP_PREFLIGHT=1"],
                          cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and not fake_clis.logged(log)
    assert "0.0.0.0/0" in done.stderr and "cluster.publicAccessCidrs" in done.stderr and "ALLOW_OPEN_ENDPOINT=1" in done.stderr


@pytest.mark.parametrize("cidrs, shared, answer, confirmed", [
    (["0.0.0.0/0"], False, "y\n", True), (["0.0.0.0/0"], False, "\n", False), (["0.0.0.0/0"], False, None, False),
    (["203.0.113.0/24"], False, None, True), (["0.0.0.0/0"], True, None, True),
])
def test_an_open_endpoint_is_asked_about_only_when_this_stack_creates_the_cluster(monkeypatch, cidrs, shared, answer, confirmed):
    """At a terminal the operator answers; without one (answer None) an open endpoint is refused. A
    narrowed endpoint, or a shared pairing (its platform stack made the cluster), asks nothing."""
    import io

    from tools import up

    stack = SHARED if shared else QWEN
    spec = load_stack(stack, {} if shared else {"sd-trn2:cluster": {"publicAccessCidrs": cidrs}}).spec()
    stdin = io.StringIO(answer or "")
    stdin.isatty = lambda: answer is not None  # type: ignore[method-assign]
    monkeypatch.setattr("sys.stdin", stdin)
    assert up.open_endpoint_confirmed(stack, spec, allowed=False) is confirmed
    assert up.open_endpoint_confirmed(stack, spec, allowed=True) is True


def test_a_reserved_stack_checks_its_reservations_instead_of_the_quota(all_clis, hub_endpoint):
    """run_checks end to end on stubbed clients: the reservation is checked in the zones the
    network spans, the quota is not asked, every AWS answer is used."""
    spec = spec_of(**RESERVED)
    sts, sts_stub = stubbed("sts")
    sts_stub.add_response("get_caller_identity", {"UserId": "AIDAEXAMPLE", "Account": "123456789012",
                                                  "Arn": "arn:aws:iam::123456789012:user/operator"}, {})
    ec2, ec2_stub = stubbed("ec2")
    ec2_stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "trn2.48xlarge", "LocationType": "availability-zone", "Location": zone}
        for zone in ("us-east-2a", "us-east-2b", "us-east-2c")]},
        {"LocationType": "availability-zone", "Filters": [{"Name": "instance-type", "Values": ["trn2.48xlarge"]}]})
    ec2_stub.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation(end=NOW + timedelta(days=2))]}, {})
    ssm, ssm_stub = stubbed("ssm")
    ssm_stub.add_response("get_parameter", {"Parameter": {"Name": platform.ami_parameter(spec), "Type": "String",
                                                          "Value": "ami-0abcdef1234567890", "Version": 1}},
                          {"Name": platform.ami_parameter(spec)})
    eks, eks_stub = stubbed("eks")
    for name, builds in offered_as_planned(spec).items():
        eks_stub.add_response("describe_addon_versions", {"addons": [addon(name, builds, "1.35")]},
                              {"addonName": name, "kubernetesVersion": "1.35"})
    eks_stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", 404,
                              expected_params={"name": spec.cluster_name})
    quotas, quotas_stub = stubbed("service-quotas")
    pricing, pricing_stub = stubbed("pricing", "us-east-1")
    for _ in range(4):
        pricing_stub.add_client_error("get_products", "AccessDeniedException", "denied", 400)
    stubs = [sts_stub, ec2_stub, ssm_stub, eks_stub, quotas_stub, pricing_stub]
    for stub in stubs:
        stub.activate()
    results = run.run_checks(spec, run.AwsClients(sts=sts, ec2=ec2, ssm=ssm, eks=eks, quotas=quotas, pricing=pricing),
                             NOW, lambda: pytest.fail("no gated model: the token must not be read"))
    for stub in stubs:
        stub.assert_no_pending_responses()
    status = {r.check: r.status for r in results}
    assert status == {"credentials": "PASS", "CLIs": "PASS", "offerings": "PASS", "quota": "PASS", "reservations": "PASS",
                      "AMI": "PASS", "EKS add-ons": "PASS", "Kubernetes": "PASS", "control plane": "PASS", "API endpoint": "WARN",
                      "Hugging Face": "PASS", "model revisions": "PASS", "checkpoint sizes": "WARN", "cost": "WARN"}
    (cost_result,) = [r for r in results if r.check == "cost"]
    assert "reserved capacity bills by its own terms" in cost_result.found


def test_an_endpoint_open_to_the_internet_warns_and_a_narrowed_one_passes():
    open_result = platform.check_endpoint(spec_of())
    assert open_result.status == "WARN" and "0.0.0.0/0" in open_result.found and "cluster.publicAccessCidrs" in open_result.fix
    narrowed = load_stack(QWEN, {"sd-trn2:cluster": {"publicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32"]}}).spec()
    result = platform.check_endpoint(narrowed)
    assert result.status == "PASS" and "203.0.113.0/24, 198.51.100.7/32 only" in result.found


# --- could not verify: the network, or a permission -------------------------------------------------

def test_could_not_verify_says_whether_the_network_or_a_permission_stopped_it():
    from botocore.exceptions import EndpointConnectionError

    from tools.preflight.result import guarded

    def refuse():
        eks, stub = stubbed("eks")
        stub.add_client_error("describe_addon_versions", "AccessDeniedException", "User is not authorized", 403)
        with stub:
            eks.describe_addon_versions(addonName="coredns", kubernetesVersion="1.35")

    def unreachable():
        raise EndpointConnectionError(endpoint_url="https://eks.us-east-2.amazonaws.com/")

    denied = guarded("EKS add-ons", "allow eks:DescribeAddonVersions", refuse)
    assert denied.status == "WARN" and denied.found.startswith("could not verify: not permitted: ")
    assert denied.fix == "allow eks:DescribeAddonVersions"
    offline = guarded("EKS add-ons", "allow eks:DescribeAddonVersions", unreachable)
    assert offline.status == "WARN" and offline.found.startswith("could not verify: could not reach the API (network): ")
    assert "proxy" in offline.fix and "allow" not in offline.fix


def test_an_aws_cli_v1_fails_the_cli_check(tmp_path, fake_bin):
    fake_bin("pulumi", fake_clis.pulumi(tmp_path / "pulumi.log"))
    fake_bin("kubectl", fake_clis.kubectl(tmp_path / "kubectl.log"))
    fake_bin("aws", 'print("aws-cli/1.18.69 Python/2.7.18 Linux/4.14 botocore/1.16.19", file=sys.stderr)\n')
    result = clis.check_clis()
    assert result.status == "FAIL" and "the AWS CLI is not version 2 (aws-cli/1.18.69" in result.found
    assert "version 2" in result.fix
