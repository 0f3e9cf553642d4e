"""Atomic run directories: everything is written to a temporary sibling, then renamed into place;
tables as tidy CSV or Parquet."""

import csv
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..config.schema import FORMER_NAMES, parquet_missing
from ..errors import OutputError
from .destination import check_directory, write_marker


def write_csv(path: Path, columns, rows) -> None:
    """A tidy CSV: a header line, then one line per row (dicts keyed by column, or sequences)."""
    with open(path, "w", newline="") as fh:
        if rows and isinstance(rows[0], dict):
            dict_writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
            dict_writer.writeheader()
            dict_writer.writerows(rows)
        else:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(rows)


def frame(columns, rows):
    """A table as a pandas DataFrame, every column that holds only numbers (or nothing) numeric:
    times in ns as float64, empty cells as NaN."""
    import pandas as pd

    records = rows if rows and isinstance(rows[0], dict) else [dict(zip(columns, r)) for r in rows]
    df = pd.DataFrame.from_records(records, columns=list(columns))
    for name in df.columns:
        cells = df[name].replace("", None)
        numbers = pd.to_numeric(cells, errors="coerce")
        if numbers.notna().sum() == cells.notna().sum():
            df[name] = numbers
    return df


#: the file endings a run directory's tables are written with (output.format csv or parquet)
TABLE_SUFFIXES = (".csv", ".parquet")


def table_files(run_dir: Path) -> dict[str, Path]:
    """A run directory's tables by name ("flows", "traces_queue", ...), whichever format wrote them."""
    return {p.stem: p for p in sorted(Path(run_dir).iterdir()) if p.suffix in TABLE_SUFFIXES and p.is_file()}


def read_table(path: Path) -> list[dict]:
    """A run table as rows {column: cell}, CSV cells as text and Parquet cells as numbers, an
    empty cell "" in both; reading CSV needs no pandas, Parquet needs pandas and pyarrow (else
    ScenarioError, one line)."""
    path = Path(path)
    if path.suffix != ".parquet":
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    if parquet_missing():
        from ..errors import ScenarioError

        raise ScenarioError(str(path), "", f"cannot read it: {parquet_missing()}")
    import pandas as pd

    df = pd.read_parquet(path)
    return df.astype(object).where(df.notna(), "").to_dict("records")


def write_run_dir(
    out: Path, summary: dict, tables: dict[str, tuple], fmt: str = "csv", texts: dict[str, str] | None = None
) -> None:
    """Write summary.json, the tables {"name.csv": (columns, rows)}, the text files
    {"name": text} and roce-emu's marker (results/destination.py) into ``out`` atomically
    (complete or absent); with fmt "parquet" each table is name.parquet. An existing ``out``
    is replaced only if it is a run directory roce-emu wrote (ScenarioError otherwise).

    If writing fails all the same (a full disk, a folder removed meanwhile), the results are
    written to a new folder in the system's temporary directory instead, and OutputError
    says where (or that they could not be kept either)."""
    out = Path(out)
    check_directory(out, "--out", "run", overwrite=True)
    try:
        write_run_files(out, summary, tables, fmt, texts)
    except OSError as err:
        reason = f"{out}: cannot write the results ({err.strerror or err})"
        kept = None
        try:
            kept = Path(tempfile.mkdtemp(prefix=f"roce-emu-{out.name}-"))
            write_run_files(kept / "run", summary, tables, fmt, texts)
        except OSError as again:
            if kept is not None:
                shutil.rmtree(kept, ignore_errors=True)
            raise OutputError(f"{reason}; they could not be kept elsewhere either ({again.strerror or again})") from err
        raise OutputError(f"{reason}; they are kept in {kept / 'run'}") from err


def write_run_files(
    out: Path, summary: dict, tables: dict[str, tuple], fmt: str = "csv", texts: dict[str, str] | None = None
) -> None:
    """write_run_dir's writing without its destination check and fallback: the files and the
    marker into a temporary sibling, then renamed into place (replacing an older ``out``)."""
    with atomic_directory(out) as tmp:
        for name, (columns, rows) in tables.items():
            if fmt == "parquet":
                frame(columns, rows).to_parquet(tmp / name.replace(".csv", ".parquet"), index=False)
            else:
                write_csv(tmp / name, columns, rows)
        for name, text in (texts or {}).items():
            (tmp / name).write_text(text)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


@contextmanager
def atomic_directory(out: Path, kind: str = "run") -> Iterator[Path]:
    """A temporary sibling of ``out`` with roce-emu's marker of ``kind`` to write into; renamed into
    place (replacing an older ``out``) when the block ends, removed if it fails."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        write_marker(tmp, kind)
        yield tmp
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_summary(run_dir: Path) -> dict:
    """A run directory's summary.json; ScenarioError (one line) if the directory is not a run
    directory or its summary is not JSON."""
    from ..errors import ScenarioError

    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise ScenarioError(str(run_dir), "", "not a run directory (no summary.json): give one that roce-emu run wrote")
    try:
        summary = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ScenarioError(str(path), "", f"not readable as JSON ({err})") from None
    if not isinstance(summary, dict):
        raise ScenarioError(str(path), "", "not a run summary (expected a JSON object)")
    return summary_with_current_names(summary)


def summary_with_current_names(summary: dict) -> dict:
    """A summary as this version writes it, from one an older version wrote: the key
    fast_forward_exact (true unless a packet train was sent) becomes approximate (its opposite)
    in its place, and the fast_forward mode on is named trains."""
    if "fast_forward_exact" in summary and "approximate" not in summary:
        older, summary = summary, {}
        for key, value in older.items():
            if key == "fast_forward_exact":
                summary["approximate"] = not value
            else:
                summary[key] = value
    former = FORMER_NAMES["sim.fast_forward"]
    if isinstance(summary.get("fast_forward"), str) and summary["fast_forward"] in former:
        summary = {**summary, "fast_forward": former[summary["fast_forward"]]}
    return summary


def read_rows(run_dir: Path, table: str) -> list[dict] | None:
    """A run directory's table ``table`` ("flows", "links", "traces_queue", ...) as rows, from
    whichever format wrote it (read_table); None when the run has no such table."""
    path = table_files(run_dir).get(table)
    return None if path is None else read_table(path)


def replace_dir(new: Path, dest: Path) -> None:
    """Move directory ``new`` to ``dest``, replacing an older ``dest`` without a moment of mixing
    (the caller has checked that ``dest`` may be replaced); if a move fails, ``dest`` is put
    back and no temporary folder is left."""
    if not dest.exists():
        os.replace(new, dest)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    try:
        os.replace(dest, trash / "old")
        try:
            os.replace(new, dest)
        except BaseException:
            os.replace(trash / "old", dest)
            raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)
