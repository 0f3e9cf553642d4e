"""Atomic run directories: everything is written to a temporary sibling, then renamed into place."""

import csv
import json
import os
import shutil
import tempfile
from importlib.util import find_spec
from pathlib import Path


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


def parquet_missing() -> str:
    """Why output.format parquet cannot be written here ('' if it can)."""
    if find_spec("pandas") and find_spec("pyarrow"):
        return ""
    return "'parquet' needs pandas and pyarrow: pip install 'roce-emu[parquet]'"


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


def write_run_dir(
    out: Path, summary: dict, tables: dict[str, tuple], fmt: str = "csv", texts: dict[str, str] | None = None
) -> None:
    """Write summary.json, the tables {"name.csv": (columns, rows)} and the text files
    {"name": text} into ``out`` atomically (complete or absent); with fmt "parquet" each table
    is name.parquet."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for name, (columns, rows) in tables.items():
            if fmt == "parquet":
                frame(columns, rows).to_parquet(tmp / name.replace(".csv", ".parquet"), index=False)
            else:
                write_csv(tmp / name, columns, rows)
        for name, text in (texts or {}).items():
            (tmp / name).write_text(text)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
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
    return summary


def read_rows(run_dir: Path, table: str) -> list[dict] | None:
    """A run directory's table ``table`` (e.g. "links") as rows of {column: value}, from
    table.csv (values as text) or table.parquet (needs pandas and pyarrow: else ScenarioError);
    None if the run has neither."""
    run_dir = Path(run_dir)
    if (run_dir / f"{table}.csv").is_file():
        with open(run_dir / f"{table}.csv", newline="") as fh:
            return list(csv.DictReader(fh))
    if (run_dir / f"{table}.parquet").is_file():
        if parquet_missing():
            from ..errors import ScenarioError

            raise ScenarioError(str(run_dir / f"{table}.parquet"), "", f"cannot read it: {parquet_missing()}")
        import pandas as pd

        return pd.read_parquet(run_dir / f"{table}.parquet").to_dict("records")
    return None


def replace_dir(new: Path, dest: Path) -> None:
    """Move directory ``new`` to ``dest``, replacing an older ``dest`` without a moment of mixing."""
    if dest.exists():
        trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        os.replace(dest, trash / "old")
        os.replace(new, dest)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(new, dest)
