"""Output of the benchmarks' tables: a Markdown table on stdout and tidy CSV."""

import csv
from pathlib import Path


def print_markdown(rows: list[dict]) -> None:
    """The rows as a Markdown table (integers with thousands separators), the first row's keys as columns."""
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = (f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in columns)
        print("| " + " | ".join(cells) + " |", flush=True)


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
