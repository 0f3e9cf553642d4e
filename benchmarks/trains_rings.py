"""Where packet trains (sim.fast_forward: trains) miss the exact engine on rings: a sweep of
ring All-Reduces (and all-to-alls) by ranks, packets per step, chunks and ACK ratio.

The sweep behind docs/fast_forward.md "When `trains` warns" (each with --csv benchmarks/trains_rings.csv;
the defaults: --ranks 16 32 64, --chunks 1, --acks 1 4, --seeds 1 2):

    python benchmarks/trains_rings.py --ranks 16 32 64 --packets 4 8 16 29 50 100 200 500 1000 --chunks 1 2
    python benchmarks/trains_rings.py --ranks 16 32 64 --packets 20 29 40 50 64 80 100 128 --chunks 2 4 8 --acks 1 2 4
    python benchmarks/trains_rings.py --ranks 16 32 --packets 20 29 35 40 45 50 57 64 --chunks 3 16 --acks 1 2
    python benchmarks/trains_rings.py --ranks 8 --packets 20 29 40 50 64 --chunks 2 3 --acks 1 2 4
    python benchmarks/trains_rings.py --ranks 128 --packets 29 50 200 --chunks 1 2
    python benchmarks/trains_rings.py --ranks 128 --packets 1000
    python benchmarks/trains_rings.py --ranks 16 32 --packets 10 20 29 40 50 64 100 200 400 --chunks 2 --acks 1 \
        --set topology.link.delay_ns=4000                                        # and =250
    python benchmarks/trains_rings.py --ranks 16 --packets 29 50 100 150 200 300 400 --chunks 1 3 4 --acks 1 \
        --set topology.link.delay_ns=4000
    python benchmarks/trains_rings.py --kind all_to_all --ranks 16 32 64 --packets 8 29 50 200 1000 --chunks 1 2
    python benchmarks/trains_rings.py --kind all_to_all --algorithm direct --ranks 16 32 --packets 8 16 29 50 200
    python benchmarks/trains_rings.py --ranks 16 32 --packets 29 50 200 --chunks 1 2 --set network.nic.queue_pair=flow
    python benchmarks/trains_rings.py --ranks 16 32 --packets 29 200 1000 --set topology.spines=2   # and =1

Each case is one collective alone on a leaf-spine of 4 spines at 200 Gb/s with 1 us links (as
tests/test_trains.py ``_ring_errors``: 8 ranks as 2 leaves x 4 hosts, 16 as 4 x 4, 32 as 8 x 4, 64 as 8 x 8,
128 as 8 x 16), congestion control none, run with ``sim.fast_forward`` off and trains for each
seed (the ECMP draws). A ring step of an All-Reduce moves ``bytes / ranks / chunks``; the sweep
sets ``bytes`` so that each flow carries ``--packets`` full packets (``network.mtu_bytes`` each).
An all-to-all sends each peer that many packets per chunk, in pairwise steps (``ring``) or all
at once (``--algorithm direct``). The error is (trains - off) / off of
the last flow's finish, in percent (positive: trains run late); ``events`` is off's events over
trains'; ``warned`` whether accuracy_warnings (roce_emu/run/inputs.py) warns for the case; ``set``
the --set overrides. Rows go to stdout as markdown as they finish, and are appended to --csv
(one row per case and seed). Wall times (``off_s``, ``trains_s``) depend on the machine's load.
"""

import argparse
import csv
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from roce_emu.api import prepare_scenario, run  # noqa: E402
from ring_replay import leaf_spine_doc  # noqa: E402
from roce_emu.config.load import parse_override  # noqa: E402
from roce_emu.config.schema import Scenario  # noqa: E402
from roce_emu.run.inputs import accuracy_warnings  # noqa: E402

#: ranks -> (leaves, hosts per leaf)
SHAPES = {8: (2, 4), 16: (4, 4), 32: (8, 4), 64: (8, 8), 128: (8, 16)}
COLUMNS = [
    "kind",
    "algorithm",
    "ranks",
    "packets",
    "chunks",
    "ack_every",
    "queue_pair",
    "seed",
    "off_ns",
    "trains_ns",
    "error_pct",
    "events",
    "off_s",
    "trains_s",
    "warned",
    "set",
]


def document(
    kind: str, algorithm: str, ranks: int, packets: int, chunks: int, ack_every: int, seed: int, overrides: list
) -> dict:
    """The scenario of one case, with ``overrides`` ((key, value) pairs as --set reads them) applied."""
    leaves, hosts = SHAPES[ranks]
    given = [("seed", seed), ("network.nic.ack_every_packets", ack_every), *overrides]
    doc = leaf_spine_doc(leaves, hosts, given)
    mtu = doc["network"].get("mtu_bytes", 1000)
    collective = {"kind": kind, "algorithm": algorithm, "bytes": packets * mtu * ranks * chunks, "chunks": chunks}
    return {**doc, "name": "trains_rings", "workload": {"collectives": [collective]}}


def measure(doc: dict) -> dict:
    """off and trains on one scenario document: last finish, events, wall seconds, the warning."""
    out = {}
    for mode in ("off", "trains"):
        prepared = prepare_scenario(Scenario.model_validate({**doc, "sim": {"fast_forward": mode}}))
        start = time.perf_counter()
        summary = run(prepared, write=False, progress=False).summary
        out[mode] = (summary["last_finish_ns"], summary["events"], time.perf_counter() - start)
    warned = accuracy_warnings(prepared.scenario, prepared.fabric, prepared.workload)
    (t_off, e_off, s_off), (t_on, e_on, s_on) = out["off"], out["trains"]
    return {
        "queue_pair": prepared.scenario.network.nic.queue_pair,
        "off_ns": round(t_off, 3),
        "trains_ns": round(t_on, 3),
        "error_pct": round(100 * (t_on - t_off) / t_off, 3),
        "events": round(e_off / max(e_on, 1), 2),
        "off_s": round(s_off, 2),
        "trains_s": round(s_on, 2),
        "warned": "yes" if warned else "no",
    }


def markdown_row(r: dict) -> str:
    return (
        f"| {r['kind']} {r['algorithm']} | {r['ranks']} | {r['packets']} | {r['chunks']} | {r['ack_every']} | "
        f"{r['queue_pair']} | "
        f"{r['seed']} | {r['error_pct']:+.2f} % | {r['events']}x | {r['off_s']} s | {r['trains_s']} s | {r['warned']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["all_reduce", "all_to_all"], default="all_reduce")
    parser.add_argument("--algorithm", choices=["ring", "direct"], default="ring", help="direct: all_to_all only")
    parser.add_argument("--ranks", type=int, nargs="+", choices=sorted(SHAPES), default=[16, 32, 64])
    parser.add_argument("--packets", type=int, nargs="+", default=[8, 29, 64, 200, 1000], help="packets per flow")
    parser.add_argument("--chunks", type=int, nargs="+", default=[1])
    parser.add_argument("--acks", type=int, nargs="+", default=[1, 4], help="network.nic.ack_every_packets")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    parser.add_argument("--csv", type=Path, default=None, help="also write the rows as CSV (appended to if it exists)")
    args = parser.parse_args()
    overrides = [parse_override(item) for item in args.set]
    print(
        "| kind | ranks | packets per flow | chunks | ACK every | queue pair | seed | trains vs off "
        "| events off / trains | off wall | trains wall | warned |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    handle = args.csv.open("a", newline="") if args.csv else None
    sink = csv.DictWriter(handle, fieldnames=COLUMNS) if handle else None
    if sink and handle.tell() == 0:
        sink.writeheader()
    for ranks, packets, chunks, every, seed in itertools.product(
        args.ranks, args.packets, args.chunks, args.acks, args.seeds
    ):
        doc = document(args.kind, args.algorithm, ranks, packets, chunks, every, seed, overrides)
        case = {"kind": args.kind, "algorithm": args.algorithm, "ranks": ranks, "packets": packets, "chunks": chunks}
        row = {**case, "ack_every": every, "seed": seed, **measure(doc)}
        row["set"] = " ".join(args.set)
        print(markdown_row(row), flush=True)
        if sink:
            sink.writerow(row)
            handle.flush()


if __name__ == "__main__":
    main()
