"""The instance facts the program sizes pods with: read back from EC2's own description of the
instance types (moto 5.2.5's snapshot of DescribeInstanceTypes), and Karpenter's model of what a
node offers pods, by its own arithmetic, figure by figure."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from stackconfig.catalog import INSTANCE_SHAPES


def described(instance_type: str) -> dict:
    (package_dir,) = importlib.util.find_spec("moto").submodule_search_locations
    types = json.load(gzip.open(Path(package_dir) / "ec2" / "resources" / "instance_types.json.gz"))
    return types[instance_type]


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_SHAPES))
def test_each_shape_figure_is_what_ec2_describes(instance_type):
    shape, info = INSTANCE_SHAPES[instance_type], described(instance_type)
    network = info["NetworkInfo"]
    card = network["NetworkCards"][network.get("DefaultNetworkCardIndex", 0)]
    assert shape.vcpus == info["VCpuInfo"]["DefaultVCpus"]
    assert shape.memory_mib == info["MemoryInfo"]["SizeInMiB"]
    assert shape.default_card_enis == card["MaximumNetworkInterfaces"]
    assert shape.ipv4_per_eni == network["Ipv4AddressesPerInterface"]
    assert shape.primary_network_gbps == network["NetworkCards"][0]["BaselineBandwidthInGbps"]
    assert shape.neuron_devices == sum(d["Count"] for d in info["NeuronInfo"]["NeuronDevices"])
    assert shape.instance_store_gb == info["InstanceStorageInfo"]["TotalSizeInGB"]


@pytest.mark.parametrize("instance_type, gib", [
    # 7600 GB less 1 GiB kube-reserved and 760 GB eviction threshold: (7600e9 - 2^30 - 760e9) / 2^30.
    ("trn2.48xlarge", 6369),
    ("trn2.3xlarge", 392),
])
def test_karpenter_ephemeral_storage_by_its_own_arithmetic(instance_type, gib):
    assert INSTANCE_SHAPES[instance_type].allocatable_ephemeral_gib == gib


@pytest.mark.parametrize("instance_type, pods, memory_mib, cpu_millicores", [
    # 2097152 - ceil(2097152 x 0.075) = 1939865; - (11 x 100 + 255) - 100 = 1938410 (~1893 GiB).
    # CPU: 60 + 10 + 2 x 5 + 188 x 2.5 = 550m kube-reserved.
    ("trn2.48xlarge", 2 * 49 + 2, 1938410, 191450),
    # 131072 - 9831 = 121241; - (11 x 30 + 255) - 100 = 120556 (~117.7 GiB). CPU: 80 + 8 x 2.5 = 100m.
    ("trn2.3xlarge", 2 * 14 + 2, 120556, 11900),
])
def test_karpenter_allocatable_by_its_own_arithmetic(instance_type, pods, memory_mib, cpu_millicores):
    shape = INSTANCE_SHAPES[instance_type]
    assert (shape.max_pods, shape.allocatable_memory_mib, shape.allocatable_cpu_millicores) == (pods, memory_mib, cpu_millicores)


def test_the_regions_validation_knows_are_botocores_own_answer():
    """stackconfig/catalog.py known_regions reads botocore's endpoint data without importing its
    session: botocore itself must list the same regions for EKS."""
    import botocore.session

    from stackconfig.catalog import known_regions

    assert known_regions() == tuple(sorted(botocore.session.get_session().get_available_regions("eks")))
    assert "us-east-2" in known_regions() and "cn-north-1" not in known_regions()
