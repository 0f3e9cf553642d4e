"""FRED against the wafer-scale mesh: the wafer-wide All-Reduce on 20 NPUs, side by side in one run.

    python benchmarks/fred.py                       # 32 MiB in 32 chunks (a few minutes)
    python benchmarks/fred.py --bytes-mib 8 --chunks 16

The fabrics are the FRED paper's (ISCA 2025) with every rate divided by one common factor,
SCALE = 100: mesh links of 750 GB/s become 60 Gb/s, NPU ports of 3 TB/s 240 Gb/s. Link delays
are 100 ns. The effective bandwidth is NCCL's bus bandwidth, 2 (p - 1) / p * D / T, the bytes a
ring would move per NPU over the time; it is reported as measured and multiplied back by SCALE
(TB/s, to compare with the paper).

- mesh 5x4: one NPU per router, the NPU's port at 4 mesh links (240 Gb/s); `hierarchical`
  (one dimension at a time), `hierarchical_bidir` (half of each chunk through the rows first,
  half through the columns first) and a ring over all 20 NPUs;
- FRED: 5 groups of 4 NPUs (240 Gb/s ports) under L1 switches under one L2 switch. Fred-A's
  L1-L2 uplinks run at 1/8 of an NPU's port, as the issue describes it; Fred-C's at a whole
  group's (4 ports). A ring over the NPUs in order, and `in_network` (Fred-B and Fred-D: the
  same fabrics with in-switch reduction).

Weight streaming: 10, then 2, I/O controllers at the paper's 128 GB/s (10.24 Gb/s here) stream
``--io-mib`` to each NPU at once, every NPU fed by its nearest controller: on the mesh they sit
evenly around the edge routers (2: at opposite corners), on FRED on the L1 switches in turn. The summary's hottest link
out of a switch and the rate each controller achieved are reported.

3D parallelism, MP(2)-DP(5)-PP(2): one iteration of a 4-block Transformer (hidden 2048,
sequence 256, eight sequences per replica, 10 TFLOPS per NPU: the paper's compute scaled as its
bandwidth), tensor-parallel pairs, two pipeline stages, five data-parallel replicas, gradients
in 25 MiB buckets cut in 8 chunks; one micro-batch, then eight (1F1B). Each phase's mean time:
the tensor-parallel all-reduces (MP), the gradient all-reduces (DP) and the activation sends
between stages (PP).

Each case runs in a fresh process after one that warms the Numba cache.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCALE = 100
MESH_GBPS = 750 * 8 / SCALE  # 60
NPU_GBPS = 4 * MESH_GBPS  # 240: 3 TB/s
DELAY_NS = 100
IO_GBPS = 128 * 8 / SCALE  # 10.24
IO_CONTROLLERS = (10, 2)

CHILD = r"""
import json, sys
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
sc = Scenario.model_validate(json.loads(sys.argv[1]))
res = run(prepare_scenario(sc), write=False, progress=False)
s = res.summary
print(json.dumps({"status": s["status"], "time_ns": (s.get("iteration_ns") or [None])[0], "wall_s": s["wall_s"],
                  "events": s["events"], **{k: v for k, v in s.items() if k.startswith("io_")}}))
"""


CHILD_TRAINING = r"""
import json, sys
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
sc = Scenario.model_validate(json.loads(sys.argv[1]))
res = run(prepare_scenario(sc), write=False, progress=False)
s, f = res.summary, res.frames()
coll, tasks = f["collectives"], f["tasks"]
mp = coll.name.str.startswith(("fwd_comm", "bwd_comm"))
pp = tasks[tasks.name.str.startswith("pipe_")]
print(json.dumps({"status": s["status"], "iteration_ns": s["iteration_ns"][0], "compute_ns": s["mean_compute_ns"],
                  "exposed_ns": s["mean_exposed_communication_ns"], "mp_ns": float(coll.time_ns[mp].mean()),
                  "dp_ns": float(coll.time_ns[~mp].mean()), "pp_ns": float(pp.duration_ns.mean()),
                  "wall_s": s["wall_s"], "events": s["events"]}))
"""


def mesh():
    return {
        "kind": "mesh",
        "dims": [5, 4],
        "link": {"rate_gbps": MESH_GBPS, "delay_ns": DELAY_NS},
        "tiers": {"host": {"rate_gbps": NPU_GBPS}},
    }


def fred(uplink_gbps):
    return {
        "kind": "fred",
        "npus": 20,
        "group_size": 4,
        "npu_rate_gbps": NPU_GBPS,
        "uplink_rate_gbps": uplink_gbps,
        "link": {"delay_ns": DELAY_NS},
    }


#: (label, topology, algorithm, the paper's effective bandwidth in TB/s or None)
CASES = [
    ("mesh 5x4, hierarchical", mesh(), "hierarchical", None),
    ("mesh 5x4, hierarchical_bidir", mesh(), "hierarchical_bidir", 1.5),
    ("mesh 5x4, ring", mesh(), "ring", None),
    ("Fred-A (uplinks 1/8 of a port), ring", fred(NPU_GBPS / 8), "ring", 1.85),
    ("Fred-B (Fred-A, in-switch)", fred(NPU_GBPS / 8), "in_network", 3.7),
    ("Fred-C (uplinks 4 ports), ring", fred(4 * NPU_GBPS), "ring", 3.0),
    ("Fred-D (Fred-C, in-switch)", fred(4 * NPU_GBPS), "in_network", 6.0),
]


def io_doc(topology, controllers, nbytes):
    return {
        "name": "fred_io",
        "topology": {**topology, "io_controllers": controllers, "io_rate_gbps": IO_GBPS},
        "workload": {"patterns": [{"kind": "weight_streaming", "bytes": nbytes}]},
    }


def training_doc(topology, dp_algorithm, micro_batches):
    h, seq, batch = 2048, 256, 8
    return {
        "name": "fred_3d",
        "topology": topology,
        "workload": {
            "training": {
                "model": {
                    "name": "transformer",
                    "layers": 4,
                    "hidden": h,
                    "sequence": seq,
                    "batch_per_rank": batch,
                    "device_tflops": 1000 / SCALE,
                },
                "tp": 2,
                "pp": 2,
                "dp": 5,
                "pipeline_bytes": batch * seq * h * 2,
                "dp_algorithm": dp_algorithm,
                "chunks": 8,
                "micro_batches": micro_batches,
            }
        },
    }


def doc(topology, algorithm, nbytes, chunks):
    return {
        "name": "fred",
        "topology": topology,
        "workload": {
            "collectives": [
                {"name": "ar", "kind": "all_reduce", "algorithm": algorithm, "bytes": nbytes, "chunks": chunks}
            ]
        },
    }


def measure(document, child=CHILD) -> dict:
    out = subprocess.run(
        [sys.executable, "-P", "-c", child, json.dumps(document)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="example: python benchmarks/fred.py --bytes-mib 8 --chunks 16"
    )
    ap.add_argument("--bytes-mib", type=float, default=32.0)
    ap.add_argument("--chunks", type=int, default=32)
    ap.add_argument("--io-mib", type=float, default=4.0, help="weight streaming: MiB to each NPU")
    ap.add_argument("--out", default=str(Path(__file__).with_name("fred.json")))
    args = ap.parse_args()
    nbytes = int(args.bytes_mib * (1 << 20))
    measure(doc(fred(NPU_GBPS), "in_network", 1 << 20, 4))  # warm the cache
    rows = []
    print("| case | algorithm | time us | bus bandwidth Gb/s | x SCALE: TB/s | paper TB/s | wall s | events |")
    print("|---|---|---|---|---|---|---|---|")
    for label, topology, algorithm, paper in CASES:
        r = measure(doc(topology, algorithm, nbytes, args.chunks))
        assert r["status"] == "finished", (label, r)
        bus_gbps = 2 * 19 / 20 * nbytes * 8 / r["time_ns"]
        tbs = bus_gbps * SCALE / 8 / 1000
        rows.append(
            {
                "case": label,
                "algorithm": algorithm,
                "time_ns": r["time_ns"],
                "bus_gbps": bus_gbps,
                "paper_scale_tb_s": tbs,
                "paper_tb_s": paper,
                "wall_s": r["wall_s"],
                "events": r["events"],
            }
        )
        print(
            f"| {label} | {algorithm} | {r['time_ns'] / 1000:.1f} | {bus_gbps:.1f} | {tbs:.2f} | "
            f"{paper if paper is not None else ''} | {r['wall_s']:.1f} | {r['events']:,} |",
            flush=True,
        )
    io_rows = []
    print(
        f"\n| fabric | I/O controllers | achieved Gb/s (mean / least) | of {IO_GBPS:g} Gb/s | hottest link | "
        "its load Gb/s | x the I/O rate |"
    )
    print("|---|---|---|---|---|---|---|")
    fabrics = (("mesh 5x4", mesh()), ("FRED (Fred-C)", fred(4 * NPU_GBPS)))
    for controllers, (label, topology) in ((c, f) for c in IO_CONTROLLERS for f in fabrics):
        r = measure(io_doc(topology, controllers, int(args.io_mib * (1 << 20))))
        assert r["status"] == "finished", (label, r)
        io_rows.append({"case": label, **r})
        mean, least = r["io_achieved_gbps_mean"], r["io_achieved_gbps_min"]
        print(
            f"| {label} | {controllers} | {mean:.2f} / {least:.2f} | {mean / IO_GBPS:.0%} | "
            f"{r['io_hottest_link']} | {r['io_hottest_link_gbps']:.1f} | {r['io_hottest_link_per_io_rate']:.2f} |",
            flush=True,
        )
    training_rows = []
    print(
        "\n| micro-batches | fabric | DP algorithm | iteration ms | speed-up over the mesh | compute ms | "
        "exposed comm. ms | MP all-reduce us | DP all-reduce us | PP send us |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    fabrics = (
        ("mesh 5x4", mesh(), "ring"),
        ("Fred-A", fred(NPU_GBPS / 8), "ring"),
        ("Fred-B", fred(NPU_GBPS / 8), "in_network"),
        ("Fred-C", fred(4 * NPU_GBPS), "ring"),
        ("Fred-D", fred(4 * NPU_GBPS), "in_network"),
    )
    for m, (label, topology, algorithm) in ((m, f) for m in (1, 8) for f in fabrics):
        r = measure(training_doc(topology, algorithm, m), CHILD_TRAINING)
        assert r["status"] == "finished", (label, r)
        training_rows.append({"case": label, "dp_algorithm": algorithm, "micro_batches": m, **r})
        mesh_row = next(row for row in training_rows if row["micro_batches"] == m)
        speedup = mesh_row["iteration_ns"] / r["iteration_ns"]
        ms = {k: r[k] / 1e6 for k in ("iteration_ns", "compute_ns", "exposed_ns")}
        us = {k: r[k] / 1e3 for k in ("mp_ns", "dp_ns", "pp_ns")}
        print(
            f"| {m} | {label} | {algorithm} | {ms['iteration_ns']:.2f} | {speedup:.2f}x | {ms['compute_ns']:.2f} | "
            f"{ms['exposed_ns']:.2f} | {us['mp_ns']:.1f} | {us['dp_ns']:.1f} | {us['pp_ns']:.1f} |",
            flush=True,
        )
    Path(args.out).write_text(
        json.dumps(
            {
                "bytes": nbytes,
                "chunks": args.chunks,
                "scale": SCALE,
                "rows": rows,
                "io": io_rows,
                "training": training_rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
