"""How far packet trains (`sim.fast_forward: trains`) put single flows under contention, against `off`.

    python benchmarks/contention.py                 # 24 random workloads, one table row each
    python benchmarks/contention.py --workloads 60 --first 100
    python benchmarks/contention.py --json out.json # the rows as JSON too
    python benchmarks/contention.py --seeds 10      # each workload over seeds 1..10: means and spreads

Each workload draws, from its own seed (1000 + its index): either a random `multi_dim` fabric
(2 or 3 dimensions of 2-4 NPUs, ring, fully connected or switch, 100-800 Gb/s, 100-1000 ns) or
a two-leaf leaf-spine (8 hosts per leaf, 2 spines, 200 Gb/s, 1 us); 2-23 flows between random
hosts of 50 KB to 8 MB, starting within 40 us; none, DCQCN or TIMELY; one ACK per packet or per
4. It runs `off` and `trains` in this process and reports, per workload, the largest error of a
single flow's completion, the error of the last completion, and how many times fewer events
`trains` took. The scale issue bounds iterations and collectives, not single flows: this measures
what trains cost where flows of different paths meet (docs/fast_forward.md).

With congestion control, one seed's single flows are a poor yardstick: the seed (ECMP hashes,
DCQCN's marks) moves single completions of the exact engine itself by tens of percent. With
``--seeds N`` each workload runs under seeds 1..N, and a second table gives the last completion's
mean and standard deviation over them, `off` and `trains`, and the error of `trains`'s mean.
"""

import argparse
import json
import os
import sys

import numpy as np


MODES = ("off", "trains")


def workload(i: int) -> dict:
    """Random workload number i (a scenario document)."""
    rng = np.random.default_rng(1000 + i)
    if i % 2 == 0:
        dims = [
            {
                "size": int(rng.integers(2, 5)),
                "kind": str(rng.choice(["ring", "fully_connected", "switch"])),
                "rate_gbps": float(rng.choice([100, 200, 400, 800])),
                "delay_ns": float(rng.choice([100, 500, 1000])),
            }
            for _ in range(int(rng.integers(2, 4)))
        ]
        topology = {"kind": "multi_dim", "dims": dims}
        hosts = int(np.prod([d["size"] for d in dims]))
    else:
        topology = {
            "kind": "leaf_spine",
            "leaves": 2,
            "hosts_per_leaf": 8,
            "spines": 2,
            "link": {"rate_gbps": 200, "delay_ns": 1000},
        }
        hosts = 16
    flows = []
    for _ in range(int(rng.integers(2, 24))):
        src, dst = rng.choice(hosts, 2, replace=False)
        flows.append(
            {
                "src": int(src),
                "dst": int(dst),
                "bytes": int(rng.choice([50_000, 200_000, 1_000_000, 5_000_000, 8_000_000])),
                "start_ns": float(rng.integers(0, 40_000)),
            }
        )
    cc = str(rng.choice(["none", "dcqcn", "timely"]))
    every = int(rng.choice([1, 4]))
    return {
        "name": f"contention_{i}",
        "seed": 1,
        "topology": topology,
        "workload": {"flows": flows},
        "network": {"cc": {"algorithm": cc}, "nic": {"ack_every_packets": every}},
    }


def finishes(doc: dict, mode: str) -> tuple[np.ndarray, int]:
    """Each flow's completion (ps) and the events, with fast_forward ``mode``."""
    from roce_emu.api import prepare_scenario, run
    from roce_emu.config.schema import Scenario

    res = run(
        prepare_scenario(Scenario.model_validate({**doc, "sim": {"fast_forward": mode}})), write=False, progress=False
    )
    n = len(doc["workload"]["flows"])
    return res.outcome.world.task["finish_ps"][:n].astype(float), int(res.summary["events"])


def measure(i: int, seeds: int = 1) -> dict:
    """Workload i's row: its first seed's errors, and with seeds > 1 the last completion over
    seeds 1..seeds (mean and standard deviation in us, off and trains)."""
    doc = workload(i)
    last = {mode: [] for mode in MODES}
    for seed in range(1, seeds + 1):
        exact, events_off = finishes({**doc, "seed": seed}, "off")
        approx, events_on = finishes({**doc, "seed": seed}, "trains")
        last["off"].append(exact.max() / 1e6)
        last["trains"].append(approx.max() / 1e6)
        if seed == 1:
            row = {
                "workload": i,
                "fabric": doc["topology"]["kind"],
                "cc": doc["network"]["cc"]["algorithm"],
                "acks_every": doc["network"]["nic"]["ack_every_packets"],
                "flows": len(exact),
                "worst_flow_error": float(np.abs(approx / exact - 1).max()),
                "last_finish_error": float(abs(approx.max() / exact.max() - 1)),
                "events_off_over_trains": events_off / events_on,
            }
    if seeds > 1:
        for mode, values in last.items():
            row[f"{mode}_last_finish_us_mean"] = float(np.mean(values))
            row[f"{mode}_last_finish_us_sd"] = float(np.std(values, ddof=1))
        row["mean_last_finish_error"] = row["on_last_finish_us_mean"] / row["off_last_finish_us_mean"] - 1
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=24, help="how many random workloads (24)")
    ap.add_argument("--first", type=int, default=0, help="index of the first workload (0)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--seeds", type=int, default=1, help="run each workload under seeds 1..N (1)")
    args = ap.parse_args(argv)
    print("| workload | fabric | cc | ACK per | flows | worst flow error | last finish error | events off / trains |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for i in range(args.first, args.first + args.workloads):
        r = measure(i, args.seeds)
        rows.append(r)
        print(
            f"| {r['workload']} | {r['fabric']} | {r['cc']} | {r['acks_every']} | {r['flows']} | "
            f"{100 * r['worst_flow_error']:.2f} % | {100 * r['last_finish_error']:.2f} % | "
            f"{r['events_off_over_trains']:.1f}x |",
            flush=True,
        )
    worst = max(rows, key=lambda r: r["worst_flow_error"])
    last = max(rows, key=lambda r: r["last_finish_error"])
    print(
        f"\nlargest single-flow error {100 * worst['worst_flow_error']:.2f} % (workload {worst['workload']}), "
        f"largest last-finish error {100 * last['last_finish_error']:.2f} % (workload {last['workload']})"
    )
    if args.seeds > 1:
        print(f"\nThe last completion over seeds 1..{args.seeds} (mean ± standard deviation):\n")
        print("| workload | cc | off: last finish us | trains: last finish us | error of the mean |")
        print("|---|---|---|---|---|")
        for r in rows:
            off, on = (f"{r[m + '_last_finish_us_mean']:.1f} ± {r[m + '_last_finish_us_sd']:.1f}" for m in MODES)
            print(f"| {r['workload']} | {r['cc']} | {off} | {on} | {100 * r['mean_last_finish_error']:+.2f} % |")
    if args.json:  # written whole or not at all
        tmp = f"{args.json}.tmp"
        with open(tmp, "w") as fh:
            json.dump(rows, fh, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
