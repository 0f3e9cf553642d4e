"""Packet trains on ring All-Reduces of long steps: error and events against the exact engine.

    python benchmarks/ring_trains.py                                   # the grid below, seeds 1 and 2
    python benchmarks/ring_trains.py --set network.nic.queue_pair=flow # a queue pair per flow
    python benchmarks/ring_trains.py --set network.nic.ack_every_packets=4

Each ring runs ``off`` and ``trains`` in this process on a leaf-spine at 200 Gb/s with 1 us links
and 4 spines (1,000-byte packets, one ACK per packet unless ``--set`` says otherwise), the
collective's bytes chosen so that each ring step is the given number of packets. It prints the
trains' mean length (packets in trains / trains sent), the signed error of the last completion
and how many times fewer events trains took. docs/fast_forward.md, "Long trains on ordered
connections", has the figures.
"""

import argparse

from roce_emu.api import prepare_scenario, run
from roce_emu.config.load import apply_override, parse_override
from roce_emu.config.schema import Scenario

GRID = ((2048, 2, 8), (4096, 2, 8), (1024, 4, 8), (2048, 4, 8))  # (packets per step, leaves, hosts per leaf)


def ring(mode: str, pkts: int, leaves: int, hosts: int, seed: int, overrides: list[str]) -> dict:
    doc = {
        "name": "ring_trains",
        "seed": seed,
        "sim": {"fast_forward": mode},
        "topology": {
            "kind": "leaf_spine",
            "leaves": leaves,
            "hosts_per_leaf": hosts,
            "spines": 4,
            "link": {"rate_gbps": 200, "delay_ns": 1000},
        },
        "workload": {
            "collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": pkts * 1000 * leaves * hosts}]
        },
    }
    for item in overrides:
        key, value = parse_override(item)
        apply_override(doc, key, value)
    return run(prepare_scenario(Scenario.model_validate(doc)), write=False, progress=False).summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    print("| packets per step | ranks | seed | mean train | error | events off / trains |")
    print("|---|---|---|---|---|---|")
    for pkts, leaves, hosts in GRID:
        for seed in args.seeds:
            off = ring("off", pkts, leaves, hosts, seed, args.overrides)
            on = ring("trains", pkts, leaves, hosts, seed, args.overrides)
            mean = on["packets_in_trains"] / max(on["trains_sent"], 1)
            error = (on["last_finish_ns"] / off["last_finish_ns"] - 1) * 100
            ratio = off["events"] / on["events"]
            print(f"| {pkts} | {leaves * hosts} | {seed} | {mean:.1f} | {error:+.3f} % | {ratio:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
