"""links.csv and summary.json hottest_links: the wire bytes each direction of each link sent,
per priority, add up to what was sent over it."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import FAST_FORWARD_MODES
from roce_emu.core import kinds as K
from roce_emu.results.links import LINK_COLUMNS, link_ids


def _single_flow(nbytes, **sections):
    return scenario(
        topology={"kind": "single_switch", "hosts": 2, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": nbytes}]},
        **sections,
    )


def _run(tmp_path, sc, name="run"):
    res = run(prepare_scenario(sc), out=tmp_path / name, progress=False)
    return res, pd.read_csv(tmp_path / name / "links.csv"), json.loads((tmp_path / name / "summary.json").read_text())


def test_a_single_flows_link_bytes_are_its_packets_wire_bytes_on_every_hop(tmp_path):
    res, links, summary = _run(tmp_path, _single_flow(1_000_000, network={"cc": {"algorithm": "none"}}))
    w = res.outcome.world
    cfg = w.cfg
    mtu, hdr, ifg = int(cfg[K.CFG_MTU]), int(cfg[K.CFG_DATA_HDR]), int(cfg[K.CFG_IFG])
    full, rest = divmod(1_000_000, mtu)
    data_wire = full * (mtu + hdr + ifg) + (rest + hdr + ifg if rest else 0)
    assert summary["retransmits"] == 0 and summary["pfc_pauses_sent"] == 0 and summary["cnps_sent"] == 0
    ack_wire = summary["acks_sent"] * (int(cfg[K.CFG_ACK_BYTES]) + ifg)
    assert list(links.columns) == list(LINK_COLUMNS)
    prio = int(w.flow[0]["prio"])
    sent = links.groupby(["node_from", "node_to", "priority"])["wire_bytes"].sum().to_dict()
    # the data crosses h0 -> switch -> h1; the ACKs come back, on the control priority
    for hop in (("h0", "sw0"), ("sw0", "h1")):
        assert sent[(*hop, prio)] == data_wire
        assert sent.get((*hop, 0), 0) == 0
    for hop in (("h1", "sw0"), ("sw0", "h0")):
        assert sent[(*hop, 0)] == ack_wire
        assert sent.get((*hop, prio), 0) == 0
    assert set(links["priority"]) == {0, prio}
    # busy time is the bytes at the link rate; utilization that over the run
    row = links[(links.node_from == "h0") & (links.priority == prio)].iloc[0]
    assert row["busy_ns"] == pytest.approx(data_wire * 8 / 100, abs=1e-3)
    assert row["utilization"] == pytest.approx(row["busy_ns"] / summary["last_finish_ns"])  # the workload's end
    assert row["tier"] == "host" and row["rate_gbps"] == 100


def test_a_long_flows_link_is_near_fully_used_and_leads_the_hottest_links(tmp_path):
    res, links, summary = _run(tmp_path, _single_flow(20_000_000))
    cfg = res.outcome.world.cfg
    per_direction = links.groupby(["node_from", "node_to"])["utilization"].sum()
    assert 0.98 < per_direction[("h0", "sw0")] <= 1.0
    assert 0.98 < per_direction[("sw0", "h1")] <= 1.0
    # back: ACKs only, one per data packet (all full)
    ack, data = cfg[K.CFG_ACK_BYTES] + cfg[K.CFG_IFG], cfg[K.CFG_MTU] + cfg[K.CFG_DATA_HDR] + cfg[K.CFG_IFG]
    assert per_direction[("h1", "sw0")] == pytest.approx(per_direction[("h0", "sw0")] * ack / data)
    hot = summary["hottest_links"]
    assert len(hot) == 4  # every direction sent something; at most HOTTEST are listed
    assert {(h["from"], h["to"]) for h in hot[:2]} == {("h0", "sw0"), ("sw0", "h1")}
    assert hot[0]["utilization"] == pytest.approx(per_direction.max(), abs=1e-6)
    assert [h["utilization"] for h in hot] == sorted((h["utilization"] for h in hot), reverse=True)


@pytest.mark.parametrize("fast_forward", FAST_FORWARD_MODES)
def test_priorities_add_up_to_each_ports_total_with_pfc_frames_counted(tmp_path, fast_forward):
    """An incast with PFC: the PAUSE frames are wire bytes of the control priority, and every
    port's bytes over the priorities are its total (trains cut short, fast-forward jumps)."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 5},
        network={"switch": {"buffer_bytes": 600_000, "pfc": {"enabled": True}}, "cc": {"algorithm": "none"}},
        workload={"flows": [{"src": s, "dst": 0, "bytes": 1_000_000} for s in range(1, 5)]},
        sim={"fast_forward": fast_forward},
    )
    res, links, summary = _run(tmp_path, sc)
    w = res.outcome.world
    assert np.array_equal(w.pq["tx_bytes"].sum(axis=1), w.port["tx_bytes"])
    assert summary["pfc_pauses_sent"] > 0
    fabric = res.prepared.fabric
    ids = link_ids(fabric)
    for p in range(len(ids)):
        mine = links[(links.link == ids[p]) & (links.node_from == fabric.names[fabric.port_node[p]])]
        assert mine["wire_bytes"].sum() == w.port["tx_bytes"][p]
    pfc_wire = int(w.cfg[K.CFG_PFC_BYTES]) + int(w.cfg[K.CFG_IFG])
    switch_ports = w.port["at_host"] == 0
    paused = w.port["pauses_sent"][switch_ports] > 0
    assert (w.pq["tx_bytes"][switch_ports][paused, 0] >= w.port["pauses_sent"][switch_ports][paused] * pfc_wire).all()


def test_links_are_numbered_as_topo_lists_them():
    from roce_emu.fabric.summary import link_rows
    from roce_emu.fabric.topology import build_fabric

    fabric = build_fabric(scenario(topology={"kind": "fat_tree", "k": 4}).topology)
    listed = [row.split(",")[:2] for row in link_rows(fabric)[1:]]
    ids = link_ids(fabric)
    assert sorted(np.bincount(ids).tolist()) == [2] * len(listed)  # two directions per link
    for p, link in enumerate(ids.tolist()):
        ends = sorted((fabric.names[fabric.port_node[p]], fabric.names[fabric.port_node[fabric.port_peer[p]]]))
        assert ends == sorted(listed[link])


def test_parquet_runs_write_links_parquet(tmp_path):
    sc = _single_flow(100_000, output={"format": "parquet"})
    res = run(prepare_scenario(sc), out=tmp_path / "pq", progress=False)
    links = pd.read_parquet(tmp_path / "pq" / "links.parquet")
    assert list(links.columns) == list(LINK_COLUMNS)
    assert links["wire_bytes"].sum() == res.outcome.world.port["tx_bytes"].sum()
    assert pd.api.types.is_numeric_dtype(links["utilization"])


def test_exact_fast_forward_jumps_give_the_same_link_bytes():
    """The exact fast-forward extrapolates the per-priority counters over its jumps: a long
    ring all-reduce, which jumps, counts the same bytes per port and priority as without."""
    topology = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4}
    worlds = []
    for mode in ("off", "exact"):
        sc = scenario(
            topology=topology,
            network={"cc": {"algorithm": "none"}},
            workload={"collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": 16_000_000}]},
            sim={"fast_forward": mode},
        )
        worlds.append(simulate(sc).outcome.world)
    off, exact = worlds
    assert exact.stats[K.C_FF_JUMPS] > 0
    assert np.array_equal(off.pq["tx_bytes"], exact.pq["tx_bytes"])
    assert np.array_equal(exact.pq["tx_bytes"].sum(axis=1), exact.port["tx_bytes"])
