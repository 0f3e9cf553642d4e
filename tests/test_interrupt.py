"""Interrupted runs leave no partial results: SIGINT and SIGTERM on a real process; run limits."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import scenario, simulate

pytestmark = pytest.mark.extensive

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_signal_during_a_run_writes_nothing(tmp_path, sig, code, word):
    out = tmp_path / "run"
    # a run of several seconds: the all-to-all with 20 MB per pair
    # the child starts with the default SIGINT action even when the suite itself ignores SIGINT
    # (a shell without job control starts background jobs so, and children inherit it)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roce_emu",
            "run",
            "scenarios/fat_tree_all_to_all.yaml",
            "--set",
            "workload.patterns.0.bytes=20000000",
            "--out",
            str(out),
            "--no-progress",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(4.0)  # past start-up (loading the compiled engine), into the simulation
    assert proc.poll() is None, "the run ended before the signal"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == code, stderr
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary directory left behind"


def test_event_limit_stops_deterministically():
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 3},
        workload={"flows": [{"src": 1, "dst": 0, "bytes": 10**7}, {"src": 2, "dst": 0, "bytes": 10**7}]},
        sim={"max_events": 30_000},
    )
    a, b = simulate(sc), simulate(sc, slice_events=777)
    for res in (a, b):
        assert res.outcome.status == "incomplete"
        assert res.summary["events"] == 30_000
        assert "sim.max_events (30000) reached with 2 of 2 flows unfinished" in res.summary["reason"]
    assert a.rows == b.rows


def test_wall_clock_limit_stops_a_runaway():
    """The largest flow the schema allows (2^50 B) would run for days; the wall-clock limit ends
    it after the first slice past 0.2 s, with status incomplete and the reason."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 2},
        workload={"flows": [{"src": 1, "dst": 0, "bytes": 2**50}]},
        sim={"max_wall_s": 0.2, "max_time_ns": 1e15, "slice_events": 100_000},
    )
    began = time.perf_counter()
    res = simulate(sc)
    assert time.perf_counter() - began < 30
    assert res.outcome.status == "incomplete"
    assert "sim.max_wall_s (0.2 s) reached" in res.summary["reason"]


def test_a_fabric_too_big_for_memory_is_refused_up_front(tmp_path):
    """A 1024 x 1024 torus needs ~1e6 x 1e6 routing rows: refused before anything is built."""
    from roce_emu.api import prepare
    from roce_emu.errors import ScenarioError

    path = tmp_path / "big.yaml"
    path.write_text("topology: {kind: torus, dims: [1024, 1024]}\nworkload: {flows: [{src: 0, dst: 1, bytes: 1}]}\n")
    began = time.perf_counter()
    with pytest.raises(ScenarioError) as err:
        prepare(path)
    assert time.perf_counter() - began < 5
    assert "topology.dims: needs about" in str(err.value) and "GB is " in str(err.value)


def test_sizes_agree_with_the_built_fabrics():
    from roce_emu.config.schema import Scenario
    from roce_emu.fabric.topology import build_fabric, fabric_size

    for topo in (
        {"kind": "fat_tree", "k": 4, "oversubscription": 2},
        {"kind": "torus", "dims": [3, 4]},
        {"kind": "mesh", "dims": [2, 3], "hosts_per_node": 2},
        {"kind": "leaf_spine"},
        {"kind": "single_switch", "hosts": 5},
        {"kind": "multi_dim", "dims": [{"size": 3}, {"size": 2, "kind": "switch"}]},
    ):
        t = Scenario.model_validate({"topology": topo}).topology
        fabric = build_fabric(t)
        assert fabric_size(t) == (fabric.n_hosts, fabric.n_nodes), topo
