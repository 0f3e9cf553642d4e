"""Atomic run directories: everything is written to a temporary sibling, then renamed into place."""
import csv
import json
import os
import shutil
import tempfile
from pathlib import Path


def write_run_dir(out: Path, flow_rows: list[dict], columns, summary: dict) -> None:
    """Write flows.csv and summary.json into ``out`` atomically (complete or absent)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        with open(tmp / "flows.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
            writer.writeheader()
            writer.writerows(flow_rows)
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
