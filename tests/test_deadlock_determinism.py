"""A cyclic pause dependency is reported as a deadlock; results never depend on slicing."""

from pathlib import Path

import numpy as np
import pytest

from conftest import assert_conservation, scenario, simulate
from roce_emu.api import run_scenario
from roce_emu.config import load_scenario
from roce_emu.core import kinds as K
from roce_emu.core.trace import rows_per_sample

pytestmark = pytest.mark.quick

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def test_ring_deadlock_is_reported_not_hung():
    res = simulate(load_scenario(SCENARIOS / "torus_ring_deadlock.yaml"))
    assert res.outcome.status == "deadlock"
    reason = res.outcome.reason
    assert "pause cycle" in reason and "r0 -> r1" in reason
    assert "stuck flows (8)" in reason
    assert res.summary["flows_finished"] == 0


def test_line_of_routers_under_the_same_load_does_not_deadlock():
    # without the wrap-around link there is no cyclic buffer dependency: PFC fires, no deadlock
    line = scenario(
        topology={"kind": "mesh", "dims": [1, 8]},
        network={"switch": {"buffer_bytes": 400000}},
        workload={"flows": [{"src": i, "dst": i + 3, "bytes": 2_000_000} for i in range(5)]},
    )
    res = simulate(line)
    assert res.outcome.status == "finished"
    assert res.summary["pfc_pauses_sent"] > 0


@pytest.mark.parametrize("name", ["incast", "fat_tree_permutation"])
def test_flows_csv_identical_whatever_the_slice(tmp_path, name):
    outs = []
    for i, slice_events in enumerate([997, 1 << 20]):
        out = tmp_path / f"run{i}"
        result = run_scenario(SCENARIOS / f"{name}.yaml", out=out, slice_events=slice_events)
        assert_conservation(result.outcome.world)
        outs.append((out / "flows.csv").read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("name", ["incast", "cc_hpcc", "cc_dcqcn"])
def test_pool_growth_and_trace_flushes_change_nothing(tmp_path, monkeypatch, name):
    """A world started with a 256-packet pool (and a trace buffer of three samples) grows and
    flushes while running, and gives the same files."""
    import roce_emu.api as api_mod

    run_scenario(SCENARIOS / f"{name}.yaml", out=tmp_path / "base")
    build = api_mod.build_world
    monkeypatch.setattr(api_mod, "build_world", lambda *args: _shrink(build(*args)))
    result = run_scenario(SCENARIOS / f"{name}.yaml", out=tmp_path / "small")
    assert_conservation(result.outcome.world)
    assert len(result.outcome.world.pkt) > 256
    for produced in (tmp_path / "base").iterdir():
        if produced.suffix == ".csv":
            assert (tmp_path / "small" / produced.name).read_bytes() == produced.read_bytes(), produced.name


def _shrink(w):
    """The same world with a 256-packet pool (nothing is allocated before the run) and room
    for three trace samples."""
    cap = 256
    w.meta[K.M_FREE] = cap
    trace_rows = 3 * rows_per_sample(w) if len(w.trace) else 0
    return w._replace(
        pkt=w.pkt[:cap].copy(),
        pkt_free=np.arange(cap - 1, -1, -1, dtype=np.int32),
        int_rec=w.int_rec[:cap].copy(),
        trace=np.zeros((trace_rows, K.TR_COLS), np.int64),
    )
