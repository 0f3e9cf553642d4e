"""Where the exact engine's events go: how much of a run any steady-phase skipping could save.

    python benchmarks/steady_phases.py --case resnet --cc none --seeds 1 2      # ResNet-50, 128 NPUs
    python benchmarks/steady_phases.py --case ring --bytes-scale 0.0625         # a 64 MiB ring All-Reduce
    python benchmarks/steady_phases.py --case ring --npus 16 --bytes-scale 0.01 --slice-ns 500

Each case of ``benchmarks/scale.py`` runs once with ``fast_forward: off``, in slices of
``--slice-ns`` simulated time (slicing never changes the result: ``roce_emu/core/loop.py``),
counting the events of each slice and each flow's delivered packets at its end. The figures are
upper bounds, each for one family of approximation that leaves the start and the end of every
flow packet-level (a margin of X us on both sides) and skips its steady middle at no cost:

- ``global``: a jump of the whole network (the exact jumps of ``fastforward.py``, or the same with
  a tolerance) can only cover slices with no flow starting or finishing anywhere within X us;
  ``global, rates steady`` also asks every active flow to deliver, in the slice and in each of the W
  slices before it, the same number of packets within TOL.
- ``per flow``: skipping each flow's own middle, whatever the others do (which needs a clock per
  flow), covers the share of each flow's duration farther than X us from its start and its end,
  weighted by duration; ``per flow, rate steady`` only the packets a flow delivers there in slices
  where its own rate held (W = 2 slices, within 1 packet).

The bound on the speed-up is 1 / (1 - skippable share of the events). The drift columns say why
global skipping finds nothing in data-parallel rings: the k-th flows of the ranks (step k) start
``spread`` apart, a rank's step often starts while its previous one still sends (``overlap``), and
some flow starts or finishes somewhere every ``gap`` (median) ns.
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MARGINS_US = (2, 5)  # X: the packet-level margin at each flow's start and end
WINDOWS = (2, 5)  # W: slices over which rates must hold
TOLERANCES = (0, 1)  # TOL: packets per slice


@dataclass
class Phases:
    """One exact run, sliced: events per slice and, per slice, each active flow's delivered packets."""

    slice_ps: int
    events: np.ndarray  # per slice
    delivered: list[dict[int, int]]  # per slice: flow -> packets delivered in it
    start_ps: np.ndarray  # per flow
    finish_ps: np.ndarray
    src: np.ndarray
    status: str


def run_sliced(prepared, slice_ps: int) -> Phases:
    """Run a prepared scenario's world to its end in slices of slice_ps, exactly."""
    from roce_emu.core import kinds as K
    from roce_emu.core.loop import advance
    from roce_emu.run.world import grow, grow_qps

    w = prepared.world
    t = 0
    counts: list[int] = []
    delivered: list[dict[int, int]] = []
    before: dict[int, int] = {}
    while True:
        status = advance(w, t + slice_ps - 1, 1 << 62)
        if status in (K.ST_POOL_LOW, K.ST_HEAP_LOW):
            w = grow(w)
            continue
        if status == K.ST_QP_LOW:
            w = grow_qps(w)
            continue
        if status == K.ST_TRACE_FULL:  # no trace is kept here
            w.meta[K.M_TRACE_ROWS] = 0
            continue
        counts.append(int(w.stats[K.C_EVENTS]))
        live = w.qp["flow"] >= 0
        now = dict(zip(w.qp["flow"][live].tolist(), w.qp["pkts_delivered"][live].tolist()))
        delivered.append({f: n - before.get(f, 0) for f, n in now.items()})
        before = now
        t += slice_ps
        if status != K.ST_T_LIMIT:
            break
    fl = w.flow
    state = "finished" if int(w.stats[K.C_FLOWS_DONE]) == len(fl) else f"stopped (status {status})"
    events = np.diff(np.array([0] + counts, np.int64))
    return Phases(slice_ps, events, delivered, fl["start_ps"].copy(), fl["finish_ps"].copy(), fl["src"].copy(), state)


def _near_boundary(ph: Phases, margin: int) -> np.ndarray:
    """Per slice: whether some flow starts or finishes within margin slices of it."""
    n = len(ph.events)
    marks = np.zeros(n + 1, np.int64)
    for b in np.concatenate([ph.start_ps, ph.finish_ps]) // ph.slice_ps:
        marks[min(int(b), n)] += 1
    cum = np.concatenate([[0], np.cumsum(marks)])
    i = np.arange(n)
    return cum[np.minimum(i + margin + 1, n + 1)] - cum[np.maximum(i - margin, 0)] > 0


def _rates_steady(ph: Phases, window: int, tol: int) -> np.ndarray:
    """Per slice: every active flow delivered as many packets (within tol) in each of the window slices before."""
    n = len(ph.events)
    steady = np.zeros(n, bool)
    for i in range(window, n):
        now = ph.delivered[i]
        if not now:
            continue
        steady[i] = all(
            ph.delivered[i - j].keys() == now.keys()
            and all(abs(ph.delivered[i - j][f] - v) <= tol for f, v in now.items())
            for j in range(1, window + 1)
        )
    return steady


def bounds(ph: Phases) -> dict:
    """The skippable shares of the events and the speed-up each bounds (module docstring)."""
    total = max(int(ph.events.sum()), 1)
    out: dict = {"events": total, "slices": len(ph.events)}
    duration = (ph.finish_ps - ph.start_ps).astype(np.float64)
    for x in MARGINS_US:
        margin = max(round(x * 1_000_000 / ph.slice_ps), 1)
        free = ~_near_boundary(ph, margin)
        out[f"global X={x}"] = float(ph.events[free].sum()) / total
        for window in WINDOWS:
            for tol in TOLERANCES:
                ok = free & _rates_steady(ph, window, tol)
                out[f"global, rates steady X={x} W={window} TOL={tol}"] = float(ph.events[ok].sum()) / total
        middle = np.clip(duration - 2 * x * 1_000_000, 0, None)
        out[f"per flow X={x}"] = float(middle.sum() / max(duration.sum(), 1.0))
        out[f"per flow, rate steady X={x} W=2 TOL=1"] = _own_rate_steady(ph, margin, 2, 1)
    return out


def _own_rate_steady(ph: Phases, margin: int, window: int, tol: int) -> float:
    """The share of delivered packets that a flow delivered in a slice farther than margin slices
    from its own start and end, having delivered as many (within tol) in each of the window slices
    before: what skipping each flow's own steady middle could save, with a clock per flow."""
    first = ph.start_ps // ph.slice_ps + margin
    last = ph.finish_ps // ph.slice_ps - margin
    steady = total = 0
    for i in range(window, len(ph.delivered)):
        now = ph.delivered[i]
        for f, v in now.items():
            total += v
            if first[f] <= i <= last[f] and all(
                abs(ph.delivered[i - j].get(f, -tol - 1) - v) <= tol for j in range(1, window + 1)
            ):
                steady += v
    return steady / max(total, 1)


def drift(ph: Phases) -> dict:
    """Ring drift: the k-th flows of each sender taken as step k."""
    per_rank = [np.sort(np.where(ph.src == r)[0]) for r in np.unique(ph.src)]
    starts = [ph.start_ps[i] for i in per_rank]
    order = [np.argsort(s, kind="stable") for s in starts]
    steps = min(len(s) for s in starts)
    if steps < 2:
        return {}
    s = np.array([st[o][:steps] for st, o in zip(starts, order)]) / 1e6
    f = np.array([ph.finish_ps[i][o][:steps] for i, o in zip(per_rank, order)]) / 1e6
    spread = s.max(axis=0) - s.min(axis=0)
    edges = np.sort(np.concatenate([ph.start_ps, ph.finish_ps]))
    return {
        "steps": steps,
        "median step us": float(np.median(f - s)),
        "spread us (median, last)": (float(np.median(spread)), float(spread[-1])),
        "overlap": float((s[:, 1:] < f[:, :-1]).mean()),
        "gap ns": float(np.median(np.diff(edges))) / 1e3,
    }


def speed_up(share: float) -> float:
    return 1.0 / max(1.0 - share, 1e-9)


def main() -> None:
    from scale import CASES

    from roce_emu.api import prepare_scenario
    from roce_emu.config.load import apply_override, parse_override
    from roce_emu.config.schema import Scenario
    from roce_emu.errors import ScenarioError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), default="resnet")
    ap.add_argument("--npus", type=int, default=128)
    ap.add_argument("--bytes-scale", type=float, default=1.0, help="scale the ring case's size")
    ap.add_argument("--cc", default="none")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--slice-ns", type=int, default=1000, help="simulated time per slice")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = ap.parse_args()
    try:
        overrides = [parse_override(item) for item in args.set]
        docs = []
        for seed in args.seeds:
            doc = {"name": f"steady_{args.case}", "seed": seed, **CASES[args.case][0](args.npus, args.bytes_scale)}
            doc["network"] = {**doc.get("network", {}), "cc": {"algorithm": args.cc}}
            doc["sim"] = {"fast_forward": "off"}
            for key, value in overrides:
                apply_override(doc, key, value)
            docs.append((seed, Scenario.model_validate(doc)))
    except (ScenarioError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    x0, x1 = MARGINS_US
    print(
        f"| seed | events | last finish us | global X={x0} / {x1} us | global, rates steady within 1 pkt (W=2) | "
        f"per flow X={x0} / {x1} us | per flow, rate steady X={x0} | step us | step start spread us (median, last) | "
        "steps overlapping | "
        "gap ns |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for seed, sc in docs:
        ph = run_sliced(prepare_scenario(sc), args.slice_ns * 1000)
        b, d = bounds(ph), drift(ph)
        steady = b[f"global, rates steady X={x0} W=2 TOL=1"]

        def cell(share: float) -> str:
            return f"{100 * share:.3f} % ({speed_up(share):.2f}x)"

        ring = "| | | |"
        if d:
            median, last = d["spread us (median, last)"]
            ring = f"{d['median step us']:.1f} | {median:.0f}, {last:.0f} | {100 * d['overlap']:.1f} % | "
            ring += f"{d['gap ns']:.0f} |"
        print(
            f"| {seed} | {b['events']:,} | {ph.finish_ps.max() / 1e6:.2f} | {cell(b[f'global X={x0}'])} / "
            f"{cell(b[f'global X={x1}'])} | {cell(steady)} | {cell(b[f'per flow X={x0}'])} / "
            f"{cell(b[f'per flow X={x1}'])} | {cell(b[f'per flow, rate steady X={x0} W=2 TOL=1'])} | {ring}",
            flush=True,
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
