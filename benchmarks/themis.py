"""Themis against the baseline on multi-dimensional fabrics of 64 NPUs, side by side in one run.

    python benchmarks/themis.py                         # six fabrics, 64 MiB, 64 chunks (about 20 min)
    python benchmarks/themis.py --bytes-mib 16          # a quarter of the size
    python benchmarks/themis.py --sweep-chunks          # 4 .. 512 chunks on the 3D heterogeneous fabric
    python benchmarks/themis.py --queue-pair connection # a connection's ring steps in order (NCCL)

The fabrics scale the shapes of the Themis paper's topologies to 64 NPUs (2D 4x16, 3D 4x4x4
homogeneous, heterogeneous and FC-Ring-Switch, 4D 2x2x4x4 and 2x4x2x4). The paper's Table 2
link bandwidths were not at hand, so the rates are this benchmark's own choice and stated
below: homogeneous fabrics give every dimension the same rate, heterogeneous ones halve it
from one dimension to the next (scale-up links faster than scale-out), as multi-tier
platforms do. Each (fabric, scheduler) runs in a fresh process after one that warms the Numba
cache. Utilisation is the mean over dimensions of collectives.csv's dimk_utilization.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
from roce_emu.results.iteration import collective_rows
sc = Scenario.model_validate(json.loads(sys.argv[1]))
res = run(prepare_scenario(sc), write=False, progress=False)
row = collective_rows(res.outcome.world, res.prepared.workload)[0]
utils = [row[k] for k in row if k.endswith("_utilization") and row[k] != ""]
print(json.dumps({"time_ns": float(row["time_ns"]), "util": sum(utils) / len(utils), "utils": utils,
                  "wall_s": res.summary["wall_s"], "events": res.summary["events"]}))
"""


def dim(size, kind, gbps, delay_ns=500):
    return {"size": size, "kind": kind, "rate_gbps": gbps, "delay_ns": delay_ns}


FABRICS = {
    "2D 4x16 (switch, switch), 400/100": [dim(4, "switch", 400), dim(16, "switch", 100)],
    "3D 4x4x4 homogeneous (ring, ring, ring), 100 each": [
        dim(4, "ring", 100),
        dim(4, "ring", 100),
        dim(4, "ring", 100),
    ],
    "3D 4x4x4 heterogeneous (ring, ring, ring), 400/200/100": [
        dim(4, "ring", 400),
        dim(4, "ring", 200),
        dim(4, "ring", 100),
    ],
    "3D 4x4x4 (fully connected, ring, switch), 400/200/100": [
        dim(4, "fully_connected", 400),
        dim(4, "ring", 200),
        dim(4, "switch", 100),
    ],
    "4D 2x2x4x4 (ring, ring, ring, switch), 400/400/200/100": [
        dim(2, "ring", 400),
        dim(2, "ring", 400),
        dim(4, "ring", 200),
        dim(4, "switch", 100),
    ],
    "4D 2x4x2x4 (ring, fully connected, ring, switch), 400/200/200/100": [
        dim(2, "ring", 400),
        dim(4, "fully_connected", 200),
        dim(2, "ring", 200),
        dim(4, "switch", 100),
    ],
}
SCHEDULERS = ("baseline", "themis_fifo", "themis_scf")


def doc(dims, nbytes, chunks, scheduler, queue_pair="flow"):
    return {
        "name": "themis",
        "topology": {"kind": "multi_dim", "dims": dims, "dim_algorithms": "ring"},  # one-way rings, as measured
        "network": {"nic": {"queue_pair": queue_pair}},
        "workload": {
            "collectives": [
                {
                    "name": "ar",
                    "kind": "all_reduce",
                    "algorithm": "hierarchical",
                    "bytes": nbytes,
                    "chunks": chunks,
                    "scheduler": scheduler,
                }
            ]
        },
    }


def measure(d: dict) -> dict:
    p = subprocess.run([sys.executable, "-P", "-c", CHILD, json.dumps(d)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes-mib", type=float, default=64)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--sweep-chunks", action="store_true", help="4 .. 512 chunks on one fabric instead")
    ap.add_argument("--queue-pair", choices=("flow", "connection"), default="flow", help="network.nic.queue_pair")
    args = ap.parse_args()
    nbytes = int(args.bytes_mib * 2**20)
    measure(doc(FABRICS["2D 4x16 (switch, switch), 400/100"], 1 << 20, 4, "themis_scf"))  # warm the cache
    print(
        "| fabric | chunks | baseline us | util | themis_fifo us | util | speed-up | themis_scf us | util | speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    if args.sweep_chunks:
        name = "3D 4x4x4 heterogeneous (ring, ring, ring), 400/200/100"
        cases = [(name, c) for c in (4, 8, 16, 32, 64, 128, 256, 512)]
    else:
        cases = [(name, args.chunks) for name in FABRICS]
    for name, chunks in cases:
        runs = {s: measure(doc(FABRICS[name], nbytes, chunks, s, args.queue_pair)) for s in SCHEDULERS}
        if any("error" in r for r in runs.values()):
            print(f"| {name} | {chunks} | " + " | ".join(r.get("error", "") for r in runs.values()) + " |")
            continue
        base = runs["baseline"]["time_ns"]
        cells = [f"{base / 1e3:.1f}", f"{runs['baseline']['util']:.1%}"]
        for s in SCHEDULERS[1:]:
            r = runs[s]
            cells += [f"{r['time_ns'] / 1e3:.1f}", f"{r['util']:.1%}", f"{base / r['time_ns']:.2f}x"]
        print(f"| {name} | {chunks} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
