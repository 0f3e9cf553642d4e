"""All-Reduce of 100 MB per algorithm per topology, on 16 and 64 hosts, beside the alpha-beta model.

    python benchmarks/collectives_table.py               # 16 and 64 hosts (several minutes)
    python benchmarks/collectives_table.py --hosts 16    # only the 16-host fabrics
    python benchmarks/collectives_table.py --bytes 1e7   # a smaller buffer

The model (docs/model.md §9, with this engine's overheads): for p ranks and N bytes,
ring 2(p-1) a + 2 (p-1)/p N tau, halving-doubling 2 log2(p) a + 2 (p-1)/p N tau, direct
2 a + 2 (p-1)/p N tau, hierarchical 2 sum_k (p_k - 1)(a + N_k/p_k tau) over the grid's
dimensions. tau is the time per payload byte on a 100 Gb/s NIC link carrying its data
frames (1082 B per 1000 B) and the ACK frames (86 B) of the data it receives; a is one
packet's trip over the fabric's longest route (1 us propagation and one frame's
serialisation per link). The model knows nothing of routing collisions: where the
measured time is far above it, links are shared (ECMP hashing on the fat-tree, dimension-
order routes on the torus and mesh). A run that ends in a PFC deadlock (possible on a
torus: its wrap-around rings close a cycle of buffer dependencies) is reported as such.
"""

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare_scenario, run  # noqa: E402
from roce_emu.config.schema import Scenario  # noqa: E402

TAU_NS = (1082 + 86) * 8 / 100e9 / 1000 * 1e9  # ns per payload byte
FABRICS = {
    16: [
        ("fat_tree k=4", {"kind": "fat_tree", "k": 4}, 6),
        ("torus 4x4", {"kind": "torus", "dims": [4, 4]}, 6),
        ("mesh 4x4", {"kind": "mesh", "dims": [4, 4]}, 8),
    ],
    64: [
        ("fat_tree k=8 (64 of 128 hosts)", {"kind": "fat_tree", "k": 8}, 6),
        ("torus 8x8", {"kind": "torus", "dims": [8, 8]}, 10),
        ("mesh 8x8", {"kind": "mesh", "dims": [8, 8]}, 16),
    ],
}


def alpha_beta_ns(algorithm: str, p: int, n: float, links: int, dims) -> float:
    a = links * (1000 + 1082 * 8 / 100)  # ns
    if algorithm == "hierarchical":
        total, held = 0.0, n
        for size in dims:
            total += (size - 1) * (a + held / size * TAU_NS)
            held /= size
        return 2 * total
    steps = {"ring": 2 * (p - 1), "halving_doubling": 2 * math.log2(p), "direct": 2}[algorithm]
    return steps * a + 2 * (p - 1) / p * n * TAU_NS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, action="append", choices=sorted(FABRICS))
    ap.add_argument("--bytes", type=float, default=100e6)
    args = ap.parse_args()
    n = int(args.bytes)
    print("| hosts | topology | algorithm | measured (ms) | alpha-beta (ms) | ratio | busBW (Gb/s) | wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for p in args.hosts or sorted(FABRICS):
        for label, topology, links in FABRICS[p]:
            algorithms = ["ring", "halving_doubling", "direct"]
            if topology["kind"] != "fat_tree":
                algorithms.append("hierarchical")
            for algorithm in algorithms:
                sc = Scenario.model_validate(
                    {
                        "name": "ar",
                        "topology": topology,
                        "workload": {
                            "collectives": [
                                {
                                    "name": "ar",
                                    "kind": "all_reduce",
                                    "algorithm": algorithm,
                                    "bytes": n,
                                    "hosts": list(range(p)) if algorithm != "hierarchical" else "all",
                                }
                            ]
                        },
                    }
                )
                res = run(prepare_scenario(sc), write=False, progress=False)
                model = alpha_beta_ns(algorithm, p, n, links, topology.get("dims", ()))
                if res.summary["status"] != "finished":  # e.g. a PFC deadlock on a torus: say so
                    print(
                        f"| {p} | {label} | {algorithm} | {res.summary['status']} | {model / 1e6:.2f} | | | "
                        f"{res.summary['wall_s']:.0f} |",
                        flush=True,
                    )
                    continue
                measured = res.summary["iteration_ns"][0]
                busbw = n * 8 / measured * 2 * (p - 1) / p
                print(
                    f"| {p} | {label} | {algorithm} | {measured / 1e6:.2f} | {model / 1e6:.2f} | "
                    f"{measured / model:.2f} | {busbw:.1f} | {res.summary['wall_s']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
