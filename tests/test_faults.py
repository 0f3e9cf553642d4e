"""Faults in the modelled network: failed, flapping, slow and lossy links, rerouting, recovery.

Expected figures are derived from the engine's rules (store-and-forward, per-packet ACKs,
go-back-N on a NACK) and the fault's timing, not read off a run.
"""

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
import yaml

from conftest import assert_conservation, scenario, simulate
from roce_emu.api import prepare, prepare_scenario, run
from roce_emu.core import kinds as K
from roce_emu.core.ideal import ideal_fct_ps
from roce_emu.core.paths import flow_path
from roce_emu.errors import ScenarioError
from roce_emu.results.tables import flow_paths
from roce_emu.fabric.routing import build_routes
from roce_emu.config.schema import FatTree, Mesh, Torus
from roce_emu.fabric.topology import build_fabric

RATE = 100e9
PROP_NS = 1000.0  # the default link delay


def wire_ns(world, frame_bytes):
    return (frame_bytes + int(world.cfg[K.CFG_IFG])) * 8 / RATE * 1e9


def data_ns(world):
    return wire_ns(world, int(world.cfg[K.CFG_MTU] + world.cfg[K.CFG_DATA_HDR]))


def ack_ns(world):
    return wire_ns(world, int(world.cfg[K.CFG_ACK_BYTES]))


def node_names(prepared, ports):
    return [prepared.fabric.names[prepared.world.port["node"][p]] for p in ports]


# ---- a failed link: reroute after convergence, recovery by go-back-N -------------------------------
def leaf_spine(faults, convergence_ns=20_000, size=2_000_000, **extra):
    return scenario(
        topology={"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1},
        network={"routing": {"convergence_ns": convergence_ns}},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": size}]},
        faults=faults,
        **extra,
    )


def used_spine(sc):
    prepared = prepare_scenario(sc)
    fwd, _ = flow_paths(prepared.world, 0)
    return node_names(prepared, fwd)[2]  # h0, leaf0, spine, leaf1


def test_flow_over_a_failed_link_completes_on_the_other_path():
    """The link leaf0-spine carrying the flow fails at T. Data reaching it from T on is lost
    until the routes converge at T + c; the first rerouted packet (3 hops to h1) draws a NACK
    (4 hops back), and the sender goes back to the first packet lost. That packet left h0
    2(s + prop) before reaching the spine at T, so the run loses c + 2(s + p) + 3(s + p) + 4(a + p)
    of sending, rounded up to whole packet times."""
    t_fail_ns, c_ns = 50_000, 20_000
    spine = used_spine(leaf_spine([]))
    healthy = simulate(leaf_spine([]))
    failed = simulate(leaf_spine([{"kind": "link_down", "link": ["leaf0", spine], "at_ns": t_fail_ns}], c_ns))
    world = failed.outcome.world
    s, a, p = data_ns(world), ack_ns(world), PROP_NS
    lost_ns = c_ns + 2 * (s + p) + 3 * (s + p) + 4 * (a + p)
    expected = math.ceil(lost_ns / s) * s
    row = failed.rows[0]
    assert failed.outcome.status == "finished"
    delay = float(row["fct_ns"]) - float(healthy.rows[0]["fct_ns"])
    assert expected - s <= delay <= expected + s, (delay, expected)
    assert float(row["fct_ns"]) >= float(row["ideal_fct_ns"]) + c_ns
    # the retransmissions are counted: every packet sent in the lost stretch went again
    assert row["retransmits"] == pytest.approx(lost_ns / s, abs=2)
    assert failed.summary["data_packets_lost_on_links"] == row["packets_dropped"] > 0
    assert failed.summary["route_updates"] == 1
    # the other spine carried the rest of the flow
    other = "spine1" if spine == "spine0" else "spine0"
    fabric = prepare_scenario(leaf_spine([])).fabric
    detour = fabric.port_towards(fabric.names.index("leaf0"), fabric.names.index(other))
    assert world.port["tx_data_pkts"][detour] > 0


def test_a_link_nobody_uses_changes_nothing():
    spine = used_spine(leaf_spine([]))
    other = "spine1" if spine == "spine0" else "spine0"
    healthy = simulate(leaf_spine([]))
    failed = simulate(leaf_spine([{"kind": "link_down", "link": ["leaf0", other], "at_ns": 50_000}]))
    assert failed.rows == healthy.rows
    assert failed.summary["data_packets_lost_on_links"] == 0


def test_a_flapping_link_comes_back_into_use():
    """Down at 50 us, up at 80 us: the routes move away at 70 us and back at 100 us. The two paths
    are equally long and empty, so moving back loses nothing: the FCT is the permanent failure's."""
    spine = used_spine(leaf_spine([]))
    link = ["leaf0", spine]
    gone = simulate(leaf_spine([{"kind": "link_down", "link": link, "at_ns": 50_000}]))
    flap = simulate(leaf_spine([{"kind": "link_down", "link": link, "at_ns": 50_000, "until_ns": 80_000}]))
    assert flap.summary["route_updates"] == 2
    assert flap.rows[0]["fct_ns"] == gone.rows[0]["fct_ns"]
    assert flap.summary["data_packets_lost_on_links"] == gone.summary["data_packets_lost_on_links"]
    fabric = prepare_scenario(leaf_spine([])).fabric
    back = fabric.port_towards(fabric.names.index("leaf0"), fabric.names.index(spine))
    sent_before_failure = 50_000 / data_ns(flap.outcome.world)
    assert flap.outcome.world.port["tx_data_pkts"][back] > sent_before_failure + 100


def test_torus_detours_around_a_cut_dimension_order_path():
    """DOR sends h0 -> h2 along dimension 1 through r0_1; with r0_0-r0_1 down, the shorter way
    left is the wrap-around through r0_3; back to DOR once the link is repaired."""
    sc = scenario(
        topology={"kind": "torus", "dims": [4, 4]},
        network={"routing": {"convergence_ns": 10_000}},
        workload={"flows": [{"src": 0, "dst": 2, "bytes": 1_000_000}]},
        faults=[{"kind": "link_down", "link": ["r0_0", "r0_1"], "at_ns": 20_000, "until_ns": 60_000}],
    )
    prepared = prepare_scenario(sc)
    w = prepared.world
    paths = [
        node_names(
            prepared,
            flow_path(
                w.route_off[e],
                w.route_ports,
                w.port["node"],
                w.port["peer_port"],
                w.port["pass_to"],
                16,
                0,
                2,
                int(w.flow[0]["ecmp_hash"]),
            ),
        )
        for e in range(len(w.route_off))
    ]
    assert paths == [["h0", "r0_0", "r0_1", "r0_2"], ["h0", "r0_0", "r0_3", "r0_2"]]
    assert list(w.link_plan["action"]) == [K.LA_DOWN, K.LA_ROUTES, K.LA_UP, K.LA_ROUTES]
    result = simulate(sc)
    assert result.outcome.status == "finished"
    assert result.rows[0]["retransmits"] > 0 and result.summary["route_updates"] == 2


@pytest.mark.parametrize(
    "topology", [FatTree(k=4), Torus(dims=[4, 4]), Mesh(dims=[4, 4])], ids=["fat_tree", "torus", "mesh"]
)
def test_routes_avoid_dead_links_and_reach_every_host(topology):
    """With two switch-to-switch links dead (the fabric stays connected), every host pair's route,
    for several flow hashes, reaches its host without crossing a dead port and without a loop."""
    fabric = build_fabric(topology)
    inner = [
        p
        for p in range(len(fabric.port_node))
        if p % 2 == 0
        and fabric.port_node[p] >= fabric.n_hosts
        and fabric.port_node[fabric.port_peer[p]] >= fabric.n_hosts
    ]
    rng = np.random.default_rng(3)
    chosen = rng.choice(inner, 2, replace=False)
    dead = frozenset(int(q) for p in chosen for q in (p, fabric.port_peer[p]))
    off, ports = build_routes(fabric, dead)
    H = fabric.n_hosts
    for src in range(H):
        for dst in range(H):
            if src == dst:
                continue
            for h in (0, 7, 12345):
                path = flow_path(off, ports, fabric.port_node, fabric.port_peer, fabric.port_pass, H, src, dst, h)
                assert fabric.port_node[fabric.port_peer[path[-1]]] == dst, (src, dst)
                assert not dead & set(path.tolist()), (src, dst)
                assert len(path) < 2 * fabric.n_nodes


# ---- lossy ports: go-back-N goodput ----------------------------------------------------------------
def lossy(loss, size=100_000_000, seed=1, **fault):
    return scenario(
        topology={"kind": "single_switch", "hosts": 2},
        seed=seed,
        network={"nic": {"rto_ns": 20_000, "nack_interval_ns": 5_000}},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": size}]},
        faults=[{"kind": "lossy_port", "port": ["sw0", "h1"], "loss": loss, **fault}],
    )


def go_back_ns(world):
    """What losing one packet costs a line-rate sender (h0 -> sw0 -> h1, loss at sw0's port): the
    next packet reaches h1 3s + 2p after the lost one started, the NACK returns in 2(a + p), and
    the sender goes back at its next packet boundary."""
    s, a, p = data_ns(world), ack_ns(world), PROP_NS
    return math.ceil((3 * s + 2 * p + 2 * (a + p)) / s) * s


def test_one_lost_packet_costs_one_go_back_window():
    healthy = simulate(lossy(1.0, size=1_000_000, at_ns=0, until_ns=1))  # the window ends before any packet
    one = simulate(lossy(1.0, size=1_000_000, at_ns=50_000, until_ns=50_080))  # one packet leaves sw0 in it
    world = one.outcome.world
    assert one.summary["data_packets_lost_on_links"] == 1 and one.summary["nacks_sent"] == 1
    delay = float(one.rows[0]["fct_ns"]) - float(healthy.rows[0]["fct_ns"])
    assert delay == pytest.approx(go_back_ns(world), abs=1e-3)
    assert one.rows[0]["retransmits"] == round(go_back_ns(world) / data_ns(world))


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_random_loss_gives_the_go_back_n_goodput(loss):
    """Each attempt at the packet the receiver waits for is lost with probability q, and each loss
    costs one go-back window D: a flow of n packets takes n s + L D with L ~ NegBin(n, q),
    E[L] = n q / (1 - q), Var[L] = n q / (1 - q)^2. Checked two ways: against the losses the run
    had (its NACKs; repeated losses of a resent packet cost a little more), and against the
    expectation within three standard deviations."""
    result = simulate(lossy(loss))
    world = result.outcome.world
    assert result.outcome.status == "finished"
    n = -(-int(world.flow[0]["size_bytes"]) // int(world.cfg[K.CFG_MTU]))
    s, D = data_ns(world), go_back_ns(world)
    fct = float(result.rows[0]["fct_ns"])
    realised = n * s + result.summary["nacks_sent"] * D
    assert fct == pytest.approx(realised, rel=0.01)
    mean_losses = n * loss / (1 - loss)
    sd_ns = math.sqrt(n * loss / (1 - loss) ** 2) * D
    expected = n * s + mean_losses * D
    assert abs(fct - expected) < 3 * sd_ns, (fct, expected, sd_ns)
    goodput = n * int(world.cfg[K.CFG_MTU]) * 8 / fct
    print(f"loss {loss}: goodput {goodput:.2f} Gb/s, go-back-N model {n * 8000 / expected:.2f} Gb/s")
    assert result.summary["data_packets_lost_on_links"] > 0 and result.rows[0]["retransmits"] > 0


def test_pfc_frames_are_never_lost():
    """A port losing everything still passes PFC pauses: an incast through it stays lossless in
    its buffer accounting and the run ends without a wedged pause."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 5},
        network={"switch": {"buffer_bytes": 400_000}, "nic": {"rto_ns": 50_000}},
        workload={"patterns": [{"kind": "incast", "dst": 0, "bytes": 300_000}]},
        faults=[{"kind": "lossy_port", "port": ["sw0", "h0"], "loss": 0.3, "until_ns": 200_000}],
    )
    result = simulate(sc)
    assert result.outcome.status == "finished"
    assert result.summary["pfc_pauses_sent"] > 0
    assert result.summary["buffer_overflows"] == 0


# ---- slow links ------------------------------------------------------------------------------------
def test_a_slow_link_gives_the_ideal_fct_at_its_rate():
    """The receiver's link at 25 Gb/s from the start: the FCT is the closed-form ideal with that
    hop (and the ACKs' first hop) at 25 Gb/s, to the picosecond; flows.csv's ideal stays the
    healthy fabric's, so the slowdown shows the fault."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 2},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": 1_000_000}]},
        faults=[{"kind": "slow_link", "link": ["sw0", "h1"], "rate_gbps": 25}],
    )
    result = simulate(sc)
    cfg = result.outcome.world.cfg
    rates = np.array([100e9, 25e9], np.int64)
    props = np.array([1_000_000, 1_000_000], np.int64)
    ideal = ideal_fct_ps(
        1_000_000,
        cfg[K.CFG_MTU],
        cfg[K.CFG_DATA_HDR],
        cfg[K.CFG_ACK_BYTES],
        cfg[K.CFG_IFG],
        rates,
        props,
        rates[::-1].copy(),
        props,
    )
    assert float(result.rows[0]["fct_ns"]) * 1000 == ideal
    assert float(result.rows[0]["slowdown"]) == pytest.approx(ideal / (float(result.rows[0]["ideal_fct_ns"]) * 1000))
    assert float(result.rows[0]["slowdown"]) > 3.5  # a quarter of the rate, less the fixed latency


def test_a_slow_link_recovers_its_rate():
    """25 Gb/s for the first 200 us, then back to 100: the FCT lies between the two ideals, and the
    run's last packets leave at line rate (the rate restored, not kept)."""
    flows = {"flows": [{"src": 0, "dst": 1, "bytes": 4_000_000}]}
    base = dict(topology={"kind": "single_switch", "hosts": 2}, workload=flows)
    slow = simulate(scenario(**base, faults=[{"kind": "slow_link", "link": ["sw0", "h1"], "rate_gbps": 25}]))
    part = simulate(
        scenario(**base, faults=[{"kind": "slow_link", "link": ["sw0", "h1"], "rate_gbps": 25, "until_ns": 200_000}])
    )
    fct = float(part.rows[0]["fct_ns"])
    assert float(part.rows[0]["ideal_fct_ns"]) < fct < float(slow.rows[0]["fct_ns"])
    assert (part.outcome.world.port["rate_bps"] == 100e9).all()


# ---- a seeded fraction of slow links (network stragglers) -----------------------------------------
def slow_fraction(seed=1, fraction=0.25, factor=2.0, workload=None, **fault):
    """A k=4 fat-tree (48 links at 100 Gb/s) with ``fraction`` of its links at 1/``factor`` rate."""
    return scenario(
        seed=seed,
        topology={"kind": "fat_tree", "k": 4},
        workload=workload or {"flows": [{"src": 0, "dst": 15, "bytes": 10_000}]},
        faults=[{"kind": "slow_link", "fraction": fraction, "factor": factor, **fault}],
    )


def chosen(sc) -> list:
    return [tuple(link["link"]) for link in simulate(sc).summary["slow_links"]]


def test_a_fraction_of_the_links_runs_at_its_rate_over_factor():
    """A quarter of the 48 links (12), each both ways at 100 / 2.5 = 40 Gb/s once the run is over;
    every other port keeps 100 Gb/s; summary.json names the links chosen."""
    res = simulate(slow_fraction(factor=2.5))
    fabric, port = res.prepared.fabric, res.outcome.world.port
    links = res.summary["slow_links"]
    assert len(links) == 12 == round(0.25 * fabric.n_links)
    assert all(link["fault"] == 0 and link["rate_gbps"] == 40 for link in links)
    slow = set()
    for link in links:
        a, b = (fabric.names.index(n) for n in link["link"])
        p = fabric.port_towards(a, b)
        slow |= {p, int(fabric.port_peer[p])}
    assert len(slow) == 24
    assert all(port["rate_bps"][p] == (40e9 if p in slow else 100e9) for p in range(len(port)))


def test_the_links_chosen_follow_the_seed_alone():
    """The same seed picks the same links whatever else the scenario draws; other seeds pick
    others; a fraction of 1 picks every link, and a tiny one picks one."""
    first = chosen(slow_fraction(seed=7))
    assert chosen(slow_fraction(seed=7, workload={"patterns": [{"kind": "permutation", "bytes": 10_000}]})) == first
    assert any(chosen(slow_fraction(seed=s)) != first for s in (8, 9))
    assert len(chosen(slow_fraction(fraction=1.0))) == 48
    assert len(chosen(slow_fraction(fraction=0.001))) == 1


def test_halving_a_tenth_of_the_links_slows_training():
    """MLFabric's motivating direction (Middleware'20): half the bandwidth on 10 % of the links
    slows data-parallel training. 16 ranks ring all-reduce 4 layers' gradients on the fat-tree;
    with 5 of its 48 links at half rate, every seed's iteration is no shorter, and on average
    longer, than the healthy fabric's."""
    layers = [
        {"name": f"l{i}", "forward_ns": 20_000, "backward_ns": 40_000, "weight_grad_bytes": 1_000_000} for i in range(4)
    ]
    training = {"training": {"layers": layers, "bucket_bytes": 0}, "iterations": 1}
    seeds = range(1, 5)
    healthy = [simulate(scenario(seed=s, topology={"kind": "fat_tree", "k": 4}, workload=training)) for s in seeds]
    slow = [simulate(slow_fraction(seed=s, fraction=0.1, workload=training)) for s in seeds]
    assert all(len(r.summary["slow_links"]) == 5 for r in slow)
    ratios = [b.summary["iteration_ns"][0] / a.summary["iteration_ns"][0] for a, b in zip(healthy, slow)]
    assert min(ratios) >= 1.0 and np.mean(ratios) > 1.05, ratios


# ---- a cut-off host: wait for the repair, or report the stall -------------------------------------
def test_host_link_down_and_up_recovers_by_timeout():
    """h1's only link is down from 50 to 250 us: no route avoids it, the sender's data is lost, and
    the retransmission timer brings the flow back after the repair."""
    sc = scenario(
        topology={"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1},
        network={"nic": {"rto_ns": 100_000}},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": 2_000_000}]},
        faults=[{"kind": "link_down", "link": ["h1", "leaf1"], "at_ns": 50_000, "until_ns": 250_000}],
    )
    result = simulate(sc)
    row = result.rows[0]
    assert result.outcome.status == "finished"
    assert row["timeouts"] >= 1
    assert float(row["finish_ns"]) > 250_000
    assert result.summary["route_updates"] == 0  # no other way round: the tables stay as they were


def test_a_host_cut_off_for_good_is_reported_as_a_stall():
    sc = leaf_spine([{"kind": "link_down", "link": ["h1", "leaf1"], "at_ns": 50_000}])
    result = simulate(sc)
    assert result.outcome.status == "stalled"
    assert "links down: h1-leaf1" in result.outcome.reason
    assert "no live path" in result.outcome.reason
    assert result.rows[0]["finish_ns"] == ""


# ---- determinism ------------------------------------------------------------------------------------
def test_faults_are_deterministic_however_sliced():
    sc = scenario(
        topology={"kind": "fat_tree", "k": 4},
        network={"cc": {"algorithm": "hpcc"}, "routing": {"convergence_ns": 5_000}},
        workload={"patterns": [{"kind": "all_to_all", "bytes": 40_000}]},
        faults=[
            {"kind": "link_down", "link": ["edge0.0", "agg0.0"], "at_ns": 10_000, "until_ns": 40_000},
            {"kind": "lossy_port", "port": ["agg1.1", "core2"], "loss": 0.05},
            {"kind": "slow_link", "link": ["h3", "edge0.1"], "rate_gbps": 40, "at_ns": 5_000},
        ],
    )
    whole = simulate(sc)
    sliced = simulate(sc, slice_events=997)
    assert whole.outcome.status == "finished"
    assert whole.rows == sliced.rows
    keep = [k for k in whole.summary if k not in ("wall_s", "engine_load_s", "events_per_s")]
    assert {k: whole.summary[k] for k in keep} == {k: sliced.summary[k] for k in keep}
    assert whole.summary["data_packets_lost_on_links"] > 0


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "faults, key, needle",
    [
        ([{"kind": "link_down", "link": ["leaf0", "spine9"]}], "faults.0.link.1", "no node of this leaf_spine"),
        ([{"kind": "link_down", "link": ["leaf0", "leaf1"]}], "faults.0.link", "no link joins leaf0 and leaf1"),
        (
            [
                {"kind": "link_down", "link": ["leaf0", "spine0"], "at_ns": 10, "until_ns": 100},
                {"kind": "link_down", "link": ["spine0", "leaf0"], "at_ns": 50},
            ],
            "faults.1",
            "overlaps faults.0",
        ),
        ([{"kind": "slow_link", "link": ["leaf0", "spine0"]}], "faults.0.rate_gbps", "required by kind 'slow_link'"),
        ([{"kind": "slow_link", "rate_gbps": 10}], "faults.0.link", "needs: link or fraction, rate_gbps or factor"),
        (
            [{"kind": "slow_link", "link": ["leaf0", "spine0"], "fraction": 0.1, "factor": 2}],
            "faults.0.fraction",
            "not allowed beside link",
        ),
        ([{"kind": "link_down", "fraction": 0.1}], "faults.0.fraction", "not used by kind 'link_down'"),
        ([{"kind": "slow_link", "fraction": 0.1, "factor": 0.5}], "faults.0.factor", "greater than or equal to 1"),
        ([{"kind": "slow_link", "fraction": 1.5, "factor": 2}], "faults.0.fraction", "1.5 is not allowed"),
        ([{"kind": "link_down", "link": ["leaf0", "spine0"], "loss": 0.1}], "faults.0.loss", "not used by kind"),
        ([{"kind": "lossy_port", "port": ["leaf0", "spine0"], "loss": 1.5}], "faults.0.loss", "1.5 is not allowed"),
        (
            [{"kind": "link_down", "link": ["leaf0", "spine0"], "at_ns": 10, "until_ns": 5}],
            "faults.0.until_ns",
            "must be after at_ns",
        ),
        ([{"kind": "melt", "link": ["leaf0", "spine0"]}], "faults.0.kind", "link_down"),
    ],
)
def test_bad_faults_are_one_line_naming_the_key(tmp_path, faults, key, needle):
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "topology": {"kind": "leaf_spine"},
                "faults": faults,
                "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 1000}]},
            }
        )
    )
    with pytest.raises(ScenarioError) as err:
        prepare(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}: "), text
    assert needle in text, text


# ---- random fault schedules keep every invariant ---------------------------------------------------
FABRIC = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
LINKS = [
    ["h0", "leaf0"],
    ["h3", "leaf1"],
    ["leaf0", "spine0"],
    ["leaf0", "spine1"],
    ["leaf1", "spine0"],
    ["leaf1", "spine1"],
]
FAULT = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["link_down", "slow_link", "lossy_port"]),
        "nodes": st.sampled_from(LINKS).flatmap(lambda pair: st.sampled_from([pair, pair[::-1]])),
        "at_ns": st.integers(0, 60_000),
        "length_ns": st.integers(1, 80_000),
        "rate_gbps": st.sampled_from([1, 10, 40]),
        "loss": st.sampled_from([0.01, 0.2, 1.0]),
    }
)


def _fault_doc(f):
    doc = {"kind": f["kind"], "at_ns": f["at_ns"], "until_ns": f["at_ns"] + f["length_ns"]}
    if f["kind"] == "lossy_port":
        return {**doc, "port": f["nodes"], "loss": f["loss"]}
    doc["link"] = f["nodes"]
    return {**doc, "rate_gbps": f["rate_gbps"]} if f["kind"] == "slow_link" else doc


@pytest.mark.extensive
@settings(
    max_examples=int(os.environ.get("FAULT_EXAMPLES", 400)),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
@given(
    faults=st.lists(FAULT, max_size=4),
    cc=st.sampled_from(["none", "dcqcn", "hpcc", "dctcp"]),
    convergence_ns=st.sampled_from([0, 3_000, 30_000]),
)
def test_random_fault_schedules_end_with_every_flow_done(faults, cc, convergence_ns):
    """Whatever faults come and go (overlapping ones are refused), every invariant holds at every
    slice (--check), packets are conserved, and once every fault has ended every flow finishes:
    no pause, route or timer is left wedged."""
    docs = [_fault_doc(f) for f in faults]
    sc_doc = dict(
        topology=FABRIC,
        network={"cc": {"algorithm": cc}, "routing": {"convergence_ns": convergence_ns}, "nic": {"rto_ns": 50_000}},
        workload={"patterns": [{"kind": "all_to_all", "bytes": 300_000}]},
        faults=docs,
    )
    try:
        prepared = prepare_scenario(scenario(**sc_doc))
    except ScenarioError as err:
        assert "overlaps" in str(err)
        return
    result = run(prepared, write=False, progress=False, slice_events=5_000, check=True)
    assert result.outcome.status == "finished", result.outcome.reason
    assert_conservation(result.outcome.world)
    for row in result.rows:
        assert float(row["fct_ns"]) >= float(row["ideal_fct_ns"])
    event("packets lost" if result.summary["data_packets_lost_on_links"] else "no packet lost")
    event("rerouted" if result.summary["route_updates"] else "routes unchanged")


def test_a_fault_due_after_the_work_does_not_make_the_run_incomplete():
    """The flows end long before the fault (and the fault after sim.max_time_ns): finished."""
    sc = leaf_spine([{"kind": "link_down", "link": ["leaf0", "spine0"], "at_ns": 5e9}], size=10_000)
    result = simulate(sc)
    assert result.outcome.status == "finished" and result.summary["flows_finished"] == 1


def test_a_wall_clock_limit_before_the_first_slice_is_incomplete():
    sc = leaf_spine([], sim={"max_wall_s": 1e-9})
    result = simulate(sc)
    assert result.outcome.status == "incomplete"
    assert "sim.max_wall_s" in result.outcome.reason
