"""Where roce-emu may write, checked before anything is built or simulated: a bad path costs no
work, and nothing of the user's is ever replaced.

What roce-emu may replace (``--overwrite``), and add to:

- A directory (a run, a sweep, a plot folder) is roce-emu's when it holds the marker file
  ``.roce-emu``, which roce-emu writes into every directory it creates; its first word is
  the kind (``run``, ``sweep``, ``plots``). ``run --overwrite`` replaces only a run directory
  so marked; a sweep adds points only to a sweep directory so marked (or an empty one). A
  sweep directory without the marker is roce-emu's too when its layout says so: the
  ``sweep.json`` record sweep.write_sweep_record writes, beside ``points/``; it gets its
  marker when the sweep resumes. Any other directory, and a file where a directory belongs,
  is refused.
- A file is roce-emu's when it is a scenario roce-emu wrote and nobody edited since (its
  stamp line ``# roce-emu-sha256: <digest>`` matches the rest of its text; ``import`` and
  ``design`` write it), a shipped example copied out unchanged, or an image roce-emu drew
  (``topo --draw``, ``plot``): signed "roce-emu" in the metadata matplotlib writes (see
  image_metadata and is_roce_emu_image). Anything else is the user's.
- Never the current directory or a folder holding it, nor a folder holding an input file.

A destination's deepest existing folder must be a directory roce-emu can write to (probed
with a temporary file, so a read-only or virtual file system such as /proc fails here too);
the missing folders below it are created when the results are written. ``copy_example`` copies
a shipped example out under the same rules.
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import ScenarioError
from ..examples import example_names, examples_dir, is_shipped_example
from ..images import is_roce_emu_image

#: the marker file of a directory roce-emu wrote
MARKER = ".roce-emu"
STAMP = "# roce-emu-sha256: "
#: the name of the file check_writable writes and removes (a killed process may leave one)
PROBE_PREFIX = ".roce-emu-probe-"
#: the keys of a sweep's sweep.json (sweep.write_sweep_record; tests/test_sweep.py holds them equal)
SWEEP_RECORD_KEYS = {"scenario", "grid", "repeat", "fixed", "points", "provenance"}
_STAMP_LINE = re.compile(r"^# roce-emu-sha256: ([0-9a-f]{64})\n", re.MULTILINE)


def write_marker(directory: Path, kind: str) -> None:
    (Path(directory) / MARKER).write_text(f"{kind}: written by roce-emu, which may replace this folder\n")


def marker_kind(directory: Path) -> str | None:
    """The kind a directory's marker names, or None when roce-emu did not write it."""
    try:
        return (Path(directory) / MARKER).read_text().split(":", 1)[0].strip()
    except (OSError, UnicodeDecodeError):
        return None


def directory_kind(directory: Path) -> str | None:
    """The kind of roce-emu directory this is: its marker's, or "sweep" for a sweep directory
    without the marker (is_unmarked_sweep); None when roce-emu did not write it."""
    found = marker_kind(directory)
    if found is None and is_unmarked_sweep(directory):
        return "sweep"
    return found


def is_unmarked_sweep(directory: Path) -> bool:
    """A sweep directory roce-emu wrote without the marker: ``sweep.json`` is the record
    sweep.write_sweep_record writes (a JSON object with every one of its keys) and ``points/``
    is a folder."""
    directory = Path(directory)
    if (directory / MARKER).exists() or not (directory / "points").is_dir():
        return False
    try:
        record = json.loads((directory / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and SWEEP_RECORD_KEYS <= set(record)


def stamped(text: str) -> str:
    """Text to write with its stamp line appended: the digest of everything before it."""
    return f"{text}{STAMP}{hashlib.sha256(text.encode()).hexdigest()}\n"


def is_stamped(path: Path) -> bool:
    """Whether the file carries a stamp that matches the rest of its text (unedited since)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    found = _STAMP_LINE.search(text)
    if found is None:
        return False
    rest = text[: found.start()] + text[found.end() :]
    return hashlib.sha256(rest.encode()).hexdigest() == found.group(1)


def check_writable(path: Path, option: str) -> None:
    """The folder ``path`` goes into can be created and written: its deepest existing ancestor
    is a directory that takes a new file."""
    path = Path(path)
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ScenarioError(option, str(path), f"{parent} is a file, not a folder: give {option} another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=parent)
    except OSError as err:
        raise ScenarioError(
            option, str(path), f"cannot write in {parent} ({err.strerror or err}): give {option} another path"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _check_not_in_use(path: Path, option: str, inputs: Sequence[Path | str]) -> None:
    """Refuse the current directory, a folder holding it, and a folder holding an input file."""
    target = Path(path).resolve()
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise ScenarioError(option, str(path), f"is the current directory or holds it: give {option} a new folder")
    for source in inputs:
        if target in Path(source).resolve().parents:
            raise ScenarioError(option, str(path), f"holds the input {source}: give {option} a new folder")


def check_directory(
    path: Path, option: str, kind: str, overwrite: bool = False, inputs: Sequence[Path | str] = ()
) -> None:
    """A directory of ``kind`` may be written at ``path``. For "run" an existing one needs
    ``overwrite`` and is replaced; for "sweep" and "plots" an existing one is added to. Either
    way an existing directory must carry roce-emu's marker of that kind (a sweep or plot folder
    may also be empty); raises ScenarioError otherwise."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        _check_not_in_use(path, option, inputs)
        if not path.is_dir():
            raise ScenarioError(option, str(path), f"is a file, not a {kind} directory: give {option} another path")
        found = directory_kind(path)
        if found != kind and not (kind != "run" and not any(path.iterdir())):
            what = f"a roce-emu {found} directory" if found else "a folder roce-emu did not write"
            raise ScenarioError(
                option,
                str(path),
                f"is {what}; roce-emu only {'replaces' if kind == 'run' else 'writes into'} its own {kind} "
                f"directories: give {option} a new folder (or move this one away)",
            )
        if kind == "run" and not overwrite:
            raise ScenarioError(
                option, str(path), f"the run directory exists: add --overwrite to replace it, or give {option} another"
            )
    check_writable(path, option)


def check_file(path: Path, option: str, overwrite: bool = False) -> None:
    """A file may be written at ``path``: it is new, or ``overwrite`` is given and roce-emu wrote
    the existing one (written_by_roce_emu); raises ScenarioError otherwise."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise ScenarioError(option, str(path), f"is a folder: give {option} a file name")
        if not overwrite:
            raise ScenarioError(
                option, str(path), f"exists: add --overwrite to replace it, or give {option} another path"
            )
        if not written_by_roce_emu(path):
            raise ScenarioError(
                option,
                str(path),
                "was not written by roce-emu or was edited since; roce-emu replaces only its own files: "
                f"give {option} another path (or move this file away)",
            )
    check_writable(path, option)


def check_image(path: Path, option: str, overwrite: bool = False) -> None:
    """An image (.png, .pdf or .svg) may be drawn at ``path`` (check_file)."""
    if Path(path).suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ScenarioError(option, str(path), "must end in .png, .pdf or .svg")
    check_file(path, option, overwrite)


def make_directory(path: Path, kind: str) -> None:
    """Create the directory of ``kind`` (and its missing parents) with roce-emu's marker; an
    existing empty one, and a sweep directory without its marker, get the marker too; any
    other with anything in it is left as it is."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if not any(path.iterdir()) or (kind == "sweep" and is_unmarked_sweep(path)):
        write_marker(path, kind)


def written_by_roce_emu(path: Path) -> bool:
    """The file is a scenario roce-emu wrote and nobody edited since, a shipped example copied
    out unchanged, or an image roce-emu drew."""
    return is_stamped(path) or is_shipped_example(path) or is_roce_emu_image(path)


def copy_example(name: str, dest: str | Path | None = None, overwrite: bool = False) -> Path:
    """Copy example ``name`` (with or without .yaml) to ``dest`` (a file, or a folder to copy
    into: one that exists, or a path ending in a separator, made if need be; default:
    ./NAME.yaml); an existing file is replaced only with ``overwrite`` and only if roce-emu wrote
    it (written_by_roce_emu): an edited copy is the user's."""
    stem = name[:-5] if name.endswith(".yaml") else name
    names = example_names()
    if stem not in names:
        raise ScenarioError("roce-emu examples", name, f"no such example (there are: {', '.join(names)})")
    folder = dest is not None and str(dest).endswith(("/", os.sep))
    dest = Path(dest) if dest is not None else Path(f"{stem}.yaml")
    if folder or dest.is_dir():
        dest = dest / f"{stem}.yaml"
    check_file(dest, "--to", overwrite)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(examples_dir() / f"{stem}.yaml", dest)
    return dest
