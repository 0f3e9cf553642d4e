"""Sweeps: points and results.csv, resuming after a kill, dask, bad grids."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import cli
from roce_emu.sweep import SweepSpec, parse_grid, points, run_sweep, sweep_spec

pytestmark = pytest.mark.extensive

ROOT = Path(__file__).resolve().parent.parent
SMALL = """name: small
topology: {kind: single_switch, hosts: 3}
workload:
  flows:
    - {src: 1, dst: 0, bytes: 200000}
    - {src: 2, dst: 0, bytes: 200000}
"""
GRID = ["network.cc.algorithm=none,dcqcn", "workload.flows.0.bytes=100000,300000"]


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def test_two_by_two_sweep_gives_four_points_and_tidy_results(small, tmp_path):
    out = tmp_path / "sweep"
    ran, total, csv_path = run_sweep(SweepSpec(small, parse_grid(GRID)), out, jobs=2, progress=False)
    assert (ran, total) == (4, 4)
    df = pd.read_csv(csv_path)
    assert len(df) == 4
    assert list(df.columns[:3]) == ["point", "network.cc.algorithm", "workload.flows.0.bytes"]
    for column in ("status", "last_finish_ns", "pfc_pauses_sent", "ecn_marks", "events"):
        assert column in df.columns
    assert sorted(zip(df["network.cc.algorithm"], df["workload.flows.0.bytes"])) == [
        ("dcqcn", 100000),
        ("dcqcn", 300000),
        ("none", 100000),
        ("none", 300000),
    ]
    assert (df["status"] == "finished").all()
    assert len(list((out / "points").iterdir())) == 4
    record = json.loads((out / "sweep.json").read_text())  # what the sweep is, and what ran it
    assert record["grid"] == {"network.cc.algorithm": ["none", "dcqcn"], "workload.flows.0.bytes": [100000, 300000]}
    assert record["points"] == 4 and record["scenario"] == str(small)
    assert record["provenance"]["engine_hash"] and record["provenance"]["numba"]
    # running it again does nothing and gives the same table
    before = csv_path.read_bytes()
    assert run_sweep(SweepSpec(small, parse_grid(GRID)), out, progress=False)[0] == 0
    assert csv_path.read_bytes() == before


def test_repeat_adds_seeds_and_hashes_follow_the_resolved_scenario(small):
    pts = points(SweepSpec(small, parse_grid(["topology.hosts=3,4"]), repeat=2))
    assert [dict(p.values)["seed"] for p in pts] == [1, 2, 1, 2]
    assert len({p.digest for p in pts}) == 4
    same = points(SweepSpec(small, parse_grid(["topology.hosts=3"])))
    assert same[0].digest == pts[0].digest, "seed 1 is the scenario's own seed: the same point"


def test_failed_point_is_recorded_and_the_sweep_goes_on(small, tmp_path):
    grid = parse_grid(["network.switch.buffer_bytes=10000,33554432"])  # the first cannot hold the headroom
    ran, total, csv_path = run_sweep(SweepSpec(small, grid), tmp_path / "s", progress=False)
    df = pd.read_csv(csv_path)
    assert sorted(df["status"]) == ["error", "finished"]
    assert "network.switch.buffer_bytes" in df.loc[df["status"] == "error", "reason"].iloc[0]


@pytest.mark.parametrize(
    "grid, needle",
    [
        (["network.cc.algoritm=none,dcqcn"], "network.cc.algoritm"),
        (["network.cc.algorithm=none,warp"], "network.cc.algorithm"),
        (["topology.hosts=3,"], "topology.hosts"),
        (["topology.hosts"], "KEY=v1,v2"),
    ],
)
def test_bad_grid_is_one_line_exit_2(small, tmp_path, grid, needle):
    args = [a for g in grid for a in ("--grid", g)]
    p = cli("sweep", small, *args, "--out", tmp_path / "s", timeout=300)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "s" / "results.csv").exists()


def test_an_unreachable_dask_scheduler_is_one_line_and_writes_nothing(small, tmp_path):
    """Nothing listens on loopback port 1: one line naming --scheduler, exit 2, no sweep folder."""
    p = cli(
        "sweep",
        small,
        "--grid",
        "network.cc.algorithm=none,dcqcn",
        "--scheduler",
        "tcp://127.0.0.1:1",
        "--out",
        tmp_path / "s",
        timeout=300,
    )
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and "--scheduler" in lines[0] and "127.0.0.1:1" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "s").exists()


def test_killed_sweep_resumes_without_redoing_finished_points(small, tmp_path):
    """Points of ~1 s each (so the kill lands while the sweep is running), --jobs 1, SIGKILL to
    the whole process group as soon as the first point is done."""
    out = tmp_path / "s"
    grid = ["network.cc.algorithm=none,dcqcn", "workload.flows.0.bytes=150000000,200000000"]
    cmd = [
        sys.executable,
        "-m",
        "roce_emu",
        "sweep",
        str(small),
        *[a for g in grid for a in ("--grid", g)],
        "--jobs",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        done = [d for d in (out / "points").glob("*") if (d / "point.json").is_file()] if out.exists() else []
        if done:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert done, "no point finished before the kill"
    # count again after the kill: another point may have finished meanwhile
    done = [d for d in (out / "points").glob("*") if (d / "point.json").is_file()]
    first = {d.name: json.loads((d / "point.json").read_text())["started"] for d in done}
    assert len(first) < 4, "the sweep finished before it could be killed"
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"{4 - len(first)} points run, {len(first)} already done" in p.stderr
    for name, started in first.items():
        assert json.loads((out / "points" / name / "point.json").read_text())["started"] == started
    assert len(pd.read_csv(out / "results.csv")) == 4
    assert not list((out / "points").glob(".*")), "half-written point directories left behind"


def test_dask_local_cluster_gives_the_same_results(small, tmp_path):
    distributed = pytest.importorskip("distributed")
    local = run_sweep(SweepSpec(small, parse_grid(GRID)), tmp_path / "local", jobs=2, progress=False)[2]
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        remote = run_sweep(
            SweepSpec(small, parse_grid(GRID)), tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False
        )[2]
    a, b = pd.read_csv(local), pd.read_csv(remote)
    timing = [c for c in a.columns if c in ("wall_s", "engine_load_s", "events_per_s")]
    pd.testing.assert_frame_equal(a.drop(columns=timing), b.drop(columns=timing))


def test_sweep_file_with_fixed_overrides(small, tmp_path):
    from roce_emu.sweep import load_sweep_file

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "scenario: small.yaml\nset: [workload.flows.1.bytes=50000]\n"
        "grid:\n  topology: [{kind: single_switch, hosts: 3}, {kind: single_switch, hosts: 4}]\n"
    )
    ran, total, csv_path = run_sweep(load_sweep_file(sweep), tmp_path / "s", progress=False)
    df = pd.read_csv(csv_path)
    assert (ran, total) == (2, 2) and list(df["hosts"]) == [3, 4]
    flows = pd.read_csv(tmp_path / "s" / "points" / df["point"][0] / "flows.csv")
    assert list(flows["bytes"]) == [200000, 50000], "the fixed override reaches every point"


def test_a_swept_topology_keeps_its_columns_and_its_own_bars(tmp_path):
    """A k=4 and a k=6 fat-tree, which both read 'fat_tree' in the summary: results.csv
    keeps the swept mapping as topology.kind / topology.k, and the policy figure draws two fabric
    groups, not one average of both."""
    from roce_emu.results.figures import policy_time_figure

    path = tmp_path / "ft.yaml"
    path.write_text("name: ft\nworkload: {flows: [{src: 0, dst: 1, bytes: 50000}, {src: 2, dst: 1, bytes: 50000}]}\n")
    grid = {
        "network.cc.algorithm": ["none", "dcqcn"],
        "topology": [{"kind": "fat_tree", "k": 4}, {"kind": "fat_tree", "k": 6}],
    }
    run_sweep(SweepSpec(path, grid), tmp_path / "sw", progress=False)
    df = pd.read_csv(tmp_path / "sw" / "results.csv")
    assert list(df.columns[1:4]) == ["network.cc.algorithm", "topology.kind", "topology.k"]
    assert sorted(df["topology.k"]) == [4, 4, 6, 6] and set(df["topology"]) == {"fat_tree"}
    assert set(zip(df["topology.k"], df["hosts"])) == {(4, 16), (6, 54)}  # each row is its own fabric
    fig = policy_time_figure(tmp_path / "sw")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    # each tick names its fabric, then PFC only's time on it
    assert [t.split("\n")[0] for t in ticks] == ["k=4", "k=6"] and all("PFC only" in t for t in ticks), ticks
    assert fig.axes[0].get_xlabel() == "fat_tree (swept topology.k)"


def _sweep_cmd(small, out, *extra):
    """A sweep of six points of about a second each (so a signal lands while it runs)."""
    grid = ["network.cc.algorithm=none,dcqcn,dctcp", "workload.flows.0.bytes=150000000,200000000"]
    return [
        sys.executable,
        "-m",
        "roce_emu",
        "sweep",
        str(small),
        *[a for g in grid for a in ("--grid", g)],
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def _finished(out: Path) -> dict:
    done = [d for d in (out / "points").glob("*") if (d / "point.json").is_file()]
    return {d.name: json.loads((d / "point.json").read_text()) for d in done}


def _interrupt_after_first_point(cmd, sig, group: bool):
    """Start the sweep in its own process group, send ``sig`` once a point has finished (to the
    whole group, as Ctrl-C in a terminal does, or to the sweep process alone, as `kill` does);
    (process, seconds from the signal to the exit, the time of the signal, points finished
    then, stderr)."""
    out = Path(cmd[cmd.index("--out") + 1])
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and _finished(out)):
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep ended before the signal"
    sent, done = time.time(), len(_finished(out))
    (os.killpg if group else os.kill)(proc.pid, sig)
    try:
        _, stderr = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the sweep did not exit within 20 s of the signal")
    return proc, time.time() - sent, sent, done, stderr


def _group_alive(pgid: int, grace_s: float = 3.0) -> bool:
    """Whether a process of the group still runs after grace_s (helpers such as
    multiprocessing's resource tracker exit a moment after their parent)."""
    deadline = time.time() + grace_s
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


def _assert_stopped_cleanly(proc, took, sent, done, stderr, code, out, jobs):
    assert proc.returncode == code, stderr
    assert took < 10, took
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "finished points are kept" in lines[0] and "Traceback" not in stderr, stderr
    assert not _group_alive(proc.pid), (
        "a worker process outlived the sweep: "
        + subprocess.run(["ps", "-o", "pid,stat,args", "-g", str(proc.pid)], capture_output=True, text=True).stdout
    )
    finished = _finished(out)
    assert done <= len(finished) <= done + jobs < 6, "only the points running at the signal may finish"
    assert all(p["started"] < sent + 0.5 for p in finished.values()), "a point was started after the signal"
    assert not list((out / "points").glob(".*")), "half-written point directories left behind"
    assert {d.name for d in (out / "points").iterdir()} == set(finished), "an unfinished point directory is left"
    assert len(pd.read_csv(out / "results.csv")) == len(finished)  # the finished points, ready to plot


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["jobs1", "jobs2"])
@pytest.mark.parametrize(
    "sig, code, group", [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)], ids=["ctrl-c", "kill"]
)
def test_a_signal_stops_a_local_sweep_and_keeps_its_finished_points(small, tmp_path, jobs, sig, code, group):
    out = tmp_path / "s"
    proc, took, sent, done, stderr = _interrupt_after_first_point(_sweep_cmd(small, out, "--jobs", jobs), sig, group)
    _assert_stopped_cleanly(proc, took, sent, done, stderr, code, out, int(jobs))
    rerun = subprocess.run(_sweep_cmd(small, out, "--jobs", "2"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and f"already done -> {out}" in rerun.stderr, rerun.stderr


def test_a_signal_stops_a_dask_sweep_and_starts_no_new_point(small, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "s"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        cmd = _sweep_cmd(small, out, "--scheduler", cluster.scheduler_address)
        proc, took, sent, done, stderr = _interrupt_after_first_point(cmd, signal.SIGINT, False)
        assert proc.returncode == 130 and took < 10, stderr
        assert "finished points are kept" in stderr and "Traceback" not in stderr, stderr
        time.sleep(4)  # the point the worker was running may still finish; no other may start
        assert done <= len(_finished(out)) <= done + 1


def test_a_sweep_without_the_marker_is_resumed_and_gets_its_marker(small, tmp_path):
    """A sweep directory roce-emu wrote without the .roce-emu marker (sweep.json as
    write_sweep_record writes it, beside points/) is roce-emu's; a folder with any other
    sweep.json is not."""
    from roce_emu.errors import ScenarioError
    from roce_emu.results.destination import SWEEP_RECORD_KEYS

    out = tmp_path / "old"
    grid = parse_grid(["network.cc.algorithm=none,dcqcn"])
    assert run_sweep(SweepSpec(small, grid), out, progress=False)[:2] == (2, 2)
    assert set(json.loads((out / "sweep.json").read_text())) == SWEEP_RECORD_KEYS
    (out / ".roce-emu").unlink()
    first, second = sorted((out / "points").iterdir())
    kept = (first / "summary.json").read_bytes()
    shutil.rmtree(second)
    assert run_sweep(SweepSpec(small, grid), out, progress=False)[:2] == (1, 2)
    assert (out / ".roce-emu").read_text().startswith("sweep")
    assert (first / "summary.json").read_bytes() == kept and (second / "summary.json").is_file()
    # the same layout with a sweep.json roce-emu did not write is the user's
    mine = tmp_path / "mine"
    (mine / "points").mkdir(parents=True)
    (mine / "sweep.json").write_text(json.dumps({"scenario": "x", "grid": {}, "notes": "mine"}))
    with pytest.raises(ScenarioError, match="did not write"):
        run_sweep(SweepSpec(small, grid), mine, progress=False)
    assert sorted(p.name for p in mine.iterdir()) == ["points", "sweep.json"]


def test_resuming_clears_the_probe_files_a_killed_point_left(small, tmp_path):
    out = tmp_path / "s"
    grid = parse_grid(["network.cc.algorithm=none,dcqcn"])
    run_sweep(SweepSpec(small, grid), out, progress=False)
    (out / "points" / ".roce-emu-probe-k2j4x9").write_text("")  # check_writable's probe file
    (out / "points" / ".abc.tmp-77").mkdir()  # a point's half-written temporary directory
    unfinished = sorted((out / "points").iterdir())[-1]  # a point the kill left half-written
    (unfinished / "summary.json").unlink()
    assert run_sweep(SweepSpec(small, grid), out, progress=False)[:2] == (1, 2)
    assert not list((out / "points").glob(".*")), "leftovers of a killed point are still there"


def test_sweep_spec_from_a_scenario_or_a_sweep_file(tmp_path):
    """A scenario is swept over --grid (or run as one point); a sweep file brings its own grid,
    repeat and set, which --set extends and --repeat replaces."""
    (tmp_path / "s.yaml").write_text(SMALL)
    spec = sweep_spec(tmp_path / "s.yaml", GRID, ["sim.seed=3"])
    assert spec.grid == parse_grid(GRID) and spec.repeat == 1 and spec.fixed == ("sim.seed=3",)
    assert sweep_spec(tmp_path / "s.yaml").grid == {}
    (tmp_path / "w.yaml").write_text("scenario: s.yaml\ngrid: {network.cc.algorithm: [none]}\nrepeat: 2\nset: [a=1]\n")
    spec = sweep_spec(tmp_path / "w.yaml", (), ["b=2"])
    assert spec.scenario == tmp_path / "s.yaml" and spec.grid == {"network.cc.algorithm": ["none"]}
    assert spec.repeat == 2 and spec.fixed == ("a=1", "b=2")
    assert sweep_spec(tmp_path / "w.yaml", repeat=5).repeat == 5


def test_results_csv_has_each_jobs_scalars_as_columns():
    from roce_emu.sweep import _flat

    summary = {
        "flows": 4,
        "iteration_ns": [1.0, 3.0],
        "mean_iteration_ns": 2.0,
        "jobs": [
            {"job": "a", "hosts": [0, 1], "time_ns": 5.0, "mean_iteration_ns": 2.5},
            {"job": "b", "hosts": [2, 3], "time_ns": 7.0, "inference": {"p99_ns": 1.0}},
        ],
    }
    assert _flat(summary) == {
        "flows": 4,
        "mean_iteration_ns": 2.0,
        "jobs.a.time_ns": 5.0,
        "jobs.a.mean_iteration_ns": 2.5,
        "jobs.b.time_ns": 7.0,
    }


def test_the_traceback_distributed_logs_when_ctrl_c_beats_its_call_is_dropped():
    """distributed's sync() logs a NameError from its cancel callback when the interrupt comes
    before its call started (a race the dask sweep test above meets now and then); the sweep's
    filter drops that record and nothing else."""
    import logging
    import sys

    from roce_emu.sweep import _QuietInterruptedSync

    def record(error, message):
        try:
            raise error
        except type(error):
            info = sys.exc_info()
        return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, message, (), info)

    quiet = _QuietInterruptedSync()
    cancel = "Exception in callback functools.partial(<function sync.<locals>.cancel at 0x7f2133a0f560>)"
    assert not quiet.filter(record(NameError("cannot access free variable 'future'"), cancel))
    assert quiet.filter(record(ValueError("x"), cancel))
    assert quiet.filter(record(NameError("y"), "Exception in callback functools.partial(<function other>)"))
    assert quiet.filter(logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "plain", (), None))
