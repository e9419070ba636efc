"""The rendered Kubernetes objects the rehearsal runs, read from an offline plan's manifests/
(offline/plan.py): the Jobs and Deployments with their pod templates, the ConfigMaps, Secrets and
Services they name, and the PersistentVolumes onto the model store.

Only what a pod needs to run is interpreted here; the rest of the plan is not rehearsed (IAM,
networking, Karpenter: docs/rehearsal.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .kubeapi import grants_of

MOUNT_PREFIX = re.compile(r"^prefix (?P<prefix>\S+)$")


@dataclass(frozen=True)
class Workload:
    """A Job or a Deployment: its pod template and what its controller does with it."""

    kind: str
    name: str
    namespace: str
    pod: dict[str, Any]
    """The pod template's spec, as rendered."""
    pod_labels: dict[str, str]
    replicas: int = 1
    backoff_limit: int = 0


@dataclass(frozen=True)
class StoreVolume:
    """A Mountpoint PersistentVolume: a read-only view of one prefix of one bucket."""

    bucket: str
    prefix: str


@dataclass
class Cluster:
    """Every object of one plan the rehearsal reads, by kind and name."""

    workloads: list[Workload]
    config_maps: dict[str, dict[str, str]]
    secrets: dict[str, dict[str, str]]
    services: dict[str, dict[str, Any]]
    claims: dict[str, StoreVolume]
    """A claim's name -> the store view of the PersistentVolume reserved for it."""
    grants: dict[str, tuple[str, list[dict]]]
    """A service account's token -> its namespace and the rules of the Roles bound to it."""


def _workload(manifest: dict[str, Any]) -> Workload | None:
    kind, metadata, spec = manifest["kind"], manifest["metadata"], manifest.get("spec", {})
    if kind not in ("Job", "Deployment"):
        return None
    template = spec["template"]
    return Workload(kind=kind, name=metadata["name"], namespace=metadata.get("namespace", "default"),
                    pod=template["spec"],
                    pod_labels=template.get("metadata", {}).get("labels", {}),
                    replicas=int(spec.get("replicas", 1)) if kind == "Deployment" else 1,
                    backoff_limit=int(spec.get("backoffLimit", 6)) if kind == "Job" else 0)


def read_plan(manifests: Path) -> Cluster:
    """Every manifest of a plan's manifests/ folder."""
    documents = [yaml.safe_load(p.read_text()) for p in sorted(manifests.glob("*.yaml"))]
    volumes = {d["spec"]["claimRef"]["name"]: d for d in documents if d["kind"] == "PersistentVolume"}
    claims: dict[str, StoreVolume] = {}
    for claim, volume in volumes.items():
        prefix = next(m["prefix"] for option in volume["spec"].get("mountOptions", []) if (m := MOUNT_PREFIX.match(option)))
        claims[claim] = StoreVolume(bucket=volume["spec"]["csi"]["volumeAttributes"]["bucketName"], prefix=prefix)
    return Cluster(
        workloads=[w for d in documents if (w := _workload(d))],
        config_maps={d["metadata"]["name"]: d.get("data", {}) for d in documents if d["kind"] == "ConfigMap"},
        secrets={d["metadata"]["name"]: d.get("stringData") or d.get("data") or {} for d in documents if d["kind"] == "Secret"},
        services={d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"},
        claims=claims,
        grants=grants_of(documents),
    )
