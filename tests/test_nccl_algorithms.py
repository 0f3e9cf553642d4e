"""NCCL's algorithms on a rail_optimized fabric against their alpha-beta closed forms (docs/model.md
§9), and the links that carry their bytes: nvls (NVLink SHARP in a node's NVSwitch), nvls_tree
(NVLS inside the nodes, the double binary tree per rail across them), hierarchical (rings over
NVLink inside the nodes, then per rail), and their one-line errors.

A step that moves S payload bytes over a path takes alpha + S tau (tests/test_collectives.py):
alpha is one packet's trip (its serialisation on every hop and every hop's delay) less its
serialisation on the bottleneck, tau the bottleneck's time per payload byte, with the ACK frames
of the data coming the other way where the same link carries them. A GPU's NIC link is passed on
cut-through by its router: it costs nothing of its own (tests/test_rail_optimized.py)."""

import pytest

from conftest import cli, scenario, simulate
from roce_emu.core.paths import ser_ps
from roce_emu.errors import ScenarioError
from roce_emu.api import prepare_scenario
from roce_emu.results.links import port_bytes
from test_collectives import tree_one_chunk_ps

MTU, DATA, ACK = 1000, 1082, 86  # payload, data frame and ACK frame on the wire (bytes)
GBPS = 10**9
NVLINK, NIC = 3600 * GBPS, 400 * GBPS
INTO_GPU = NVLINK + NIC  # the link into a GPU: both of its ports' rates
NVLINK_PS, RAIL_PS = 150_000, 1_000_000
G = 4  # GPUs a node
S = 8_000_000  # bytes per rank
SF = {"switch": {"reduction": "store_and_forward"}}  # the NVSwitch reduces whole chunks (the steps below)


def rail(nodes):
    """``nodes`` nodes of 4 GPUs, every node of a rail under one leaf (no spine on any path)."""
    return {
        "kind": "rail_optimized",
        "nodes": nodes,
        "gpus_per_node": G,
        "nodes_per_leaf": nodes,
        "spines": 1,
        "nvlink_delay_ns": 150,
        "link": {"delay_ns": 1000},
    }


# hops (rate, delay) of each kind of path
UP = [(NVLINK, NVLINK_PS), (NVLINK, 0)]  # GPU router -> NVSwitch -> its reduction unit
DOWN = [(NVLINK, 0), (NVLINK, NVLINK_PS), (INTO_GPU, 0)]  # unit -> NVSwitch -> GPU router -> GPU
NV = [(NVLINK, NVLINK_PS), (NVLINK, NVLINK_PS), (INTO_GPU, 0)]  # GPU router -> NVSwitch -> GPU router -> GPU
ONE_LEAF = [(NIC, RAIL_PS), (NIC, RAIL_PS), (INTO_GPU, 0)]  # GPU router -> leaf -> GPU router -> GPU


def alpha_ps(hops):
    bottleneck = min(rate for rate, _ in hops)
    return sum(ser_ps(DATA, rate) + delay for rate, delay in hops) - ser_ps(DATA, bottleneck)


def step_ps(hops, payload, with_acks=False):
    """alpha + S tau over these hops."""
    bottleneck = min(rate for rate, _ in hops)
    return alpha_ps(hops) + payload * (DATA + (ACK if with_acks else 0)) * 8e12 / bottleneck / MTU


def nvls_ps(nbytes, nodes=1):
    """One chunk of an NVLS (one node) or NVLS+Tree All-Reduce, its steps one after the other: the
    NVLS reduce-scatter (the chunk up, its slice down), the double binary tree of the nodes on
    each rail over the slice (tests/test_collectives.py tree_one_chunk_ps, over a rail's path),
    the NVLS all-gather (the slice up, the chunk down)."""
    nvls = step_ps(UP, nbytes) + step_ps(DOWN, nbytes / G) + step_ps(UP, nbytes / G) + step_ps(DOWN, nbytes)
    return nvls + (tree_one_chunk_ps(nodes, nbytes / G, alpha_ps(ONE_LEAF), NIC) if nodes > 1 else 0)


def run(nodes, network=None, **collective):
    sections = dict(topology=rail(nodes), workload={"collectives": [{"name": "c", **collective}]})
    res = simulate(scenario(**sections, **({"network": network} if network else {})))
    assert res.outcome.status == "finished" and res.summary["data_packets_dropped"] == 0
    return res, res.summary["iteration_ns"][0] * 1000


def sent(res, a, b):
    """Wire bytes (data and ACKs, every priority) sent from node a to node b (by name)."""
    fabric = res.prepared.fabric
    port = fabric.port_towards(fabric.names.index(a), fabric.names.index(b))
    return int(port_bytes(res.outcome.world)[port].sum())


def tier_bytes(res, tier):
    fabric = res.prepared.fabric
    sent_by_port = port_bytes(res.outcome.world).sum(axis=1)
    return int(sum(b for b, t in zip(sent_by_port, fabric.port_tier) if t == tier))


def wire(payload):
    """A payload's data frames and the ACK frames of as much data received, on the wire."""
    return payload // MTU * (DATA + ACK)


def test_nvls_sends_each_buffer_into_the_nvswitch_once():
    """NVLS All-Reduce in one node, one chunk, as NCCL runs it: every GPU sends its buffer into the
    NVSwitch, which reduces it and sends GPU i slice i of the result (S / g); GPU i sends that
    slice up once and the switch multicasts it to every GPU. Four steps one after the other:
    S up, S / g down, S / g up, S down. Each GPU's NVLink carries (1 + 1/g) S each way (and the
    ACKs of as much the other way), not a ring's 2 (g - 1) / g S, and nothing goes over a rail."""
    res, measured = run(2, SF, kind="all_reduce", algorithm="nvls", bytes=S, hosts=list(range(G)))
    predicted = nvls_ps(S)
    print(f"nvls: {measured / 1e6:.2f} us, alpha-beta {predicted / 1e6:.2f} us")
    assert measured == pytest.approx(predicted, rel=0.02)
    for gpu in range(G):
        assert sent(res, f"gpu{gpu}", "nvs0") == sent(res, "nvs0", f"gpu{gpu}") == wire(S + S // G)
    assert tier_bytes(res, "rail") == tier_bytes(res, "leaf_spine") == 0
    t = res.flow_table
    assert {res.prepared.fabric.names[d] for d in t["dst"][t["src"] == 0]} == {"nvs0.unit.gpu0"}


@pytest.mark.parametrize("kind, up, down", [("reduce_scatter", S, S // G), ("all_gather", S // G, S)])
def test_nvls_reduce_scatter_and_all_gather_are_one_step_each_way(kind, up, down):
    """NVLS Reduce-Scatter: the buffer up, the GPU's reduced segment down; All-Gather: the
    segment up, the NVSwitch's multicast of all of them down."""
    res, measured = run(1, SF, kind=kind, algorithm="nvls", bytes=S)
    assert measured == pytest.approx(step_ps(UP, up) + step_ps(DOWN, down), rel=0.02)
    assert sent(res, "gpu2", "nvs0") == up // MTU * DATA + down // MTU * ACK


def test_nvls_tree_reduces_in_the_nodes_and_across_them_per_rail():
    """NVLS+Tree over 2 nodes, one chunk: the NVLS reduce-scatter inside each node (S up, S / g
    down), the double binary tree of 2 ranks on each rail on its slice S / g (two rounds, each
    rank sending and receiving half the slice in each: tests/test_collectives.py
    tree_one_chunk_ps over the rail's path), then the NVLS all-gather (S / g up, S down). A
    GPU's rail carries its slice S / g each way, its NVLink (1 + 1/g) S; no byte crosses a spine."""
    res, measured = run(2, SF, kind="all_reduce", algorithm="nvls_tree", bytes=S)
    predicted = nvls_ps(S, nodes=2)
    print(f"nvls_tree: {measured / 1e6:.2f} us, alpha-beta {predicted / 1e6:.2f} us")
    assert measured == pytest.approx(predicted, rel=0.02)
    for h in range(2 * G):
        node, gpu = divmod(h, G)
        assert sent(res, f"gpu{h}", f"nvs{node}") == wire(S + S // G)
        assert sent(res, f"gpu{h}", f"rail{gpu}.leaf0") == wire(S // G)
    assert tier_bytes(res, "leaf_spine") == 0


def test_nvls_tree_chunks_pipeline_towards_the_busiest_rail():
    """NVLS+Tree over 4 nodes: each rail runs the double binary tree of 4 ranks (node 0's GPU
    the root of one tree, node 3's of the other, each with one child). Nodes 1 and 2 are inner
    in one tree and leaves in the other: their GPUs send and receive 2 S / g on their rail (half
    the slice up and the whole down in one tree, half up in the other), nodes 0 and 3 half as
    much. That rail is the busiest link (2 S / g against the NVLink's (1 + 1/g) S at 9 times the
    rate). With 8 chunks the time lies between that link's work and its work plus one chunk's
    trip through every step (the pipeline's fill and drain); one chunk takes the sum of its
    steps."""
    _, measured = run(4, SF, kind="all_reduce", algorithm="nvls_tree", bytes=S)
    assert measured == pytest.approx(nvls_ps(S, nodes=4), rel=0.02)
    chunks = 8
    res, measured = run(4, SF, kind="all_reduce", algorithm="nvls_tree", bytes=S, chunks=chunks)
    for h in range(4 * G):
        node, gpu = divmod(h, G)
        assert sent(res, f"gpu{h}", f"rail{gpu}.leaf0") == wire((2 if node in (1, 2) else 1) * S // G)
    busiest = 2 * S / G * (DATA + ACK) * 8e12 / NIC / MTU
    fill = nvls_ps(S / chunks, nodes=4)
    print(f"nvls_tree x{chunks}: {measured / 1e6:.2f} us, busiest rail {busiest / 1e6:.2f} + fill {fill / 1e6:.2f} us")
    assert busiest <= measured <= busiest + fill


def test_hierarchical_on_a_rail_fabric_runs_over_nvlink_then_per_rail():
    """Hierarchical All-Reduce over 4 nodes of 4 GPUs: dimension 0 is a ring over NVLink inside
    each node (3 steps of S / 4 each way), dimension 1 a ring among the GPUs of each rail across
    the nodes (3 steps of S / 16). The phases add up; each GPU's NVLink carries 2 (3/4) S, its
    rail 2 (3/4) S / 4, and no byte crosses a spine (every ring stays on its rail)."""
    res, measured = run(4, kind="all_reduce", algorithm="hierarchical", bytes=S)
    phases = 3 * step_ps(NV, S / 4, with_acks=True) + 3 * step_ps(ONE_LEAF, S / 16, with_acks=True)
    print(f"hierarchical on rails: {measured / 1e6:.2f} us, alpha-beta {2 * phases / 1e6:.2f} us")
    assert measured == pytest.approx(2 * phases, rel=0.03)
    for h in range(4 * G):
        node, gpu = divmod(h, G)
        assert sent(res, f"gpu{h}", f"nvs{node}") == wire(2 * 3 * S // 4)
        assert sent(res, f"gpu{h}", f"rail{gpu}.leaf0") == wire(2 * 3 * S // 16)
    assert tier_bytes(res, "leaf_spine") == 0


BAD = [
    (
        {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2},
        {"algorithm": "nvls"},
        "workload.collectives.0.algorithm: 'nvls' is not allowed on a leaf_spine fabric: it reduces in a node's "
        "NVSwitch (topology kind: rail_optimized)",
    ),
    (
        rail(2),
        {"algorithm": "nvls"},
        "workload.collectives.0.hosts: 'nvls' runs inside one node's NVSwitch; these ranks span nodes 0, 1 "
        "(across nodes: nvls_tree)",
    ),
    (
        rail(2),
        {"algorithm": "nvls_tree", "hosts": [0, 1, 4, 6]},
        "workload.collectives.0.hosts: 'nvls_tree' needs the same GPUs (one tree per rail) in every node: "
        "node 0 has [0, 1], node 1 [0, 2]",
    ),
    (
        rail(2),
        {"algorithm": "nvls_tree", "hosts": [0, 4]},
        "workload.collectives.0.hosts: 'nvls_tree' needs at least 2 GPUs of each node; node 0 has GPU 0 alone",
    ),
    (
        rail(2),
        {"algorithm": "nvls_tree", "kind": "reduce_scatter"},
        "workload.collectives.0.algorithm: 'nvls_tree' is not allowed for reduce_scatter",
    ),
    (rail(2), {"algorithm": "in_network"}, "'in_network' is not allowed on a rail_optimized fabric"),
]


@pytest.mark.parametrize("topology, collective, needle", BAD, ids=[b[2][:50] for b in BAD])
def test_bad_nvls_names_the_key(topology, collective, needle):
    spec = {"kind": "all_reduce", "bytes": 8000, **collective}
    with pytest.raises(ScenarioError) as err:
        prepare_scenario(scenario(topology=topology, workload={"collectives": [spec]}))
    assert needle in str(err.value)


def test_bad_nvls_is_one_line_and_exit_2(tmp_path):
    """From the command line: one line naming the file and the key, exit code 2, no traceback."""

    path = tmp_path / "bad.yaml"
    path.write_text(
        "topology: {kind: single_switch, hosts: 4}\n"
        "workload: {collectives: [{kind: all_reduce, algorithm: nvls, bytes: 8000}]}\n"
    )
    out = cli("validate", path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.yaml" in lines[0] and "workload.collectives.0.algorithm" in lines[0]
