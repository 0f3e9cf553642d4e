"""Contention components: how often a memo of their exact outcomes would hit.

    python benchmarks/components.py                          # every case (ResNet-50 on 128 NPUs: about 2 min)
    python benchmarks/components.py --case resnet --npus 32  # one case, fewer NPUs
    python benchmarks/components.py --case transformer --case spine
    python benchmarks/components.py --case gpt --case moe    # the GPT and the MoE on the rail-optimised fabric
    python benchmarks/components.py --case ring --set network.nic.queue_pair=connection

Each case runs once, exactly (``fast_forward: off``, in this process, every flow of every
collective a row). Then every flow's path is read back from the world (its ECMP hash and the
routing tables, results.tables.flow_paths): the egress ports its data crosses and those its
ACKs cross. A flow occupies a port of its data path from the time its first packet can reach it
to the time its last packet leaves it (its start and when its receiver held every byte, shifted
by the idle-network latency before and after that hop); it occupies a port of its ACK path
likewise, up to the time its sender had the last ACK. The shifts assume no queueing at the other
hops, so the intervals are if anything too long: two flows may be linked that did not meet.
With ``network.nic.queue_pair: connection`` a flow starts to occupy its path once the flow before
it on its connection has sent its last packet (the engine's rule), not when it is released.

Two flows are *linked* if they occupy one port at once. A *component* is a connected component
of that graph over the whole run: a set of flows that met nobody outside the set while active,
and so whose exact outcome depends only on their own inputs (and on a switch's shared buffer and
PFC pauses, which this ignores). Three variants of "occupy":

- ``data``: data paths only (ACKs are ignored altogether);
- ``data+ack``: data with data, and a flow's data with another flow's ACKs;
- ``data, ack as key``: components as ``data``, but a flow's key also names the ACK streams of
  flows outside its component that its data meets (at which hop, their bytes and path, their start
  offset): the ACK chain broken as the issue proposes.

A component's *key* is what a memo would be looked up by: each flow's bytes, its start offset
from the component's first start (quantised to one packet's serialisation time at that first
flow's first hop, or 10 times that, or ignored), each hop's rate and delay, the shape (which flows
share which ports in which hop order, ports renamed in order of appearance, flows in a canonical
order), and the ACK ratio. Each flow starts with its congestion control reset (a queue pair per
flow) and, by construction, with its ports free of other flows' packets, so neither needs a field.
The predicted hit rate is 1 - distinct keys / components (the first occurrence of a key is a miss),
and weighted by bytes the share of bytes in components whose key was seen before.
"""

import argparse
import itertools
import math
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

VARIANTS = ("data", "data+ack", "data, ack as key")
QUANTA = (("1 pkt", 1), ("10 pkt", 10), ("ignored", 0))
#: components whose tied flows have more orderings than this keep the sorted order
#: (an isomorphism missed there can only add distinct keys)
MAX_ORDERINGS = 720


@dataclass
class Flows:
    """Every flow of one exact run, with its paths and per-port occupancy intervals."""

    name: str
    bytes: np.ndarray
    start: np.ndarray  # ps: when it may send (with connection queue pairs: and the flow before it has sent)
    delivered: np.ndarray  # ps: its receiver held every byte
    finish: np.ndarray  # ps: its sender had every ACK
    data: list  # per flow: tuple of egress ports of its data
    ack: list  # per flow: tuple of egress ports of its ACKs
    hop: dict  # port -> (rate_gbps, delay_ns)
    data_iv: list  # per flow: [(lo, hi)] per data hop
    ack_iv: list  # per flow: [(lo, hi)] per ACK hop
    quantum: np.ndarray  # per flow: a full packet's serialisation time at its first hop (ps)
    ack_every: int
    iterations: int
    wall_s: float


def run_case(name: str, doc: dict) -> Flows:
    """Simulate the scenario document exactly and read every flow's timing and paths."""
    from roce_emu.api import prepare_scenario, run
    from roce_emu.config.schema import Scenario
    from roce_emu.core import kinds as K
    from roce_emu.core.paths import ser_ps
    from roce_emu.results.tables import flow_paths

    doc = {**doc, "output": {"collective_flows": True}, "sim": {"fast_forward": "off"}}
    t0 = time.perf_counter()
    prepared = prepare_scenario(Scenario.model_validate(doc))
    result = run(prepared, write=False, progress=False)
    wall = time.perf_counter() - t0
    if result.summary["status"] != "finished":
        raise SystemExit(f"{name}: the run ended {result.summary['status']}")
    w = result.outcome.world
    table = result.flow_table
    n = len(table["flow_id"])
    cfg = w.cfg
    mtu, hdr, ifg, ack_bytes = (int(cfg[k]) for k in (K.CFG_MTU, K.CFG_DATA_HDR, K.CFG_IFG, K.CFG_ACK_BYTES))
    rate = w.port["nominal_bps"].astype(np.int64)
    prop = w.port["prop_ps"].astype(np.int64)
    size = table["bytes"].astype(np.int64)
    start = table["start_ps"].astype(np.int64)
    finish = table["finish_ps"].astype(np.int64)
    delivered = w.task["finish_ps"][:n].astype(np.int64)
    data, ack, quantum = [], [], np.zeros(n, np.int64)
    data_iv: list = [None] * n
    ack_iv: list = [None] * n
    hop: dict[int, tuple] = {}
    for f in range(n):
        fwd, rev = (tuple(int(p) for p in path) for path in flow_paths(w, f))
        data.append(fwd)
        ack.append(rev)
        for p in fwd + rev:
            hop.setdefault(p, (int(rate[p]) / 1e9, int(prop[p]) / 1e3))
        quantum[f] = ser_ps(mtu + hdr + ifg, int(rate[fwd[0]]))
    # with a queue pair per connection, a flow sends once the one before it on its connection
    # has sent its last packet: that is when it starts to occupy its path
    last_sent: dict[tuple, int] = {}
    prio, posted = w.flow["prio"], w.flow["conn"]
    for f in sorted(range(n), key=lambda f: (int(start[f]), f)):
        conn = (int(table["src"][f]), int(table["dst"][f]), int(prio[f]), int(posted[f]))
        if posted[f] >= 0 and conn in last_sent:
            start[f] = max(int(start[f]), last_sent[conn])
        first_wire = min(int(size[f]), mtu) + hdr + ifg
        last_wire = int(size[f]) - (max(int(size[f]) - 1, 0) // mtu) * mtu + hdr + ifg
        fwd, rev = data[f], ack[f]
        data_iv[f] = _intervals(fwd, int(start[f]), int(delivered[f]), first_wire, last_wire, rate, prop, ser_ps)
        last_sent[conn] = data_iv[f][0][1]
        first_ack = int(start[f]) + sum(int(ser_ps(first_wire, int(rate[p]))) + int(prop[p]) for p in fwd)
        ack_wire = ack_bytes + ifg
        ack_iv[f] = _intervals(rev, first_ack, int(finish[f]), ack_wire, ack_wire, rate, prop, ser_ps)
    iterations = int(doc.get("workload", {}).get("iterations", 1))
    return Flows(
        name,
        size,
        start,
        delivered,
        finish,
        data,
        ack,
        hop,
        data_iv,
        ack_iv,
        quantum,
        int(cfg[K.CFG_ACK_EVERY]),
        iterations,
        wall,
    )


def _intervals(path, first_sent, last_arrived, first_wire, last_wire, rate, prop, ser_ps) -> list[tuple[int, int]]:
    """[lo, hi) per hop of a path: from the time the first frame (sent at first_sent) can reach
    the hop's queue to the time the last frame (arrived at the end at last_arrived) leaves it,
    both over an idle network."""
    out = []
    before = 0
    after = [0] * (len(path) + 1)
    for j in range(len(path) - 1, -1, -1):
        p = path[j]
        later = int(ser_ps(last_wire, int(rate[path[j + 1]]))) if j + 1 < len(path) else 0
        after[j] = after[j + 1] + int(prop[p]) + later
    for j, p in enumerate(path):
        out.append((first_sent + before, last_arrived - after[j]))
        before += int(ser_ps(first_wire, int(rate[p]))) + int(prop[p])
    return out


class UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def port_occupancy(flows: Flows) -> dict[int, list[tuple[int, int, int, bool]]]:
    """port -> [(lo, hi, flow, is_ack)], sorted by lo."""
    per_port = defaultdict(list)
    for f in range(len(flows.bytes)):
        for p, (lo, hi) in zip(flows.data[f], flows.data_iv[f]):
            per_port[p].append((lo, hi, f, False))
        for p, (lo, hi) in zip(flows.ack[f], flows.ack_iv[f]):
            per_port[p].append((lo, hi, f, True))
    for rows in per_port.values():
        rows.sort()
    return per_port


def overlaps(occupancy, wanted) -> list[tuple[int, int, int, int]]:
    """Every (port, flow a, flow b, kind) where a's and b's intervals on the port overlap and
    wanted(kind_a, kind_b) (kinds: False data, True ACK), found by a sweep per port."""
    out = []
    for p, rows in occupancy.items():
        active: list[tuple[int, int, bool]] = []
        for lo, hi, f, is_ack in rows:
            active = [a for a in active if a[0] > lo]
            for a_hi, g, g_ack in active:
                if g != f and wanted(is_ack, g_ack):
                    out.append((p, f, g, (is_ack, g_ack)))
            active.append((hi, f, is_ack))
    return out


def components(n: int, links) -> list[list[int]]:
    """Connected components of the flows under the links, each sorted, ordered by first flow."""
    uf = UnionFind(n)
    for _, a, b, _ in links:
        uf.union(a, b)
    groups = defaultdict(list)
    for f in range(n):
        groups[uf.find(f)].append(f)
    return sorted(groups.values(), key=lambda g: g[0])


def foreign_acks(flows: Flows, comp_of: np.ndarray, ack_meets) -> dict[int, list[tuple[int, int]]]:
    """flow -> [(hop index of its data path, flow whose ACKs meet it there)], outside its component."""
    out = defaultdict(list)
    for p, a, b, kinds in ack_meets:
        data_f, ack_f = (a, b) if not kinds[0] else (b, a)
        if comp_of[data_f] != comp_of[ack_f]:
            out[data_f].append((flows.data[data_f].index(p), ack_f))
    return out


def component_key(flows: Flows, comp: list[int], variant: str, q: int, foreign) -> tuple:
    """The canonical key of a component (module docstring), offsets in units of q packets (0: ignored)."""
    t0 = min(int(flows.start[f]) for f in comp)
    first = min(comp, key=lambda f: (int(flows.start[f]), int(flows.quantum[f])))
    unit = int(flows.quantum[first]) * q

    def offset(t: int) -> int:
        return (t - t0) // unit if q else 0

    with_acks = variant != "data"

    def descriptor(f: int) -> tuple:
        d = (
            offset(int(flows.start[f])),
            int(flows.bytes[f]),
            tuple(flows.hop[p] for p in flows.data[f]),
            tuple(flows.hop[p] for p in flows.ack[f]) if with_acks else (),
        )
        if variant == "data, ack as key":
            met = sorted(
                (j, int(flows.bytes[g]), tuple(flows.hop[p] for p in flows.data[g]), offset(int(flows.start[g])))
                for j, g in foreign.get(f, ())
            )
            d += (tuple(met),)
        return d

    desc = {f: descriptor(f) for f in comp}
    ordered = sorted(comp, key=lambda f: desc[f])
    ties = [list(g) for _, g in itertools.groupby(ordered, key=lambda f: desc[f])]

    def shape(order) -> tuple:
        label: dict[int, int] = {}
        out = []
        for f in order:
            ports = flows.data[f] + (flows.ack[f] if with_acks else ())
            out.append(tuple(label.setdefault(p, len(label)) for p in ports))
        return tuple(out)

    if sum(math.lgamma(len(g) + 1) for g in ties) <= math.log(MAX_ORDERINGS):
        best = min(
            shape([f for perm in perms for f in perm])
            for perms in itertools.product(*map(itertools.permutations, ties))
        )
    else:
        best = shape(ordered)
    return (flows.ack_every, tuple(desc[f] for f in ordered), best)


def analyse(flows: Flows) -> dict:
    """Per variant: components, their sizes, and keys and hit rates per quantisation."""
    n = len(flows.bytes)
    occupancy = port_occupancy(flows)
    data_links = overlaps(occupancy, lambda a, b: not a and not b)
    mixed = overlaps(occupancy, lambda a, b: a != b)
    out = {}
    for variant in VARIANTS:
        comps = components(n, data_links + mixed if variant == "data+ack" else data_links)
        comp_of = np.empty(n, np.int64)
        for i, c in enumerate(comps):
            comp_of[c] = i
        foreign = foreign_acks(flows, comp_of, mixed) if variant == "data, ack as key" else {}
        comps.sort(key=lambda c: min(int(flows.start[f]) for f in c))  # the order a memo meets them
        sizes = Counter(len(c) for c in comps)
        total_bytes = int(flows.bytes.sum())
        row = {
            "components": len(comps),
            "alone": sizes.get(1, 0) / n,
            "sizes": sizes,
            "largest": max(sizes),
            "met_foreign_acks": sum(1 for f in range(n) if foreign.get(f)) / n,
            "same_connection": same_connection(flows, data_links),
            "step_overlap": step_overlap(flows),
        }
        for label, q in QUANTA:
            seen: set = set()
            hit_bytes = 0
            for c in comps:
                key = component_key(flows, c, variant, q, foreign)
                if key in seen:
                    hit_bytes += int(flows.bytes[c].sum())
                seen.add(key)
            row[label] = (len(seen), 1 - len(seen) / len(comps), hit_bytes / total_bytes)
        if variant == "data":
            row["spread"] = offset_spread(flows, comps)
        out[variant] = row
    return out


def same_connection(flows: Flows, links) -> float:
    """The share of data-with-data overlaps that are two flows of one sender and receiver (a
    ring's next step starting while its previous one still sends), or nan without overlaps."""
    if not links:
        return float("nan")
    same = sum(
        1 for _, a, b, _ in links if flows.data[a][0] == flows.data[b][0] and flows.data[a][-1] == flows.data[b][-1]
    )
    return same / len(links)


def step_overlap(flows: Flows) -> tuple[float, float]:
    """Over consecutive flows of one sender and receiver (by start): the share whose receiver held
    the earlier one's last byte more than its path's propagation delay after the later one was
    released (they truly overlap), and the median of that lead in ns."""
    by_connection = defaultdict(list)
    for f in range(len(flows.bytes)):
        by_connection[(flows.data[f][0], flows.data[f][-1])].append(f)
    leads, real = [], 0
    for group in by_connection.values():
        group.sort(key=lambda f: (int(flows.start[f]), f))
        for a, b in zip(group, group[1:]):
            lead = int(flows.delivered[a]) - int(flows.start[b])
            leads.append(lead / 1e3)
            real += lead > sum(flows.hop[p][1] for p in flows.data[a]) * 1e3
    if not leads:
        return float("nan"), float("nan")
    return real / len(leads), float(np.median(leads))


def offset_spread(flows: Flows, comps) -> list[float]:
    """Percentiles 50, 90, 99 and the largest of the start spread (last start - first start) of
    the multi-flow components, in packets of serialisation time at the first flow's first hop."""
    spread = [
        (max(int(flows.start[f]) for f in c) - min(int(flows.start[f]) for f in c)) / int(flows.quantum[c[0]])
        for c in comps
        if len(c) > 1
    ]
    if not spread:
        return []
    return [float(np.percentile(spread, p)) for p in (50, 90, 99)] + [max(spread)]


def size_bins(sizes: Counter) -> str:
    bins = ((1, 1), (2, 2), (3, 4), (5, 16), (17, 128), (129, 1 << 62))
    parts = []
    for lo, hi in bins:
        k = sum(v for s, v in sizes.items() if lo <= s <= hi)
        if k:
            parts.append(f"{lo if lo == hi else f'{lo}-{hi}' if hi < 1 << 62 else f'>{lo - 1}'}: {k}")
    return ", ".join(parts)


def cases(npus: int) -> dict:
    """name -> (description, scenario document)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from roce_emu.config.load import read_document
    from scale import case_resnet, case_ring

    def shipped(name: str) -> dict:
        doc = read_document(ROOT / "scenarios" / f"{name}.yaml")
        doc.pop("output", None)
        return doc

    ring = case_ring(128, 1.0)
    ring["workload"]["collectives"][0]["bytes"] = 128 * 64 * 1024
    return {
        "resnet": (f"ResNet-50 DP, {npus} NPUs (scale.py's resnet)", {"name": "resnet", **case_resnet(npus, 1.0)}),
        "resnet_small": ("ResNet-50 DP, 32 NPUs", {"name": "resnet32", **case_resnet(32, 1.0)}),
        "transformer": ("training_transformer.yaml (TP 4 x DP 4)", shipped("training_transformer")),
        "spine": ("training_spine_congestion.yaml (TP 4 x DP 4)", shipped("training_spine_congestion")),
        "gpt": ("training_gpt_rail.yaml (GPT, TP 8 x PP 2 x DP 2)", shipped("training_gpt_rail")),
        "moe": ("training_moe_rail.yaml (MoE, EP 16, skewed experts)", shipped("training_moe_rail")),
        "ring": ("ring All-Reduce, 128 ranks, 8 MiB", {"name": "ring", **ring}),
    }


def markdown(label: str, flows: Flows, result: dict) -> str:
    n = len(flows.bytes)
    lines = [
        f"**{label}**: {n:,} flows, {flows.iterations} iteration(s), one ACK per {flows.ack_every} packet(s), "
        f"run in {flows.wall_s:.0f} s",
        "",
        "| variant | components | flows alone | sizes (size: count) | largest | "
        + " | ".join(f"keys, hit, bytes hit ({q} offsets)" for q, _ in QUANTA)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(QUANTA),
    ]
    for variant, row in result.items():
        cells = [
            variant,
            f"{row['components']:,}",
            f"{100 * row['alone']:.1f} %",
            size_bins(row["sizes"]),
            f"{row['largest']:,}",
        ]
        for q, _ in QUANTA:
            keys, hit, byte_hit = row[q]
            cells.append(f"{keys:,}, {100 * hit:.1f} %, {100 * byte_hit:.1f} %")
        lines.append("| " + " | ".join(cells) + " |")
    spread = result["data"]["spread"]
    if spread:
        lines += [
            "",
            "Start spread of the multi-flow `data` components, in packets: "
            f"median {spread[0]:.1f}, 90th percentile {spread[1]:.1f}, 99th {spread[2]:.1f}, largest {spread[3]:.1f}. "
            "Flows whose data meets ACKs of another component: "
            f"{100 * result['data, ack as key']['met_foreign_acks']:.1f} %.",
            f"Data-with-data overlaps between two flows of one sender and receiver: "
            f"{100 * result['data']['same_connection']:.1f} %.",
            "Consecutive flows of one sender and receiver that overlap by more than their path's delay: "
            f"{100 * result['data']['step_overlap'][0]:.1f} % (the earlier one's last byte arrives "
            f"{result['data']['step_overlap'][1]:.0f} ns after the later one's release, median).",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--case", action="append", choices=["resnet", "resnet_small", "transformer", "spine", "gpt", "moe", "ring"]
    )
    ap.add_argument("--npus", type=int, default=128, help="NPUs of the resnet case")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = ap.parse_args()
    from roce_emu.config.load import apply_override, parse_override
    from roce_emu.errors import ScenarioError

    table = cases(args.npus)
    try:  # as roce-emu run --set reads them: a bad one stops here, in one line, exit code 2
        overrides = [parse_override(item) for item in args.set]
        for name in args.case or list(table):
            for key, value in overrides:
                apply_override(table[name][1], key, value)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    for name in args.case or list(table):
        label, doc = table[name]
        if args.set:
            label += ", " + ", ".join(args.set)
        flows = run_case(name, doc)
        print(markdown(label, flows, analyse(flows)), end="\n\n", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
