"""Where a result came from: the code, the engine, the inputs and the platform of a run.

Every run directory carries this record in summary.json ("provenance") next to the resolved
scenario (scenario.yaml), so that a figure can be traced to the exact code and inputs, and
``roce-emu run <run dir>/scenario.yaml`` reruns it.
"""

import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from .. import __version__
from ..core import CORE_HASH


@lru_cache(maxsize=1)
def git_describe() -> str | None:
    """``git describe --always --dirty`` of the checkout roce_emu runs from; None when it is not
    a git checkout (an installed wheel) or git is missing."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "describe", "--always", "--dirty", "--tags"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def provenance(source: str, overrides: list[str] | tuple, seed: int | None) -> dict:
    """The record for summary.json: roce-emu's version and git state, the engine's source hash
    (the Numba cache key), the scenario file, the --set overrides, the seed, and the versions of
    Python, numba and numpy."""
    return {
        "roce_emu_version": __version__,
        "git": git_describe(),
        "engine_hash": CORE_HASH,
        "scenario_file": source,
        "overrides": list(overrides),
        "seed": seed,
        "python": platform.python_version(),
        "numba": _version("numba"),
        "numpy": _version("numpy"),
        "platform": f"{sys.platform}-{platform.machine()}",
        "resolved_scenario": "scenario.yaml",
    }


def scenario_yaml(document: dict) -> str:
    """The resolved scenario as YAML that loads back to the same scenario (keys in schema order)."""
    header = (
        "# The scenario as this run used it, every default filled in (roce-emu "
        f"{__version__}).\n# Rerun: roce-emu run <this file> --out <new run dir>\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)
