"""Sizes derived from the config: how device groups pack onto trn2 nodes, which connected group a
claim is constrained to, and the bucket lists vllm-neuron compiles for."""
from __future__ import annotations

import pytest

from stackconfig import pack_device_groups
from stackconfig.catalog import device_group_for
from stackconfig.engines import powers_of_two_up_to


@pytest.mark.parametrize("groups, per_node, nodes", [
    ([8, 8], 16, [[8, 8]]),                          # exactly full
    ([16, 16, 16], 16, [[16], [16], [16]]),
    ([1, 16, 1], 16, [[16], [1, 1]]),                # largest first
    ([4, 8, 4, 8, 2], 16, [[8, 8], [4, 4, 2]]),
    ([8, 4, 2, 1, 1], 16, [[8, 4, 2, 1, 1]]),
    ([4, 4, 4], 8, [[4, 4], [4]]),
    ([1], 1, [[1]]),
    ([], 16, []),
])
def test_device_groups_pack_first_fit_decreasing(groups, per_node, nodes):
    assert pack_device_groups(groups, per_node) == nodes


def test_packing_leaves_the_callers_list_alone():
    groups = [1, 8, 4]
    pack_device_groups(groups, 16)
    assert groups == [1, 8, 4]


@pytest.mark.parametrize("devices, group", [(1, 1), (2, 4), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16), (16, 16)])
def test_a_claim_is_constrained_to_the_smallest_connected_group_that_holds_it(devices, group):
    assert device_group_for(devices) == group


@pytest.mark.parametrize("limit, start, buckets", [
    (1, 1, [1]),
    (2, 1, [1, 2]),
    (4, 1, [1, 2, 4]),
    (6, 1, [1, 2, 4, 6]),
    (128, 128, [128]),
    (1000, 128, [128, 256, 512, 1000]),
    (16384, 128, [128, 256, 512, 1024, 2048, 4096, 8192, 16384]),
])
def test_buckets_are_powers_of_two_from_start_ending_at_the_limit(limit, start, buckets):
    assert powers_of_two_up_to(limit, start=start) == buckets


def test_buckets_start_at_one_by_default():
    assert powers_of_two_up_to(8) == [1, 2, 4, 8]
