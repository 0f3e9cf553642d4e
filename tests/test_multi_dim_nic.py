"""multi_dim NPUs send by a NIC port per dimension link (``nic: per_link``) or by one shared
port (``nic: shared``): the links each builds, the paths packets take, and what the choice
does to flows of two dimensions side by side, against closed forms."""

import networkx as nx
import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.config.schema import MultiDim
from roce_emu.core.paths import flow_path
from roce_emu.fabric.routing import build_routes
from roce_emu.fabric.topology import build_fabric
from roce_emu.core import kinds as K
from roce_emu.results.tables import flow_table, flows_now

DIMS_3D = [
    {"size": 4, "kind": "ring", "rate_gbps": 400, "delay_ns": 100},
    {"size": 3, "kind": "fully_connected", "rate_gbps": 200, "delay_ns": 200},
    {"size": 2, "kind": "switch", "rate_gbps": 100, "delay_ns": 500},
]
LINKS_PER_NPU = 2 + 2 + 1  # a ring of 4, a full mesh of 3, one switch


def _fabric(nic, dims=DIMS_3D):
    fabric = build_fabric(MultiDim(dims=dims, nic=nic))
    return fabric, *build_routes(fabric)


def test_per_link_gives_every_npu_a_nic_link_per_dimension_link():
    fabric, _, _ = _fabric("per_link")
    rate = {f"dim{k}": int(d["rate_gbps"] * 1e9) for k, d in enumerate(DIMS_3D)}
    for h in range(fabric.n_hosts):
        host_link, *nic = fabric.node_ports[h]  # the host link first: what arrives comes by it
        assert fabric.port_tier[host_link] == "host" and fabric.port_pass[fabric.port_peer[host_link]] == -1
        assert len(nic) == LINKS_PER_NPU
        router = fabric.host_attachment(h)
        passed = [int(fabric.port_pass[fabric.port_peer[p]]) for p in nic]
        assert sorted(passed) == sorted(p for p in fabric.node_ports[router] if fabric.port_tier[p].startswith("dim"))
        for p, q in zip(nic, passed):  # each at the rate of the dimension link it sends onto
            assert fabric.port_tier[p] == "nic" and fabric.port_rate_bps[p] == rate[fabric.port_tier[q]]
    shared, _, _ = _fabric("shared")
    assert all(len(shared.node_ports[h]) == 1 for h in range(shared.n_hosts))
    assert (shared.port_pass == -1).all()
    assert shared.n_links == fabric.n_links - LINKS_PER_NPU * fabric.n_hosts


def test_per_link_paths_are_shortest_and_leave_by_the_nic_link_of_their_first_dimension_link():
    fabric, off, ports = _fabric("per_link")
    routers = fabric.switch_graph()
    n = fabric.n_hosts
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            for h in range(4):  # several ECMP hashes
                path = flow_path(off, ports, fabric.port_node, fabric.port_peer, fabric.port_pass, n, src, dst, h)
                assert fabric.port_node[fabric.port_peer[path[-1]]] == dst
                hops = nx.shortest_path_length(routers, fabric.host_attachment(src), fabric.host_attachment(dst))
                assert len(path) == hops + 2  # NIC link, dimension links, host link
                assert fabric.port_tier[path[0]] == "nic" and fabric.port_tier[path[-1]] == "host"
                assert path[1] == fabric.port_pass[fabric.port_peer[path[0]]]


DIMS_2D = [
    {"size": 8, "kind": "switch", "rate_gbps": 800, "delay_ns": 500},
    {"size": 2, "kind": "switch", "rate_gbps": 200, "delay_ns": 500},
]
FAST = {"src": 0, "dst": 1, "bytes": 4_000_000}  # over dimension 0
SLOW = {"src": 0, "dst": 8, "bytes": 4_000_000}  # over dimension 1


def _fcts(nic, flows, cc="none"):
    res = simulate(
        scenario(
            topology={"kind": "multi_dim", "dims": DIMS_2D, "nic": nic},
            network={"cc": {"algorithm": cc}},
            workload={"flows": flows},
        )
    )
    table = flow_table(res.outcome.world)
    return table["fct_ps"], table["ideal_ps"], res.outcome.world


@pytest.mark.parametrize("cc", ["none", "dcqcn"])
def test_per_link_flows_of_two_dimensions_do_not_share_the_nic(cc):
    """Alone, each flow takes its ideal FCT (the closed form on its path); side by side they
    take the same, to the picosecond. With one shared NIC port the round robin halves the fast
    flow's share while the slow one is sending."""
    both, ideal, world = _fcts("per_link", [FAST, SLOW], cc)
    assert np.array_equal(both, ideal)
    assert world.port["ecn_marks"].sum() == 0 and world.port["pauses_sent"].sum() == 0
    fast_alone = _fcts("per_link", [FAST], cc)[0][0]
    assert both[0] == fast_alone
    shared, shared_ideal, _ = _fcts("shared", [FAST, SLOW])
    assert shared[0] > 1.4 * shared_ideal[0]


def test_per_link_nic_follows_the_routes_around_a_dead_dimension_link():
    """A ring of 4 NPUs whose link npu0-npu1 fails as NPU 0 starts a flow to NPU 1, the routes
    converging at once. The routes after the failure send NPU 0's packets for NPU 1 by its NIC
    link onto npu0-npu3, the long way round; a packet that still arrives on the NIC link of the
    dead link is routed the same way by the router (not dropped), so the flow finishes with
    nothing lost."""
    dims = [{"size": 4, "kind": "ring", "rate_gbps": 100, "delay_ns": 500}]
    res = simulate(
        scenario(
            topology={"kind": "multi_dim", "dims": dims},
            workload={"flows": [{"src": 0, "dst": 1, "bytes": 1_000_000}]},
            faults=[{"kind": "link_down", "link": ["npu0", "npu1"], "at_ns": 0}],
            network={"routing": {"convergence_ns": 0}},
        )
    )
    world, fabric = res.outcome.world, res.prepared.fabric
    port = world.port
    path = flow_path(
        world.route_off[-1],
        world.route_ports,
        port["node"],
        port["peer_port"],
        port["pass_to"],
        fabric.n_hosts,
        0,
        1,
        int(world.flow[0]["ecmp_hash"]),
    )
    assert [fabric.names[int(port["node"][port["peer_port"][p]])] for p in path] == [
        "npu0",
        "npu3",
        "npu2",
        "npu1",
        "h1",
    ]
    assert fabric.port_tier[path[0]] == "nic"
    flow = flows_now(world)[0]
    assert flow["finish_ps"] > 0 and flow["pkts_dropped"] == 0 and world.stats[K.C_DATA_SENT] == flow["pkts_delivered"]
    around = fabric.port_towards(fabric.names.index("npu0"), fabric.names.index("npu3"))
    assert port["tx_bytes"][around] >= 1_000_000


def test_per_link_sends_as_a_nic_on_the_dimension_link_itself():
    """NPU 0 to NPU 1 through a 2-NPU switch dimension (800 Gb/s, 100 ns): its router passes the
    NIC link's packets on cut-through, so the flow takes exactly as long as from a host whose
    own NIC is on that link. The same path as a custom fabric: host 0 - hub - router 1 - host 1,
    the last link at the NPU's injection rate (an ACK crosses it at host 1's end there, at host
    0's end on the multi_dim fabric: the same delay alone)."""
    nbytes = 1_000_000
    flows = {"flows": [{"src": 0, "dst": 1, "bytes": nbytes}]}
    dims = [{"size": 2, "kind": "switch", "rate_gbps": 800, "delay_ns": 100}]
    multi = simulate(scenario(topology={"kind": "multi_dim", "dims": dims}, workload=flows))
    links = [[0, 2, 800, 100], [2, 3, 800, 100], [3, 1, 800, 0]]  # host 0 - hub - router 1 - host 1
    custom = simulate(scenario(topology={"kind": "custom", "switches": [2, 3], "links": links}, workload=flows))
    fct = [flow_table(r.outcome.world)["fct_ps"][0] for r in (multi, custom)]
    assert fct[0] == fct[1]
