"""Results under latency jitter (network.jitter): how the spread over seeds changes with realistic
NIC and switch jitter, and whether the congestion-control policies keep their order.

    python benchmarks/jitter.py [--jobs 2] [--seeds 5] [--out sweeps/jitter] [--only spine|resnet]

Two sweeps (resumable: run again to finish an interrupted one), each printed as a Markdown table
(docs/model.md, "Jitter"):

- spine: scenarios/training_spine_congestion.yaml, the five policies x jitter off / typical /
  four times typical, SEEDS seeds each: first varying the seed of the per-packet draws alone
  (network.jitter.seed; without jitter only the ECN marks differ), then the scenario's seed,
  which also draws the ECMP hashes. Per policy: the mean iteration time with its 95 % interval
  (Student t) and standard deviation, and the policies' order by mean; then in how many seeds
  each level ranks the policies as its mean does.
- resnet: scenarios/training_resnet50.yaml (one iteration, DCQCN) with every link 0 to 5 ns
  longer, exactly (one seed) and under typical jitter (SEEDS draw seeds): whether the nanosecond
  resonance of the exact model survives a fabric's jitter.

"Typical" is every source's literature default (network.jitter.*.mean_ns left out: NIC 100 ns,
switch 50 ns), exponentially distributed.
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.config.schema import JITTER_DEFAULT_MEAN_NS  # noqa: E402
from roce_emu.results.seeds import spread  # noqa: E402
from roce_emu.sweep import SweepSpec, run_sweep  # noqa: E402

POLICIES = ["none", "dcqcn", "hpcc", "timely", "dctcp"]
LABEL = {"none": "PFC only", "dcqcn": "DCQCN", "hpcc": "HPCC", "timely": "TIMELY", "dctcp": "DCTCP"}


def jitter(scale: float) -> dict:
    """network.jitter with every source exponential at scale x its literature default (0: none)."""
    if scale == 0:
        return {"nic": {"distribution": "none"}, "switch": {"distribution": "none"}}
    return {
        device: {"distribution": "exponential", "mean_ns": scale * mean}
        for device, mean in JITTER_DEFAULT_MEAN_NS.items()
    }


LEVELS = {"off": 0.0, "typical": 1.0, "4x typical": 4.0}


def level_of(row: dict) -> str:
    mean = row.get("network.jitter.nic.mean_ns", "")
    scale = float(mean) / JITTER_DEFAULT_MEAN_NS["nic"] if mean not in ("", None) else 0.0
    return next(name for name, s in LEVELS.items() if abs(s - scale) < 1e-9)


def read_rows(results: Path) -> list[dict]:
    with open(results, newline="") as fh:
        return list(csv.DictReader(fh))


def cell(st, scale: float = 1e-6) -> str:
    if st.n < 2:
        return f"{st.mean * scale:.3f}"
    return f"{st.mean * scale:.3f} ± {st.half * scale:.3f} (s.d. {st.sd * scale:.3f})"


def draw_seeds(n: int) -> dict:
    """A grid over the seed of the per-packet draws alone (network.jitter.seed 1 ... n): the ECMP
    hashes and the workload stay those of the scenario's seed."""
    return {"network.jitter.seed": list(range(1, n + 1))}


def spine(out: Path, seeds: int, jobs: int, vary: str) -> None:
    """vary "draws": network.jitter.seed 1 ... seeds; vary "seed": the scenario's seed (ECMP hashes too)."""
    grid = {"network.jitter": [jitter(s) for s in LEVELS.values()], "network.cc.algorithm": POLICIES}
    spec = SweepSpec(
        ROOT / "scenarios" / "training_spine_congestion.yaml",
        grid | draw_seeds(seeds) if vary == "draws" else grid,
        1 if vary == "draws" else seeds,
    )
    seed_key = "network.jitter.seed" if vary == "draws" else "seed"
    began = time.perf_counter()
    ran, total, results = run_sweep(spec, out / f"spine_{vary}", jobs=jobs, progress=True)
    print(f"\nspine, varying {seed_key}: {ran} of {total} points run in {time.perf_counter() - began:.0f} s\n")
    rows = [r for r in read_rows(results) if r["status"] == "finished"]
    by: dict[tuple, dict[str, float]] = {}  # (level, policy) -> {seed: iteration ns}
    for r in rows:
        by.setdefault((level_of(r), r["network.cc.algorithm"]), {})[r[seed_key]] = float(r["mean_iteration_ns"])
    print("Iteration time (ms): mean ± half the 95 % interval over seeds (standard deviation)\n")
    print("| policy | " + " | ".join(LEVELS) + " |")
    print("|---|" + "---|" * len(LEVELS))
    for p in POLICIES:
        print(f"| {LABEL[p]} | " + " | ".join(cell(spread(by.get((lv, p), {}).values())) for lv in LEVELS) + " |")
    print()
    for lv in LEVELS:
        means = {p: spread(by.get((lv, p), {}).values()).mean for p in POLICIES}
        order = sorted(POLICIES, key=lambda p: means[p])
        seed_ids = sorted(set.intersection(*(set(by.get((lv, p), {})) for p in POLICIES)), key=int)
        same = sum(sorted(POLICIES, key=lambda p: by[lv, p][s]) == order for s in seed_ids)
        print(
            f"- {lv}: order by mean {' < '.join(LABEL[p] for p in order)}; "
            f"the same order in {same} of {len(seed_ids)} seeds"
        )


def resnet(out: Path, seeds: int, jobs: int) -> None:
    base = ROOT / "scenarios" / "training_resnet50.yaml"
    fixed = ("workload.iterations=1",)
    delays = [1000 + d for d in range(6)]
    began = time.perf_counter()
    exact = SweepSpec(base, {"topology.link.delay_ns": delays}, 1, fixed)
    _, _, exact_csv = run_sweep(exact, out / "resnet_exact", jobs=jobs, progress=True)
    typical = f"network.jitter={json.dumps(jitter(1.0))}"
    jittered = SweepSpec(base, {"topology.link.delay_ns": delays} | draw_seeds(seeds), 1, (*fixed, typical))
    _, _, jitter_csv = run_sweep(jittered, out / "resnet_jitter", jobs=jobs, progress=True)
    print(f"\nresnet: {time.perf_counter() - began:.0f} s (--jobs {jobs})\n")

    def times(results: Path) -> dict[float, list[float]]:
        got: dict[float, list[float]] = {}
        for r in read_rows(results):
            if r["status"] == "finished":
                got.setdefault(float(r["topology.link.delay_ns"]), []).append(float(r["mean_iteration_ns"]))
        return got

    ex, jt = times(exact_csv), times(jitter_csv)
    first = ex[delays[0]][0]
    print("| link delay (ns) | exact (ms) | vs 1000 ns | typical jitter (ms) | vs 1000 ns |")
    print("|---|---|---|---|---|")
    jt0 = spread(jt.get(delays[0], [])).mean
    for d in delays:
        e = ex.get(d, [float("nan")])[0]
        st = spread(jt.get(d, []))
        print(f"| {d} | {e * 1e-6:.3f} | {e / first - 1:+.2%} | {cell(st)} | {st.mean / jt0 - 1:+.2%} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "sweeps" / "jitter")
    ap.add_argument("--only", choices=["spine", "resnet"], default=None)
    args = ap.parse_args()
    if args.only in (None, "spine"):
        spine(args.out, args.seeds, args.jobs, "draws")
    if args.only in (None, "resnet"):
        resnet(args.out, args.seeds, args.jobs)
    if args.only in (None, "spine"):
        spine(args.out, args.seeds, args.jobs, "seed")


if __name__ == "__main__":
    main()
