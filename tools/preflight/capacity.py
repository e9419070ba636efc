"""Can the stack get its trn2 nodes: offerings in its zones, the on-demand quota, reservations.

Shapes of every EC2 and Service Quotas answer read here: botocore 1.44.5
data/ec2/2016-11-15/service-2.json.gz (DescribeInstanceTypeOfferings, DescribeCapacityReservations,
DescribeCapacityBlockOfferings) and data/service-quotas/2019-06-24/service-2.json.gz.
"""
from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from stackconfig import PlatformSpec, StackSpec
from stackconfig.zones import ZoneSelectionError, platform_zones, unoffered_zones
from tools.stack import one_line

from .estimate import RunEstimate
from .result import UNREACHABLE, Result, worst

# --- offerings --------------------------------------------------------------------------------

OFFERINGS = "offerings"


def offered_zones(ec2: Any, instance_type: str) -> list[str]:
    """Zones of the client's region offering `instance_type` on demand (the same query the
    network component makes at deploy time: components/platform/network.py offered_zones)."""
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    return sorted({o["Location"] for page in pages for o in page["InstanceTypeOfferings"]})


def check_offerings(platform: PlatformSpec, offered: list[str], reservations_possible: bool) -> tuple[Result, list[str]]:
    """The zones the platform's network will span (stackconfig/zones.py, the rule the
    program's network applies) and whether the accelerator instance type is offered in them. Returns the
    zones too: the reservation and Capacity Block checks compare against them.

    `reservations_possible`: a stack on reserved capacity, or a platform (its pairings may be),
    can launch where no on-demand offering is, so that case is a warning there."""
    instance_type, region = platform.instance_type, platform.region
    hint = (f"aws ec2 describe-instance-type-offerings --location-type availability-zone "
            f"--filters Name=instance-type,Values={instance_type} --region <r> lists them")
    try:
        zones = platform_zones(offered, platform)
    except ZoneSelectionError as error:
        return Result("FAIL", OFFERINGS, str(error), f"{hint}; or buy a Capacity Block and name its zone and a "
                                                   f"second one in cluster.availabilityZones"), []
    missing = unoffered_zones(offered, zones)
    if not missing:
        return Result("PASS", OFFERINGS, f"{instance_type} is offered in {', '.join(zones)}, the zones the "
                                         f"network will span"), zones
    if len(missing) == len(zones):
        status = "WARN" if reservations_possible else "FAIL"
        return Result(status, OFFERINGS, f"{instance_type} has no on-demand offering in any of "
                                         f"cluster.availabilityZones {', '.join(zones)} (region {region}); only a "
                                         f"capacity reservation can launch it there",
                      f"{hint}; name offering zones, or use a reservation in one of these"), zones
    return Result("WARN", OFFERINGS, f"{instance_type} has no on-demand offering in {', '.join(missing)} (of "
                                     f"{', '.join(zones)}); nodes launch only in the others unless a reservation "
                                     f"is there", hint), zones


# --- quota ------------------------------------------------------------------------------------

QUOTA = "quota"
QUOTA_NAME = "Running On-Demand Trn instances"
# The code two independent sources give (docs/facts.md, "Regions and capacity"); the quota is found
# by its name first, and the code's answer is used only if it carries that name.
QUOTA_CODE = "L-2C3B7624"


def trn_quota(quotas: Any) -> dict | None:
    for page in quotas.get_paginator("list_service_quotas").paginate(ServiceCode="ec2"):
        for quota in page["Quotas"]:
            if quota.get("QuotaName") == QUOTA_NAME:
                return quota
    quota = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=QUOTA_CODE)["Quota"]
    return quota if quota.get("QuotaName") == QUOTA_NAME else None


def check_quota(spec: StackSpec, quotas: Any) -> Result:
    """Running on-demand Trn instances are counted in vCPUs (docs/facts.md, "Regions and capacity"): the nodes need
    node_count x vCPUs of the instance type. Reserved capacity launches into the reservations,
    which the reservations check covers."""
    capacity = spec.capacity
    needed = spec.node_count * capacity.shape.vcpus
    if capacity.capacity_type == "reserved":
        return Result("PASS", QUOTA, f"not needed: capacityType reserved launches into {', '.join(capacity.reservation_ids)}")
    quota = trn_quota(quotas)
    if quota is None:
        return Result("WARN", QUOTA, f"could not verify: no EC2 quota named {QUOTA_NAME!r} in {spec.region}",
                      "check Service Quotas in the console")
    value = quota.get("Value", 0.0)
    what = (f"{QUOTA_NAME!r} is {value:g} vCPU in {spec.region}; {spec.node_count} x {capacity.instance_type} need "
            f"{needed} ({capacity.shape.vcpus} each)")
    if value >= needed:
        return Result("PASS", QUOTA, what + "; other running Trn instances in the account count against it")
    return Result("FAIL", QUOTA, what,
                  f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
                  f"{quota.get('QuotaCode', QUOTA_CODE)} --desired-value {needed} --region {spec.region}; or buy a "
                  f"Capacity Block (capacityType reserved)")


# --- reservations and Capacity Blocks ----------------------------------------------------------

RESERVATIONS = "reservations"
# DescribeCapacityReservations State values (CapacityReservationState enum): usable now; usable
# later (a Capacity Block is "scheduled" until its start); never usable again.
USABLE_STATES = ("active",)
UPCOMING_STATES = ("scheduled", "pending", "payment-pending", "assessing", "delayed")
# Capacity Block durations: "1-day increments up 14 days" (DescribeCapacityBlockOfferings
# CapacityDurationHours, botocore 1.44.5 ec2 service model).
MAX_BLOCK_HOURS = 14 * 24
OFFERINGS_SHOWN = 3


def reservations_by_id(ec2: Any) -> dict[str, dict]:
    """Every reservation the account sees in the region. Listing all (rather than asking for the
    configured ids) makes a missing id a verified absence instead of an error code to interpret."""
    pages = ec2.get_paginator("describe_capacity_reservations").paginate()
    return {r["CapacityReservationId"]: r for page in pages for r in page["CapacityReservations"]}


def assess_reservation(reservation: dict, spec: StackSpec, zones: list[str], estimate: RunEstimate,
                       now: datetime) -> tuple[str, str, int]:
    """(status, finding, instances it contributes) for one configured reservation."""
    rid, state = reservation["CapacityReservationId"], reservation.get("State", "")
    kind = "Capacity Block" if reservation.get("ReservationType") == "capacity-block" else "ODCR"
    label = f"{rid} ({kind}, {reservation.get('InstanceType')}, {reservation.get('AvailabilityZone')}, {state})"
    if reservation.get("InstanceType") != spec.capacity.instance_type:
        return "FAIL", f"{label}: reserves {reservation.get('InstanceType')}, the stack runs {spec.capacity.instance_type}", 0
    if reservation.get("AvailabilityZone") not in zones:
        return "FAIL", f"{label}: outside the stack's zones {', '.join(zones) or '(unknown)'}", 0
    end = reservation.get("EndDate")
    if end is not None and end <= now:
        return "FAIL", f"{label}: ended {end:%Y-%m-%d %H:%M}Z", 0
    if state not in USABLE_STATES + UPCOMING_STATES:
        return "FAIL", f"{label}: a reservation in state {state} launches nothing", 0
    if state in USABLE_STATES:
        count = reservation.get("AvailableInstanceCount", 0)
        notes, status = [f"{count} instance(s) available"], "PASS"
    else:  # nothing is available before the start; what it will hold is its total
        count, start = reservation.get("TotalInstanceCount", 0), reservation.get("StartDate")
        notes = [f"{count} instance(s) from its start", f"starts {start:%Y-%m-%d %H:%M}Z" if start else "not started"]
        status = "WARN"
    if end is not None:
        begins = max(now, reservation.get("StartDate") or now)
        left = (end - begins).total_seconds() / 3600
        notes.append(f"ends {end:%Y-%m-%d %H:%M}Z, {left:.1f} h of use")
        if left < estimate.hours:
            notes.append(f"fewer than the {estimate.describe()} a run takes")
            status = "WARN"
    return status, f"{label}: {', '.join(notes)}", count


def check_reservations(spec: StackSpec, ec2: Any, zones: list[str], estimate: RunEstimate, now: datetime) -> Result:
    known = reservations_by_id(ec2)
    statuses, findings, available = [], [], 0
    for rid in spec.capacity.reservation_ids:
        if rid not in known:
            statuses.append("FAIL")
            findings.append(f"{rid}: not found in {spec.region}")
            continue
        status, finding, count = assess_reservation(known[rid], spec, zones, estimate, now)
        statuses.append(status)
        findings.append(finding)
        available += count if status != "FAIL" else 0
    if available < spec.node_count:
        statuses.append("FAIL")
        findings.append(f"{available} instance(s) usable across them, {spec.node_count} needed")
    status = worst(statuses)
    fix = "" if status == "PASS" else (f"aws ec2 describe-capacity-reservations --region {spec.region}; set "
                                       f"capacity.reservationIds and cluster.availabilityZones to a usable reservation")
    return Result(status, RESERVATIONS, "; ".join(findings), fix)


def block_hours(estimate: RunEstimate) -> int:
    return min(MAX_BLOCK_HOURS, max(24, math.ceil(estimate.hours / 24) * 24))


def list_capacity_blocks(spec: StackSpec, ec2: Any, zones: list[str], estimate: RunEstimate) -> Result:
    """No reservation with on-demand capacity: a WARN, with the Capacity Blocks one could buy for
    the stack's node count and a duration that covers the run estimate."""
    hours = block_hours(estimate)
    what = (f"none configured and capacityType on-demand: on-demand {spec.capacity.instance_type} capacity is scarce. "
            f"Capacity Blocks for {spec.node_count} x {spec.capacity.instance_type}, {hours} h: ")
    try:
        offerings = ec2.describe_capacity_block_offerings(
            InstanceType=spec.capacity.instance_type, InstanceCount=spec.node_count, CapacityDurationHours=hours,
        )["CapacityBlockOfferings"]
    except UNREACHABLE as error:
        what += f"could not list them: {one_line(error)}"
    else:
        shown = [f"{o['AvailabilityZone']}{'' if not zones or o['AvailabilityZone'] in zones else ' (not a stack zone)'} from "
                 f"{o['StartDate']:%Y-%m-%d %H:%M}Z for {o['CapacityBlockDurationHours']} h, {o['UpfrontFee']} "
                 f"{o.get('CurrencyCode', 'USD')} upfront ({o['CapacityBlockOfferingId']})"
                 for o in sorted(offerings, key=lambda o: o["StartDate"])[:OFFERINGS_SHOWN]]
        what += "; ".join(shown) if shown else "none offered now"
    return Result("WARN", RESERVATIONS, what,
                  f"aws ec2 purchase-capacity-block --capacity-block-offering-id <id> --instance-platform Linux/UNIX "
                  f"--region {spec.region}, then capacity.capacityType reserved, capacity.reservationIds and "
                  f"cluster.availabilityZones (its zone and a second one)")
