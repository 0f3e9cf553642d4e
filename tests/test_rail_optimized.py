"""rail_optimized fabrics: lone flows on every kind of path against closed forms to the
picosecond, the paths themselves (NVSwitch inside a node, one rail, spines, PXN), the
oversubscription's effect on a rail's cross-leaf throughput, the default buffers, the
bisection, Chakra ranks on GPUs, and one-line errors for impossible combinations."""

import networkx as nx
import pytest

from conftest import scenario, simulate
from roce_emu.config.load import validate_document
from roce_emu.config.schema import RailOptimized
from roce_emu.core.paths import flow_path, ser_ps
from roce_emu.errors import ScenarioError
from roce_emu.fabric.routing import build_routes
from roce_emu.fabric.summary import bisection_bps, describe, draw
from roce_emu.fabric.topology import build_fabric
from roce_emu.results.iteration import collective_rows
from roce_emu.run.inputs import check_inputs
from test_import_chakra import node, per_rank_program, write_traces

GBPS = 10**9
NVLINK, NIC, UPLINK = 3600 * GBPS, 400 * GBPS, 800 * GBPS  # uplink: 2 nodes x 400 over 1 spine
INTO_GPU = NVLINK + NIC  # the link into a GPU: both of its ports' rates
NVLINK_PS, RAIL_PS, SPINE_PS = 150_000, 1_000_000, 500_000
#: 4 nodes of 4 GPUs, 2 nodes under each leaf of a rail (2 leaves per rail), one spine
SMALL = {
    "kind": "rail_optimized",
    "nodes": 4,
    "gpus_per_node": 4,
    "nodes_per_leaf": 2,
    "spines": 1,
    "nvlink_delay_ns": 150,
    "link": {"delay_ns": 1000},
    "tiers": {"leaf_spine": {"delay_ns": 500}},
}


def host(node: int, gpu: int, gpus: int = 4) -> int:
    return node * gpus + gpu


def lone_flow_fct_ps(packets: int, data_hops, ack_hops, frame=1000 + 62 + 20, ack=66 + 20) -> int:
    """FCT of a lone flow of full-size packets over store-and-forward hops (rate_bps, delay_ps):
    the first packet crosses every hop, the others follow one bottleneck serialisation apart,
    and the last one's ACK crosses the hops back (never queued behind the previous ACK, which
    left a bottleneck serialisation earlier). A GPU's NIC port is passed on cut-through by its
    router, so it costs only its delay (0), not a serialisation of its own."""
    s = [ser_ps(frame, rate) for rate, _ in data_hops]
    data = sum(s) + (packets - 1) * max(s) + sum(d for _, d in data_hops)
    return data + sum(ser_ps(ack, rate) + d for rate, d in ack_hops)


NV = [(NVLINK, NVLINK_PS), (NVLINK, NVLINK_PS)]  # GPU router -> NVSwitch -> GPU router
IN = [(INTO_GPU, 0)]
ONE_LEAF = [(NIC, RAIL_PS), (NIC, RAIL_PS)]  # GPU router -> leaf -> GPU router
SPINE = [(NIC, RAIL_PS), (UPLINK, SPINE_PS), (UPLINK, SPINE_PS), (NIC, RAIL_PS)]  # ... leaf -> spine -> leaf ...

PATHS = {
    # name: (pxn, src, dst, data hops, ACK hops)
    "intra_node_nvswitch": (False, host(0, 0), host(0, 3), NV + IN, NV + IN),
    "same_rail_same_leaf": (False, host(0, 1), host(1, 1), ONE_LEAF + IN, ONE_LEAF + IN),
    "same_rail_across_leaves": (False, host(0, 1), host(3, 1), SPINE + IN, SPINE + IN),
    "cross_rail_spines": (False, host(0, 0), host(1, 2), SPINE + IN, SPINE + IN),
    "cross_rail_pxn_same_leaf": (True, host(0, 0), host(1, 2), NV + ONE_LEAF + IN, NV + ONE_LEAF + IN),
    "cross_rail_pxn_across_leaves": (True, host(0, 0), host(2, 3), NV + SPINE + IN, NV + SPINE + IN),
}


@pytest.mark.parametrize("name", list(PATHS))
def test_lone_flow_fct_equals_closed_form(name):
    pxn, src, dst, data_hops, ack_hops = PATHS[name]
    packets = 200
    res = simulate(
        scenario(
            topology={**SMALL, "pxn": pxn},
            workload={"flows": [{"src": src, "dst": dst, "bytes": packets * 1000}]},
        )
    )
    row = res.rows[0]
    assert int(row["hops"]) == len(data_hops) + 1  # and the GPU's NIC link
    assert int(round(float(row["fct_ns"]) * 1000)) == lone_flow_fct_ps(packets, data_hops, ack_hops)
    assert row["fct_ns"] == row["ideal_fct_ns"]


def _fabric(**keys):
    fabric = build_fabric(RailOptimized(**{**SMALL, **keys}))
    return fabric, *build_routes(fabric)


def _path(fabric, off, ports, src, dst, h):
    path = flow_path(off, ports, fabric.port_node, fabric.port_peer, fabric.port_pass, fabric.n_hosts, src, dst, h)
    assert fabric.port_node[fabric.port_peer[path[-1]]] == dst
    return path


def _roles(fabric, path):
    """The roles of the switches a path crosses (gpu, nvswitch, leaf, spine), in order."""
    g = fabric.graph
    return [g.nodes[int(fabric.port_node[fabric.port_peer[p]])].get("role", "host") for p in path]


@pytest.mark.parametrize("pxn", [False, True])
def test_every_pair_is_reachable_and_each_kind_of_traffic_stays_where_it_belongs(pxn):
    fabric, off, ports = _fabric(pxn=pxn, spines=2)
    g = fabric.graph
    G = 4
    for src in range(fabric.n_hosts):
        for dst in range(fabric.n_hosts):
            if src == dst:
                continue
            for h in range(4):  # several ECMP hashes
                path = _path(fabric, off, ports, src, dst, h)
                roles = _roles(fabric, path)
                crossed = [int(fabric.port_node[fabric.port_peer[p]]) for p in path]
                if src // G == dst // G:  # inside a node: NVSwitch only, never a leaf
                    assert roles == ["gpu", "nvswitch", "gpu", "host"]
                elif src % G == dst % G:  # one rail: its own leaves, no NVSwitch
                    assert "nvswitch" not in roles
                    assert all(g.nodes[v]["rail"] == src % G for v, r in zip(crossed, roles) if r == "leaf")
                elif not pxn:  # another rail: over a spine
                    assert "nvswitch" not in roles and "spine" in roles
                else:  # PXN: NVLink to the source node's GPU of the destination's rail, then that rail
                    assert roles[:3] == ["gpu", "nvswitch", "gpu"] and roles.count("nvswitch") == 1
                    relay = crossed[2]
                    assert g.nodes[relay]["node"] == src // G and g.nodes[relay]["rail"] == dst % G
                    assert all(g.nodes[v]["rail"] == dst % G for v, r in zip(crossed, roles) if r == "leaf")


def test_pxn_path_is_nvlink_then_one_rail():
    fabric, off, ports = _fabric(pxn=True)
    path = _path(fabric, off, ports, host(0, 0), host(1, 2), 0)
    assert [fabric.port_tier[p] for p in path] == ["nic", "nvlink", "nvlink", "rail", "rail", "host"]
    assert [fabric.names[fabric.port_node[fabric.port_peer[p]]] for p in path] == [
        "gpu0",
        "nvs0",
        "gpu2",
        "rail2.leaf0",
        "gpu6",
        "h6",
    ]


def test_a_dead_nvlink_sends_intra_node_traffic_over_the_rails():
    fabric, _, _ = _fabric()
    p = fabric.port_towards(fabric.names.index("gpu0"), fabric.names.index("nvs0"))
    off, ports = build_routes(fabric, frozenset({p, int(fabric.port_peer[p])}))
    roles = _roles(fabric, _path(fabric, off, ports, host(0, 0), host(0, 1), 0))
    assert roles == ["gpu", "leaf", "spine", "leaf", "gpu", "host"]


def _cross_leaf_gbps(oversubscription: float) -> float:
    """Every GPU of the nodes under leaf A sends 8 MB to its rail's GPU in a node under leaf B
    (4 nodes of 2 GPUs, 2 nodes per leaf, one spine): the aggregate goodput."""
    topo = {**SMALL, "gpus_per_node": 2, "oversubscription": oversubscription}
    flows = [{"src": host(a, g, 2), "dst": host(a + 2, g, 2), "bytes": 8_000_000} for a in range(2) for g in range(2)]
    res = simulate(scenario(topology=topo, workload={"flows": flows}))
    last_ns = max(float(r["finish_ns"]) for r in res.rows)
    return sum(f["bytes"] for f in flows) * 8 / last_ns


def test_oversubscription_two_halves_a_rails_cross_leaf_throughput():
    full, half = _cross_leaf_gbps(1.0), _cross_leaf_gbps(2.0)
    assert full == pytest.approx(4 * 400 * 1000 / 1082, rel=0.05)  # four NICs' goodput at 400 Gb/s
    assert half / full == pytest.approx(0.5, rel=0.05)


def test_uplink_rate_and_bisection_follow_oversubscription():
    fabric, _, _ = _fabric(spines=2, oversubscription=2.0)
    uplinks = {d["rate_bps"] for _, _, d in fabric.graph.edges(data=True) if d["tier"] == "leaf_spine"}
    assert uplinks == {2 * 400 * GBPS // (2 * 2)}  # 2 nodes x 400 Gb/s over 2.0 x 2 spines
    # the node halves {0, 1} and {2, 3} sit under different leaves of every rail: each of the 4
    # rails crosses by its leaf's uplinks, 2 x 200 Gb/s
    assert bisection_bps(fabric) == 4 * 400 * GBPS
    assert bisection_bps(_fabric(spines=2)[0]) == 4 * 800 * GBPS
    facts = describe(fabric)
    assert facts["hosts"] == 16 and facts["switches"] == 16 + 4 + 8 + 2
    assert facts["routing"].startswith("rail")


def test_the_brief_example_builds_and_passes_the_buffer_check_with_default_buffers(tmp_path):
    """16 nodes x 8 GPUs with only the rail_optimized keys: every switch's PFC headroom and
    reserve (an NVSwitch's 8 ports at 3600 Gb/s and 200 ns among them) fit the default buffer."""
    topo = {
        "kind": "rail_optimized",
        "nodes": 16,
        "gpus_per_node": 8,
        "nvlink_rate_gbps": 3600,
        "nvlink_delay_ns": 200,
        "nic_rate_gbps": 400,
        "nodes_per_leaf": 16,
        "spines": 8,
        "oversubscription": 1.0,
        "pxn": False,
        "link": {"delay_ns": 1000},
    }
    inputs = check_inputs(scenario(topology=topo, workload={"flows": [{"src": 0, "dst": 127, "bytes": 1000}]}))
    fabric = inputs.fabric
    assert fabric.n_hosts == 128
    nvs = fabric.names.index("nvs0")
    assert inputs.node["pfc_free_bytes"][nvs] > inputs.node["buffer_bytes"][nvs] // 2
    nvl72 = {"kind": "rail_optimized", "nodes": 2, "gpus_per_node": 72}  # the guide's largest NVSwitch
    check_inputs(scenario(topology=nvl72, workload={"flows": [{"src": 0, "dst": 143, "bytes": 1000}]}))
    draw(fabric, tmp_path / "rails.png")
    assert (tmp_path / "rails.png").stat().st_size > 10_000


def test_hosts_are_numbered_node_by_node():
    fabric, _, _ = _fabric()
    for h in range(fabric.n_hosts):
        router = fabric.graph.nodes[fabric.host_attachment(h)]
        assert (router["node"], router["rail"]) == (h // 4, h % 4) == (fabric.host_coords[h][1], h % 4)
    leaf = fabric.names.index("rail3.leaf1")
    under = sorted(fabric.graph.nodes[v]["node"] for v in fabric.graph.neighbors(leaf) if v < fabric.n_endpoints * 2)
    assert under == [2, 3] and nx.is_connected(nx.Graph(fabric.graph))


@pytest.mark.parametrize("name", list(PATHS))
def test_a_chakra_send_goes_from_gpu_rank_to_gpu_peer_at_the_paths_closed_form(tmp_path, name):
    """Rank r of a 16-rank trace is host r = node x 4 + gpu: a COMM_SEND from rank src to rank dst
    is one flow from host src to host dst, and takes the closed form of that kind of path (the
    same pairs as test_lone_flow_fct_equals_closed_form), the other ranks' traces empty."""
    pxn, src, dst, data_hops, ack_hops = PATHS[name]
    packets = 200
    ranks: list[list] = [[] for _ in range(16)]
    ranks[src] = [node(1, "COMM_SEND_NODE", comm_dst=dst, comm_size=packets * 1000, comm_tag=3)]
    ranks[dst] = [node(1, "COMM_RECV_NODE", comm_src=src, comm_size=packets * 1000, comm_tag=3)]
    prefix = write_traces(tmp_path, ranks)
    res = simulate(scenario(topology={**SMALL, "pxn": pxn}, workload={"chakra": {"prefix": prefix}}))
    (row,) = res.rows
    assert (int(row["src"]), int(row["dst"])) == (src, dst)
    assert int(round(float(row["fct_ns"]) * 1000)) == lone_flow_fct_ps(packets, data_hops, ack_hops)
    assert "mean_compute_ns" not in res.summary  # no compute or collective: no rank timeline to break down


def test_chakra_ranks_run_on_the_gpus(tmp_path):
    """A trace of 8 ranks on 2 nodes x 4 GPUs, whose coordinates are (gpu, node): an all-reduce
    over dimension 0 only runs in one group per node (over the NVSwitch), over dimension 1 only
    in one group per rail (the GPUs g of both nodes), over both in one group of all 8."""
    ranks = [
        [
            node(1, "COMM_COLL_NODE", comm_type="ALL_REDUCE", comm_size=100_000, involved_dim=[True, False]),
            node(2, "COMM_COLL_NODE", [1], comm_type="ALL_REDUCE", comm_size=100_000, involved_dim=[True, True]),
            node(3, "COMM_COLL_NODE", [2], comm_type="ALL_REDUCE", comm_size=100_000, involved_dim=[False, True]),
        ]
        for _ in range(8)
    ]
    prefix = write_traces(tmp_path, ranks)
    topo = {**SMALL, "nodes": 2, "nodes_per_leaf": 1}
    res = simulate(scenario(topology=topo, workload={"chakra": {"prefix": prefix}}))
    rows = collective_rows(res.outcome.world, res.prepared.workload)
    assert sorted((r["ranks"], r["group"]) for r in rows) == [(2, 0), (2, 1), (2, 2), (2, 3), (4, 0), (4, 4), (8, 0)]
    table = res.flow_table
    per_rail = [c for c in res.prepared.workload.collectives if c.name.startswith("n3#")]  # node 3's, per group
    pairs = {(int(table["src"][k]), int(table["dst"][k])) for c in per_rail for k in c.flows}
    assert pairs == {(g, g + 4) for g in range(4)} | {(g + 4, g) for g in range(4)}  # GPU g of node 0 and of node 1
    (tmp_path / "program").mkdir()
    program = write_traces(tmp_path / "program", [per_rank_program(r) for r in range(8)])
    res = simulate(scenario(topology=topo, workload={"chakra": {"prefix": program, "ranks": [7, 6, 5, 4, 3, 2, 1, 0]}}))
    assert res.summary["status"] == "finished" and len(res.summary["iteration_ns"]) == 1


@pytest.mark.parametrize(
    "keys, message",
    [
        (
            {"nodes": 6, "nodes_per_leaf": 4},
            "topology.nodes_per_leaf: 4 is not allowed: it must divide nodes (6), so that every leaf of a rail "
            "holds as many servers",
        ),
        ({"oversubscription": 0.5}, "topology.oversubscription:"),
        ({"gpus_per_node": 1}, "topology.gpus_per_node:"),
        ({"link": {"rate_gbps": 100}}, "topology.link.rate_gbps: 100 is not allowed: rail_optimized's rates are"),
        ({"tiers": {"nvlink": {"delay_ns": 5}}}, "unknown tier 'nvlink' (allowed: rail, leaf_spine)"),
    ],
)
def test_impossible_combinations_are_one_line_errors(keys, message):
    with pytest.raises(ScenarioError) as info:
        validate_document({"topology": {"kind": "rail_optimized", **keys}}, "rail.yaml")
    text = str(info.value)
    assert "\n" not in text and message in text


def test_after_a_link_down_on_nvlink_a_lone_intra_node_flow_crosses_the_rails_at_their_closed_form():
    """gpu0's NVLink fails at 20 us; a flow from GPU 0 to GPU 1 of the same server at 200 us
    (routes long converged) goes leaf, spine, leaf both ways, and takes that path's closed form
    (2 servers, so one leaf per rail and 2 x 400 Gb/s over 2 spines per uplink)."""
    topo = {"kind": "rail_optimized", "nodes": 2, "gpus_per_node": 4, "spines": 2}
    res = simulate(
        scenario(
            topology=topo,
            workload={"flows": [{"src": 0, "dst": 1, "bytes": 1_000_000, "start_ns": 200_000}]},
            faults=[{"kind": "link_down", "link": ["gpu0", "nvs0"], "at_ns": 20_000}],
        )
    )
    row = res.rows[0]
    rails = [(NIC, RAIL_PS), (NIC, RAIL_PS), (NIC, RAIL_PS), (NIC, RAIL_PS), (INTO_GPU, 0)]
    assert res.summary["data_packets_dropped"] == 0
    assert int(round(float(row["fct_ns"]) * 1000)) == lone_flow_fct_ps(1000, rails, rails)
