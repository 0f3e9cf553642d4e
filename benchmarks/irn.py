"""IRN without PFC against RoCE (go-back-N) with and without PFC: an incast and random traffic.

    python benchmarks/irn.py                 # both fabrics, congestion control none and DCQCN
    python benchmarks/irn.py --csv out.csv   # also write the rows as tidy CSV

The direction of Mittal et al., SIGCOMM'18 ("Revisiting Network Support for RDMA", §4): IRN
without PFC does at least as well as RoCE with PFC, and RoCE without PFC collapses. Fabrics:

- incast: the shipped 8-to-1 incast (scenarios/cc_none.yaml: 8 x 4 MB into one host through a
  4 MiB shared buffer, 100 Gb/s, 1 us links);
- incast, 200 KB: the same into a 200 KB buffer, less than the packets IRN's BDP cap lets the
  senders have in flight (8 x 53 frames), so IRN drops too; PFC is not run there (its headroom,
  three link BDPs per port, would not fit);
- random: the k=4 fat-tree (16 hosts, 100 Gb/s, 1 us links) with Poisson background traffic of
  web-search flow sizes at 60 % load for 2 ms, switches of 1 MiB buffer (small enough for PFC to
  fire and, without it, for drops).

FCT percentiles are over the run's flows; "slowdown" is FCT over the flow's ideal FCT.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare, run  # noqa: E402
from tables import print_markdown, write_csv  # noqa: E402

TRANSPORTS = [
    ("RoCE + PFC", ["network.transport=go_back_n", "network.switch.pfc.enabled=true"]),
    ("RoCE, no PFC", ["network.transport=go_back_n", "network.switch.pfc.enabled=false"]),
    ("IRN, no PFC", ["network.transport=irn", "network.switch.pfc.enabled=false"]),
]
ALGORITHMS = ["none", "dcqcn"]
RANDOM = {
    "name": "irn_random",
    "seed": 1,
    "topology": {"kind": "fat_tree", "k": 4, "link": {"rate_gbps": 100, "delay_ns": 1000}},
    "network": {"switch": {"buffer_bytes": 1 << 20}},
    "workload": {"patterns": [{"kind": "poisson", "load": 0.6, "cdf": "websearch", "duration_ns": 2_000_000}]},
}


def one(fabric: Path, algorithm: str, overrides: list[str]) -> dict:
    prepared = prepare(fabric, [*overrides, f"network.cc.algorithm={algorithm}", "output.traces=[]"])
    result = run(prepared, write=False, progress=False)
    s = result.summary
    fct = np.array([float(r["fct_ns"]) for r in result.rows if r["fct_ns"] != ""])
    slow = np.array([float(r["fct_ns"]) / float(r["ideal_fct_ns"]) for r in result.rows if r["fct_ns"] != ""])
    return {
        "flows": len(result.rows),
        "median_fct_us": round(float(np.median(fct)) / 1e3, 1),
        "p99_fct_us": round(float(np.percentile(fct, 99)) / 1e3, 1),
        "p99_slowdown": round(float(np.percentile(slow, 99)), 2),
        "completion_us": round(s["last_finish_ns"] / 1e3, 1),
        "dropped": s["data_packets_dropped"],
        "retransmits": s["retransmits"],
        "timeouts": s["timeouts"],
        "pfc_pauses": s["pfc_pauses_sent"],
        "wall_s": round(s["wall_s"], 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    random = Path(tempfile.mkdtemp()) / "irn_random.yaml"
    random.write_text(yaml.safe_dump(RANDOM))
    incast = ROOT / "scenarios/cc_none.yaml"
    small = ["network.switch.buffer_bytes=200000"]
    for fabric, path, extra in (("incast", incast, []), ("incast, 200 KB", incast, small), ("random", random, [])):
        for algorithm in ALGORITHMS:
            table = [
                {"fabric": fabric, "cc": algorithm, "transport": label, **one(path, algorithm, [*overrides, *extra])}
                for label, overrides in TRANSPORTS
                if not (extra and "pfc.enabled=true" in overrides[-1])
            ]
            print(f"\n{fabric}, cc {algorithm}\n")
            print_markdown(table)
            rows.extend(table)
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
