"""Lean outputs: per-flow rows of collective traffic only when asked for, and Parquet tables."""

import json
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import pytest

from conftest import scenario
from roce_emu.api import prepare_scenario, run, run_scenario
from roce_emu.core import CORE_HASH
from roce_emu.errors import ScenarioError

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def _mixed(**output):
    """Two explicit flows beside a ring all-reduce over 4 hosts (2 x 3 steps x 4 flows = 24)."""
    return scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={
            "flows": [{"src": 0, "dst": 1, "bytes": 50_000}, {"src": 2, "dst": 3, "bytes": 70_000}],
            "collectives": [{"kind": "all_reduce", "bytes": 400_000}],
        },
        output=output,
    )


def _write(tmp_path, name, **output):
    prepared = prepare_scenario(_mixed(**output))
    res = run(prepared, out=tmp_path / name, progress=False)
    return res, tmp_path / name


def test_collective_flows_are_left_out_of_flows_and_tasks_by_default(tmp_path):
    res, out = _write(tmp_path, "lean")
    flows = pd.read_csv(out / "flows.csv")
    assert list(flows["flow_id"]) == [0, 1]  # the explicit flows only
    tasks = pd.read_csv(out / "tasks.csv")
    assert set(tasks.loc[tasks["kind"] == "flow", "task_id"]) == {0, 1}
    colls = pd.read_csv(out / "collectives.csv")
    assert colls["flows"].sum() == 24  # the collective's flows are summed up here

    full, out_full = _write(tmp_path, "full", collective_flows=True)
    assert len(pd.read_csv(out_full / "flows.csv")) == 26
    assert len(pd.read_csv(out_full / "tasks.csv")) > len(tasks)
    # the summary covers every flow either way
    lean_summary = json.loads((out / "summary.json").read_text())
    full_summary = json.loads((out_full / "summary.json").read_text())
    for key in ("flows", "mean_fct_ns", "p99_slowdown", "mean_iteration_ns", "data_packets_sent"):
        assert lean_summary[key] == full_summary[key]
    assert lean_summary["flows"] == 26


def test_parquet_tables_read_back_with_numeric_columns(tmp_path):
    _, csv_out = _write(tmp_path, "csv", collective_flows=True)
    _, pq_out = _write(tmp_path, "pq", collective_flows=True, format="parquet")
    assert {p.name for p in pq_out.iterdir()} == {
        "flows.parquet",
        "tasks.parquet",
        "collectives.parquet",
        "timeline.parquet",
        "fct_by_size.parquet",
        "links.parquet",
        "summary.json",
        "scenario.yaml",
        ".roce-emu",
    }
    for table in ("flows", "tasks", "collectives", "timeline", "links"):
        a = pd.read_csv(csv_out / f"{table}.csv")
        b = pd.read_parquet(pq_out / f"{table}.parquet")
        assert list(a.columns) == list(b.columns)
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
    flows = pd.read_parquet(pq_out / "flows.parquet")
    for column in ("start_ns", "finish_ns", "fct_ns", "ideal_fct_ns", "slowdown", "bytes"):
        assert pd.api.types.is_numeric_dtype(flows[column]), column
    tasks = pd.read_parquet(pq_out / "tasks.parquet")
    assert pd.api.types.is_numeric_dtype(tasks["duration_ns"])
    assert tasks["host"].isna().any() and pd.api.types.is_numeric_dtype(tasks["host"])  # flows have no host


def test_an_unknown_format_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("output: {format: xlsx}\nworkload: {flows: [{src: 0, dst: 1, bytes: 1000}]}\n")
    from roce_emu.config import load_scenario

    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "output.format" in str(err.value) and "\n" not in str(err.value)


# ---- provenance: every run directory says where its numbers came from, and reruns ------------
@pytest.mark.parametrize(
    "name, overrides",
    [
        ("training_dlrm.yaml", ["workload.iterations=1", "network.cc.algorithm=hpcc"]),
        ("link_failure.yaml", ["sim.fast_forward=exact"]),
    ],
)
def test_the_resolved_scenario_reruns_byte_for_byte(tmp_path, name, overrides):
    first = run_scenario(SCENARIOS / name, overrides, out=tmp_path / "first")
    prov = first.summary["provenance"]
    assert prov["overrides"] == overrides
    assert prov["seed"] == first.summary["seed"]
    assert prov["engine_hash"] == CORE_HASH and len(prov["engine_hash"]) == 16
    assert prov["numba"] == numba.__version__ and prov["numpy"] == np.__version__
    assert prov["python"].count(".") == 2
    assert prov["roce_emu_version"] == first.summary["version"]
    on_disk = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert on_disk["provenance"] == prov
    resolved = tmp_path / "first" / "scenario.yaml"
    # the rerun takes no overrides: everything it needs is in the resolved file
    again = run_scenario(resolved, out=tmp_path / "again")
    files = sorted(p.name for p in (tmp_path / "first").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "again").iterdir())
    assert "scenario.yaml" in files and "flows.csv" in files
    for f in files:
        if f != "summary.json":
            assert (tmp_path / "first" / f).read_bytes() == (tmp_path / "again" / f).read_bytes(), f
    volatile = {"wall_s", "engine_load_s", "events_per_s", "provenance"}
    assert {k: v for k, v in first.summary.items() if k not in volatile} == {
        k: v for k, v in again.summary.items() if k not in volatile
    }
    assert again.summary["provenance"]["scenario_file"] == str(resolved)


# ---- the Python API: DataFrames with numeric columns, in memory or read back ------------------
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_results_as_dataframes_in_memory_and_read_back(tmp_path, fmt):
    from roce_emu.api import read_run

    res, out = _write(tmp_path, fmt, format=fmt)
    frames = res.frames()
    assert set(frames) == {"flows", "tasks", "collectives", "timeline", "fct_by_size", "links"}
    collectives = frames["collectives"]
    for column in ("start_ns", "finish_ns", "time_ns", "busbw_gbps", "bytes"):
        assert pd.api.types.is_numeric_dtype(collectives[column]), column
    assert collectives["time_ns"].iloc[0] == pytest.approx(
        collectives["finish_ns"].iloc[0] - collectives["start_ns"].iloc[0]
    )
    flows = frames["flows"]
    assert pd.api.types.is_numeric_dtype(flows["fct_ns"]) and (flows["fct_ns"] >= flows["ideal_fct_ns"]).all()
    back = read_run(out)
    assert back.summary == json.loads((out / "summary.json").read_text())
    assert set(back.frames) == set(frames)
    for name, df in frames.items():
        pd.testing.assert_frame_equal(df.reset_index(drop=True), back.frames[name], check_dtype=False)


def test_read_run_of_a_folder_that_is_no_run_is_one_line(tmp_path):
    from roce_emu.api import read_run

    with pytest.raises(ScenarioError, match="not a run directory") as err:
        read_run(tmp_path)
    assert "\n" not in str(err.value)
