"""The congestion-control ablation: every policy x fat-tree / torus / mesh x the shipped training
workloads (ResNet-50 data parallel, Transformer tensor + data parallel, DLRM), as one sweep.

    python benchmarks/cc_ablation.py [--jobs 2] [--out sweeps/cc_ablation]

It runs (or resumes) the sweep of benchmarks/cc_ablation.yaml, makes its figures
(OUT/plots/), copies the headline figure to docs/cc_ablation.png, and prints the iteration
time of each point normalised to PFC only, as a Markdown table.
"""

import argparse
import csv
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.results.figures import figures_for, save  # noqa: E402
from roce_emu.sweep import load_sweep_file, run_sweep  # noqa: E402

POLICIES = ["none", "dcqcn", "hpcc", "timely", "dctcp"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "sweeps" / "cc_ablation")
    args = ap.parse_args()
    began = time.perf_counter()
    ran, total, results = run_sweep(
        load_sweep_file(ROOT / "benchmarks" / "cc_ablation.yaml"), args.out, jobs=args.jobs, progress=True
    )
    wall = time.perf_counter() - began
    for name, fig in figures_for(args.out).items():
        save(fig, args.out / "plots", name)
    (ROOT / "docs").mkdir(exist_ok=True)
    shutil.copy(args.out / "plots" / "policy_time.png", ROOT / "docs" / "cc_ablation.png")
    with open(results, newline="") as fh:
        rows = list(csv.DictReader(fh))
    times: dict[tuple, dict] = {}  # (workload, topology) -> {(policy, seed): ns or a status}
    for r in rows:
        key = (r["workload.training.model.name"], r["topology.kind"])  # swept mappings are flattened
        ok = r["status"] == "finished"
        times.setdefault(key, {})[r["network.cc.algorithm"], r["seed"]] = (
            float(r["mean_iteration_ns"]) if ok else r["status"]
        )
    seeds = sorted({seed for by in times.values() for _, seed in by}, key=int)
    print(f"\n{ran} of {total} points run in {wall:.0f} s (--jobs {args.jobs}), seeds {', '.join(seeds)}\n")
    print("Mean over seeds, and the standard deviation where there are several:\n")
    print("| workload | topology | PFC only (ms) | " + " | ".join(POLICIES[1:]) + " |")
    print("|---|---|---|" + "---|" * (len(POLICIES) - 1))
    for (workload, topology), by in sorted(times.items()):
        cells = [_cell([by.get(("none", seed)) for seed in seeds], 1e-6)]
        for p in POLICIES[1:]:
            ratios = [_ratio(by.get((p, seed)), by.get(("none", seed))) for seed in seeds]
            cells.append(_cell(ratios, 1.0))
        print(f"| {workload} | {topology} | " + " | ".join(cells) + " |")


def _ratio(value, base):
    """value / base, or the status of whichever of the two points did not finish."""
    if isinstance(value, float) and isinstance(base, float):
        return value / base
    return base if isinstance(value, float) else value


def _cell(values: list, scale: float) -> str:
    """The mean of values (times scale) with its standard deviation over seeds, or the first
    status of a point that did not finish."""
    bad = [v for v in values if not isinstance(v, float)]
    if bad:
        return str(bad[0])
    mean = statistics.fmean(values) * scale
    if len(values) < 2:
        return f"{mean:.3f}"
    return f"{mean:.3f} ± {statistics.stdev(values) * scale:.3f}"


if __name__ == "__main__":
    main()
