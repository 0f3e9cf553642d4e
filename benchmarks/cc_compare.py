"""Every congestion-control algorithm on the same fabrics: completion, queues, pauses, marks, CNPs.

    python benchmarks/cc_compare.py                 # the 8-to-1 incast and the k=4 fat-tree permutation
    python benchmarks/cc_compare.py --csv out.csv   # also write the table as tidy CSV

Each row is one run with the defaults of docs/model.md, the queue sampled every 2 us. "mean queue" is
the time average of the busiest switch port's egress queue over the run (from the trace);
"peak queue" is the largest egress queue any switch port held.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare, run  # noqa: E402
from roce_emu.results.metrics import queue_series  # noqa: E402
from tables import print_markdown, write_csv  # noqa: E402

POLICIES = [
    ("none", []),
    ("dcqcn", []),
    ("dcqcn", ["network.cc.params.variant=paper"]),
    ("hpcc", []),
    ("timely", []),
    ("dctcp", []),
]
FABRICS = [
    ("incast 8x4 MB, 4 MiB buffer", "scenarios/cc_none.yaml"),
    ("k=4 fat-tree permutation, 1 MB", "scenarios/fat_tree_permutation.yaml"),
]
TRACE = ["output.traces=[queue]", "output.trace_interval_ns=2000"]


def one(path: str, algorithm: str, extra: list[str]) -> dict:
    prepared = prepare(ROOT / path, [f"network.cc.algorithm={algorithm}", *extra, *TRACE])
    result = run(prepared, write=False, progress=False)
    s, world, trace = result.summary, result.outcome.world, result.outcome.trace
    busiest = max(
        np.flatnonzero(world.port["at_host"] == 0),
        key=lambda p: queue_series(trace, int(p))[1].mean() if len(trace) else 0,
    )
    label = algorithm + ("-paper" if extra else ("-cx" if algorithm == "dcqcn" else ""))
    return {
        "cc": label,
        "completion_us": round(s["last_finish_ns"] / 1e3, 1),
        "mean_slowdown": round(s["mean_slowdown"], 3),
        "peak_queue_kb": round(s["max_queue_bytes"] / 1e3, 1),
        "mean_queue_kb": round(float(queue_series(trace, int(busiest))[1].mean()) / 1e3, 1),
        "pfc_pauses": s["pfc_pauses_sent"],
        "ecn_marks": s["ecn_marks"],
        "cnps": s["cnps_sent"],
        "events": s["events"],
        "wall_s": round(s["wall_s"], 3),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    for fabric, path in FABRICS:
        print(f"\n{fabric} ({path})\n")
        table = [one(path, algorithm, extra) for algorithm, extra in POLICIES]
        print_markdown(table)
        rows.extend({"fabric": fabric, **row} for row in table)
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
