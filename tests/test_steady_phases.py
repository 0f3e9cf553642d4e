"""benchmarks/steady_phases.py: the bounds it measures on cases whose answer is known, and the
exact run it measures is the engine's own however it is sliced."""

import importlib.util
from pathlib import Path

import numpy as np

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.core.kinds import C_EVENTS

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("steady_phases", ROOT / "benchmarks" / "steady_phases.py")
assert _spec is not None and _spec.loader is not None
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4, "link": {"rate_gbps": 200}}
LONE = {"topology": LEAF_SPINE, "workload": {"flows": [{"src": 0, "dst": 5, "bytes": 4_000_000}]}}
RING = {
    "topology": LEAF_SPINE,
    "workload": {"collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": 800_000}]},
}


def test_slicing_by_time_gives_the_engines_own_run():
    whole = simulate(scenario(**RING)).outcome.world
    ph = S.run_sliced(prepare_scenario(scenario(**RING)), 500_000)
    assert ph.status == "finished"
    assert np.array_equal(ph.finish_ps, whole.flow["finish_ps"])
    assert int(ph.events.sum()) == int(whole.stats[C_EVENTS])


def test_a_lone_long_flow_is_steady_but_for_its_start_and_end():
    """4,000 packets at 200 Gb/s (about 180 us): every 1 us slice away from the flow's two ends
    delivers the same 23 or 24 packets, so nearly all events are skippable by every measure, and
    per flow the share is (duration - 2 X) / duration by construction."""
    ph = S.run_sliced(prepare_scenario(scenario(**LONE)), 1_000_000)
    b = S.bounds(ph)
    duration = int(ph.finish_ps[0] - ph.start_ps[0])
    for x in S.MARGINS_US:
        assert abs(b[f"per flow X={x}"] - (duration - 2 * x * 10**6) / duration) < 1e-9
        # the slices within X of either end hold about 2 (X + 1) of the flow's duration in us
        assert b[f"global X={x}"] > 1 - (2 * (x + 2) * 1e6) / duration
        assert b[f"global, rates steady X={x} W=2 TOL=1"] > b[f"global X={x}"] - 0.05
        assert b[f"global, rates steady X={x} W=2 TOL=0"] < b[f"global, rates steady X={x} W=2 TOL=1"]
        # alone, the flow's own steady packets are the network's steady events, within the ends' slices
        assert abs(b[f"per flow, rate steady X={x} W=2 TOL=1"] - b[f"global, rates steady X={x} W=2 TOL=1"]) < 0.05


def test_a_ring_of_short_steps_has_no_global_steady_phase():
    """Eight ranks, 14 steps of 100 KB (about 5 us each): some flow starts or ends every few hundred ns."""
    ph = S.run_sliced(prepare_scenario(scenario(**RING)), 1_000_000)
    b = S.bounds(ph)
    d = S.drift(ph)
    assert d["steps"] == 14
    assert b["global X=2"] < 0.05
    assert b["per flow X=2"] > b["global X=2"]  # each flow has a middle; the ring as a whole has none
    assert S.speed_up(b["global X=2"]) < 1.06
