"""Where roce-emu writes: only what it wrote is replaced, output paths are checked before
anything is built, and a failed write does not lose a finished run (results/destination.py)."""

import errno
import json
import time
from pathlib import Path

import pytest

from test_cli import SCEN, cli

NET = "topology: [ Ring, Switch ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50, 25 ]\nlatency: [ 500, 1000 ]\n"
#: a run of many seconds: if it is refused in less, it was refused before simulating
LONG = [SCEN / "fat_tree_all_to_all.yaml", "--set", "workload.patterns.0.bytes=20000000"]


def _one_line_error(p, *needles) -> str:
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_overwrite_replaces_only_a_run_directory_roce_emu_wrote(tmp_path):
    mydata = tmp_path / "mydata"
    mydata.mkdir()
    (mydata / "thesis.tex").write_text("\\chapter{Results}\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for target in (mydata, notes):
        p = cli("run", SCEN / "single_flow.yaml", "--out", target, "--overwrite", cwd=tmp_path)
        _one_line_error(p, str(target), "--out")
    assert (mydata / "thesis.tex").read_text() == "\\chapter{Results}\n" and len(list(mydata.iterdir())) == 1
    assert notes.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydata", "notes.txt"], "a temporary folder is left"
    # a run directory roce-emu wrote carries its marker, and --overwrite replaces it
    run = tmp_path / "run"
    assert cli("run", SCEN / "single_flow.yaml", "--out", run).returncode == 0
    assert (run / ".roce-emu").read_text().startswith("run")
    p = cli("run", SCEN / "single_flow.yaml", "--out", run, "--overwrite", "--set", "workload.flows.0.bytes=5000")
    assert p.returncode == 0, p.stderr
    assert "5000" in (run / "flows.csv").read_text()


def test_the_current_folder_its_ancestors_and_the_input_s_folder_are_never_replaced(tmp_path):
    run = tmp_path / "run"
    assert cli("run", SCEN / "single_flow.yaml", "--out", run).returncode == 0
    before = _listing(tmp_path)
    for out in (".", ".."):  # a run directory roce-emu wrote, but the current one / its parent
        p = cli("run", SCEN / "single_flow.yaml", "--out", out, "--overwrite", cwd=run)
        _one_line_error(p, "current directory")
    # rerunning a run directory's resolved scenario into that very directory
    p = cli("run", run / "scenario.yaml", "--out", run, "--overwrite")
    _one_line_error(p, "holds the input")
    assert _listing(tmp_path) == before
    assert not [p for p in tmp_path.rglob(".*") if p.name != ".roce-emu"], "a temporary folder is left"


@pytest.mark.parametrize("where", ["file", "proc"])
def test_a_run_into_a_path_that_cannot_be_written_is_refused_before_simulating(tmp_path, where):
    (tmp_path / "afile").write_text("x\n")
    out = tmp_path / "afile" / "sub" if where == "file" else Path("/proc/roce-emu-test/x")
    began = time.time()
    p = cli("run", *LONG, "--out", out, cwd=tmp_path)
    _one_line_error(p, str(out))
    assert time.time() - began < 30, "the path was checked only after simulating"
    assert (tmp_path / "afile").read_text() == "x\n"


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", SCEN / "single_flow.yaml", "--grid", "network.cc.algorithm=none,dcqcn", "--out", "afile/sub"],
        ["plot", "run", "--out", "afile/sub"],
        ["topo", SCEN / "incast.yaml", "--draw", "afile/sub/t.png"],
        ["design", SCEN / "allreduce_multi_dim.yaml", "--budget-gbps", "800", "-o", "afile/sub.yaml"],
        ["import", "astra-sim", "net.yml", "-o", "afile/sub.yaml"],
        ["examples", "incast", "--to", "afile/sub.yaml"],
    ],
    ids=["sweep", "plot", "topo", "design", "import", "examples"],
)
def test_every_command_refuses_an_output_it_cannot_write_in_one_line(tmp_path, args):
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "net.yml").write_text(NET)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"scenario": "x"}))
    before = _listing(tmp_path)
    p = cli(*args, cwd=tmp_path)
    _one_line_error(p, "afile")
    assert _listing(tmp_path) == before


def test_topo_draws_into_a_folder_it_creates(tmp_path):
    p = cli("topo", SCEN / "incast.yaml", "--draw", tmp_path / "nodir" / "deeper" / "t.png")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert (tmp_path / "nodir" / "deeper" / "t.png").stat().st_size > 0


def test_topo_replaces_only_a_drawing_roce_emu_made_and_only_with_overwrite(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = {}
    for ext in ("png", "pdf", "svg"):  # the user's images, made with matplotlib too
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        fig.savefig(tmp_path / f"mine.{ext}")
        plt.close(fig)
        mine[ext] = (tmp_path / f"mine.{ext}").read_bytes()
    for ext in mine:
        for extra in ([], ["--overwrite"]):
            p = cli("topo", SCEN / "incast.yaml", "--draw", f"mine.{ext}", *extra, cwd=tmp_path)
            _one_line_error(p, f"mine.{ext}", "--draw", "not written by roce-emu" if extra else "--overwrite")
            assert (tmp_path / f"mine.{ext}").read_bytes() == mine[ext]
        # a drawing roce-emu made is replaced with --overwrite, and only then
        assert cli("topo", SCEN / "incast.yaml", "--draw", f"t.{ext}", cwd=tmp_path).returncode == 0
        p = cli("topo", SCEN / "incast.yaml", "--set", "topology.hosts=3", "--draw", f"t.{ext}", cwd=tmp_path)
        _one_line_error(p, f"t.{ext}", "exists: add --overwrite")
        drawn = (tmp_path / f"t.{ext}").read_bytes()
        smaller = ["--set", "topology.hosts=3"]
        p = cli("topo", SCEN / "incast.yaml", *smaller, "--draw", f"t.{ext}", "--overwrite", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (tmp_path / f"t.{ext}").read_bytes() != drawn


def test_a_sweep_and_plots_write_only_into_their_own_folders(tmp_path):
    mydata = tmp_path / "mydata"
    mydata.mkdir()
    (mydata / "results.csv").write_text("my,own\n1,2\n")
    before = _listing(tmp_path)
    p = cli("sweep", SCEN / "single_flow.yaml", "--grid", "network.cc.algorithm=none,dcqcn", "--out", mydata)
    _one_line_error(p, str(mydata), "did not write")
    run = tmp_path / "run"
    assert cli("run", SCEN / "single_flow.yaml", "--out", run).returncode == 0
    before = _listing(tmp_path)
    p = cli("plot", run, "--out", mydata)
    _one_line_error(p, str(mydata), "did not write")
    assert _listing(tmp_path) == before
    p = cli("plot", run)  # a new folder: marked, and plotting again writes into it
    assert p.returncode == 0, p.stderr
    assert (run / "plots" / ".roce-emu").read_text().startswith("plots")
    assert cli("plot", run).returncode == 0


def test_files_are_replaced_only_if_roce_emu_wrote_them_unedited(tmp_path):
    (tmp_path / "net.yml").write_text(NET)
    # an example copied out unchanged is roce-emu's; an edited copy is the user's
    assert cli("examples", "incast", cwd=tmp_path).returncode == 0
    assert cli("examples", "cc_hpcc", "--to", "incast.yaml", "--overwrite", cwd=tmp_path).returncode == 0
    assert (tmp_path / "incast.yaml").read_bytes() == (SCEN / "cc_hpcc.yaml").read_bytes()
    edited = (tmp_path / "incast.yaml").read_text() + "# my change\n"
    (tmp_path / "incast.yaml").write_text(edited)
    p = cli("examples", "incast", "--overwrite", cwd=tmp_path)
    _one_line_error(p, "incast.yaml", "edited")
    assert (tmp_path / "incast.yaml").read_text() == edited
    # an imported scenario carries a stamp: replaced while unedited, kept once edited
    assert cli("import", "astra-sim", "net.yml", "-o", "s.yaml", cwd=tmp_path).returncode == 0
    assert "# roce-emu-sha256: " in (tmp_path / "s.yaml").read_text()
    p = cli("import", "astra-sim", "net.yml", "--bytes", "1000", "-o", "s.yaml", "--overwrite", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "bytes: 1000" in (tmp_path / "s.yaml").read_text()
    edited = (tmp_path / "s.yaml").read_text().replace("bytes: 1000", "bytes: 2000")
    (tmp_path / "s.yaml").write_text(edited)
    for args in (
        ["import", "astra-sim", "net.yml", "-o", "s.yaml", "--overwrite"],
        ["design", SCEN / "allreduce_multi_dim.yaml", "--budget-gbps", "800", "-o", "s.yaml", "--overwrite"],
        ["examples", "incast", "--to", "s.yaml", "--overwrite"],
    ):
        _one_line_error(cli(*args, cwd=tmp_path), "s.yaml", "not written by roce-emu")
    assert (tmp_path / "s.yaml").read_text() == edited
    # a file the user wrote is never replaced
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    design = ["design", SCEN / "allreduce_multi_dim.yaml", "--budget-gbps", "800"]
    p = cli(*design, "-o", "mine.yaml", "--overwrite", cwd=tmp_path)
    _one_line_error(p, "mine.yaml", "not written by roce-emu")
    assert (tmp_path / "mine.yaml").read_text() == "name: mine\n"


def test_a_failed_write_keeps_the_results_elsewhere_and_says_where(tmp_path, monkeypatch):
    """A full disk (simulated on the target's folder only): one OutputError line naming the
    target and the folder where the complete results were written instead; no temporary
    folder is left beside the target."""
    from roce_emu.api import run_scenario
    from roce_emu.errors import OutputError
    from roce_emu.results import output

    target = tmp_path / "runs" / "r"
    real = output.write_csv

    def full_disk(path, columns, rows):
        if Path(path).parent.parent == target.parent:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, columns, rows)

    monkeypatch.setattr(output, "write_csv", full_disk)
    with pytest.raises(OutputError) as err:
        run_scenario(SCEN / "single_flow.yaml", out=target)
    message = str(err.value)
    assert "\n" not in message and str(target) in message and "No space left" in message
    kept = Path(message.rsplit("kept in ", 1)[1])
    try:
        assert json.loads((kept / "summary.json").read_text())["flows_finished"] == 1
        assert (kept / "flows.csv").is_file() and (kept / ".roce-emu").is_file()
    finally:
        import shutil

        shutil.rmtree(kept.parent)
    assert not target.exists() and list(target.parent.iterdir()) == []
