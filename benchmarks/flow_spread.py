"""How far a flow's exact completion strays from that of flows like it: the accuracy side of a
memo keyed on a flow alone (components.py gives the hit-rate side).

    python benchmarks/flow_spread.py                   # ResNet-50 on 128 NPUs, one ACK per packet (about 40 s)
    python benchmarks/flow_spread.py --npus 32 --seed 2

Runs benchmarks/scale.py's ResNet-50 case exactly (``fast_forward: off``, in this process), then
groups its flows by *class*: bytes, hops and idle-network FCT (which fix a lone flow's outcome),
and optionally by the ACK stream its data meets on its NIC's uplink, in bins: ``overlap`` (how
much of its lifetime the flows arriving at its sender overlap, in units of its FCT) or
``offset`` (the start of the incoming flow it overlaps most, relative to its own start, in units
of its FCT). For each grouping it prints the keys and each flow's FCT against its key's median:
a memo storing one outcome per key errs by about that much per flow. It also prints the error of
replaying each class's first flow (by start) for every later one, which is what a memo keyed on
the class would do.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from scale import case_resnet  # noqa: E402


def spread(fct: np.ndarray, key: np.ndarray) -> tuple[int, np.ndarray]:
    """The number of distinct keys and each flow's |FCT - its key's median FCT| / FCT."""
    keys, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    median = np.array([np.median(fct[inverse == k]) for k in range(len(keys))])
    return len(keys), np.abs(fct - median[inverse]) / fct


def incoming(start, finish, src, dst) -> tuple[np.ndarray, np.ndarray]:
    """Per flow, the overlap of the flows arriving at its sender with its lifetime, and the start of
    the one it overlaps most relative to its own; both in units of its FCT."""
    fct = finish - start
    lists: dict[int, list[int]] = {}
    for f in np.lexsort((start, dst)):
        lists.setdefault(int(dst[f]), []).append(int(f))
    arriving = {h: np.array(v) for h, v in lists.items()}
    overlap, offset = np.zeros(len(fct)), np.zeros(len(fct))
    for f in range(len(fct)):
        g = arriving.get(int(src[f]))
        if g is None:
            continue
        shared = np.minimum(finish[f], finish[g]) - np.maximum(start[f], start[g])
        if (shared > 0).any():
            overlap[f] = shared[shared > 0].sum() / fct[f]
            offset[f] = (start[g[np.argmax(shared)]] - start[f]) / fct[f]
    return overlap, offset


def main() -> None:
    from roce_emu.api import prepare_scenario, run
    from roce_emu.config.schema import Scenario
    from roce_emu.results.tables import flow_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cc", default="none")
    args = ap.parse_args()
    doc = {"name": "spread", "seed": args.seed, **case_resnet(args.npus, 1.0)}
    doc["network"] = {"cc": {"algorithm": args.cc}}
    result = run(prepare_scenario(Scenario.model_validate(doc)), write=False, progress=False)
    t = flow_table(result.outcome.world)
    start, finish = t["start_ps"], t["finish_ps"]
    fct = (finish - start).astype(float)
    cls = np.stack([t["bytes"], t["hops"], t["ideal_ps"]], 1)
    overlap, offset = incoming(start, finish, t["src"], t["dst"])

    print(f"{len(fct)} flows; FCT over idle-network FCT: mean {np.mean(fct / t['ideal_ps']):.4f}")
    print("| key | keys | mean error | p99 error | flows over 1 % |")
    print("|---|---|---|---|---|")
    groupings = [("class", cls)]
    for bins in (8, 32):
        groupings.append((f"class, overlap in 1/{bins}", np.column_stack([cls, np.floor(overlap * bins)])))
        groupings.append((f"class, offset in 1/{bins}", np.column_stack([cls, np.round(offset * bins)])))
    for name, key in groupings:
        n, err = spread(fct, key)
        print(f"| {name} | {n} | {err.mean():.3%} | {np.percentile(err, 99):.3%} | {np.mean(err > 0.01):.2%} |")

    keys, inverse = np.unique(cls, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    first = np.full(len(keys), -1)
    for f in np.argsort(start, kind="stable"):
        if first[inverse[f]] < 0:
            first[inverse[f]] = f
    replay = (fct[first[inverse]] - fct) / fct
    print(
        f"replaying each class's first flow: mean {replay.mean():+.3%}, "
        f"mean |error| {np.abs(replay).mean():.3%}, p99 {np.percentile(np.abs(replay), 99):.3%}"
    )


if __name__ == "__main__":
    main()
