"""roce-emu compare (summaries, iteration and collective times of run directories side by side)
and the console line of a run with iterations."""

import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import scenario
from roce_emu.api import prepare_scenario, run
from roce_emu.cli import main


def _training(algorithm: str, **output):
    """Two flows beside a ring all-reduce over 4 hosts, two iterations."""
    return scenario(
        topology={"kind": "single_switch", "hosts": 4},
        network={"cc": {"algorithm": algorithm}},
        workload={
            "flows": [{"src": 0, "dst": 1, "bytes": 50_000}],
            "collectives": [{"kind": "all_reduce", "bytes": 400_000}],
            "iterations": 2,
        },
        output=output,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run directories: DCQCN as CSV, no congestion control as Parquet."""
    root = tmp_path_factory.mktemp("runs")
    a = run(prepare_scenario(_training("dcqcn")), out=root / "dcqcn", progress=False)
    b = run(prepare_scenario(_training("none", format="parquet")), out=root / "none", progress=False)
    return root, a.summary, b.summary


def _table(text: str, first_cell: str) -> list[list[str]]:
    """The rows of the Markdown table whose header starts with ``first_cell``, as cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_compare_puts_summaries_side_by_side_with_ratios_to_the_first(runs):
    root, a, b = runs
    result = CliRunner().invoke(main, ["compare", str(root / "dcqcn"), str(root / "none")])
    assert result.exit_code == 0, result.output
    rows = {r[0]: r[1:] for r in _table(result.stdout, "summary key")}
    assert rows["cc_algorithm"] == ["dcqcn", "none"]
    ratio = b["last_finish_ns"] / a["last_finish_ns"]
    assert rows["last_finish_ns"][1].endswith(f"({ratio:.3f}x)")
    assert rows["events"] == [str(a["events"]), f"{b['events']} ({b['events'] / a['events']:.3f}x)"]
    assert "cc_params.variant" in rows  # nested fields as dotted keys
    assert "hottest_links" not in rows and "iteration_ns" not in rows

    iterations = {r[0]: r[1:] for r in _table(result.stdout, "iteration_ns")}
    assert set(iterations) == {"0", "1", "mean"}
    for i in (0, 1):
        assert iterations[str(i)][0] == format(a["iteration_ns"][i], ".10g")
        assert iterations[str(i)][1].startswith(format(b["iteration_ns"][i], ".10g") + " (")
    assert iterations["mean"][0] == format(a["mean_iteration_ns"], ".10g")

    collectives = _table(result.stdout, "collective / group: mean time_ns")
    assert len(collectives) == 1 and all(cell for cell in collectives[0])  # read from CSV and Parquet


def test_compare_differing_leaves_out_equal_keys_and_draws_a_figure(runs, tmp_path):
    root, a, b = runs
    result = CliRunner().invoke(
        main, ["compare", str(root / "dcqcn"), str(root / "none"), "--differing", "--out", str(tmp_path / "fig")]
    )
    assert result.exit_code == 0, result.output
    keys = [r[0] for r in _table(result.stdout, "summary key")]
    assert "cc_algorithm" in keys and "hosts" not in keys and "scenario" not in keys
    assert (tmp_path / "fig" / "compare.png").stat().st_size > 0 and (tmp_path / "fig" / "compare.pdf").is_file()


def test_compare_never_draws_over_a_users_figure(runs, tmp_path):
    """--out is a figure folder like plot's: a folder of the user's (here holding their own
    compare.png) is refused in one line before anything is written, and stays as it was; a
    second compare into the folder roce-emu made replaces its own figure."""
    root, _, _ = runs
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "compare.png").write_bytes(b"the user's figure")
    refused = CliRunner().invoke(main, ["compare", str(root / "dcqcn"), str(root / "none"), "--out", str(mine)])
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and "--out" in refused.stderr
    assert refused.stdout == ""
    assert sorted(p.name for p in mine.iterdir()) == ["compare.png"]
    assert (mine / "compare.png").read_bytes() == b"the user's figure"
    for _ in range(2):
        again = CliRunner().invoke(main, ["compare", str(root / "dcqcn"), "--out", str(tmp_path / "fig")])
        assert again.exit_code == 0, again.output
    assert (tmp_path / "fig" / "compare.png").stat().st_size > 0


def test_compare_reads_a_summary_an_older_version_wrote(runs, tmp_path):
    """Older versions wrote fast_forward_exact (true unless a packet train was sent) where this
    one writes approximate, its opposite, and named the trains mode on: compare reads them as
    today's names, one row each beside a current run."""
    root, a, _ = runs
    old = tmp_path / "old"
    shutil.copytree(root / "dcqcn", old)
    written = {
        ("fast_forward_exact" if k == "approximate" else k): (True if k == "approximate" else v) for k, v in a.items()
    }
    (old / "summary.json").write_text(json.dumps({**written, "fast_forward": "on"}))
    assert "approximate" not in written and written["fast_forward_exact"] is True
    result = CliRunner().invoke(main, ["compare", str(root / "dcqcn"), str(old)])
    assert result.exit_code == 0, result.output
    rows = {r[0]: r[1:] for r in _table(result.stdout, "summary key")}
    assert rows["approximate"] == ["False", "False"] and "fast_forward_exact" not in rows
    assert rows["fast_forward"] == ["off", "trains"]


def test_compare_of_a_directory_that_is_no_run_is_one_line(runs, tmp_path):
    root, _, _ = runs
    result = CliRunner().invoke(main, ["compare", str(root / "dcqcn"), str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "not a run directory" in result.stderr
    assert result.stdout == ""
    missing = CliRunner().invoke(main, ["compare", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "not a run directory" in missing.stderr


def test_compare_help_has_an_example():
    result = CliRunner().invoke(main, ["compare", "--help"])
    assert result.exit_code == 0 and "roce-emu compare runs/" in result.stdout


def test_the_console_line_of_a_run_with_iterations_shows_their_times(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(json.dumps(_training("dcqcn").model_dump(mode="json")))
    result = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    times = summary["iteration_ns"]
    line = result.stderr.strip().splitlines()[-1]
    assert summary["mean_iteration_ns"] < 1e6  # in us
    us = [f"{t / 1e3:.3f}" for t in (summary["mean_iteration_ns"], *times)]
    assert f"test: iteration {us[0]} us ({us[1]}, {us[2]}), " in line
    assert "flows finished" in line
