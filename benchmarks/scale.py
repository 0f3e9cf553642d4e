"""Scale: wall time and peak memory with a fast-forward mode and with off, side by side in one run.

    python benchmarks/scale.py                       # every case at full size (hours with "off")
    python benchmarks/scale.py --case ring --npus 16 # one case, fewer NPUs
    python benchmarks/scale.py --bytes-scale 0.25    # the ring all-reduce a quarter as large
    python benchmarks/scale.py --fast exact          # the exact fast-forward instead of trains
    python benchmarks/scale.py --fast memo           # the memo of exact outcomes
    python benchmarks/scale.py --fast memo-trains    # ... the flows it leaves to the engine in trains
    python benchmarks/scale.py --case resnet --npus 64 --cc dcqcn --seeds 1 2 3 4   # one row per seed, and their mean
    python benchmarks/scale.py --case ring --npus 128 --set workload.collectives.0.bytes=26214400

Cases: "resnet" (ResNet-50 data parallel, ring, on a 2-level
leaf-spine at 200 Gb/s, under none, DCQCN and HPCC), "ring" (a 1 GiB ring all-reduce),
"transformer" (TP 8 x DP 16 on multi_dim), "gpt" (a GPT whose tensor parallelism dominates, on a
rail-optimised fabric: tp 8, pp 4, dp NPUs / 32), "moe" (a Mixtral-class MoE with skewed experts on
that fabric with 2:1 uplinks, under DCQCN: congested). Each (case, cc, mode) runs in a fresh process,
after one that warms the Numba cache. It reports its wall time (everything: loading the
kernels, building, the engine, the results), the engine's share, its peak RSS and the
iteration or collective time. The error column is the fast mode's ("trains", packet trains,
"memo", replayed exact outcomes, or "exact") time minus off's, over off's, signed: 0 when the
skipping was exact. With several
``--seeds``, a last row gives the mean speed-up and the mean and largest error.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

# a child's run of the scenario document in argv[1]: prepared, its summary s, the times t0 and t1
RUN = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
sc = Scenario.model_validate(json.loads(sys.argv[1]))
prepared = prepare_scenario(sc)
t1 = time.perf_counter()
res = run(prepared, write=False, progress=False)
s = res.summary
"""
CHILD = (
    RUN
    + r"""
print(json.dumps({"wall_s": time.perf_counter() - t0, "build_s": t1 - t0, "engine_s": s["wall_s"],
                  "events": s["events"], "events_skipped": s.get("events_skipped", 0), "status": s["status"],
                  "time_ns": s.get("mean_iteration_ns") or s["last_finish_ns"], "flows": s["flows"],
                  "flows_finished": s["flows_finished"], "sim_time_ns": s["sim_time_ns"],
                  "bytes": int(prepared.world.flow["size_bytes"].sum()),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
)


def leaf_spine(npus: int) -> dict:
    leaves = max(npus // 16, 1)
    return {
        "kind": "leaf_spine",
        "leaves": leaves,
        "hosts_per_leaf": npus // leaves,
        "spines": 4,
        "link": {"rate_gbps": 200, "delay_ns": 1000},
    }


def fat_tree(npus: int) -> dict:
    """The k-ary fat-tree of k**3 / 4 hosts (k = 16 for 1024), at the leaf-spine's rate and delay."""
    k = round((4 * npus) ** (1 / 3))
    if k % 2 or k**3 // 4 != npus:
        raise ValueError(f"{npus} NPUs is no k-ary fat-tree (k**3 / 4 hosts: 16, 128, 432, 1024, ...)")
    return {"kind": "fat_tree", "k": k, "link": {"rate_gbps": 200, "delay_ns": 1000}}


def case_resnet(npus: int, scale: float) -> dict:
    return {
        "topology": leaf_spine(npus),
        "workload": {
            "training": {
                "model": {"name": "resnet50", "batch_per_rank": 32, "device_tflops": 100},
                "dp_algorithm": "ring",
            }
        },
    }


def case_ring(npus: int, scale: float) -> dict:
    return {
        "topology": leaf_spine(npus),
        "workload": {"collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": int((1 << 30) * scale)}]},
    }


def case_transformer(npus: int, scale: float) -> dict:
    tp = 8
    return {
        "topology": {
            "kind": "multi_dim",
            "dims": [
                {"size": tp, "kind": "switch", "rate_gbps": 800, "delay_ns": 100},
                {"size": npus // tp, "kind": "switch", "rate_gbps": 200, "delay_ns": 1000},
            ],
        },
        "workload": {
            "training": {
                "model": {"name": "transformer", "layers": 4, "hidden": 4096, "sequence": 2048, "batch_per_rank": 1},
                "tp": tp,
                "dp": npus // tp,
            }
        },
    }


def case_gpt(npus: int, scale: float) -> dict:
    """A GPT whose tensor-parallel traffic dominates (hidden 2048, 8 layers, 8 micro-batches per
    replica): tp 8 inside each server, pp 4, dp npus / 32, on a rail-optimised fabric."""
    from llm import topology  # llm.py's rail fabric (imported here: llm.py imports this module)

    dp = max(npus // 32, 1)
    return {
        "topology": {**topology(npus, 1.0, False, False), "nodes_per_leaf": 16},  # as measured
        "network": {"mtu_bytes": 4096},
        "workload": {
            "training": {
                "model": {"kind": "gpt", "layers": 8, "hidden": 2048, "heads": 16, "seq_len": 1024,
                          "vocab": 50257, "micro_batch": 1, "global_batch": 8 * dp},
                "tp": 8,
                "pp": 4,
                "dp": dp,
            }
        },
    }  # fmt: skip


def case_moe(npus: int, scale: float) -> dict:
    """llm.py's Mixtral-class MoE (tp 1, pp 4, ep 8, dp npus / 4, Zipf-skewed experts) on its
    rail-optimised fabric with the leaves' uplinks oversubscribed 2:1: congested."""
    from llm import MTU, moe, topology  # imported here: llm.py imports this module

    return {
        "topology": topology(npus, 2.0, False, False),
        "network": {"mtu_bytes": MTU},
        "workload": {"training": moe(npus, False)},
    }


#: --fast: the sim settings of each fast mode compared with off
FAST = {
    "trains": {"fast_forward": "trains"},
    "exact": {"fast_forward": "exact"},
    "memo": {"fast_forward": "memo"},
    "memo-trains": {"fast_forward": "memo", "memo_engine": "trains"},  # the memo, its engine in trains
}

CASES = {
    "gpt": (case_gpt, ("none",)),
    "moe": (case_moe, ("dcqcn",)),
    "resnet": (case_resnet, ("none", "dcqcn", "hpcc")),
    "ring": (case_ring, ("none",)),
    "transformer": (case_transformer, ("dcqcn",)),
}


def measure(doc: dict, timeout: float | None = None, child: str = CHILD) -> dict:
    """Run one scenario document in a fresh process (the script ``child``, which prints its figures
    as JSON on its last line); its figures, or {"error": the last line of its errors}.
    The child imports roce_emu as ``python -P`` does (PYTHONPATH, then the installed package),
    not from the current directory, so that a tree named on PYTHONPATH is the one measured."""
    try:
        p = subprocess.run(
            [sys.executable, "-P", "-c", child, json.dumps(doc)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def warm_cache() -> None:
    """Compile (or load) both kernels once, so that no measured run pays for compiling."""
    for mode in ("off", "exact", "trains", "memo"):
        measure(
            {
                "name": "warm",
                "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 100_000}]},
                "sim": {"fast_forward": mode},
            }
        )


def main() -> None:
    from roce_emu.config.load import apply_override, parse_override
    from roce_emu.errors import ScenarioError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), action="append", help="repeatable; default: all")
    ap.add_argument("--npus", type=int, default=128)
    ap.add_argument("--bytes-scale", type=float, default=1.0, help="scale the ring case's size")
    ap.add_argument("--cc", action="append", help="only these algorithms (repeatable)")
    ap.add_argument("--fast", choices=sorted(FAST), default="trains", help="the mode compared with off")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1], help="one row per seed (ECMP hashes, CC draws)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = ap.parse_args()
    try:  # as roce-emu run --set reads them; a bad one stops here, in one line, exit code 2
        overrides = [parse_override(item) for item in args.set]
        for name in args.case or sorted(CASES):
            trial = CASES[name][0](args.npus, args.bytes_scale)
            for key, value in overrides:
                apply_override(trial, key, value)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    warm_cache()
    f = args.fast
    print(
        f"| case | NPUs | cc | seed | off: wall s | off: engine s | off: RSS MB | {f}: wall s | {f}: engine s | "
        f"{f}: RSS MB | speed-up (wall) | events off / {f} | time error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.case or sorted(CASES):
        build, ccs = CASES[name]
        for cc in args.cc or ccs:
            errors, ratios = [], []
            for seed in args.seeds:
                doc = {"name": f"scale_{name}", "seed": seed, **build(args.npus, args.bytes_scale)}
                doc["network"] = {**doc.get("network", {}), "cc": {"algorithm": cc}}
                for key, value in overrides:
                    apply_override(doc, key, value)
                runs = {}
                for mode in ("off", args.fast):
                    doc["sim"] = FAST.get(mode, {"fast_forward": mode})
                    runs[mode] = measure(doc)
                off, on = runs["off"], runs[args.fast]
                row = f"| {name} | {args.npus} | {cc} | {seed} |"
                if "error" in off or "error" in on:
                    print(f"{row} {off.get('error', '')} {on.get('error', '')} |")
                    continue
                errors.append((on["time_ns"] - off["time_ns"]) / off["time_ns"])
                ratios.append(off["wall_s"] / on["wall_s"])
                print(
                    f"{row} {off['wall_s']:.1f} | {off['engine_s']:.1f} | "
                    f"{off['rss_mb']:.0f} | {on['wall_s']:.1f} | {on['engine_s']:.1f} | {on['rss_mb']:.0f} | "
                    f"{ratios[-1]:.2f}x | {off['events']:,} / {on['events']:,} | {100 * errors[-1]:+.3f} % |",
                    flush=True,
                )
            if len(errors) > 1:
                print(
                    f"| {name} | {args.npus} | {cc} | mean of {len(errors)} | | | | | | | "
                    f"{sum(ratios) / len(ratios):.2f}x | | {100 * sum(errors) / len(errors):+.3f} % "
                    f"(largest {100 * max(map(abs, errors)):.3f} %) |",
                    flush=True,
                )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
