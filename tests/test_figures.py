"""Every standard figure: written as non-empty PDF and PNG, axes labelled with units."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import scenario
from roce_emu.api import prepare_scenario, run
from roce_emu.figures import RUN_FIGURES, SWEEP_FIGURES, figures_for, save
from roce_emu.sweep import SweepSpec, parse_grid, run_sweep

ROOT = Path(__file__).resolve().parent.parent
UNIT = re.compile(r"\(.+\)")
TRAINING = """name: tiny_training
topology: {kind: single_switch, hosts: 4}
workload:
  training:
    layers:
      - {name: l0, forward_ns: 20000, backward_ns: 40000, weight_grad_bytes: 200000}
      - {name: l1, forward_ns: 20000, backward_ns: 40000, weight_grad_bytes: 400000}
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweep")
    path = base / "tiny.yaml"
    path.write_text(TRAINING)
    grid = parse_grid(["network.cc.algorithm=none,dcqcn,hpcc", "topology.kind=single_switch"])
    run_sweep(SweepSpec(path, grid), base / "out", jobs=2, progress=False)
    return base / "out"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    sc = scenario(topology={"kind": "single_switch", "hosts": 5}, network={"cc": {"algorithm": "dcqcn"}},
                  workload={"flows": [{"src": s, "dst": 0, "bytes": 100_000 * s} for s in range(1, 5)]},
                  output={"traces": ["rate", "queue"], "trace_interval_ns": 2000})
    run(prepare_scenario(sc), out, progress=False)
    return out


def _check(fig):
    for ax in fig.axes:
        assert UNIT.search(ax.get_xlabel()), f"x label without unit: {ax.get_xlabel()!r}"
        assert UNIT.search(ax.get_ylabel()), f"y label without unit: {ax.get_ylabel()!r}"
        n_series = len(ax.get_legend_handles_labels()[0])
        if n_series > 1:
            assert ax.get_legend() is not None or fig.legends


@pytest.mark.parametrize("kind", ["sweep", "run"])
def test_every_figure_has_labelled_axes_and_both_files(kind, sweep_dir, run_dir, tmp_path):
    directory = sweep_dir if kind == "sweep" else run_dir
    figures = figures_for(directory)
    assert set(figures) == set(SWEEP_FIGURES if kind == "sweep" else RUN_FIGURES)
    for name, fig in figures.items():
        _check(fig)
        for path in save(fig, tmp_path, name):
            assert path.stat().st_size > 1000, path


def test_pdf_bytes_repeat(run_dir, tmp_path):
    from roce_emu.figures import fct_figure

    a = save(fct_figure(run_dir), tmp_path / "a", "f")[0].read_bytes()
    b = save(fct_figure(run_dir), tmp_path / "b", "f")[0].read_bytes()
    assert a == b


def test_plot_command_and_scripts(sweep_dir, run_dir, tmp_path):
    p = subprocess.run([sys.executable, "-m", "roce_emu", "plot", str(sweep_dir), "--out", str(tmp_path / "cli")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert {f.name for f in (tmp_path / "cli").iterdir()} >= {"policy_time.pdf", "policy_time.png",
                                                             "comm_breakdown.pdf", "pauses_marks.png"}
    p = subprocess.run([sys.executable, "plots/time_series.py", str(run_dir), "--out", str(tmp_path / "ts")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "ts" / "queues.png").stat().st_size > 1000
    p = subprocess.run([sys.executable, "-m", "roce_emu", "plot", str(tmp_path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 2 and "neither a run directory" in p.stderr
