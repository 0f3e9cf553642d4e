"""The jitted packet engine: NumPy arrays and integers only.

Importing this package ties Numba's on-disk cache to a hash of the sources in this
folder. Numba checks a cached function against its own file only, so a cached caller
does not notice an edited callee in another module; with the hash, every distinct
version of the core gets its own cache directory and nobody measures or tests stale
machine code.
"""

import hashlib
import os
import shutil
import sys
from pathlib import Path


def _core_source_hash() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):  # subfolders too
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _cache_base() -> Path:
    explicit = os.environ.get("ROCE_EMU_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "roce-emu"


CORE_HASH = _core_source_hash()
CACHE_DIR = _cache_base() / f"numba-{CORE_HASH}"
os.environ["NUMBA_CACHE_DIR"] = str(CACHE_DIR)
if "numba" in sys.modules:  # numba read its config already: make it read it again
    from numba.core import config as _numba_config

    _numba_config.reload_config()


def clear_cache() -> list[Path]:
    """Delete every cached compilation of roce-emu: the numba-<hash> folders of all core
    versions beside CACHE_DIR (nothing else in that folder); the folders removed."""
    removed = sorted(CACHE_DIR.parent.glob("numba-*")) if CACHE_DIR.parent.is_dir() else []
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed
