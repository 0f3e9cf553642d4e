"""The code base passes its linter and formatter (ruff) and its type check (mypy), configured in
pyproject.toml, so CI runs them with the tests."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["roce_emu", "tests", "benchmarks", "plots"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.quick
def test_ruff_finds_nothing():
    p = _run("ruff", "check", *SOURCES)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.quick
def test_ruff_format_leaves_everything_as_it_is():
    p = _run("ruff", "format", "--check", *SOURCES)
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_finds_nothing():
    """The Python side type-checks (the jitted core is left out, see pyproject.toml)."""
    p = _run("mypy")
    assert p.returncode == 0, p.stdout + p.stderr
