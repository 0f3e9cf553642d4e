"""Shared entry point of the plot scripts: read a directory, make some figures, save PDF and PNG."""

import argparse
from pathlib import Path

from roce_emu.results.figures import save


def run_script(doc: str, makers: dict, argv=None) -> list[Path]:
    """Parse ``DIRECTORY [--out OUT]``, make each figure the directory has data for, save it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("directory", type=Path, help="a run directory (summary.json) or sweep directory (results.csv)")
    ap.add_argument("--out", type=Path, default=None, help="where the figures go (default: DIRECTORY/plots)")
    args = ap.parse_args(argv)
    written = []
    for name, make in makers.items():
        fig = make(args.directory)
        if fig is not None:
            written += save(fig, args.out or args.directory / "plots", name)
    for path in written:
        print(path)
    return written
