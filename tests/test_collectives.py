"""Collectives and iterations against the alpha-beta model (docs/model.md §9) and the DAG's arithmetic.

The model, derived for this engine: a step that moves S payload bytes over a path takes
alpha + S * tau, where alpha is one packet's trip (serialisation and propagation on every
link) minus its serialisation on the bottleneck, and tau is the bottleneck's time per
payload byte: the data frame's wire bytes, plus the ACK frame's when the same link also
carries the ACKs of the data coming the other way (a NIC that both sends and receives).
"""

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario, run
from roce_emu.core.paths import ser_ps
from roce_emu.results.iteration import collective_rows

MTU, DATA, ACK = 1000, 1082, 86  # payload, data frame and ACK frame on the wire (bytes)
RATE = 100 * 10**9
PROP = 1_000_000  # ps


def tau_ps(rate=RATE, with_acks=True):
    """Bottleneck time per payload byte, in ps (a float: it is an average)."""
    return (DATA + (ACK if with_acks else 0)) * 8e12 / rate / MTU


def switch_alpha_ps():
    """host -> switch -> host: two serialisations and two propagations, minus the bottleneck's one."""
    return ser_ps(DATA, RATE) + 2 * PROP


def run_collective(n_hosts, **collective):
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": n_hosts},
            workload={"collectives": [{"name": "c", **collective}]},
        )
    )
    assert res.outcome.status == "finished"
    return res, res.summary["iteration_ns"][0] * 1000  # ps


@pytest.mark.parametrize(
    "kind, algorithm, p, nbytes, steps, payload_per_step",
    [
        # ring: 2(p-1) steps of N/p
        ("all_reduce", "ring", 8, 8_000_000, 14, lambda n, p: [n / p] * 14),
        # recursive halving then doubling: N/2, N/4, N/8, then N/8, N/4, N/2
        ("all_reduce", "halving_doubling", 8, 8_000_000, 6, lambda n, p: [n / 2, n / 4, n / 8, n / 8, n / 4, n / 2]),
        # direct: a reduce-scatter and an all-gather phase, each (p-1) N/p through every NIC
        ("all_reduce", "direct", 8, 8_000_000, 2, lambda n, p: [(p - 1) * n / p] * 2),
        ("reduce_scatter", "ring", 8, 8_000_000, 7, lambda n, p: [n / p] * 7),
        ("all_gather", "ring", 8, 8_000_000, 7, lambda n, p: [n / p] * 7),
        ("all_to_all", "direct", 8, 8_000_000, 1, lambda n, p: [(p - 1) * n / p]),
        # pairwise exchange: p - 1 steps of N/p
        ("all_to_all", "ring", 8, 8_000_000, 7, lambda n, p: [n / p] * 7),
    ],
)
def test_collective_time_matches_alpha_beta(kind, algorithm, p, nbytes, steps, payload_per_step):
    res, measured = run_collective(p, kind=kind, algorithm=algorithm, bytes=nbytes)
    predicted = sum(switch_alpha_ps() + s * tau_ps() for s in payload_per_step(nbytes, p))
    assert len(payload_per_step(nbytes, p)) == steps
    print(f"{kind} {algorithm}: {measured / 1e6:.1f} us, alpha-beta {predicted / 1e6:.1f} us")
    assert measured == pytest.approx(predicted, rel=0.03)
    assert res.summary["data_packets_dropped"] == 0


def test_busbw_approaches_link_goodput():
    """NCCL's bus bandwidth of a ring all-reduce (collectives.csv): close to the goodput a link
    leaves after its data and the ACKs of the reverse direction (100 Gb/s * 1000 / 1168)."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 8},
        workload={"collectives": [{"name": "ar", "kind": "all_reduce", "bytes": 16_000_000}]},
    )
    prepared = prepare_scenario(sc)
    res = run(prepared, write=False, progress=False)
    row = collective_rows(res.outcome.world, prepared.workload)[0]
    assert row["ranks"] == 8 and row["flows"] == 8 * 14
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 7 / 8)
    assert row["busbw_gbps"] == pytest.approx(100 * MTU / (DATA + ACK), rel=0.03)
    assert float(row["time_ns"]) == res.summary["iteration_ns"][0]


def _multi_dim(dims, collective, **topology):
    return scenario(
        topology={"kind": "multi_dim", "dims": dims, **topology},
        workload={"collectives": [{"name": "ar", "kind": "all_reduce", **collective}]},
    )


DIMS_2D = [
    {"size": 4, "kind": "ring", "rate_gbps": 100, "delay_ns": 500},
    {"size": 4, "kind": "switch", "rate_gbps": 50, "delay_ns": 1000},
]


def _dim_step(dim, payload):
    """One ring step inside a dimension: NPU host link (fast, 0 delay) -> dimension link(s) -> host link."""
    rate = int(dim["rate_gbps"] * 1e9)
    host_rate = int(sum(d["rate_gbps"] * (1 if d["kind"] == "switch" else 2) for d in DIMS_2D) * 1e9)
    prop = int(dim["delay_ns"] * 1000)
    if dim["kind"] == "switch":  # router -> switch -> router: the router's uplink also carries ACKs
        alpha = 2 * ser_ps(DATA, host_rate) + 2 * ser_ps(DATA, rate) + 2 * prop - ser_ps(DATA, rate)
        return alpha + payload * tau_ps(rate, with_acks=True)
    # ring link: the ACKs go back on the reverse link, which carries no data in a ring step
    alpha = 2 * ser_ps(DATA, host_rate) + ser_ps(DATA, rate) + prop - ser_ps(DATA, rate)
    return alpha + payload * tau_ps(rate, with_acks=False)


def test_hierarchical_all_reduce_is_the_sum_of_its_phases():
    """4 x 4 multi-dimensional fabric (a 100G ring, then a 50G switch), a one-way ring in each:
    reduce-scatter on the ring (3 steps of N/4), on the switch (3 steps of N/16), then
    all-gather back; the dimensions use different links, so the phases just add up."""
    n = 16_000_000
    res = simulate(_multi_dim(DIMS_2D, {"algorithm": "hierarchical", "bytes": n}, dim_algorithms="ring"))
    measured = res.summary["iteration_ns"][0] * 1000
    ring, switch = DIMS_2D
    phases = 3 * _dim_step(ring, n / 4) + 3 * _dim_step(switch, n / 16)
    predicted = 2 * phases
    print(f"hierarchical: {measured / 1e6:.1f} us, sum of phases {predicted / 1e6:.1f} us")
    assert measured == pytest.approx(predicted, rel=0.03)


def test_chunks_pipeline_the_hierarchical_phases():
    """With 8 chunks, chunk c's switch phase overlaps chunk c + 1's ring phase: faster than one
    chunk, and no faster than the slowest phase alone (one-way rings)."""
    n = 16_000_000
    ring = {"dim_algorithms": "ring"}
    one = simulate(_multi_dim(DIMS_2D, {"algorithm": "hierarchical", "bytes": n}, **ring)).summary["iteration_ns"][0]
    eight = simulate(_multi_dim(DIMS_2D, {"algorithm": "hierarchical", "bytes": n, "chunks": 8}, **ring))
    t8 = eight.summary["iteration_ns"][0]
    ring_phases = 2 * 3 * _dim_step(DIMS_2D[0], n / 4) / 1000
    print(f"hierarchical: 1 chunk {one / 1e3:.1f} us, 8 chunks {t8 / 1e3:.1f} us")
    assert t8 < 0.9 * one
    assert t8 > ring_phases * 0.97


def test_bidirectional_hierarchical_runs_both_halves_at_once():
    """hierarchical_bidir: half of each chunk goes through the dimensions in order, half in
    reverse order. On two equal ring dimensions both are busy at once, where hierarchical uses
    one at a time: the same bytes in all, spread evenly over the two dimensions (hierarchical
    puts 3/4 of the buffer on dimension 0 and 3/16 on dimension 1, each way), in well under the
    time (the ideal is about half)."""
    dims = [{"size": 4, "kind": "ring", "rate_gbps": 100, "delay_ns": 500}] * 2
    n = 8_000_000
    one, two = (
        simulate(_multi_dim(dims, {"algorithm": a, "bytes": n, "chunks": 4}))
        for a in ("hierarchical", "hierarchical_bidir")
    )
    rows = [collective_rows(r.outcome.world, r.prepared.workload)[0] for r in (one, two)]
    moved = [[float(row[f"dim{k}_bytes"]) for k in (0, 1)] for row in rows]
    assert sum(moved[0]) == pytest.approx(sum(moved[1]), rel=1e-4)
    assert moved[0][0] / moved[0][1] == pytest.approx(4, rel=1e-3)
    assert moved[1][0] == pytest.approx(moved[1][1], rel=1e-3)
    t1, t2 = one.summary["iteration_ns"][0], two.summary["iteration_ns"][0]
    print(f"hierarchical {t1 / 1e3:.1f} us, bidirectional {t2 / 1e3:.1f} us")
    assert t2 < 0.7 * t1


def test_compute_only_iteration_is_its_critical_path():
    """fwd 100 us on every host, then bwd 50 us; host 0 also runs opt (30 us) after fwd; all in
    two iterations: each iteration is 150 us, all of it compute on the busiest host."""
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={
                "iterations": 2,
                "compute": [
                    {"name": "fwd", "duration_ns": 100_000},
                    {"name": "bwd", "duration_ns": 50_000, "after": ["fwd"]},
                    {"name": "opt", "host": 0, "duration_ns": 30_000, "after": ["fwd"]},
                ],
            },
        )
    )
    s = res.summary
    assert s["iteration_ns"] == [150_000.0, 150_000.0]
    assert s["mean_compute_ns"] == 150_000.0
    assert s["mean_exposed_communication_ns"] == 0.0
    assert s["mean_communication_ns"] == 0.0
    assert s["tasks_finished"] >= 2 * (4 + 4 + 1)


def test_fully_overlapped_communication_is_not_exposed():
    """An all-reduce launched beside 2 ms of compute on every host finishes inside it."""
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={
                "compute": [{"name": "bwd", "duration_ns": 2_000_000}],
                "collectives": [{"name": "ar", "kind": "all_reduce", "bytes": 4_000_000}],
            },
        )
    )
    s = res.summary
    assert s["iteration_ns"] == [2_000_000.0]
    assert s["mean_exposed_communication_ns"] == 0.0
    assert 0 < s["mean_communication_ns"] < 2_000_000


def test_exposed_communication_after_compute():
    """The same all-reduce after the compute: the iteration is compute + all-reduce, and the
    all-reduce's time is all exposed."""
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={
                "compute": [{"name": "bwd", "duration_ns": 200_000}],
                "collectives": [{"name": "ar", "kind": "all_reduce", "bytes": 4_000_000, "after": ["bwd"]}],
            },
        )
    )
    s = res.summary
    comm = s["iteration_ns"][0] - 200_000
    assert s["mean_exposed_communication_ns"] == pytest.approx(comm, rel=1e-3)
    assert s["mean_compute_ns"] == 200_000.0


@pytest.mark.parametrize(
    "topology",
    [{"kind": "fat_tree", "k": 4}, {"kind": "torus", "dims": [4, 4]}, {"kind": "mesh", "dims": [4, 4]}],
    ids=["fat_tree", "torus", "mesh"],
)
def test_all_to_all_time_is_the_busiest_link(topology):
    """Direct all-to-all of 16 MB per rank over 16 hosts: every flow starts at once, so the
    time is the most loaded link's bytes (data frames, plus the ACK frames coming back) over
    its rate. Measured: fat-tree 1748 us (ECMP hashing stacks flows on some links), torus
    1408 us (every link shares the load; the NICs are the bottleneck), mesh 1503 us (no
    wrap-around: dimension-order routes crowd the middle links)."""
    from roce_emu.results.tables import flow_paths

    res = simulate(
        scenario(
            topology=topology,
            workload={
                "collectives": [{"name": "a2a", "kind": "all_to_all", "algorithm": "direct", "bytes": 16_000_000}]
            },
        )
    )
    w = res.outcome.world
    wire_bytes = np.zeros(len(w.port))
    for f in range(len(w.flow)):
        fwd, rev = flow_paths(w, f)
        n = -(-int(w.flow[f]["size_bytes"]) // MTU)
        wire_bytes[fwd] += int(w.flow[f]["size_bytes"]) + n * (DATA - MTU)
        wire_bytes[rev] += n * ACK
    bound_ns = float((wire_bytes * 8e9 / w.port["rate_bps"]).max())
    measured = res.summary["iteration_ns"][0]
    print(f"{topology['kind']}: {measured / 1e3:.1f} us, busiest link {bound_ns / 1e3:.1f} us")
    assert bound_ns <= measured <= 1.02 * bound_ns


BAD = [
    (
        {"collectives": [{"kind": "all_reduce", "algorithm": "halving_doubling", "bytes": 6000}]},
        {"kind": "single_switch", "hosts": 6},
        "workload.collectives.0.hosts: halving_doubling needs a power-of-two",
    ),
    (
        {"collectives": [{"kind": "all_gather", "algorithm": "halving_doubling", "bytes": 8000}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.collectives.0.algorithm: 'halving_doubling' is not allowed "
        "for all_gather (allowed: ring, direct, in_network, nvls)",
    ),
    (
        {"collectives": [{"kind": "all_reduce", "algorithm": "hierarchical", "bytes": 8000}]},
        {"kind": "fat_tree", "k": 4},
        "hierarchical needs a multi_dim, rail_optimized, torus or mesh",
    ),
    (
        {"collectives": [{"kind": "all_reduce", "bytes": 3}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.collectives.0.bytes: 'all_reduce0' moves 3 bytes, fewer than one per rank and chunk (4 x 1)",
    ),
    (
        {"collectives": [{"kind": "all_reduce", "bytes": 15, "channels": 4}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.collectives.0.bytes: 'all_reduce0' moves 15 bytes, fewer than one per rank, chunk and channel "
        "(4 x 1 x 4)",
    ),
    (
        {"collectives": [{"kind": "reduce_scatter", "algorithm": "tree", "bytes": 8000}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.collectives.0.algorithm: 'tree' is not allowed for reduce_scatter (allowed: ring, direct, "
        "in_network, nvls)",
    ),
    (
        {"collectives": [{"kind": "all_reduce", "bytes": 8000, "after": ["nope"]}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.collectives.0.after.0: 'nope' is not allowed",
    ),
    (
        {"compute": [{"name": "a", "duration_ns": 1, "after": ["b"]}, {"name": "b", "duration_ns": 1, "after": ["a"]}]},
        {"kind": "single_switch", "hosts": 4},
        "waits for itself through a -> b -> a",
    ),
    (
        {"compute": [{"name": "a", "duration_ns": 1}, {"name": "a", "duration_ns": 2}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.compute.1.name: 'a' is not allowed: workload.compute.0 has that name already",
    ),
    (
        {"compute": [{"name": "a", "duration_ns": 1, "hosts": [7]}]},
        {"kind": "single_switch", "hosts": 4},
        "workload.compute.0.hosts.0: 7 is not allowed",
    ),
]


@pytest.mark.parametrize("workload, topology, needle", BAD, ids=[b[2][:40] for b in BAD])
def test_bad_collectives_and_compute_name_the_key(workload, topology, needle):
    from roce_emu.errors import ScenarioError

    with pytest.raises(ScenarioError) as err:
        prepare_scenario(scenario(topology=topology, workload=workload))
    assert needle in str(err.value)


def test_cycle_check_agrees_with_networkx_on_random_graphs():
    """dag.has_cycle (a frontier at a time, for million-task DAGs) against networkx, duplicate
    edges and self-loops included; DagBuilder.in_creation_order only where there is no cycle."""
    import random

    import networkx as nx

    from roce_emu.workload.dag import DagBuilder, has_cycle

    rng = random.Random(7)
    cyclic = forward = 0
    for _ in range(300):
        n = rng.randint(1, 30)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 60))]
        if rng.random() < 0.3:  # each edge from the task created first, as collectives are built
            edges = [(min(u, v), max(u, v)) for u, v in edges if u != v]
        b = DagBuilder()
        for _ in range(n):
            b.compute(0, 1, "c")
        for u, v in edges:
            b.edge(u, v)
        g = nx.DiGraph(edges)
        g.add_nodes_from(range(n))
        expected = not nx.is_directed_acyclic_graph(g)
        cyclic += expected
        assert has_cycle(b.build()[1]) == expected, (n, edges)
        if b.in_creation_order():  # the quick test build_workload trusts first
            assert not expected, (n, edges)
            forward += 1
    assert 30 < cyclic < 270  # both kinds were drawn
    assert forward > 50


@pytest.mark.parametrize(
    "hosts, kind, chunks", [(2, "all_reduce", 1), (5, "all_reduce", 3), (4, "reduce_scatter", 2), (3, "all_gather", 1)]
)
def test_ring_dependencies_are_the_data_each_flow_forwards(hosts, kind, chunks):
    """Flow (chunk c, step s, rank i) waits exactly for flow (c, s - 1, i - 1), which brought it
    the segment it forwards, and for (c - 1, s, i), which held its place in the pipeline; it
    carries segment (i - s) mod p of its chunk."""
    from roce_emu.workload.collectives import split
    from roce_emu.fabric.topology import build_fabric
    from roce_emu.workload import build_workload

    nbytes = 1_000_003
    sc = scenario(
        topology={"kind": "single_switch", "hosts": hosts},
        workload={"collectives": [{"kind": kind, "bytes": nbytes, "chunks": chunks}]},
    )
    w = build_workload(sc, build_fabric(sc.topology), "test")
    (c,) = w.collectives
    t = w.tasks
    p = hosts
    steps = {"all_reduce": 2 * (p - 1), "reduce_scatter": p - 1, "all_gather": p - 1}[kind]
    ids = np.array(c.flows).reshape(chunks, steps, p)
    preds = {}
    for k in range(len(t)):
        for s in t.succ[t.succ_off[k] : t.succ_off[k + 1]]:
            preds.setdefault(int(s), set()).add(k)
    for ch, size in enumerate(split(nbytes, chunks)):
        seg = split(size, p)
        for s in range(steps):
            for i in range(p):
                f = int(ids[ch, s, i])
                assert (w.flows.src[f], w.flows.dst[f]) == (i, (i + 1) % p)
                assert w.flows.size_bytes[f] == seg[(i - s) % p]
                expected = set()
                if s > 0:
                    expected.add(int(ids[ch, s - 1, (i - 1) % p]))
                if ch > 0:
                    expected.add(int(ids[ch - 1, s, i]))
                assert preds.get(f, set()) == expected, (ch, s, i)


# ---- NCCL's double binary tree (algorithm: tree) and channels ----------------------------------
#
# Per payload byte on a link: a data frame's share, and an ACK frame's where the link also carries
# the ACKs of data coming the other way (a rank that sends and receives in the same round).
W_DATA = DATA * 8e12 / RATE / MTU
W_ACK = ACK * 8e12 / RATE / MTU


def tree_one_chunk_ps(n, nbytes, alpha_ps=None, rate=RATE):
    """The double binary tree's all-reduce of one chunk on a single switch (links at ``rate``, a
    packet's trip ``alpha_ps``, by default switch_alpha_ps's): each tree carries
    h = nbytes / 2, reduced up in rounds (a rank sends once both children's flows are in) and
    broadcast down. For n = 2^m >= 4 the trees (NCCL's binary tree and its mirror image) run
    round by round on disjoint ranks: up, round 0 every rank sends (the leaves of either tree)
    and the inner ranks each take two children's flows (2h data and the ACKs of the h they
    send on their receive link), rounds 1..m-2 take two children's flows, round m-1 one flow
    into the root; down, the same in reverse. n = 2: one round up and one down, each rank
    sending and receiving h. n = 3 (trees 1 -> 2 -> 0 and 2 -> 0 -> 1): four rounds in each
    of which one rank sends h and receives h."""
    h = nbytes / 2
    alpha = switch_alpha_ps() if alpha_ps is None else alpha_ps
    w_data, w_ack = W_DATA * RATE / rate, W_ACK * RATE / rate
    if n == 2:
        return 2 * (alpha + h * (w_data + w_ack))
    if n == 3:
        return 4 * (alpha + h * (w_data + w_ack))
    m = n.bit_length() - 1
    assert n == 1 << m
    rounds = (2 * w_data + w_ack) + (m - 2) * 2 * w_data + w_data  # one way; the other mirrors it
    return 2 * m * alpha + 2 * h * rounds


def _busiest_link_ps(world):
    """The busiest link direction's wire bytes (data frames, and the ACK frames of the data
    coming the other way) over its rate: no schedule can finish sooner."""
    from roce_emu.results.tables import flow_paths

    wire_bytes = np.zeros(len(world.port))
    for f in range(len(world.flow)):
        fwd, rev = flow_paths(world, f)
        size = int(world.flow[f]["size_bytes"])
        packets = -(-size // MTU)
        wire_bytes[fwd] += size + packets * (DATA - MTU)
        wire_bytes[rev] += packets * ACK
    return float((wire_bytes * 8e12 / world.port["rate_bps"]).max())


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_tree_one_chunk_matches_its_rounds(n):
    """One chunk: the measured time is the closed form of tree_one_chunk_ps within 1% (the
    closed form counts every packet's headers and ACKs and one packet's store-and-forward per
    round; what is left is ACKs queued behind data frames)."""
    nbytes = 8_000_000
    res, measured = run_collective(n, kind="all_reduce", algorithm="tree", bytes=nbytes)
    predicted = tree_one_chunk_ps(n, nbytes)
    print(f"tree n={n}: {measured / 1e6:.1f} us, closed form {predicted / 1e6:.1f} us")
    assert measured == pytest.approx(predicted, rel=0.01)
    assert res.summary["data_packets_dropped"] == 0


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_tree_chunks_pipeline_towards_the_busiest_link(n):
    """Eight chunks pipeline up and down the trees, so the time tends to the busiest link's
    work L * tau: for n = 2^m >= 4 every rank sends and receives 2S (half up and a whole down
    in the tree where it is inner, half up in the other), L = 2S, checked here; n = 2: S,
    n = 3: 1.5S. No schedule beats L * tau, and the pipeline adds at most one chunk's trip
    through every round (tree_one_chunk_ps of S / C) to it: the fill before the busiest link
    has work for every round, and the drain after. Measured between the two (n = 8: 14% over
    L * tau), and for n >= 4 well under one chunk's time."""
    nbytes, chunks = 8_000_000, 8
    res, measured = run_collective(n, kind="all_reduce", algorithm="tree", bytes=nbytes, chunks=chunks)
    bound = _busiest_link_ps(res.outcome.world)
    link_bytes = {2: nbytes, 3: 1.5 * nbytes}.get(n, 2 * nbytes)
    assert bound == pytest.approx(link_bytes * tau_ps(), rel=1e-3)
    fill = tree_one_chunk_ps(n, nbytes / chunks)
    print(f"tree n={n} x{chunks}: {measured / 1e6:.1f} us, busiest link {bound / 1e6:.1f} + fill {fill / 1e6:.1f} us")
    assert bound <= measured <= bound + fill
    if n >= 4:
        assert measured < 0.8 * tree_one_chunk_ps(n, nbytes)


@pytest.mark.parametrize("n, chunks, channels", [(2, 1, 1), (3, 2, 1), (5, 1, 2), (6, 3, 1), (8, 2, 2), (13, 1, 1)])
def test_tree_gives_every_rank_every_contribution(n, chunks, channels):
    """The step DAG reduces and broadcasts: following each chunk's half (each tree) through the
    flows and the flows they wait for, a flow carries its sender's own data and whatever the
    flows it waits for carried; every rank ends up with every rank's data, for every chunk and
    both halves, and every rank sends and receives in both trees' phases."""
    from roce_emu.fabric.topology import build_fabric
    from roce_emu.workload import build_workload
    from roce_emu.workload.collectives import split

    nbytes = 1_000_003
    sc = scenario(
        topology={"kind": "single_switch", "hosts": n},
        workload={
            "collectives": [
                {"kind": "all_reduce", "algorithm": "tree", "bytes": nbytes, "chunks": chunks, "channels": channels}
            ]
        },
    )
    w = build_workload(sc, build_fabric(sc.topology), "test")
    (c,) = w.collectives
    t = w.tasks
    preds: dict[int, set] = {}
    for k in range(len(t)):
        for s in t.succ[t.succ_off[k] : t.succ_off[k + 1]]:
            preds.setdefault(int(s), set()).add(k)
    # per channel, per chunk, per tree: n - 1 flows up and n - 1 down
    groups = np.asarray(c.flows).reshape(channels, chunks, 2, 2 * (n - 1))
    for channel, share in enumerate(split(nbytes, channels)):
        for chunk, size in enumerate(split(share, chunks)):
            for tree, half in enumerate(split(size, 2)):
                flows = [int(f) for f in groups[channel, chunk, tree]]
                assert all(w.flows.size_bytes[f] == half for f in flows)
                carried: dict[int, set] = {}
                for f in flows:  # in creation order: a flow after those it waits for
                    carried[f] = {int(w.flows.src[f])}.union(*(carried.get(g, set()) for g in preds.get(f, ())))
                has = {r: {r} for r in range(n)}
                for f in flows:
                    has[int(w.flows.dst[f])] |= carried[f]
                assert all(got == set(range(n)) for got in has.values()), (channel, chunk, tree)


def test_double_binary_tree_is_nccls():
    """NCCL's trees (ncclGetBtree / ncclGetDtree) for 8 and 5 ranks: the binary tree rooted at
    0 (one child, 4), its mirror image rooted at 7 for even counts, shifted by one for odd
    counts; for even counts a rank is a leaf in one tree and inner in the other."""
    from roce_emu.workload.collectives import double_binary_tree

    assert double_binary_tree(8) == ([-1, 2, 4, 2, 0, 6, 4, 6], [1, 3, 1, 7, 5, 3, 5, -1])
    assert double_binary_tree(5) == ([-1, 2, 4, 2, 0], [1, -1, 3, 0, 3])
    for n in (4, 6, 8, 10, 16):
        first, second = double_binary_tree(n)
        inner = [{p for p in tree if p >= 0} for tree in (first, second)]
        assert not inner[0] & inner[1]


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_channels_on_one_switch_take_the_time_of_one(algorithm):
    """On a single switch the NIC links are the bottleneck with one ring or tree already, so
    four channels (four instances on a quarter of the bytes each, at once) take the same time
    within 3% (a little less: one channel's step boundaries are filled by the others')."""
    nbytes = 8_000_000
    _, one = run_collective(8, kind="all_reduce", algorithm=algorithm, bytes=nbytes)
    res, four = run_collective(8, kind="all_reduce", algorithm=algorithm, bytes=nbytes, channels=4)
    print(f"{algorithm}: 1 channel {one / 1e6:.1f} us, 4 channels {four / 1e6:.1f} us")
    assert four == pytest.approx(one, rel=0.03)
    flows = len(res.outcome.world.flow)
    assert flows == 4 * (2 * 8 * 7 if algorithm == "ring" else 4 * 7)


def _leaf_spine_ring(spine_gbps, channels):
    """A ring all-reduce over two leaves of two hosts under two spines, leaf-spine links at spine_gbps."""
    two_by_two = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
    ring = {"name": "c", "kind": "all_reduce", "bytes": 8_000_000, "channels": channels}
    res = simulate(
        scenario(
            topology={**two_by_two, "tiers": {"leaf_spine": {"rate_gbps": spine_gbps}}},
            workload={"collectives": [ring]},
        )
    )
    return res, res.summary["iteration_ns"][0] * 1000


def test_channels_spread_a_ring_over_ecmp_paths():
    """Two leaves of two hosts, two spines, leaf-spine links at half the host rate: one ring's
    flow between the leaves hashes to one spine and gets half of what its NICs could carry, so
    the ring takes well over (1.5x) its time where the leaf-spine links run at the host rate.
    With 8 channels each crossing carries 8 flows, which ECMP spreads over both spines: within
    20% of that time (the hash does not split them exactly evenly), and no sooner than the
    busiest link allows."""
    _, full = _leaf_spine_ring(100, 1)
    _, one = _leaf_spine_ring(50, 1)
    res, eight = _leaf_spine_ring(50, 8)
    print(f"ring: 100G spines {full / 1e6:.1f} us; 50G spines 1 channel {one / 1e6:.1f}, 8 channels {eight / 1e6:.1f}")
    assert one > 1.5 * full
    assert _busiest_link_ps(res.outcome.world) <= eight < 1.2 * full


def test_odd_channels_run_the_ring_the_other_way():
    """Channel 0 sends to the next rank, channel 1 to the one before, each on its half of the bytes."""
    from roce_emu.fabric.topology import build_fabric
    from roce_emu.workload import build_workload

    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={"collectives": [{"kind": "all_reduce", "bytes": 8000, "channels": 2}]},
    )
    w = build_workload(sc, build_fabric(sc.topology), "test")
    (c,) = w.collectives
    ids = np.asarray(c.flows).reshape(2, -1)
    for channel, step in ((0, 1), (1, -1)):
        src, dst = w.flows.src[ids[channel]], w.flows.dst[ids[channel]]
        assert ((dst - src) % 4 == step % 4).all()
        assert w.flows.size_bytes[ids[channel]].sum() == 6 * 4 * 1000  # 6 steps, 4 flows of a quarter of 4000


@pytest.mark.parametrize(
    "kind, factor", [("all_reduce", 2 * 3 / 4), ("reduce_scatter", 3 / 4), ("all_gather", 3 / 4), ("all_to_all", 3 / 4)]
)
def test_bus_bandwidth_follows_nccl_tests(kind, factor):
    """collectives.csv: algbw_gbps = bytes x 8 / time (nccl-tests' algbw, with bytes its `size`:
    the per-rank buffer), busbw_gbps = algbw x 2(n-1)/n for All-Reduce, x (n-1)/n for
    Reduce-Scatter, All-Gather and All-To-All (nccl-tests' doc/PERFORMANCE.md), here n = 4."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={"collectives": [{"name": "c", "kind": kind, "bytes": 400_000}]},
    )
    prepared = prepare_scenario(sc)
    res = run(prepared, write=False, progress=False)
    row = collective_rows(res.outcome.world, prepared.workload)[0]
    assert row["algbw_gbps"] == pytest.approx(400_000 * 8 / float(row["time_ns"]), rel=1e-5)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor, rel=1e-5)


def test_training_runs_its_gradient_all_reduces_on_channels():
    """workload.training.channels: every gradient all-reduce is split over that many channels,
    each a ring of its own (twice the flows for two channels, each carrying half the bytes)."""
    from pathlib import Path

    from roce_emu.config import load_scenario
    from roce_emu.fabric.topology import build_fabric
    from roce_emu.workload import build_workload

    path = str(Path(__file__).resolve().parent.parent / "scenarios" / "training_resnet50.yaml")
    built = []
    for channels in (1, 2):
        sc = load_scenario(path, [f"workload.training.channels={channels}"])
        w = build_workload(sc, build_fabric(sc.topology), path)
        built.append([(c.channels, len(c.flows), int(w.flows.size_bytes[c.flows].sum())) for c in w.collectives])
    assert built[0] and len(built[0]) == len(built[1])
    for (ch1, flows1, bytes1), (ch2, flows2, bytes2) in zip(*built):
        assert (ch1, ch2) == (1, 2)
        assert flows2 == 2 * flows1
        assert abs(bytes2 - bytes1) <= flows2  # the shares differ by at most a byte per flow
