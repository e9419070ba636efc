"""What the stack costs per hour while up and per run, from the AWS Pricing API for its region.

Priced: a pairing's trn2 nodes, and a platform's system nodes (EC2 on-demand, Linux, shared
tenancy), its one NAT gateway (components/platform/network.py) and the EKS control plane; a standalone
stack is both. Not priced: EBS volumes, S3, data
transfer, the NAT's public IPv4 address, CloudWatch. A price the API does not give (or cannot be
asked for) falls back to a cited list price and the line says "approximate".

GetProducts is served from us-east-1 (docs/facts.md, "Regions and capacity"). Each PriceList entry is
one product as JSON: product.attributes (instanceType, usagetype, ...) and
terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD (AWS Billing user guide,
"Reading the service price list file for an AWS service"; Karpenter reads the same fields:
aws/karpenter-provider-aws@v1.14.1 pkg/providers/pricing/pricing.go onDemandPage).
"""
from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any, Iterable

from stackconfig import PlatformSpec, StackSpec
from stackconfig.catalog import APPROXIMATE_HOURLY_USD, INSTANCE_SHAPES
from stackconfig.versions import EKS_SUPPORT
from tools.stack import one_line

from .estimate import RunEstimate
from .result import UNREACHABLE, Result

CHECK = "cost"
PRICING_REGION = "us-east-1"


@dataclass(frozen=True)
class Price:
    usd_per_hour: float | None
    approximate: bool
    source: str
    error: str | None = None
    """Why the Pricing API gave no price, when it failed."""


def hourly_usd(price_list: Iterable[str], usage_suffix: str | None = None) -> list[float]:
    """Non-zero on-demand USD prices in GetProducts PriceList entries, optionally only those whose
    product usagetype ends with `usage_suffix` (it starts with a region code, e.g. USE2-)."""
    prices = []
    for entry in price_list:
        product = json.loads(entry)
        usage = product.get("product", {}).get("attributes", {}).get("usagetype", "")
        if usage_suffix and not usage.endswith(usage_suffix):
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
                if usd > 0:
                    prices.append(usd)
    return prices


def products(pricing: Any, service: str, filters: dict[str, str]) -> list[str]:
    pages = pricing.get_paginator("get_products").paginate(
        ServiceCode=service, Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()])
    return [entry for page in pages for entry in page["PriceList"]]


def instance_filters(instance_type: str, region: str) -> dict[str, str]:
    """One Linux on-demand shared-tenancy price, the filters Karpenter uses (pricing.go
    fetchOnDemandPricing; docs/facts.md, "Regions and capacity")."""
    return {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
            "preInstalledSw": "NA", "capacitystatus": "Used", "marketoption": "OnDemand"}


def from_api(pricing: Any, service: str, filters: dict[str, str], usage_suffix: str | None,
             fallback: tuple[float | None, str]) -> Price:
    """The API's price (the highest if several match), else the fallback labelled approximate."""
    try:
        found = hourly_usd(products(pricing, service, filters), usage_suffix)
    except UNREACHABLE as error:
        return Price(fallback[0], True, fallback[1], one_line(error))
    if found:
        return Price(max(found), False, "AWS Pricing API")
    return Price(fallback[0], True, f"{fallback[1]}; the Pricing API lists none")


def instance_price(pricing: Any, instance_type: str, region: str) -> Price:
    shape = INSTANCE_SHAPES.get(instance_type)
    if shape is not None:
        fallback = (shape.approx_hourly_usd, "catalog price (stackconfig/catalog.py)")
    else:
        fallback = APPROXIMATE_HOURLY_USD.get(instance_type, (None, "no catalog price"))
    return from_api(pricing, "AmazonEC2", instance_filters(instance_type, region), None, fallback)


def nat_price(pricing: Any, region: str) -> Price:
    # productFamily "NAT Gateway", usagetype <region>-NatGateway-Hours (infracost/infracost
    # internal/resources/aws/nat_gateway.go: the same family and usagetype pattern).
    return from_api(pricing, "AmazonEC2", {"productFamily": "NAT Gateway", "regionCode": region}, "NatGateway-Hours",
                    APPROXIMATE_HOURLY_USD["nat-gateway"])


def control_plane_price(pricing: Any, region: str, extended: bool) -> Price:
    if extended:  # billed at the extended rate; its usage type is not looked up here
        usd, source = APPROXIMATE_HOURLY_USD["eks-extended"]
        return Price(usd, True, source)
    # ServiceCode AmazonEKS, usagetype <region>-AmazonEKS-Hours:perCluster (infracost/infracost
    # internal/resources/aws/eks_cluster.go).
    return from_api(pricing, "AmazonEKS", {"regionCode": region}, "AmazonEKS-Hours:perCluster",
                    APPROXIMATE_HOURLY_USD["eks-standard"])


def dollars(amount: float) -> str:
    return f"${amount:,.3f}" if amount < 1 else f"${amount:,.2f}"


PricedItem = tuple[str, int, Price]


def platform_items(platform: PlatformSpec, pricing: Any, today: datetime.date) -> list[PricedItem]:
    """What the cluster costs whatever runs on it: system nodes, NAT gateway, control plane. Past
    the end of standard support the control plane bills extended support only with supportType
    EXTENDED; with STANDARD, EKS upgrades it instead (botocore eks UpgradePolicyRequest.supportType)."""
    support = EKS_SUPPORT.get(platform.cluster.kubernetes_version)
    extended = (support is not None and today > support.standard_until
                and platform.cluster.support_type == "EXTENDED")
    cluster = platform.cluster
    return [
        (f"{cluster.system_node_count} x {cluster.system_node_instance_type}", cluster.system_node_count,
         instance_price(pricing, cluster.system_node_instance_type, platform.region)),
        ("NAT gateway", 1, nat_price(pricing, platform.region)),
        ("EKS control plane" + (" (extended support)" if extended else ""), 1,
         control_plane_price(pricing, platform.region, extended)),
    ]


def check_cost(spec: StackSpec | PlatformSpec, pricing: Any, estimate: RunEstimate | None, today: datetime.date) -> Result:
    """The stack's own hourly cost, and per run for a pairing. A shared pairing adds only its trn2
    nodes; the platform stack's cost (cluster, NAT, system nodes) is reported by its own preflight."""
    items: list[PricedItem] = []
    if isinstance(spec, StackSpec):
        items.append((f"{spec.node_count} x {spec.capacity.instance_type}", spec.node_count,
                      instance_price(pricing, spec.capacity.instance_type, spec.region)))
    if not (isinstance(spec, StackSpec) and spec.shared):
        items += platform_items(spec if isinstance(spec, PlatformSpec) else spec.platform, pricing, today)
    unpriced = [name for name, _, price in items if price.usd_per_hour is None]
    hourly = sum(count * price.usd_per_hour for _, count, price in items if price.usd_per_hour is not None)
    parts = [f"{name} {'?' if p.usd_per_hour is None else dollars(count * p.usd_per_hour)}"
             f"{' (approximate: ' + p.source + ')' if p.approximate else ''}" for name, count, p in items]
    approximate = any(p.approximate for _, _, p in items)
    found = f"{'approximate: ' if approximate else ''}{dollars(hourly)}/h while up in {spec.region} ({'; '.join(parts)})"
    data: dict[str, Any] = {"hourlyUsd": round(hourly, 4), "approximate": approximate}
    if estimate is not None:
        per_run = hourly * estimate.hours
        found += f"; {dollars(per_run)} per run of {estimate.describe()}"
        data.update(perRunUsd=round(per_run, 2), runHours=round(estimate.hours, 2))
    if isinstance(spec, StackSpec) and spec.shared:
        found += f"; plus the platform stack {spec.platform_reference}'s own hourly cost while it is up"
    if unpriced:
        found += f"; without {', '.join(unpriced)}"
    errors = sorted({p.error for _, _, p in items if p.error})
    if errors:
        found += f"; Pricing API: {'; '.join(errors)}"
    if isinstance(spec, StackSpec) and spec.capacity.capacity_type == "reserved":
        found += "; reserved capacity bills by its own terms, not the on-demand rate shown"
    if approximate or unpriced:
        return Result("WARN", CHECK, found, "allow pricing:GetProducts, or check the EC2, VPC and EKS pricing pages "
                                            "for the region", data)
    return Result("PASS", CHECK, found, data=data)
