"""Exact single-flow FCT against the closed form, to the picosecond."""

import pytest

from conftest import scenario, simulate
from roce_emu.core.paths import ser_ps

pytestmark = [pytest.mark.quick, pytest.mark.nojit]


def closed_form_fct_ps(size, links, rate_bps, prop_ps, mtu=1000, hdr=62, ack=66, ifg=20):
    """Equal-rate path of `links` links: back-to-back packets, store-and-forward per hop.

    The last (smaller or equal) packet leaves hop 1 at (n-1)s + s_last, then queues behind
    packet n-2 at every later hop, so it reaches the receiver at (n+K-2)s + s_last + K*p;
    its ACK then crosses K hops unimpeded."""
    n = -(-size // mtu)
    s = ser_ps(mtu + hdr + ifg, rate_bps)
    s_last = ser_ps(size - (n - 1) * mtu + hdr + ifg, rate_bps)
    a = ser_ps(ack + ifg, rate_bps)
    data = (n + links - 2) * s + s_last + links * prop_ps if n > 1 or links == 1 else links * (s_last + prop_ps)
    return data + links * (a + prop_ps)


@pytest.mark.parametrize("size", [1000, 1_000_000, 1_234_567])
def test_single_switch_fct_exact(size):
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 2},
            workload={"flows": [{"src": 0, "dst": 1, "bytes": size, "start_ns": 3}]},
        )
    )
    row = res.rows[0]
    expected = closed_form_fct_ps(size, 2, 100 * 10**9, 1_000_000)
    assert int(round(float(row["fct_ns"]) * 1000)) == expected
    assert row["ideal_fct_ns"] == row["fct_ns"]
    assert row["retransmits"] == 0


def test_three_switch_path_fct_exact():
    # leaf-spine, hosts on different leaves: host-leaf-spine-leaf-host, 4 links, 3 switches
    res = simulate(
        scenario(
            topology={
                "kind": "leaf_spine",
                "leaves": 2,
                "spines": 2,
                "hosts_per_leaf": 2,
                "link": {"rate_gbps": 100, "delay_ns": 800},
            },
            workload={"flows": [{"src": 0, "dst": 3, "bytes": 777_777}]},
        )
    )
    row = res.rows[0]
    assert row["hops"] == 4
    expected = closed_form_fct_ps(777_777, 4, 100 * 10**9, 800_000)
    assert int(round(float(row["fct_ns"]) * 1000)) == expected


def test_mixed_rates_match_ideal():
    # fat-tree with 400G fabric tiers: the engine equals the ideal closed form exactly
    res = simulate(
        scenario(
            topology={
                "kind": "fat_tree",
                "k": 4,
                "tiers": {"edge_agg": {"rate_gbps": 400}, "agg_core": {"rate_gbps": 400}},
            },
            workload={"flows": [{"src": 0, "dst": 15, "bytes": 333_333}]},
        )
    )
    row = res.rows[0]
    assert row["hops"] == 6
    assert row["fct_ns"] == row["ideal_fct_ns"]
    assert float(row["slowdown"]) == 1.0


def test_bulk_ideal_fcts_equal_one_by_one():
    """results.tables computes every flow's ideal FCT in one pass, once per distinct (size,
    stored hops) (core/ideal.py): on a fat-tree with mixed rates and repeated sizes, each value
    equals ideal_fct_ps computed for that flow alone from its own paths."""
    import numpy as np

    from roce_emu.api import prepare_scenario
    from roce_emu.core import kinds as K
    from roce_emu.core.ideal import _stored_hops, ideal_fct_ps
    from roce_emu.results.tables import flow_paths, flow_table

    rng = np.random.default_rng(3)
    flows = [
        {"src": int(s), "dst": int(d), "bytes": int(b)}
        for s, d, b in zip(rng.integers(0, 16, 120), rng.integers(0, 16, 120), rng.choice([999, 4000, 64_123], 120))
        if s != d
    ]
    sc = scenario(
        topology={
            "kind": "fat_tree",
            "k": 4,
            "link": {"rate_gbps": 100, "delay_ns": 1000},
            "tiers": {"agg_core": {"rate_gbps": 40, "delay_ns": 300}},
        },
        workload={"flows": flows},
    )
    w = prepare_scenario(sc).world
    table = flow_table(w)
    port = w.port
    cfg = w.cfg
    distinct = set()
    for f in range(len(w.flow)):
        fwd, rev = flow_paths(w, f)
        f_rate, f_prop = _stored_hops(fwd, port["nominal_bps"], port["prop_ps"], port["peer_port"], port["pass_to"])
        r_rate, r_prop = _stored_hops(rev, port["nominal_bps"], port["prop_ps"], port["peer_port"], port["pass_to"])
        size = int(w.flow[f]["size_bytes"])
        want = ideal_fct_ps(
            size,
            cfg[K.CFG_MTU],
            cfg[K.CFG_DATA_HDR],
            cfg[K.CFG_ACK_BYTES],
            cfg[K.CFG_IFG],
            f_rate,
            f_prop,
            r_rate,
            r_prop,
        )
        assert table["ideal_ps"][f] == want, f
        assert table["hops"][f] == len(fwd)
        distinct.add((size, tuple(f_rate), tuple(f_prop), tuple(r_rate), tuple(r_prop)))
    assert 3 < len(distinct) < len(w.flow)  # values were reused, and not all the same
