"""Write a scenario roce-emu made (``import``, ``design``): validated first, with a header naming
its sources and what was not carried over (or, for a design, what was chosen and why) and
roce-emu's stamp, atomically (a reader never sees half a file), never over a file unless asked
and roce-emu wrote it."""

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from ..config.load import validate_document, with_current_names
from .destination import check_file, stamped


def write_scenario(
    doc: dict, dest: Path, sources: list[str], notes: list[str], overwrite: bool = False, about: Sequence[str] = ()
) -> Path:
    """Write ``doc`` to ``dest`` with a header naming its sources, then the ``about`` lines (what
    the file is, e.g. which design was chosen and why), then the ``notes`` (what was not carried
    over), and roce-emu's stamp (results/destination.py); an existing file is replaced only with
    ``overwrite`` and only if roce-emu wrote it. A deprecated name of a value is written as its
    current name."""
    dest = Path(dest)
    check_file(dest, "--out", overwrite)
    validate_document(doc, str(dest))  # an importer's bug must not reach the user's disk
    doc = with_current_names(doc)
    header = [f"# {'Written' if about else 'Imported'} by roce-emu from {', '.join(sources)}."]
    header += [f"# {line}" for line in about]
    if notes:
        header.append("# Not carried over:")
        header += [f"#   - {n}" for n in notes]
    text = stamped("\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def write_imported(doc: dict, dest: Path | None, sources: list[str], notes: list[str], overwrite: bool = False) -> Path:
    """write_scenario for an importer's document: to ``dest``, by default ./NAME.yaml after the
    document's name."""
    return write_scenario(doc, Path(dest or f"{doc['name']}.yaml"), sources, notes, overwrite)


def import_scenario(
    read: Callable[[], tuple[dict, list[str], list[str]]], dest: Path | None, overwrite: bool = False
) -> tuple[Path, list[str]]:
    """``roce-emu import``: ``dest`` (when given) checked first, then the other tool's files read
    (``read()``: the document, what was not carried over, the files read) and the scenario
    written (write_imported). Returns where it went and the notes."""
    if dest is not None:
        check_file(Path(dest), "--out", overwrite)
    doc, notes, sources = read()
    return write_imported(doc, dest, sources, notes, overwrite), notes
