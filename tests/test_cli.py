"""The command line: help for every command, runs that write tidy files, bad input as one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import cli

ROOT = Path(__file__).resolve().parent.parent
SCEN = ROOT / "scenarios"


@pytest.mark.parametrize(
    "cmd",
    [
        [],
        ["run"],
        ["topo"],
        ["validate"],
        ["sweep"],
        ["plot"],
        ["compare"],
        ["cc"],
        ["examples"],
        ["import"],
        ["import", "astra-sim"],
        ["import", "ns3"],
        ["design"],
        ["cache"],
    ],
)
def test_help_teaches_with_an_example(cmd):
    """Every help text ends with examples, at least one of that very command, and each example's
    scenario and --set overrides pass the input checks (so the examples stay true as the format
    changes)."""
    from roce_emu.run.inputs import load_inputs

    p = cli(*cmd, "--help")
    assert p.returncode == 0
    assert p.stdout.startswith("Usage: ")
    examples = [
        line.split() for line in p.stdout.split("Example", 1)[1].splitlines() if line.strip().startswith("roce-emu ")
    ]
    assert examples, p.stdout
    assert not cmd or any(ex[1] == cmd[0] for ex in examples), examples
    for ex in examples:
        files = [ROOT / t for t in ex if t.endswith(".yaml") and (ROOT / t).parent.name in ("scenarios", "benchmarks")]
        sets = [ex[i + 1] for i, t in enumerate(ex) if t == "--set"]
        for path in files:
            if ex[1] in ("run", "validate", "topo"):
                load_inputs(path, sets)
            else:
                assert path.is_file(), ex


def test_run_writes_tidy_results(tmp_path):
    out = tmp_path / "incast"
    p = cli("run", SCEN / "incast.yaml", "--out", out, "--set", "workload.flows.0.bytes=5e5")
    assert p.returncode == 0, p.stderr
    flows = pd.read_csv(out / "flows.csv")
    assert list(flows.columns[:10]) == [
        "flow_id",
        "src",
        "dst",
        "bytes",
        "start_ns",
        "finish_ns",
        "fct_ns",
        "ideal_fct_ns",
        "slowdown",
        "retransmits",
    ]
    assert flows.loc[0, "bytes"] == 500_000
    assert (flows["fct_ns"] >= flows["ideal_fct_ns"]).all()
    summary = json.loads((out / "summary.json").read_text())
    for key in (
        "events",
        "wall_s",
        "events_per_s",
        "data_packets_sent",
        "data_packets_dropped",
        "pfc_pauses_sent",
        "ecn_marks",
        "max_switch_buffer_bytes",
        "status",
    ):
        assert key in summary
    assert summary["status"] == "finished"
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")], "temporary directory left behind"


def test_deadlock_exits_1_with_one_line_report(tmp_path):
    p = cli("run", SCEN / "torus_ring_deadlock.yaml", "--out", tmp_path / "dl")
    assert p.returncode == 1
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "PFC deadlock" in lines[0] and "Traceback" not in p.stderr


def test_topo_summary_of_a_k4_fat_tree(tmp_path):
    p = cli("topo", SCEN / "fat_tree_permutation.yaml", "--draw", tmp_path / "ft.png")
    assert p.returncode == 0, p.stderr
    facts = dict(line.split(": ", 1) for line in p.stdout.splitlines())
    facts = {k.strip(): v.strip() for k, v in facts.items()}
    assert facts["hosts"] == "16" and facts["switches"] == "20" and facts["links"] == "48"
    assert facts["diameter (links)"] == "6"
    assert facts["bisection (Gb/s)"] == "800"
    assert (tmp_path / "ft.png").stat().st_size > 1000


def test_topo_draws_a_multi_dim_fabric_with_its_dimension_switches(tmp_path):
    """The shipped 4 x 4 multi_dim (dimension 0 a ring, dimension 1 a switch per row): each
    dimension switch stands in a column of its own right of every router, at the height of the
    row of NPUs it joins, in order; with the dimensions swapped, in a row of its own below
    them, under its column. The command draws it (this was a KeyError 'coord' traceback)."""
    from roce_emu.config import load_scenario
    from roce_emu.fabric.summary import dimension_switches, layout
    from roce_emu.fabric.topology import build_fabric

    path = SCEN / "allreduce_multi_dim.yaml"
    for swapped in (False, True):
        sets = ["topology.dims.0.kind=switch", "topology.dims.1.kind=ring"] if swapped else []
        fabric = build_fabric(load_scenario(path, sets).topology)
        pos = layout(fabric)
        hubs = dimension_switches(fabric)
        routers = [n for n in range(fabric.n_endpoints, fabric.n_nodes) if n not in hubs]
        assert len(hubs) == 4 and len(routers) == 16
        across, along = (0, 1) if swapped else (1, 0)  # the position axis that tells hubs apart, the one they share
        beyond = min if swapped else max
        edge = beyond(pos[r][along] for r in routers)
        for hub in hubs:
            joined = list(fabric.graph.neighbors(hub))
            assert {pos[m][across] for m in joined} == {pos[hub][across]}, "level with the NPUs it joins"
            assert (pos[hub][along] < edge) if swapped else (pos[hub][along] > edge), "outside the router grid"
        assert len({pos[h][along] for h in hubs}) == 1, "one column (row) for all"
        assert len({pos[h][across] for h in hubs}) == 4
    p = cli("topo", path, "--draw", tmp_path / "md.png")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert (tmp_path / "md.png").stat().st_size > 1000


def test_topo_links_lists_the_names_faults_use():
    import csv
    import io

    p = cli("topo", SCEN / "fat_tree_permutation.yaml", "--links")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(rows) == 48
    assert {"node_a": "agg0.1", "node_b": "core2", "tier": "agg_core", "rate_gbps": "100", "delay_ns": "1000"} in rows


GOOD = (SCEN / "incast.yaml").read_text()

BAD_CASES = {
    "unknown top-level key": (GOOD + "\nno_such_key: 1\n", [], "no_such_key"),
    "unknown nested key": (GOOD.replace("pfc: {enabled: true}", "pfc: {enabled: true, xoff: 3}"), [], "xoff"),
    "wrong type": (GOOD.replace("hosts: 9", "hosts: nine"), [], "topology.hosts"),
    "odd fat-tree k": (GOOD, ["--set", "topology.kind=fat_tree", "--set", "topology.k=3"], "topology.k"),
    "rate not positive": (GOOD.replace("rate_gbps: 100", "rate_gbps: 0"), [], "rate_gbps"),
    "host id out of range": (GOOD.replace("src: 8, dst: 0", "src: 9, dst: 0"), [], "workload.flows.7.src"),
    "negative bytes": (GOOD.replace("bytes: 2000000}", "bytes: -5}", 1), [], "workload.flows.0.bytes"),
    "unknown topology kind": (GOOD.replace("single_switch", "hypercube"), [], "topology.kind"),
    "unknown cc algorithm": (GOOD, ["--set", "network.cc.algorithm=warp"], "network.cc.algorithm"),
    "kmin above kmax": (GOOD, ["--set", "network.switch.ecn.kmin_bytes=9000000"], "network.switch.ecn"),
    "pmax above one": (GOOD, ["--set", "network.switch.ecn.pmax=1.5"], "pmax"),
    "malformed yaml": ("name: [unclosed\n", [], "invalid YAML"),
    "not a mapping": ("- 1\n- 2\n", [], "mapping"),
    "buffer too small for headroom": (
        GOOD.replace("buffer_bytes: 4194304", "buffer_bytes: 10000"),
        [],
        "network.switch.buffer_bytes",
    ),
    "set index out of range": (GOOD, ["--set", "workload.flows.99.bytes=1"], "workload.flows.99"),
    "set without equals": (GOOD, ["--set", "topology.k"], "KEY=VALUE"),
    "flow to itself": (GOOD.replace("src: 1, dst: 0", "src: 0, dst: 0"), [], "workload.flows.0.dst"),
    "no flows": (GOOD.split("workload:")[0], [], "workload"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, case):
    text, extra, needle = BAD_CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    p = cli("run", path, "--out", out, *extra)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1, p.stderr
    assert needle in lines[0]
    assert "Traceback" not in p.stderr
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.yaml"]


def test_bad_files(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    for path, needle in ((tmp_path / "missing.yaml", "no such file"), (tmp_path, "directory"), (binary, "UTF-8")):
        p = cli("run", path, "--out", tmp_path / "out")
        assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["cc", "bogus"], "'bogus' is not one of"),
        (["sweep", "scenarios/incast.yaml", "--jobs", "0"], "'--jobs'"),
        (["run"], "Missing argument 'SCENARIO'"),
        (["run", "scenarios/incast.yaml", "--slice-events", "0"], "'--slice-events'"),
        (["plot", "no/such/dir"], "'DIRECTORY'"),
        (["nosuch"], "No such command 'nosuch'"),
    ],
)
def test_bad_options_are_one_line_exit_2(args, needle):
    p = cli(*args)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("error: roce-emu"), p.stderr


def test_cache_clear_removes_only_what_roce_emu_wrote(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "other").mkdir()
    for version in ("numba-0123456789abcdef", "numba-fedcba9876543210"):
        (tmp_path / version / "core_x").mkdir(parents=True)
        (tmp_path / version / "core_x" / "loop.advance-47.py311.nbi").write_text("")
    env = {**os.environ, "ROCE_EMU_CACHE_DIR": str(tmp_path)}
    p = cli("cache", "clear", env=env, timeout=120)
    assert p.returncode == 0 and "removed 2 cached engine versions" in p.stdout
    assert sorted(x.name for x in tmp_path.iterdir()) == ["notes.txt", "other"]


def test_a_cold_compile_is_announced_and_a_cached_one_is_not(tmp_path, monkeypatch):
    from roce_emu.run import driver
    from roce_emu.core.fastforward import advance_ff
    from roce_emu.core.loop import advance

    monkeypatch.setattr(driver, "CACHE_DIR", tmp_path / "numba-x")
    assert "compiling the engine" in driver.compile_notice(advance)
    assert f"about {driver.COMPILE_S['advance']} s" in driver.compile_notice(advance)
    assert "compiling the fast-forward kernel" in driver.compile_notice(advance_ff)
    cached = tmp_path / "numba-x" / "core_y"
    cached.mkdir(parents=True)
    (cached / "loop.advance-47.py311.nbi").write_text("")
    assert driver.compile_notice(advance) == ""
    assert driver.compile_notice(advance_ff) != ""  # one kernel's cache says nothing of the other's


def test_a_process_compiling_a_kernel_holds_a_lock_others_wait_on(tmp_path, monkeypatch):
    """Processes on one cache (a sweep's local jobs, test workers) compile a kernel once."""
    import fcntl

    from roce_emu.run import driver
    from roce_emu.core.fastforward import advance_ff
    from roce_emu.core.loop import advance

    monkeypatch.setattr(driver, "CACHE_DIR", tmp_path / "numba-x")
    both = driver.COMPILE_S["advance"] + driver.COMPILE_S["advance_ff"]
    assert f"about {both} s" in driver.compile_notice(advance_ff)  # it calls the engine, not compiled yet
    with driver.compiling(advance):
        with open(tmp_path / "numba-x" / "compiling-advance.lock") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(tmp_path / "numba-x" / "compiling-advance.lock") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released


@pytest.mark.parametrize("name", ["cc_dcqcn", "cc_hpcc"])
def test_print_normalized_shows_the_values_a_run_uses_and_reruns_identically(name, tmp_path):
    """The CC parameters (computed ones included) and the ECN thresholds as the
    run uses them, not {} and null; the printed scenario runs to the same flows.csv and summary."""
    import yaml

    p = cli("validate", SCEN / f"{name}.yaml", "--print-normalized")
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(p.stdout)
    ecn = doc["network"]["switch"]["ecn"]
    assert all(isinstance(ecn[k], (int, float)) for k in ("kmin_bytes", "kmax_bytes", "pmax"))
    (tmp_path / "normalized.yaml").write_text(p.stdout)
    a, b = (
        cli("run", SCEN / f"{name}.yaml", "--out", tmp_path / "a"),
        cli("run", tmp_path / "normalized.yaml", "--out", tmp_path / "b"),
    )
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert doc["network"]["cc"]["params"] == summary["cc_params"] != {}
    assert (tmp_path / "a" / "flows.csv").read_bytes() == (tmp_path / "b" / "flows.csv").read_bytes()
    again = json.loads((tmp_path / "b" / "summary.json").read_text())
    for key in ("wall_s", "events_per_s", "engine_load_s"):
        summary.pop(key), again.pop(key)
    assert summary.pop("provenance")["scenario_file"] != again.pop("provenance")["scenario_file"]
    assert summary == again


def test_an_existing_run_directory_is_never_replaced_silently(tmp_path):
    """A second run into the same directory is refused (one line, exit 2, the
    first results untouched) unless --overwrite."""
    out = tmp_path / "run"
    first = cli("run", SCEN / "single_flow.yaml", "--out", out)
    assert first.returncode == 0, first.stderr
    before = (out / "summary.json").read_bytes()
    again = cli("run", SCEN / "single_flow.yaml", "--out", out, "--set", "workload.flows.0.bytes=5000")
    lines = [line for line in again.stderr.splitlines() if line.strip()]
    assert again.returncode == 2 and len(lines) == 1 and "--overwrite" in lines[0] and str(out) in lines[0]
    assert (out / "summary.json").read_bytes() == before
    replaced = cli(
        "run", SCEN / "single_flow.yaml", "--out", out, "--set", "workload.flows.0.bytes=5000", "--overwrite"
    )
    assert replaced.returncode == 0, replaced.stderr
    assert pd.read_csv(out / "flows.csv")["bytes"].tolist() == [5000]


def test_examples_lists_and_copies_the_shipped_scenarios(tmp_path):
    p = cli("examples", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    listed = [line.split()[0] for line in p.stdout.splitlines()]
    assert listed == sorted(f.stem for f in SCEN.glob("*.yaml"))
    assert "expect-exit" not in p.stdout  # the description, not the contract marker
    p = cli("examples", "incast", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "incast.yaml").read_bytes() == (SCEN / "incast.yaml").read_bytes()
    again = cli("examples", "incast", cwd=tmp_path)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1 and "--overwrite" in again.stderr
    p = cli("examples", "cc_hpcc.yaml", "--to", tmp_path / "study", cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "study").read_bytes() == (SCEN / "cc_hpcc.yaml").read_bytes()
    p = cli("examples", "incast", "--to", "new/folder/", cwd=tmp_path)  # a folder to make, as --help shows
    assert p.returncode == 0 and (tmp_path / "new" / "folder" / "incast.yaml").is_file(), p.stderr
    bad = cli("examples", "resnet", cwd=tmp_path)
    assert bad.returncode == 2 and "training_resnet50" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_wheel_carries_every_module_the_scenarios_and_the_license(tmp_path):
    """A plain `pip install` (not -e) must have every subpackage and the examples."""
    import zipfile

    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    (wheel,) = tmp_path.glob("roce_emu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {str(f.relative_to(ROOT)) for f in (ROOT / "roce_emu").rglob("*.py")}
    assert sources <= names, f"left out of the wheel: {sorted(sources - names)}"
    assert {f"roce_emu/scenarios/{f.name}" for f in SCEN.glob("*.yaml")} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)


def test_validate_and_the_configuration_do_not_load_the_engine(tmp_path):
    """`roce-emu validate` runs every input check (here a switch buffer too small for its PFC
    headroom, which only the fabric's port records reveal) without importing Numba; so does
    reading the configuration alone."""
    probe = (
        "import sys, runpy\n"
        "import roce_emu.config\n"
        "assert 'numba' not in sys.modules, 'roce_emu.config loaded numba'\n"
        "sys.argv = ['roce-emu', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('roce_emu', run_name='__main__')\n"
        "finally:\n"
        "    print('numba' in sys.modules, file=sys.stderr)\n"
    )
    ok = subprocess.run(
        [sys.executable, "-c", probe, "validate", SCEN / "fat_tree_permutation.yaml"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert ok.returncode == 0 and "ok (16 flows" in ok.stdout, ok.stderr
    assert ok.stderr.strip().splitlines()[-1] == "False"
    bad = subprocess.run(
        [sys.executable, "-c", probe, "validate", SCEN / "incast.yaml", "--set", "network.switch.buffer_bytes=100000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and lines[-1] == "False", bad.stderr
    assert "network.switch.buffer_bytes" in lines[0] and "headroom" in lines[0] and "Traceback" not in bad.stderr


@pytest.mark.parametrize("path", sorted(SCEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_scenarios_normalized_form_is_valid_and_builds_the_same_workload(path):
    """What a run writes as scenario.yaml (and --print-normalized prints) is read back without
    error and builds the same fabric and workload: a kind whose rates come from keys of its own
    (fred, rail_optimized) is written without the link rates it would refuse."""
    import numpy as np

    from roce_emu.api import normalized_document, prepare
    from roce_emu.config.load import validate_document
    from roce_emu.run.inputs import check_inputs

    prepared = prepare(path)
    again = check_inputs(validate_document(normalized_document(prepared), "normalized.yaml"), "normalized.yaml")
    assert again.fabric.n_hosts == prepared.fabric.n_hosts and again.fabric.n_nodes == prepared.fabric.n_nodes
    for column in ("src", "dst", "size_bytes", "start_ps", "prio"):
        assert np.array_equal(getattr(again.workload.flows, column), getattr(prepared.workload.flows, column)), column
    assert len(again.workload.tasks) == len(prepared.workload.tasks)
