"""AWS answers for the APIs moto does not implement (docs/facts.md, "Regions and capacity": EKS
DescribeAddonVersions, Service Quotas for ec2, DescribeCapacityReservations, Capacity Block
offerings, Pricing), for botocore's Stubber.

Every response is shaped by botocore 1.44.5's service models (data/<service>/<version>/
service-2.json.gz), and Stubber validates each one against its operation's output shape when it is
added, so a field the model does not have fails the test that adds it. Values are examples, not
real prices or ids. The moto server and the local hub server are in tests/conftest.py.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
from botocore.stub import Stubber

REGION = "us-east-2"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def stubbed(service: str, region: str = REGION) -> tuple[object, Stubber]:
    """A real client whose calls Stubber answers; nothing leaves the process."""
    client = boto3.client(service, region_name=region, aws_access_key_id="AKIAIOSFODNN7EXAMPLE",
                          aws_secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    return client, Stubber(client)


# --- Service Quotas: ListServiceQuotas / GetServiceQuota (ServiceQuota shape) -------------------

def trn_quota(value: float) -> dict:
    return {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:123456789012:ec2/L-2C3B7624", "QuotaCode": "L-2C3B7624",
            "QuotaName": "Running On-Demand Trn instances", "Value": value, "Unit": "None", "Adjustable": True,
            "GlobalQuota": False}


def other_quota() -> dict:
    return {**trn_quota(1152.0), "QuotaCode": "L-1216C47A", "QuotaName": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:123456789012:ec2/L-1216C47A"}


# --- EC2 DescribeCapacityReservations (CapacityReservation shape) ------------------------------

def reservation(rid: str = "cr-0123456789abcdef0", *, state: str = "active", zone: str = "us-east-2a",
                instance_type: str = "trn2.48xlarge", available: int = 1, total: int = 1,
                start: datetime = NOW - timedelta(hours=2), end: datetime | None = NOW + timedelta(days=7),
                block: bool = True) -> dict:
    answer = {"CapacityReservationId": rid, "OwnerId": "123456789012",
              "CapacityReservationArn": f"arn:aws:ec2:{REGION}:123456789012:capacity-reservation/{rid}",
              "AvailabilityZoneId": "use2-az1", "InstanceType": instance_type, "InstancePlatform": "Linux/UNIX",
              "AvailabilityZone": zone, "Tenancy": "default", "TotalInstanceCount": total,
              "AvailableInstanceCount": available, "EbsOptimized": True, "EphemeralStorage": False, "State": state,
              "StartDate": start, "EndDateType": "limited" if end else "unlimited", "InstanceMatchCriteria": "targeted",
              "CreateDate": start - timedelta(days=1), "Tags": [],
              "ReservationType": "capacity-block" if block else "default"}
    if end is not None:
        answer["EndDate"] = end
    return answer


# --- EC2 DescribeCapacityBlockOfferings (CapacityBlockOffering shape) --------------------------

def block_offering(oid: str, zone: str, start: datetime, hours: int, fee: str) -> dict:
    return {"CapacityBlockOfferingId": oid, "InstanceType": "trn2.48xlarge", "AvailabilityZone": zone,
            "InstanceCount": 1, "StartDate": start, "EndDate": start + timedelta(hours=hours),
            "CapacityBlockDurationHours": hours, "UpfrontFee": fee, "CurrencyCode": "USD", "Tenancy": "default"}


# --- EKS DescribeAddonVersions (AddonInfo / AddonVersionInfo shapes) ---------------------------

def addon(name: str, builds: list[tuple[str, bool]], cluster_version: str) -> dict:
    """One add-on's builds, newest first as the API lists them: (build, defaultVersion)."""
    return {"addonName": name, "type": "networking", "owner": "aws", "publisher": "eks",
            "addonVersions": [{"addonVersion": build, "architecture": ["amd64", "arm64"], "computeTypes": ["ec2"],
                               "compatibilities": [{"clusterVersion": cluster_version, "platformVersions": ["*"],
                                                    "defaultVersion": default}],
                               "requiresConfiguration": False, "requiresIamPermissions": False}
                              for build, default in builds]}


# --- Pricing GetProducts: PriceList entries ------------------------------------------------------
# Each entry is one product as a JSON string: "product" (sku, productFamily, attributes) and
# "terms" -> "OnDemand" -> <sku>.<offerTermCode> -> "priceDimensions" -> <rateCode> -> unit,
# pricePerUnit {"USD": "..."} (AWS Billing user guide, "Reading the service price list file for an
# AWS service"; the fields Karpenter reads, pkg/providers/pricing/pricing.go onDemandPage).

def price_entry(service: str, family: str, attributes: dict, usd: str, unit: str = "Hrs", sku: str = "EXAMPLESKU0001") -> str:
    term, rate = f"{sku}.JRTCKXETXF", f"{sku}.JRTCKXETXF.6YS6EN2CT7"
    return json.dumps({
        "product": {"sku": sku, "productFamily": family, "attributes": {"regionCode": REGION, **attributes}},
        "serviceCode": service,
        "terms": {"OnDemand": {term: {"sku": sku, "offerTermCode": "JRTCKXETXF", "effectiveDate": "2026-11-01T00:00:00Z",
                                      "termAttributes": {},
                                      "priceDimensions": {rate: {"rateCode": rate, "unit": unit, "beginRange": "0",
                                                                 "endRange": "Inf", "appliesTo": [], "description": "example",
                                                                 "pricePerUnit": {"USD": usd}}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    })


def instance_entry(instance_type: str, usd: str) -> str:
    return price_entry("AmazonEC2", "Compute Instance",
                       {"instanceType": instance_type, "usagetype": f"USE2-BoxUsage:{instance_type}", "operatingSystem": "Linux",
                        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used", "marketoption": "OnDemand"}, usd)


def nat_entries(hourly: str, per_gb: str) -> list[str]:
    """The NAT Gateway family holds an hourly and a per-GB product; only the first is an hourly price."""
    return [price_entry("AmazonEC2", "NAT Gateway", {"usagetype": "USE2-NatGateway-Hours", "group": "NGW:NatGateway"}, hourly,
                        sku="EXAMPLESKU0002"),
            price_entry("AmazonEC2", "NAT Gateway", {"usagetype": "USE2-NatGateway-Bytes", "group": "NGW:NatGateway"}, per_gb,
                        unit="GB", sku="EXAMPLESKU0003")]


def eks_entries(hourly: str) -> list[str]:
    return [price_entry("AmazonEKS", "Compute", {"usagetype": "USE2-AmazonEKS-Hours:perCluster", "operation": "CreateOperation"},
                        hourly, sku="EXAMPLESKU0004"),
            price_entry("AmazonEKS", "Compute", {"usagetype": "USE2-Fargate-vCPU-Hours:perCPU"}, "0.04048", sku="EXAMPLESKU0005")]
