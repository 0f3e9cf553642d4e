"""Engine speed: events per second and wall time, cold (compiling) and warm, per scenario.

    python benchmarks/engine_speed.py            # incast, k=4 fat-tree permutation and all-to-all
    python benchmarks/engine_speed.py --repeat 5 # best of 5 warm runs
    python benchmarks/engine_speed.py --cc       # also the all-to-all under every CC algorithm (warm)

"Cold" runs each scenario in a fresh process with an empty Numba cache (compile time
included, reported as load_s); "warm" runs in this process once the kernels are loaded.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ["incast", "fat_tree_permutation", "fat_tree_all_to_all"]


CC_ROWS = ["dcqcn", "hpcc", "timely", "dctcp"]


def warm(name: str, repeat: int, overrides: tuple = ()) -> dict:
    from roce_emu.api import prepare, run

    best = None
    for _ in range(repeat):
        prepared = prepare(ROOT / "scenarios" / f"{name}.yaml", list(overrides))
        result = run(prepared, write=False, progress=False)
        s = result.summary
        if best is None or s["wall_s"] < best["wall_s"]:
            best = s
    return {"events": best["events"], "wall_s": best["wall_s"], "events_per_s": best["events_per_s"]}


def cold(name: str) -> dict:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, ROCE_EMU_CACHE_DIR=cache)
        began = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "roce_emu",
                "run",
                str(ROOT / "scenarios" / f"{name}.yaml"),
                "--out",
                f"{out}/run",
                "--no-progress",
            ],
            check=True,
            env=env,
            capture_output=True,
        )
        total = time.perf_counter() - began
        s = json.loads(Path(f"{out}/run/summary.json").read_text())
    return {"process_s": round(total, 2), "load_s": s["engine_load_s"], "wall_s": s["wall_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per scenario (best is reported)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold (compiling) runs")
    ap.add_argument("--cc", action="store_true", help="also the all-to-all under each CC algorithm (warm)")
    args = ap.parse_args()
    print(
        f"{'scenario':<22} {'events':>10} {'warm wall s':>12} {'Mevents/s':>10} {'cold process s':>15} "
        f"{'compile s':>10}"
    )
    for name in SCENARIOS:
        w = warm(name, args.repeat)
        c = {"process_s": float("nan"), "load_s": float("nan")} if args.no_cold else cold(name)
        print(
            f"{name:<22} {w['events']:>10} {w['wall_s']:>12.3f} {w['events_per_s'] / 1e6:>10.2f} "
            f"{c['process_s']:>15.2f} {c['load_s']:>10.2f}",
            flush=True,
        )
    for algorithm in CC_ROWS if args.cc else []:
        w = warm("fat_tree_all_to_all", args.repeat, (f"network.cc.algorithm={algorithm}",))
        label = f"all_to_all {algorithm}"
        print(f"{label:<22} {w['events']:>10} {w['wall_s']:>12.3f} {w['events_per_s'] / 1e6:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
