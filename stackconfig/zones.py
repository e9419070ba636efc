"""Which availability zones a platform's VPC spans: the rule the network component applies at deploy
time and `make preflight` applies beforehand, so both name the same zones."""
from __future__ import annotations

from .model import PlatformSpec


class ZoneSelectionError(ValueError):
    """The region cannot host the stack's instance type in enough zones."""


def choose_zones(offered: list[str], *, region: str, instance_type: str, count: int, configured: tuple[str, ...]) -> list[str]:
    """The configured zones, else the first `count` zones (by name) that offer the instance type.

    Configured zones are used even where the type has no on-demand offering: a Capacity Block can
    be bought there (docs/facts.md, "Regions and capacity"); `unoffered_zones` names them."""
    if configured:
        return list(configured)
    if len(offered) < count:
        raise ZoneSelectionError(
            f"capacity.instanceType {instance_type} is offered in {len(offered)} availability zone(s) of "
            f"aws:region {region} ({', '.join(offered) or 'none'}); the cluster needs "
            f"{count}. Choose another aws:region (`make preflight` lists offerings) or name "
            f"the zones in cluster.availabilityZones.")
    return offered[:count]


def platform_zones(offered: list[str], platform: PlatformSpec) -> list[str]:
    return choose_zones(offered, region=platform.region, instance_type=platform.instance_type,
                        count=platform.cluster.availability_zone_count, configured=platform.cluster.availability_zones)


def unoffered_zones(offered: list[str], zones: list[str]) -> list[str]:
    """Chosen zones without an on-demand offering of the instance type: only a reservation launches there."""
    return [z for z in zones if z not in offered]
