"""LLM training on a rail-optimised GPU cluster: a GPT and a mixture-of-experts iteration under congestion control.

    python benchmarks/llm.py                                   # the default matrix (below), into benchmarks/llm.json
    python benchmarks/llm.py --case moe --gpus 128 --cc hpcc --oversub 2 --pxn off   # one row
    python benchmarks/llm.py --case gpt --gpus 1024 --cc dcqcn --oversub 1 --pxn off --mode exact --timeout 3600
    python benchmarks/llm.py --size --case gpt --gpus 1024     # flows and packets of a case, without running it
    python benchmarks/llm.py --table                           # the tables of the points recorded so far
    python benchmarks/llm.py --quick --out /tmp/llm.json       # small sizes, a few seconds a point

Cases, on ``topology.kind: rail_optimized`` (servers of 8 GPUs joined by an NVSwitch at
3600 Gb/s, each GPU's own 400 Gb/s NIC to a leaf of its rail, 8 servers' GPUs of one rail per
leaf, 8 spines, 1 us links, 4 KB MTU), one iteration, Megatron's placement (tp fastest, then pp,
then dp):

- ``gpt``: a 13B-class GPT (hidden 5120, 40 heads, sequence 2048, vocabulary 50257, as GPT-3 13B
  and Llama-2 13B) with tp 8 inside each server, pp 4 and dp = GPUs / 32, reduced to GPT_LAYERS
  layers and GPT_MICRO_BATCHES micro-batches per replica (docs/performance.md says why);
- ``moe``: Mixtral 8x7B (``preset: mixtral-8x7b``: hidden 4096, 8 experts of ffn 14336, top-2)
  with tp 1, pp 4, ep 8 and dp = GPUs / 4, so that each expert-parallel group spans 4 servers
  (2 GPUs of each, on 2 rails), its expert popularity Zipf-skewed (``imbalance`` MOE_IMBALANCE),
  reduced to MOE_LAYERS layers, sequences of MOE_SEQ_LEN tokens and one micro-batch.

Each point (case, GPUs, cc, oversubscription, PXN, fast-forward mode) runs in a fresh process on
a warm Numba cache (scale.py's harness) and records the iteration time, the mean exposed
communication per GPU (results/iteration.py), ECN marks and PFC pauses with the link directions
they happened on, the events, the wall time and the child's peak RSS. Points are kept in
benchmarks/llm.json (--out), a re-run replacing the point of the same key; --table prints them.
With no selection the default matrix runs: both cases on 128 GPUs under none, DCQCN and HPCC,
oversubscription 1 and 2, PXN off and on, exactly (24 points), then the 1024-GPU GPT (DCQCN,
non-blocking, PXN off) with fast_forward off, exact and trains (memo: --mode memo). Any of --case, --gpus, --cc,
--oversub, --pxn, --mode given runs the product of the values given, the others at their
defaults (both cases, 128 GPUs, all three policies, 1 and 2, off and on, off).
"""

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from scale import RUN, measure, warm_cache  # noqa: E402

GPUS_PER_NODE = 8
NODES_PER_LEAF = 8
SPINES = 8
MTU = 4096

# the reductions (docs/performance.md, "LLM training on a rail fabric", says why)
GPT_LAYERS = 4  # of 40: 1 per pipeline stage
GPT_SEQ_LEN = 1024  # of 2048
GPT_MICRO_BATCHES = 2  # per replica
MOE_LAYERS = 4  # of 32: 1 per pipeline stage
MOE_SEQ_LEN = 1024  # of 4096
MOE_FFN_HIDDEN = 1792  # of 14336: each expert an eighth as wide
MOE_VOCAB = 1000  # of 32000
MOE_IMBALANCE = 1.5

CCS = ("none", "dcqcn", "hpcc")
MODES = ("off", "exact", "trains", "memo")
KEY = ("case", "gpus", "cc", "oversub", "pxn", "mode", "quick", "set")


def key(p: dict, **change) -> str:
    """A point's identity: a re-run of the same key replaces it in the file."""
    return json.dumps([{**p, **change}.get(k, []) for k in KEY])


# the child: scale.py's run of one scenario, with the figures this benchmark reports
CHILD = (
    RUN
    + r"""
import re
from collections import Counter
import numpy as np
fabric, port = prepared.fabric, prepared.world.port
kind = [re.sub(r"\d+", "", name).split(".")[-1] for name in fabric.names]  # rail3.leaf0 -> leaf
node, peer = fabric.port_node, fabric.port_node[fabric.port_peer]
marks, pauses = Counter(), Counter()
for p in np.flatnonzero(port["ecn_marks"]):  # marked at the egress port: the link node -> peer
    marks[f"{kind[node[p]]}>{kind[peer[p]]}"] += int(port["ecn_marks"][p])
for p in np.flatnonzero(port["pauses_sent"]):  # sent by an ingress port: pauses the link peer -> node
    pauses[f"{kind[peer[p]]}>{kind[node[p]]}"] += int(port["pauses_sent"][p])
keys = ("status", "events", "events_skipped", "flows", "flows_finished", "data_packets_sent", "ecn_marks",
        "pfc_pauses_sent", "cnps_sent", "max_queue_bytes", "mean_iteration_ns", "mean_compute_ns",
        "mean_communication_ns", "mean_exposed_communication_ns", "mean_idle_ns", "hottest_links")
print(json.dumps({"wall_s": time.perf_counter() - t0, "build_s": t1 - t0, "engine_s": s["wall_s"],
                  **{k: s.get(k) for k in keys}, "marks_at": dict(marks.most_common()),
                  "pauses_at": dict(pauses.most_common()),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
)


def topology(gpus: int, oversub: float, pxn: bool, quick: bool) -> dict:
    nodes = gpus // GPUS_PER_NODE
    return {
        "kind": "rail_optimized",
        "nodes": nodes,
        "gpus_per_node": GPUS_PER_NODE,
        "nvlink_rate_gbps": 3600,
        "nvlink_delay_ns": 200,
        "nic_rate_gbps": 400,
        "nodes_per_leaf": min(2 if quick else NODES_PER_LEAF, nodes),
        "spines": 2 if quick else SPINES,
        "oversubscription": oversub,
        "pxn": pxn,
        "link": {"delay_ns": 1000},
    }


def gpt(gpus: int, quick: bool) -> dict:
    """The 13B-class GPT: tp 8, pp 4, dp = GPUs / 32 (quick: 2 small layers, pp 2)."""
    pp = 2 if quick else 4
    dp = gpus // (GPUS_PER_NODE * pp)
    micro = 2 if quick else GPT_MICRO_BATCHES
    model = {"kind": "gpt", "layers": GPT_LAYERS, "hidden": 5120, "heads": 40, "seq_len": GPT_SEQ_LEN, "vocab": 50257}
    if quick:
        model.update(layers=2, hidden=512, heads=8, seq_len=256, vocab=1000)
    model.update(micro_batch=1, global_batch=micro * dp, device_tflops=989)
    return {"model": model, "tp": GPUS_PER_NODE, "pp": pp, "dp": dp}


def moe(gpus: int, quick: bool) -> dict:
    """Mixtral 8x7B: tp 1, pp 4, ep 8, dp = GPUs / 4 (quick: 2 small layers, pp 2)."""
    pp = 2 if quick else 4
    model = {
        "preset": "mixtral-8x7b",
        "layers": MOE_LAYERS,
        "seq_len": MOE_SEQ_LEN,
        "ffn_hidden": MOE_FFN_HIDDEN,
        "vocab": MOE_VOCAB,
    }
    if quick:
        model.update(layers=2, hidden=256, heads=4, kv_heads=2, ffn_hidden=512, seq_len=256, vocab=1000)
    model.update(micro_batch=1, ep=8, imbalance=MOE_IMBALANCE, device_tflops=989)
    return {"model": model, "tp": 1, "pp": pp, "dp": gpus // pp}


CASES = {"gpt": gpt, "moe": moe}


def scenario(point: dict) -> dict:
    """The point's scenario document, its --set overrides applied."""
    from roce_emu.config.load import apply_override, parse_override

    gpus, quick = point["gpus"], point["quick"]
    doc = {
        "name": f"llm_{point['case']}_{gpus}",
        "seed": 1,
        "topology": topology(gpus, point["oversub"], point["pxn"] == "on", quick),
        "network": {"mtu_bytes": MTU, "cc": {"algorithm": point["cc"]}},
        "workload": {"training": CASES[point["case"]](gpus, quick)},
        "sim": {"fast_forward": point["mode"]},
    }
    for item in point.get("set", []):
        apply_override(doc, *parse_override(item))
    return doc


def default_matrix() -> list[dict]:
    small = [
        {"case": c, "gpus": 128, "cc": cc, "oversub": o, "pxn": x, "mode": "off"}
        for c, cc, o, x in itertools.product(CASES, CCS, (1.0, 2.0), ("off", "on"))
    ]
    large = [{"case": "gpt", "gpus": 1024, "cc": "dcqcn", "oversub": 1.0, "pxn": "off", "mode": m} for m in MODES[:3]]
    return small + large


def size(point: dict) -> dict:
    """Flows, data packets and bytes of a point, from its built workload (no run)."""
    import numpy as np

    from roce_emu.api import prepare_scenario
    from roce_emu.config.schema import Scenario
    from roce_emu.workload.size import workload_size

    sc = Scenario.model_validate(scenario(point))
    prepared = prepare_scenario(sc)
    counted = workload_size(sc, prepared.fabric, "llm.py")
    nbytes = prepared.world.flow["size_bytes"].astype(np.int64)
    return {
        "flows": counted.flows if counted else len(nbytes),
        "tasks": counted.tasks if counted else None,
        "packets": int(((nbytes + MTU - 1) // MTU).sum()),
        "gbytes": float(nbytes.sum()) / 1e9,
    }


def command(p: dict) -> str:
    """The command line that re-runs one point."""
    quick = " --quick" if p["quick"] else ""
    return (
        f"python benchmarks/llm.py --case {p['case']} --gpus {p['gpus']} --cc {p['cc']} --oversub {p['oversub']:g} "
        f"--pxn {p['pxn']} --mode {p['mode']}{quick}" + "".join(f" --set {item}" for item in p.get("set", []))
    )


def where(counts: dict) -> str:
    """The link directions holding most of a count, e.g. 'spine>leaf 80 %'."""
    total = sum(counts.values())
    if not total:
        return ""
    return ", ".join(f"{k.replace('>', '→')} {100 * v / total:.0f} %" for k, v in list(counts.items())[:2])


def table(points: list[dict]) -> str:
    """The markdown tables: one row per point, then the fast modes against off."""
    head = (
        "| case | GPUs | cc | oversub | PXN | mode | iteration ms | vs none | exposed comm ms | ECN marks | "
        "marked at | PFC pauses | paused | events | wall s | peak RSS MB |\n" + "|" + "---|" * 16 + "\n"
    )
    rows = []
    by_key = {key(p): p for p in points}
    for p in points:
        if p.get("status") != "finished":
            rows.append(
                f"| {p['case']} | {p['gpus']} | {p['cc']} | {p['oversub']:g} | {p['pxn']} | {p['mode']} | "
                f"{p.get('error') or p.get('status')} |" + " |" * 9
            )
            continue
        base = by_key.get(key(p, cc="none"))
        vs = ""
        if base and base is not p and base.get("status") == "finished":
            vs = f"{100 * (p['mean_iteration_ns'] / base['mean_iteration_ns'] - 1):+.1f} %"
        if p["mode"] != "off":
            off = by_key.get(key(p, mode="off"))
            if off and off.get("status") == "finished":
                vs = f"{100 * (p['mean_iteration_ns'] / off['mean_iteration_ns'] - 1):+.3f} % vs off"
        skipped = f" ({p['events_skipped'] / 1e6:.0f} M skipped)" if p.get("events_skipped") else ""
        rows.append(
            f"| {p['case']} | {p['gpus']} | {p['cc']} | {p['oversub']:g} | {p['pxn']} | {p['mode']} | "
            f"{p['mean_iteration_ns'] / 1e6:.3f} | {vs} | {p['mean_exposed_communication_ns'] / 1e6:.3f} | "
            f"{p['ecn_marks']:,} | {where(p['marks_at'])} | {p['pfc_pauses_sent']:,} | {where(p['pauses_at'])} | "
            f"{p['events'] / 1e6:,.0f} M{skipped} | {p['wall_s']:.1f} | {p['rss_mb']:,.0f} |"
        )
    return head + "\n".join(rows)


def order(p: dict) -> tuple:
    return (p["quick"], p["gpus"], p["case"], MODES.index(p["mode"]), p["oversub"], p["pxn"], CCS.index(p["cc"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), action="append", help="repeatable")
    ap.add_argument("--gpus", type=int, action="append", help="a multiple of 64 (quick: of 32); repeatable")
    ap.add_argument("--cc", choices=CCS, action="append", help="repeatable")
    ap.add_argument("--oversub", type=float, action="append", help="topology.oversubscription; repeatable")
    ap.add_argument("--pxn", choices=("off", "on"), action="append", help="repeatable")
    ap.add_argument("--mode", choices=MODES, action="append", help="sim.fast_forward; repeatable")
    ap.add_argument("--quick", action="store_true", help="small models on 32 GPUs: a few seconds a point")
    ap.add_argument("--size", action="store_true", help="print each point's flows and packets instead of running")
    ap.add_argument("--table", action="store_true", help="print the recorded points' table and stop")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per point")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    ap.add_argument("--out", type=Path, default=ROOT / "llm.json")
    args = ap.parse_args()
    recorded = json.loads(args.out.read_text()) if args.out.is_file() else []
    if args.table:
        print(table(sorted(recorded, key=order)))
        return
    chosen = (args.case, args.gpus, args.cc, args.oversub, args.pxn, args.mode)
    if any(chosen):
        points = [
            dict(zip(KEY[:6], values))
            for values in itertools.product(
                args.case or list(CASES),
                args.gpus or [32 if args.quick else 128],
                args.cc or list(CCS),
                args.oversub or [1.0, 2.0],
                args.pxn or ["off", "on"],
                args.mode or ["off"],
            )
        ]
    else:
        points = [p for p in default_matrix() if p["gpus"] == 128 or not args.quick]
        if args.quick:
            points = [{**p, "gpus": 32} for p in points]
    points = [{**p, "quick": args.quick, **({"set": args.set} if args.set else {})} for p in points]
    from roce_emu.config.load import validate_document
    from roce_emu.errors import ScenarioError

    for p in points:
        if p["gpus"] % (32 if args.quick else 64) or p["gpus"] <= 0:
            print(
                f"error: --gpus {p['gpus']} is not allowed: a positive multiple of {32 if args.quick else 64}",
                file=sys.stderr,
            )
            sys.exit(2)
        try:  # as roce-emu run --set reads them; a bad one stops here, in one line, exit code 2
            validate_document(scenario(p), "llm.py --set")
        except (ScenarioError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
    if args.size:
        for p in points:
            print(json.dumps({**p, **size(p)}), flush=True)
        return
    if not args.quick:
        warm_cache()
    for p in points:
        print(command(p), flush=True)
        result = {**p, **measure(scenario(p), args.timeout, CHILD)}
        result.setdefault("status", "error")
        recorded = json.loads(args.out.read_text()) if args.out.is_file() else []  # another run may have added
        recorded = [r for r in recorded if key(r) != key(p)] + [result]
        recorded.sort(key=order)
        args.out.write_text(json.dumps(recorded, indent=1) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "hottest_links"}), flush=True)
    print(table([r for r in recorded if key(r) in {key(p) for p in points}]))


if __name__ == "__main__":
    main()
