"""Atomic run directories: everything is written to a temporary sibling, then renamed into place."""
import csv
import json
import os
import shutil
import tempfile
from pathlib import Path


def write_csv(path: Path, columns, rows) -> None:
    """A tidy CSV: a header line, then one line per row (dicts keyed by column, or sequences)."""
    with open(path, "w", newline="") as fh:
        if rows and isinstance(rows[0], dict):
            writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
            writer.writeheader()
        else:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
        writer.writerows(rows)


def write_run_dir(out: Path, flow_rows: list[dict], columns, summary: dict,
                  tables: dict[str, tuple] = None) -> None:
    """Write flows.csv, summary.json and any further tables {file name: (columns, rows)} into
    ``out`` atomically (complete or absent)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        write_csv(tmp / "flows.csv", columns, flow_rows)
        for name, (table_columns, rows) in (tables or {}).items():
            write_csv(tmp / name, table_columns, rows)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        os.chmod(tmp, 0o755)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(new: Path, dest: Path) -> None:
    """Move directory ``new`` to ``dest``, replacing an older ``dest`` without a moment of mixing."""
    if dest.exists():
        trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        os.replace(dest, trash / "old")
        os.replace(new, dest)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(new, dest)
