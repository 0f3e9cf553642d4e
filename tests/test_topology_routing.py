"""Fabric construction and routing tables: counts, ECMP fan-out, dimension-order paths."""

import numpy as np
import pytest

from conftest import scenario
from roce_emu.core.paths import flow_path
from roce_emu.fabric.routing import build_routes
from roce_emu.fabric.topology import build_fabric

pytestmark = [pytest.mark.quick, pytest.mark.nojit]


def _fabric_routes(topology):
    fabric = build_fabric(scenario(topology=topology).topology)
    off, ports = build_routes(fabric)
    return fabric, off, ports


def test_fat_tree_counts_and_ecmp_fanout():
    fabric, off, ports = _fabric_routes({"kind": "fat_tree", "k": 4})
    assert (fabric.n_hosts, fabric.n_switches, fabric.n_links) == (16, 20, 48)
    H = fabric.n_hosts
    edge0 = fabric.host_attachment(0)
    # from an edge switch to another pod: both aggregation uplinks are equal-cost
    row = edge0 * H + 15
    assert off[row + 1] - off[row] == 2
    # to a host on the same edge switch: the one down port
    row = edge0 * H + 1
    assert off[row + 1] - off[row] == 1


def test_fat_tree_paths_are_shortest_for_every_pair():
    fabric, off, ports = _fabric_routes({"kind": "fat_tree", "k": 4})
    lengths = set()
    for src in range(16):
        for dst in range(16):
            if src != dst:
                path = flow_path(
                    off, ports, fabric.port_node, fabric.port_peer, fabric.port_pass, 16, src, dst, src * 31 + dst
                )
                assert fabric.port_node[fabric.port_peer[path[-1]]] == dst
                lengths.add(len(path))
    assert lengths == {2, 4, 6}


def test_torus_dimension_order_goes_the_short_way_round():
    fabric, off, ports = _fabric_routes({"kind": "torus", "dims": [5, 4]})
    # host 0 at (0,0) to host at (4,1): dimension 0 first, 1 hop backwards over the wrap, then 1 hop
    dst = 4 * 4 + 1
    path = flow_path(off, ports, fabric.port_node, fabric.port_peer, fabric.port_pass, fabric.n_hosts, 0, dst, 7)
    routers = [fabric.graph.nodes[int(fabric.port_node[fabric.port_peer[p]])].get("coord") for p in path]
    assert routers == [(0, 0), (4, 0), (4, 1), None]


def test_mesh_has_no_wrap_links():
    fabric, _, _ = _fabric_routes({"kind": "mesh", "dims": [3, 4]})
    assert fabric.n_links == 12 + (2 * 4 + 3 * 3)
    assert np.all(fabric.port_rate_bps == 100 * 10**9)
