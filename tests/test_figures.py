"""Every standard figure: written as non-empty PDF and PNG, axes labelled with units."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.container import ErrorbarContainer

from conftest import cli, scenario
from roce_emu.api import prepare_scenario, run
from roce_emu.config import load_scenario
from roce_emu.results.figures import RUN_FIGURES, SWEEP_FIGURES, figures_for, save
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
    run_sweep(SweepSpec(path, grid, 2), base / "out", jobs=2, progress=False)  # two seeds per point
    return base / "out"


@pytest.fixture(scope="module")
def training_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("training")
    path = base / "tiny.yaml"
    path.write_text(TRAINING + "  iterations: 2\n")
    out = base / "r"
    run(prepare_scenario(load_scenario(path)), out, progress=False)
    return out


def _traced_run(out: Path, fmt: str = "csv") -> Path:
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 5},
        network={"cc": {"algorithm": "dcqcn"}},
        workload={"flows": [{"src": s, "dst": 0, "bytes": 100_000 * s} for s in range(1, 5)]},
        output={"traces": ["rate", "queue"], "trace_interval_ns": 2000, "format": fmt},
    )
    run(prepare_scenario(sc), out, progress=False)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _traced_run(tmp_path_factory.mktemp("run") / "r")


def _check(fig):
    fig.canvas.draw()
    areas = [ax.get_window_extent() for ax in fig.axes]
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]:
        box = legend.get_window_extent()
        assert not any(box.overlaps(area) for area in areas), "a legend covers an axes' data area"
    for ax in fig.axes:
        assert UNIT.search(ax.get_xlabel()), f"x label without unit: {ax.get_xlabel()!r}"
        ylabels = [a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)]  # a shared axis: once
        assert any(UNIT.search(label) for label in ylabels), f"y label without unit: {ax.get_ylabel()!r}"
        n_series = len(ax.get_legend_handles_labels()[0])
        if n_series > 1:
            assert ax.get_legend() is not None or fig.legends


EXPECTED = {
    "sweep": set(SWEEP_FIGURES),
    "run": {"fct_slowdown", "queues", "rates", "link_utilization"},
    "training": {"rank_timeline", "collective_times", "link_utilization"},
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_figure_has_labelled_axes_and_both_files(kind, sweep_dir, run_dir, training_dir, tmp_path):
    directory = {"sweep": sweep_dir, "run": run_dir, "training": training_dir}[kind]
    figures = figures_for(directory)
    assert set(figures) == EXPECTED[kind]
    assert set().union(*EXPECTED.values()) == set(SWEEP_FIGURES) | set(RUN_FIGURES)
    for name, fig in figures.items():
        _check(fig)
        for path in save(fig, tmp_path, name):
            assert path.stat().st_size > 1000, path


def test_the_compare_figure_has_labelled_axes(run_dir, training_dir, tmp_path):
    from roce_emu.results.compare import load_runs
    from roce_emu.results.figures import compare_figure

    runs = load_runs([run_dir, training_dir])
    fig = compare_figure([r.label for r in runs], [r.summary for r in runs])
    _check(fig)
    assert "iteration" in fig.axes[0].get_ylabel()
    assert save(fig, tmp_path, "compare")[1].stat().st_size > 1000


def test_pdf_bytes_repeat(run_dir, tmp_path):
    from roce_emu.results.figures import fct_figure

    a = save(fct_figure(run_dir), tmp_path / "a", "f")[0].read_bytes()
    b = save(fct_figure(run_dir), tmp_path / "b", "f")[0].read_bytes()
    assert a == b


def test_plot_command_and_scripts(sweep_dir, run_dir, tmp_path):
    p = cli("plot", sweep_dir, "--out", tmp_path / "cli", timeout=300)
    assert p.returncode == 0, p.stderr
    assert {f.name for f in (tmp_path / "cli").iterdir()} >= {
        "policy_time.pdf",
        "policy_time.png",
        "comm_breakdown.pdf",
        "pauses_marks.png",
    }
    p = subprocess.run(
        [sys.executable, "plots/time_series.py", str(run_dir), "--out", str(tmp_path / "ts")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "ts" / "queues.png").stat().st_size > 1000
    p = cli("plot", tmp_path, timeout=300)
    assert p.returncode == 2 and "neither a run directory" in p.stderr


def test_plot_reads_a_parquet_run_like_a_csv_one(run_dir, tmp_path):
    """output.format parquet: the same figures with the same data as the CSV run, and the plot command works."""
    pytest.importorskip("pyarrow")
    parquet = _traced_run(tmp_path / "pq", "parquet")
    assert not list(parquet.glob("*.csv")) and (parquet / "flows.parquet").is_file()
    from_csv, from_parquet = figures_for(run_dir), figures_for(parquet)
    assert set(from_parquet) == set(from_csv) == EXPECTED["run"]
    for name in from_csv:
        for a, b in zip(from_csv[name].axes, from_parquet[name].axes):
            assert len(a.lines) + len(a.patches) > 0, name  # lines, or bars
            assert len(a.lines) == len(b.lines) and len(a.patches) == len(b.patches), name
            for la, lb in zip(a.lines, b.lines):
                assert la.get_label() == lb.get_label()
                assert list(la.get_xdata()) == pytest.approx(list(lb.get_xdata()))
                assert list(la.get_ydata()) == pytest.approx(list(lb.get_ydata()))
            for pa, pb in zip(a.patches, b.patches):
                assert pa.get_bbox().bounds == pytest.approx(pb.get_bbox().bounds), name
    p = cli("plot", parquet, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (parquet / "plots" / "fct_slowdown.png").stat().st_size > 1000


def test_policy_ratios_sit_on_an_axis_around_one_with_error_bars_over_seeds(sweep_dir):
    """A few percent must show, so the axis is not pinned at 0, and repeated points
    carry error bars."""
    import csv

    from roce_emu.results.figures import policy_time_figure

    fig = policy_time_figure(sweep_dir)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert 0.5 < low < 1.0 < high, (low, high)
    labels = ax.get_legend_handles_labels()[1] or [t.get_text() for t in fig.legends[0].get_texts()]
    assert "PFC only" not in labels, "PFC only is the baseline line at 1, not a bar"
    assert "2 seeds" in ax.get_ylabel()
    dots = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert dots and all(c.has_yerr for c in dots)
    with open(sweep_dir / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len({r["seed"] for r in rows}) == 2
    values = [y for c in dots for y in c.lines[0].get_ydata()]
    assert all(low <= y <= high for y in values)


def _fake_sweep(directory: Path, times: dict[str, float], counts: int = 0) -> Path:
    """A results.csv of one point per policy (one seed), its iteration time and counts given."""
    directory.mkdir()
    columns = ["point", "network.cc.algorithm", "scenario", "status", "topology", "cc_algorithm"]
    columns += ["mean_iteration_ns", "last_finish_ns", "pfc_pauses_sent", "ecn_marks"]
    lines = [",".join(columns)]
    for i, (policy, t) in enumerate(times.items()):
        lines.append(f"p{i},{policy},s,finished,single_switch,{policy},{t},{t},{counts},{counts}")
    (directory / "results.csv").write_text("\n".join(lines) + "\n")
    return directory


def test_policy_time_shows_every_policy_with_its_label_inside_the_axes(tmp_path):
    """A ratio of exactly 1.00 (DCQCN here) is a visible mark, one below 1 (HPCC) too, every
    policy in the legend has one, and every value label lies inside the axes. The data come
    from policy_time_table, the drawing from draw_policy_time."""
    from roce_emu.results.figures import draw_policy_time, policy_time_table

    sweep = _fake_sweep(tmp_path / "sw", {"none": 1000.0, "dcqcn": 1000.0, "hpcc": 900.0, "timely": 1200.0})
    table = policy_time_table(sweep)
    assert [(r["policy"], r["ratio"]) for r in table.records] == [
        ("dcqcn", 1.0),
        ("hpcc", pytest.approx(0.9)),
        ("timely", pytest.approx(1.2)),
    ]
    fig = draw_policy_time(table)
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["DCQCN", "HPCC", "TIMELY"]
    marks = {c.get_label(): c.lines[0] for c in ax.containers if isinstance(c, ErrorbarContainer)}
    for label, ratio in zip(legend, (1.0, 0.9, 1.2)):
        line = marks[label]
        assert line.get_marker() not in (None, "", "None") and line.get_markersize() > 0 and line.get_visible()
        assert list(line.get_ydata()) == [pytest.approx(ratio)] and low < ratio < high
    box = ax.get_window_extent()
    texts = [t for t in ax.texts if t.get_text()]
    assert sorted(t.get_text() for t in texts) == ["0.90", "1.00", "1.20"]
    for text in texts:
        extent = text.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1, text


def test_few_policy_labels_are_level_on_the_far_side_of_the_line_and_the_tick_gives_pfc_only_time(tmp_path):
    """One fabric, four policies (the MoE page's figure): each value label is level, 8 pt, on
    the side of its dot away from the line at 1 (so 0.99 is not struck through), and the tick
    under the fabric gives PFC only's own time, which the ratios are of."""
    from roce_emu.results.figures import draw_policy_time, policy_time_table

    sweep = _fake_sweep(
        tmp_path / "sw", {"none": 12.894e6, "dcqcn": 14.72e6, "hpcc": 13.41e6, "timely": 12.66e6, "dctcp": 12.78e6}
    )
    table = policy_time_table(sweep)
    assert table.baselines == {((), "single_switch"): 12.894e6}
    fig = draw_policy_time(table)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single_switch\nPFC only: 12.894 ms"]
    line_y = ax.transData.transform((0, 1.0))[1]
    texts = {t.get_text(): t for t in ax.texts if t.get_text()}
    assert sorted(texts) == ["0.98", "0.99", "1.04", "1.14"]
    for text in texts.values():
        box = text.get_window_extent()
        assert text.get_rotation() == 0 and text.get_fontsize() >= 8
        dot_y = ax.transData.transform(text.xy)[1]
        if float(text.get_text()) < 1:
            assert box.y1 < dot_y < line_y
        else:
            assert line_y < dot_y < box.y0
    _check(fig)


def test_pauses_and_marks_count_from_zero_when_every_count_is_zero(tmp_path):
    from roce_emu.results.figures import pauses_marks_figure

    fig = pauses_marks_figure(_fake_sweep(tmp_path / "sw", {"none": 1.0, "dcqcn": 1.0}))
    fig.canvas.draw()
    for ax in fig.axes:
        low, high = ax.get_ylim()
        assert low == 0 and high > 0
        assert all(tick >= 0 for tick in ax.get_yticks() if low <= tick <= high)
        assert [t.get_text() for t in ax.texts] == ["0", "0"]


def test_the_rank_timeline_tiles_every_iteration(training_dir):
    """timeline.csv: per host and iteration, compute + exposed communication + idle = the
    iteration time, and the summary's breakdown is its mean."""
    import json

    import pandas as pd

    timeline = pd.read_csv(training_dir / "timeline.csv")
    summary = json.loads((training_dir / "summary.json").read_text())
    assert set(timeline["state"]) <= {"compute", "exposed_communication", "idle"}
    assert ((timeline["end_ns"] - timeline["start_ns"] - timeline["duration_ns"]).abs() < 1e-6).all()
    per = timeline.groupby(["iteration", "host"])["duration_ns"].sum().unstack()
    for it, length in enumerate(summary["iteration_ns"]):
        assert per.loc[it].to_numpy() == pytest.approx(length, abs=1e-3)
    means = timeline.groupby(["iteration", "host", "state"])["duration_ns"].sum().unstack(fill_value=0)
    assert means["compute"].mean() == pytest.approx(summary["mean_compute_ns"], rel=1e-9)
    assert means["exposed_communication"].mean() == pytest.approx(summary["mean_exposed_communication_ns"], rel=1e-9)


def test_torus_drawings_show_their_wrap_around_links(tmp_path):
    from roce_emu.fabric.summary import draw, wrap_links
    from roce_emu.fabric.topology import build_fabric

    for topology, expected in (
        ({"kind": "torus", "dims": [4, 4]}, 8),
        ({"kind": "torus", "dims": [8]}, 1),
        ({"kind": "mesh", "dims": [4, 4]}, 0),
        ({"kind": "torus", "dims": [2, 4]}, 2),
    ):
        fabric = build_fabric(
            scenario(topology=topology, workload={"flows": [{"src": 0, "dst": 1, "bytes": 1}]}).topology
        )
        wrap = wrap_links(fabric)
        assert len(wrap) == expected, (topology, wrap)
        for u, v in wrap:
            assert fabric.graph.has_edge(u, v)
        draw(fabric, tmp_path / "t.png")
        assert (tmp_path / "t.png").stat().st_size > 1000


def _labels_apart(labels) -> None:
    """No two tick labels overlap (each label's box, as drawn)."""
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), "two tick labels run together"


def test_a_swept_topology_key_labels_each_fabric_by_its_value_and_names_the_key_once(tmp_path):
    """A sweep of the spine links' rate (as in the tutorial): the ticks show the value, not the
    whole dotted key per tick, and do not overlap; the axis label names the key."""
    from roce_emu.results.figures import breakdown_figure, policy_time_figure

    key = "topology.tiers.leaf_spine.rate_gbps"
    (tmp_path / "sw").mkdir()
    columns = ["point", "network.cc.algorithm", key, "scenario", "status", "topology", "cc_algorithm"]
    columns += ["mean_iteration_ns", "mean_compute_ns", "mean_exposed_communication_ns", "mean_idle_ns"]
    lines = [",".join(columns)]
    for i, (policy, rate, t) in enumerate(
        [("none", 100, 15.4), ("dcqcn", 100, 19.6), ("none", 200, 12.0), ("dcqcn", 200, 12.6), ("none", 1000, 9.3)]
    ):
        lines.append(f"p{i},{policy},{rate},s,finished,leaf_spine,{policy},{t * 1e6},{1e6},{t * 1e6 - 2e6},{1e6}")
    (tmp_path / "sw" / "results.csv").write_text("\n".join(lines) + "\n")
    fig = policy_time_figure(tmp_path / "sw")
    fig.canvas.draw()
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == ["rate_gbps=100", "rate_gbps=200", "rate_gbps=1000"]  # the grid's order
    assert ax.get_xlabel().count(key) == 1
    _labels_apart(ax.get_xticklabels())
    _check(fig)
    fig = breakdown_figure(tmp_path / "sw")
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == ["rate_gbps=100 PFC only", "rate_gbps=100 DCQCN"]
    assert ax.get_xlabel().count(key) == 1


def test_pauses_and_marks_are_legible_and_on_a_log_scale_when_counts_span_orders(tmp_path):
    """451,430 marks next to 5,962: a symmetric-log axis from 0 on which the small bar is more
    than a sliver; the policy names do not run together. Counts of one magnitude stay linear."""
    from roce_emu.results.figures import pauses_marks_figure

    sweep = _fake_sweep(tmp_path / "sw", {p: 1.0 for p in ("none", "dcqcn", "hpcc", "timely", "dctcp")})
    with open(sweep / "results.csv") as fh:
        text = fh.read()
    counts = {"none": (2594, 451430), "dcqcn": (0, 10062), "hpcc": (0, 0), "timely": (0, 22992), "dctcp": (0, 5962)}
    for policy, (pauses, marks) in counts.items():
        text = text.replace(f",{policy},1.0,1.0,0,0", f",{policy},1.0,1.0,{pauses},{marks}")
    (sweep / "results.csv").write_text(text)
    fig = pauses_marks_figure(sweep)
    fig.canvas.draw()
    pauses, marks = fig.axes
    assert pauses.get_yscale() == "linear" and marks.get_yscale() == "symlog"
    assert "log scale" in marks.get_ylabel() and "log scale" not in pauses.get_ylabel()
    for ax in fig.axes:
        assert ax.get_ylim()[0] == 0
        _labels_apart(ax.get_xticklabels())
        _labels_apart(ax.get_yticklabels())
    heights = {t.get_text(): t for t in marks.texts}
    assert set(heights) == {"451,430", "10,062", "0", "22,992", "5,962"}
    box = marks.get_window_extent()
    small = [p for p in marks.patches if p.get_height() == 5962][0].get_window_extent()
    assert small.height > 0.3 * box.height, "5,962 marks drawn as a sliver next to 451,430"


def test_the_rate_figure_shows_the_flows_pacing_held_back_most(tmp_path):
    """Ten short flows at line rate come first by id; the two cut to 10 Gb/s are the ones shown
    first, and the title says how the flows were chosen."""
    from roce_emu.results.figures import rate_figure

    run = tmp_path / "r"
    run.mkdir()
    lines = ["t_ns,flow_id,rate_bps,window_bytes,acked_bytes"]
    for flow in range(10):
        lines += [f"0,{flow},100000000000,0,0", f"1000,{flow},100000000000,0,0"]
    for flow, cut in ((10, 10e9), (11, 40e9)):
        lines += [f"0,{flow},100000000000,0,0", f"1000,{flow},{cut:.0f},0,0", f"50000,{flow},{cut:.0f},0,0"]
    (run / "traces_rate.csv").write_text("\n".join(lines) + "\n")
    fig = rate_figure(run, top=4)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 4 and labels[0].startswith("flow 10: ") and labels[1].startswith("flow 11: ")
    assert "held back" in labels[0] and "4 of 12 flows held back most" in ax.get_title()
    assert ax.get_ylim()[0] == 0
    _check(fig)
