"""The engine runs as plain Python (NUMBA_DISABLE_JIT=1), so that debuggers and coverage see it.

The tests marked ``nojit`` (CONTRIBUTING.md, "Tests") are the ones quick enough to run that way; this
test runs them unjitted and reads the engine's line coverage, so that the path cannot break unseen."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.extensive

ROOT = Path(__file__).resolve().parent.parent


def test_the_engine_runs_unjitted_and_coverage_sees_it(tmp_path):
    report = tmp_path / "coverage.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # one process: the coverage of a single run
            "-m",
            "nojit",
            "-W",
            "ignore::RuntimeWarning",  # the hash in core/rng.py wraps around in uint64, as it does jitted
            "--cov=roce_emu.core",
            f"--cov-report=json:{report}",
        ],
        cwd=ROOT,
        env=dict(os.environ, NUMBA_DISABLE_JIT="1", COVERAGE_FILE=str(tmp_path / ".coverage")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:]
    files = json.loads(report.read_text())["files"]
    # the exact engine's modules (the fast-forward kernels drive it; these tests do not run them)
    engine = [v["summary"] for k, v in files.items() if not k.endswith(("fastforward.py", "memo.py"))]
    covered = sum(s["covered_lines"] for s in engine) / sum(s["num_statements"] for s in engine)
    assert covered >= 0.5, covered  # measured 55 % (loop, NIC, ports, MMU, heap, queue pairs)
    loop = next(v for k, v in files.items() if k.endswith("core/loop.py"))
    assert loop["summary"]["percent_covered"] >= 60, loop["summary"]
