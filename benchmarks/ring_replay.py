"""Where packet trains lose a ring All-Reduce: in each flow, or in the ring's feedback?

    python benchmarks/ring_replay.py                          # 32 ranks as 4 leaves x 8 hosts
    python benchmarks/ring_replay.py --leaves 8 --hosts 16    # 128 ranks (about a minute)
    python benchmarks/ring_replay.py --set network.nic.ack_every_packets=4

A ring step waits for the data it forwards, so each flow starts when the flow before it on its
diagonal ends: a ring is a feedback loop, and a small per-flow difference between `trains` (packet
trains) and `off` (the exact engine) can grow along it. This benchmark separates the two:

1. **Closed loop**: the ring All-Reduce (steps of ``--step-bytes``) on a leaf-spine of
   ``--leaves`` x ``--hosts`` hosts (4 spines, 200 Gb/s, 1 us links, no congestion control unless
   ``--set`` says otherwise), `off` and `trains`: the error of `trains`'s last completion.
2. **Open loop**: every flow of the exact run, replayed as an explicit flow that starts when it
   started there, `off` and `trains`: the error of each flow's completion (at its receiver) when
   both engines see the same start times. Replayed `off` reproduces the ring's own flows (the
   table gives their mean difference at the sender), so the open-loop error is the trains' error
   per flow.
3. **How the exact ring drifts**: the slope of a flow's exact completion time against its lag
   (its start minus the mean start of its step). A positive slope means late ranks get later,
   so the ranks drift apart; the table gives the slope of the open-loop error too.
"""

import argparse
import sys

import numpy as np


def leaf_spine_doc(leaves: int, hosts: int, overrides: list) -> dict:
    """A scenario document without a workload: ``leaves`` x ``hosts`` on 4 spines at 200 Gb/s with
    1 us links, seed 1, no congestion control, then ``overrides`` ((key, value) pairs as --set
    reads them)."""
    from roce_emu.config.load import apply_override

    doc = {
        "name": "ring_replay",
        "seed": 1,
        "topology": {
            "kind": "leaf_spine",
            "leaves": leaves,
            "hosts_per_leaf": hosts,
            "spines": 4,
            "link": {"rate_gbps": 200, "delay_ns": 1000},
        },
        "network": {"cc": {"algorithm": "none"}},
    }
    for key, value in overrides:
        apply_override(doc, key, value)
    return doc


def _run(doc: dict, mode: str):
    from roce_emu.api import prepare_scenario, run
    from roce_emu.config.schema import Scenario

    sim = {**doc.get("sim", {}), "fast_forward": mode}
    return run(prepare_scenario(Scenario.model_validate({**doc, "sim": sim})), write=False, progress=False)


def measure(leaves: int, hosts: int, step_bytes: int, overrides: list) -> dict:
    """The closed-loop error, the open-loop per-flow errors and the drift slopes (times in us);
    ``overrides`` are (key, value) pairs as ``roce-emu run --set`` reads them."""
    base = leaf_spine_doc(leaves, hosts, overrides)
    ranks = leaves * hosts
    collective = {"kind": "all_reduce", "algorithm": "ring", "bytes": step_bytes * ranks}
    ring = {**base, "workload": {"collectives": [collective]}, "output": {"collective_flows": True}}
    closed = {mode: _run(ring, mode) for mode in ("off", "trains")}
    table = closed["off"].flow_table
    start_ps = np.asarray(table["start_ps"], np.int64)
    flows = [
        {"src": int(s), "dst": int(d), "bytes": int(b), "start_ns": float(t) / 1e3}
        for s, d, b, t in zip(table["src"], table["dst"], table["bytes"], start_ps)
    ]
    replay = {**base, "workload": {"flows": flows}}
    received = {}
    for mode in ("off", "trains"):
        res = _run(replay, mode)
        received[mode] = (res.outcome.world.task["finish_ps"][: len(flows)].astype(np.float64) - start_ps) / 1e6
        if mode == "off":  # the replay is faithful if its flows end as the ring's did (at the sender)
            faithful = np.abs(np.asarray(res.flow_table["fct_ps"], np.float64) - table["fct_ps"]).mean() / 1e6
    error = received["trains"] - received["off"]
    steps = len(flows) // ranks
    step_mean = start_ps[: steps * ranks].reshape(steps, ranks).mean(axis=1)
    lag = (start_ps[: steps * ranks] - np.repeat(step_mean, ranks)) / 1e6
    fit = np.vstack([lag, np.ones_like(lag)]).T
    slope = {
        name: float(np.linalg.lstsq(fit, y[: steps * ranks], rcond=None)[0][0])
        for name, y in (("exact", received["off"]), ("error", error))
    }
    last = {mode: closed[mode].summary["last_finish_ns"] / 1e3 for mode in closed}
    return {
        "ranks": ranks,
        "off_us": last["off"],
        "trains_us": last["trains"],
        "closed_loop_error": last["trains"] / last["off"] - 1,
        "flows": len(flows),
        "replay_vs_ring_us": float(faithful),
        "mean_flow_us": float(received["off"].mean()),
        "open_loop_mean_us": float(error.mean()),
        "open_loop_sd_us": float(error.std()),
        "open_loop_p5_us": float(np.percentile(error, 5)),
        "open_loop_p95_us": float(np.percentile(error, 95)),
        "drift_slope_exact": slope["exact"],
        "drift_slope_error": slope["error"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leaves", type=int, default=4, help="leaves (4)")
    ap.add_argument("--hosts", type=int, default=8, help="hosts per leaf (8)")
    ap.add_argument("--step-bytes", type=int, default=236030, help="bytes per ring step (236030: ResNet-50's buckets)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = ap.parse_args(argv)
    from roce_emu.config.load import parse_override, validate_document
    from roce_emu.errors import ScenarioError

    try:  # as roce-emu run --set reads them; a bad one stops here, in one line, exit code 2
        overrides = [parse_override(item) for item in args.set]
        validate_document(leaf_spine_doc(args.leaves, args.hosts, overrides), "ring_replay.py --set")
    except (ScenarioError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    r = measure(args.leaves, args.hosts, args.step_bytes, overrides)
    print(
        "| ranks | off: last us | trains: last us | closed loop | flows | replayed off vs ring | flow us "
        "| open loop: mean | sd | p5 .. p95 | exact drift slope | error's slope |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {r['ranks']} | {r['off_us']:.1f} | {r['trains_us']:.1f} | {100 * r['closed_loop_error']:+.2f} % | "
        f"{r['flows']} | {1e3 * r['replay_vs_ring_us']:.1f} ns | "
        f"{r['mean_flow_us']:.3f} | {1e3 * r['open_loop_mean_us']:+.1f} ns | {1e3 * r['open_loop_sd_us']:.1f} ns | "
        f"{1e3 * r['open_loop_p5_us']:+.1f} .. {1e3 * r['open_loop_p95_us']:+.1f} ns | "
        f"{r['drift_slope_exact']:+.4f} | {r['drift_slope_error']:+.4f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
