"""benchmarks/llm.py --quick: every point runs to the end in its own process, is recorded with the
figures the benchmarks page reports, and the recorded points make the table."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "llm.py"


def llm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_quick_matrix_runs_and_tabulates(tmp_path):
    out = tmp_path / "llm.json"
    grid = ("--quick", "--out", str(out), "--cc", "dcqcn", "--oversub", "2", "--pxn", "off", "--pxn", "on")
    ran = llm(*grid)
    assert ran.returncode == 0, ran.stderr
    points = json.loads(out.read_text())
    assert len(points) == 4  # 2 cases x 2 PXN settings
    for p in points:
        assert p["status"] == "finished" and p["flows_finished"] == p["flows"] > 0
        assert p["mean_exposed_communication_ns"] <= p["mean_communication_ns"] + 1e-6
        assert p["mean_compute_ns"] < p["mean_iteration_ns"]
        assert p["rss_mb"] > 0 and p["wall_s"] > 0
        assert sum(p["marks_at"].values()) == p["ecn_marks"]
        assert sum(p["pauses_at"].values()) == p["pfc_pauses_sent"]

    def point(case, cc, pxn):
        return next(p for p in points if (p["case"], p["cc"], p["pxn"]) == (case, cc, pxn))

    # the GPT's tensor parallelism stays in a server and its pipeline and data-parallel peers are
    # on the same rail: PXN has no cross-rail traffic to move; the MoE's expert groups span rails
    assert point("gpt", "dcqcn", "on")["events"] == point("gpt", "dcqcn", "off")["events"]
    assert point("gpt", "dcqcn", "on")["mean_iteration_ns"] == point("gpt", "dcqcn", "off")["mean_iteration_ns"]
    assert point("moe", "dcqcn", "on")["mean_iteration_ns"] != point("moe", "dcqcn", "off")["mean_iteration_ns"]

    shown = llm("--table", "--out", str(out))
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.startswith("| gpt") or line.startswith("| moe")]
    assert len(rows) == 4
    # re-running one point replaces it in the file
    again = llm("--quick", "--out", str(out), "--case", "gpt", "--cc", "dcqcn", "--oversub", "2", "--pxn", "off")
    assert again.returncode == 0, again.stderr
    assert len(json.loads(out.read_text())) == 4


def test_bad_gpu_count_is_one_line_and_exit_2(tmp_path):
    ran = llm("--quick", "--gpus", "48", "--out", str(tmp_path / "x.json"))
    assert ran.returncode == 2
    assert ran.stderr.strip().count("\n") == 0 and "--gpus 48" in ran.stderr
