"""`make preflight STACK=<s>`: read-only checks with your credentials, before `pulumi up` spends money.

    python -m tools.preflight --stack S [--json]

One line per check: PASS, WARN or FAIL, the check, what was found and how to fix it. Exit 0 when
nothing fails, 1 when something does, 2 when the stack file is invalid. A check whose API could not
be reached or was not permitted says WARN "could not verify"; only a verified negative is a FAIL.
Every AWS client uses the stack's region (pricing: us-east-1) and honours AWS_ENDPOINT_URL and
AWS_ENDPOINT_URL_<SERVICE>; the hub check honours HF_ENDPOINT. Nothing is created or changed.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from stackconfig import PlatformSpec, StackSpec
from stackconfig.source import stack_argument
from tools.stack import StackFileError, ToolError, one_line, pulumi_outputs, stack_spec

from . import account, capacity, clis, cost, hub, platform
from .estimate import run_estimate
from .result import UNREACHABLE, Result, guarded, unreachable


def client_config() -> Config:
    """A preflight should answer in seconds: short timeouts, and the standard retry mode's 3
    attempts in all, or what AWS_MAX_ATTEMPTS says (botocore reads it only when the client config
    sets no max_attempts, and then writes the result into the config's retries dict: botocore 1.44
    args.py _compute_retry_max_attempts; hence a fresh Config per client)."""
    return Config(retries={"mode": "standard"}, connect_timeout=5, read_timeout=20)


@dataclass(frozen=True)
class AwsClients:
    sts: Any
    ec2: Any
    ssm: Any
    eks: Any
    quotas: Any
    pricing: Any


def aws_clients(region: str) -> AwsClients:
    session = boto3.Session(region_name=region)

    def client(service: str, in_region: str = region) -> Any:
        return session.client(service, region_name=in_region, config=client_config())

    return AwsClients(sts=client("sts"), ec2=client("ec2"), ssm=client("ssm"), eks=client("eks"),
                      quotas=client("service-quotas"), pricing=client("pricing", cost.PRICING_REGION))


def run_checks(spec: StackSpec | PlatformSpec, aws: AwsClients, now: datetime,
               read_token: Callable[[], hub.Token],
               read_deployed_addons: Callable[[], dict[str, str] | None] = lambda: None) -> list[Result]:
    """A platform stack is checked for what it builds (zones, add-ons, Kubernetes support, its own
    cost); a pairing for its capacity, AMI, models and cost too. A shared pairing's network and
    cluster are its platform's, from the platform's stack file: checking them again here is cheap
    and catches a platform file changed since it was deployed."""
    platform_spec = spec if isinstance(spec, PlatformSpec) else spec.platform
    estimate = run_estimate(spec) if isinstance(spec, StackSpec) else None
    results = [account.check_identity(aws.sts, spec.region), clis.check_clis()]
    try:
        offerings, zones = capacity.check_offerings(
            platform_spec, capacity.offered_zones(aws.ec2, platform_spec.instance_type),
            reservations_possible=not isinstance(spec, StackSpec) or spec.capacity.capacity_type == "reserved")
    except UNREACHABLE as error:
        offerings = unreachable(capacity.OFFERINGS, "allow ec2:DescribeInstanceTypeOfferings", error)
        zones = list(spec.cluster.availability_zones)
    results.append(offerings)
    if isinstance(spec, StackSpec):
        results.append(guarded(capacity.QUOTA, "allow servicequotas:ListServiceQuotas and GetServiceQuota",
                               lambda: capacity.check_quota(spec, aws.quotas)))
        if spec.capacity.reservation_ids:
            results.append(guarded(capacity.RESERVATIONS, "allow ec2:DescribeCapacityReservations",
                                   lambda: capacity.check_reservations(spec, aws.ec2, zones, estimate, now)))
        else:
            results.append(capacity.list_capacity_blocks(spec, aws.ec2, zones, estimate))
        results.append(guarded(platform.AMI, "allow ssm:GetParameter on parameter/aws/service/*",
                               lambda: platform.check_ami(spec, aws.ssm)))
    results.append(guarded(platform.ADDONS, "allow eks:DescribeAddonVersions",
                           lambda: platform.check_addons(spec, aws.eks, read_deployed_addons())))
    results.append(platform.check_kubernetes_support(spec, now.date()))
    results.append(guarded(platform.CONTROL_PLANE, "allow eks:DescribeCluster",
                           lambda: platform.check_control_plane(spec, aws.eks)))
    results.append(platform.check_endpoint(spec))
    if isinstance(spec, StackSpec):
        results.append(hub.check_hub(spec, read_token))
        results.append(hub.check_revisions(spec))
        results.append(hub.check_checkpoints(spec, read_token))
    results.append(cost.check_cost(spec, aws.pricing, estimate, now.date()))
    return results


def deployed_addons(stack: str) -> dict[str, str] | None:
    """The add-on builds a deployed stack reports (its `versions` output), or None when it is not
    deployed or its outputs cannot be read; never a reason to stop the preflight."""
    try:
        addons = pulumi_outputs(stack).get("versions", {}).get("addons")
    except ToolError:
        return None
    return addons if isinstance(addons, dict) else None


def report(spec: StackSpec | PlatformSpec, results: list[Result], as_json: bool) -> str:
    failed = [r for r in results if r.status == "FAIL"]
    if as_json:
        return json.dumps({"stack": spec.stack, "region": spec.region, "ok": not failed,
                           "results": [r.as_json() for r in results]}, indent=2)
    summary = (f"{len(failed)} check(s) failed: fix them before `make up`" if failed
               else "no check failed" + (" (see the warnings)" if any(r.status == "WARN" for r in results) else ""))
    return "\n".join([f"preflight {spec.stack} ({spec.region}, cluster {spec.cluster_name})",
                      *(r.line() for r in results), summary])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools preflight", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, type=stack_argument)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    try:
        spec = stack_spec(args.stack)
        aws = aws_clients(spec.region)
    except StackFileError as error:
        print(error, file=sys.stderr)
        return 2
    except BotoCoreError as error:  # e.g. AWS_PROFILE names a profile that does not exist
        print(f"error: AWS: {one_line(error)}", file=sys.stderr)
        return 1
    # The token is read once (`pulumi config get`), for both checks that ask the hub.
    results = run_checks(spec, aws, datetime.now(timezone.utc), functools.cache(lambda: hub.stack_token(args.stack)),
                         lambda: deployed_addons(args.stack))
    print(report(spec, results, args.json))
    return 1 if any(r.status == "FAIL" for r in results) else 0
