"""The platform's sections: namespaces and region, cluster, capacity, zones, tags, model store,
and what a shared pairing needs from the platform stack it names.
"""
from __future__ import annotations

import difflib
import ipaddress
import re
from typing import Any, Callable, Mapping

from ..catalog import (
    CAPACITY_TYPES,
    INSTANCE_SHAPES,
    KARPENTER_RESERVED_TAGS,
    LOG_RETENTION_DAYS,
    MIN_KUBERNETES_VERSION,
    NEWEST_EKS_VERSION,
    SUPPORT_TYPES,
    TAG_KEY_MAX,
    TAG_VALUE_MAX,
    WORKLOAD_IDENTITIES,
    known_regions,
)
from ..model import CapacitySettings, ClusterSettings, PlatformSpec
from ..versions import AMI_ALIASES, DEFAULT_KUBERNETES_VERSION, EKS_ADDONS
from .reader import _Section

_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")


_AMI_ALIAS = re.compile(r"^al2023@v\d{8}$")


_AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")


REGION_KEY = "aws:region"


# Namespaces besides the project's that a stack file may hold: the AWS provider's own settings
# (profile, assumeRole, ...; the provider validates those) and Pulumi's.
OTHER_NAMESPACES = ("aws", "pulumi")


CLUSTER_KEYS = {"kubernetesVersion", "supportType", "logRetentionDays", "systemNodeInstanceType", "systemNodeCount",
                "vpcCidr", "availabilityZoneCount", "availabilityZones", "workloadIdentity", "publicAccessCidrs"}


OPEN_TO_ALL = "0.0.0.0/0"


MAX_PUBLIC_ACCESS_CIDRS = 40
"""EKS's limit on a cluster's public-endpoint CIDR blocks (Amazon EKS service quotas: "Public
endpoint access CIDR ranges per cluster")."""


CAPACITY_KEYS = {"instanceType", "capacityType", "reservationIds", "amiAlias", "rootVolumeGiB", "replacementHeadroomNodes"}


_PLATFORM_REFERENCE = re.compile(r"^(?P<org>[A-Za-z0-9_.-]+)/(?P<project>[A-Za-z0-9_.-]+)/(?P<stack>[A-Za-z0-9_.-]+)$")


PlatformConfigReader = Callable[[str], Mapping[str, Any]]
"""Reads a stack file of this project by stack name: "namespace:key" -> value. Raises
FileNotFoundError when there is none, ConfigError when it cannot be read."""


def _tags(top: _Section) -> dict[str, str]:
    """Extra tags for every AWS resource and the trn2 instances (through the EC2NodeClass)."""
    tags = top.mapping("tags", {}) or {}
    for key, value in tags.items():
        problem = _tag_problem(key, value)
        if problem:
            top.problem(f"tags.{key}", problem)
    return {k: v for k, v in tags.items() if not _tag_problem(k, v)}


def _tag_problem(key: Any, value: Any) -> str | None:
    if not isinstance(key, str) or not isinstance(value, str) or not key:
        return "tags map non-empty strings to strings"
    if key.lower().startswith("aws:"):
        return "tag keys starting with aws: are reserved by AWS"
    if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
        return f"AWS allows keys of {TAG_KEY_MAX} and values of {TAG_VALUE_MAX} characters"
    if any(key.startswith(reserved) for reserved in KARPENTER_RESERVED_TAGS):
        return f"Karpenter reserves it (the EC2NodeClass refuses tags matching {', '.join(KARPENTER_RESERVED_TAGS)})"
    return None


def _parse_platform(top: _Section, project: str, stack: str, region: str, raw: Mapping[str, Any],
                    tags: dict[str, str]) -> PlatformSpec:
    """The platform part of a stack's own config (a platform stack, or a standalone pairing)."""
    problems = top.problems
    capacity = _Section("capacity", raw.get("capacity"), [], CAPACITY_KEYS)  # checked in full by the pairing
    if raw.get("stackKind") == "platform":
        capacity = _Section("capacity", raw.get("capacity"), problems, {"instanceType"})
    model_store = _Section("modelStore", raw.get("modelStore"), problems, {"retainOnDestroy"})
    return PlatformSpec(
        project=project,
        stack=stack,
        region=region,
        cluster=_parse_cluster(_Section("cluster", raw.get("cluster"), problems, CLUSTER_KEYS), region),
        instance_type=capacity.string("instanceType", "trn2.48xlarge", choices=tuple(INSTANCE_SHAPES)) or "trn2.48xlarge",
        retain_model_store=model_store.boolean("retainOnDestroy", False),
        tags=tags,
    )


def _check_against_platform(top: _Section, region: str, capacity: CapacitySettings, platform: PlatformSpec,
                            reference: str | None) -> None:
    """What a pairing needs from the platform it runs on."""
    where = f"the platform {reference}" if reference else "this stack"
    if reference and region and platform.region != region:
        top.problem(REGION_KEY, f"{region} differs from {where}'s {platform.region}; a pairing runs in its platform's region")
    if reference and capacity.instance_type != platform.instance_type:
        top.problem("capacity.instanceType", f"{capacity.instance_type} differs from {platform.instance_type}, the instance type "
                                             f"{where}'s zones were chosen for; set capacity.instanceType there")
    if capacity.reservation_ids and not platform.cluster.availability_zones:
        # A reservation launches only in its own AZ, and Karpenter only into the subnets the
        # network created: the AZ must be named so the network includes it (make preflight checks it).
        key = "capacity.reservationIds" if reference else "cluster.availabilityZones"
        top.problem(key, f"a capacity reservation needs {where}'s cluster.availabilityZones to list its availability zone")


def _split_namespaces(project: str, config: Mapping[str, Any], problems: list[tuple[str, str]]) -> tuple[dict[str, Any], str]:
    """The project's keys (without "project:") and the region; every other key must belong to
    a namespace this program or its providers read, so a misspelled namespace is named."""
    raw: dict[str, Any] = {}
    for key, value in config.items():
        namespace, _, name = str(key).partition(":")
        if namespace == project and name:
            raw[name] = value
        elif namespace not in OTHER_NAMESPACES or not name:
            near = difflib.get_close_matches(namespace, [project, *OTHER_NAMESPACES], n=1)
            hint = f" (did you mean {near[0]}:{name}?)" if near else ""
            problems.append((str(key), f"unknown config namespace {namespace!r}{hint}; this program reads {project}:<key> and {REGION_KEY}"))
    region = config.get(REGION_KEY)
    regions = known_regions()
    if region is None:
        problems.append((REGION_KEY, f"is required: the region to deploy to (`pulumi config set {REGION_KEY} us-east-2`); docs/configuration.md, 'Regions'"))
    elif not isinstance(region, str) or region not in regions:
        problems.append((REGION_KEY, f"{region!r} is not an AWS region with EKS; known: {', '.join(regions)}"))
    return raw, region if isinstance(region, str) else ""


def _vpc_cidr(value: str) -> str | None:
    """A /16 inside 10.0.0.0/8: private subnets take a /19 per zone, public ones a /24."""
    try:
        network = ipaddress.ip_network(value)
    except ValueError:
        return f"{value!r} is not a CIDR block (e.g. 10.64.0.0/16)"
    if network.prefixlen != 16 or not network.subnet_of(ipaddress.ip_network("10.0.0.0/8")):
        return f"{value!r} is not a /16 inside 10.0.0.0/8 (e.g. 10.64.0.0/16)"
    return None


def _parse_cluster(s: _Section, region: str) -> ClusterSettings:
    version = s.string("kubernetesVersion", DEFAULT_KUBERNETES_VERSION, pattern=re.compile(r"^1\.\d+$"), hint='a "1.N" version')
    minor = tuple(int(p) for p in version.split(".")) if version else None
    if minor and minor < MIN_KUBERNETES_VERSION:
        s.problem("kubernetesVersion", f"{version} is below 1.34, the first version the Neuron DRA driver supports")
    elif minor and minor > NEWEST_EKS_VERSION:
        s.problem("kubernetesVersion", f"{version} is above {'.'.join(map(str, NEWEST_EKS_VERSION))}, the newest EKS version this program knows")
    elif version and version not in EKS_ADDONS:
        s.problem("kubernetesVersion", f"no EKS add-on builds are pinned for {version} (stackconfig/versions.py EKS_ADDONS; "
                                       f"pinned: {', '.join(EKS_ADDONS)}); `aws eks describe-addon-versions --kubernetes-version {version}` lists them")
    zones = s.listing("availabilityZones", [])
    for index, zone in enumerate(zones or []):
        if not isinstance(zone, str) or not _AVAILABILITY_ZONE.match(zone) or (region and not zone.startswith(region)):
            s.problem(f"availabilityZones[{index}]", f"{zone!r} is not an availability zone of {region or 'the region'} (e.g. {region or 'us-east-2'}a)")
    named = [zone for zone in zones or [] if isinstance(zone, str)]  # the others are reported above
    if len(set(named)) != len(named):
        s.problem("availabilityZones", "lists a zone twice")
    if zones and len(zones) < 2:
        s.problem("availabilityZones", "needs at least two zones: EKS requires subnets in two availability zones")
    zone_count = s.integer("availabilityZoneCount", len(zones) if zones else 2, low=2, high=6)
    if zones and zone_count != len(zones):
        s.problem("availabilityZoneCount", f"{zone_count} disagrees with the {len(zones)} availabilityZones listed; omit it")
    return ClusterSettings(
        kubernetes_version=version or "",
        system_node_instance_type=s.string("systemNodeInstanceType", "m7i.xlarge"),
        system_node_count=s.integer("systemNodeCount", 2, low=2, high=10),
        vpc_cidr=s.string("vpcCidr", "10.64.0.0/16", check=_vpc_cidr) or "10.64.0.0/16",
        availability_zone_count=zone_count or 2,
        availability_zones=tuple(zones or ()),
        workload_identity=s.string("workloadIdentity", "irsa", choices=WORKLOAD_IDENTITIES) or "irsa",
        support_type=s.string("supportType", "STANDARD", choices=SUPPORT_TYPES) or "STANDARD",
        log_retention_days=s.integer("logRetentionDays", 14, allowed=LOG_RETENTION_DAYS) or 14,
        public_access_cidrs=_public_access_cidrs(s),
    )


def _public_access_cidrs(s: _Section) -> tuple[str, ...]:
    """Who may reach the public Kubernetes API endpoint: IPv4 blocks, default everyone (as EKS's own
    default; preflight warns). The machine that runs `pulumi up` and kubectl must be inside."""
    cidrs = s.listing("publicAccessCidrs", [OPEN_TO_ALL])
    if cidrs is None:
        return (OPEN_TO_ALL,)
    if not cidrs:
        s.problem("publicAccessCidrs", f"lists no block: nothing, not even `pulumi up`, could reach the cluster (omit it for {OPEN_TO_ALL})")
    if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        s.problem("publicAccessCidrs", f"lists {len(cidrs)} blocks; EKS allows {MAX_PUBLIC_ACCESS_CIDRS}")
    for index, cidr in enumerate(cidrs):
        try:
            network = ipaddress.ip_network(cidr) if isinstance(cidr, str) else None
        except ValueError as error:
            s.problem(f"publicAccessCidrs[{index}]", f"{cidr!r} is not an IPv4 CIDR block ({error}; e.g. 203.0.113.0/24)")
            continue
        if not isinstance(network, ipaddress.IPv4Network):
            s.problem(f"publicAccessCidrs[{index}]", f"{cidr!r} is not an IPv4 CIDR block (the cluster is IPv4-only; e.g. 203.0.113.0/24)")
    return tuple(c for c in cidrs if isinstance(c, str))


def _parse_capacity(s: _Section, kubernetes_version: str) -> CapacitySettings:
    """The pairing's trn2 capacity. The AMI alias defaults to the release pinned for the cluster's
    Kubernetes version (stackconfig/versions.py AMI_ALIASES)."""
    instance_type = s.string("instanceType", "trn2.48xlarge", choices=tuple(INSTANCE_SHAPES))
    capacity_type = s.string("capacityType", "on-demand", choices=CAPACITY_TYPES)
    reservations = s.listing("reservationIds", [])
    for index, rid in enumerate(reservations or []):
        if not isinstance(rid, str) or not _RESERVATION_ID.match(rid):
            s.problem(f"reservationIds[{index}]", f"{rid!r} is not a capacity reservation id (cr-...)")
    if reservations and capacity_type != "reserved":
        s.problem("capacityType", 'must be "reserved" when reservationIds are set (Karpenter launches into reservations only for reserved capacity)')
    if capacity_type == "reserved" and not reservations:
        s.problem("reservationIds", 'are required when capacityType is "reserved"')
    return CapacitySettings(
        instance_type=instance_type or "trn2.48xlarge",
        capacity_type=capacity_type or "on-demand",
        reservation_ids=tuple(reservations or ()),
        ami_alias=s.string("amiAlias", AMI_ALIASES.get(kubernetes_version, AMI_ALIASES[DEFAULT_KUBERNETES_VERSION]).version,
                           pattern=_AMI_ALIAS, hint="al2023@vYYYYMMDD, pinned (not @latest)"),
        root_volume_gib=s.integer("rootVolumeGiB", 200, low=100, high=2000),
        replacement_headroom_nodes=s.integer("replacementHeadroomNodes", 0, low=0, high=1),
    )
