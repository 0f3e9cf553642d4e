"""Scaling: wall time per ResNet-50 iteration and per simulated byte as the NPU count grows.

    python benchmarks/scaling.py                       # 16 .. 256 NPUs, exact engine, then the figure
    python benchmarks/scaling.py --npus 16 32 --mode trains --timeout 900
    python benchmarks/scaling.py --npus 1024 --mode trains --fabric fat_tree \
        --set network.nic.ack_every_packets=4 --out /tmp/ft.json   # the issue's 1024-NPU case, coalesced ACKs

ResNet-50 data parallel (ring all-reduce, 25 MiB gradient buckets), one iteration, DCQCN, on
the scale benchmark's 2-level leaf-spine at 200 Gb/s (16 NPUs per leaf, 4 spines), or with
--fabric fat_tree the k-ary fat-tree of that many hosts (k = 16 for 1024) at the same rate. Each point
runs in a fresh process on a warm Numba cache (benchmarks/scale.py's harness). Writes
benchmarks/scaling.json and docs/scaling.png (with --out elsewhere: OUT.json and OUT.png); a point
that fails or times out is recorded with its reason and left out of the figure, as is a probe
(--probe-s) that stopped early.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from scale import case_resnet, fat_tree, measure, warm_cache  # noqa: E402


def figure(points: list[dict], path: Path, fabric: str = "leaf-spine") -> None:
    """Left: wall time per iteration (and the engine's part) against NPUs, log-log, with a run
    stopped by the timeout drawn as a lower bound; right: wall time per simulated GB."""
    from roce_emu.results.figures import STYLE, save

    import matplotlib.pyplot as plt
    import numpy as np

    colors = {"off": "#0072B2", "exact": "#E69F00", "trains": "#009E73"}
    names = {"off": "every packet (off)", "exact": "exact jumps", "trains": "packet trains"}
    with plt.rc_context(STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(7.8, 3.4))
        for mode, marker in (("off", "o"), ("exact", "^"), ("trains", "s")):
            mine = sorted(
                (p for p in points if p["mode"] == mode and p.get("status") == "finished"), key=lambda p: p["npus"]
            )
            if mine:
                n = np.array([p["npus"] for p in mine])
                wall = np.array([p["wall_s"] for p in mine])
                gb = np.array([p["bytes"] for p in mine]) / 1e9
                left.loglog(n, wall, marker=marker, color=colors[mode], label=f"{names[mode]}: wall time")
                left.loglog(
                    n,
                    [p["engine_s"] for p in mine],
                    marker=marker,
                    ls="--",
                    color=colors[mode],
                    alpha=0.6,
                    label=f"{names[mode]}: engine only",
                )
                right.semilogx(n, wall / gb, marker=marker, color=colors[mode], label=names[mode])
            for p in points:  # runs the timeout stopped: their wall time is at least the timeout
                if p["mode"] == mode and str(p.get("error", "")).startswith("stopped after"):
                    bound = float(p["error"].split()[2])
                    left.scatter(
                        [p["npus"]],
                        [bound],
                        marker="^",
                        color=colors[mode],
                        zorder=3,
                        label=f"{names[mode]}: stopped (at least)",
                    )
        for ax in (left, right):
            ax.set_xlabel(f"NPUs (ResNet-50 DP, {fabric}, 200 Gb/s)")
            ax.set_xticks([16, 32, 64, 128, 256, 512, 1024], ["16", "32", "64", "128", "256", "512", "1024"])
            ax.minorticks_off()
        left.set_ylabel("wall time per iteration (s)")
        right.set_ylabel("wall time per simulated GB (s/GB)")
        handles, labels = left.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, fontsize=7)
        fig.tight_layout()
    save(fig, path.parent, path.stem)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument(
        "--mode", choices=["off", "exact", "trains"], action="append", help="sim.fast_forward (default: off)"
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per point")
    ap.add_argument(
        "--probe-s",
        type=float,
        default=None,
        help="stop each run after this many seconds in the engine (sim.max_wall_s) and record how "
        "far it got: for sizes whose full run would take too long",
    )
    ap.add_argument("--fabric", choices=["leaf_spine", "fat_tree"], default="leaf_spine")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    ap.add_argument("--out", type=Path, default=ROOT / "scaling.json")
    args = ap.parse_args()
    from roce_emu.config.load import apply_override, parse_override, validate_document
    from roce_emu.errors import ScenarioError

    def scenario(npus: int, mode: str) -> dict:
        doc = {
            "name": "scaling",
            "seed": 1,
            **case_resnet(npus, 1.0),
            "network": {"cc": {"algorithm": "dcqcn"}},
            "sim": {"fast_forward": mode, **({"max_wall_s": args.probe_s} if args.probe_s else {})},
        }
        doc["workload"]["iterations"] = 1
        if args.fabric == "fat_tree":
            doc["topology"] = fat_tree(npus)
        for key, value in overrides:
            apply_override(doc, key, value)
        return doc

    try:  # as roce-emu run --set reads them; a bad one stops here, in one line, exit code 2
        overrides = [parse_override(item) for item in args.set]
        for npus in args.npus:
            validate_document(scenario(npus, "off"), "scaling.py --set")
    except (ScenarioError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    warm_cache()

    def setting(p: dict) -> tuple:  # points of other fabrics or overrides share the file, not the figure
        return p.get("fabric", "leaf_spine"), p.get("set", [])

    ours = (args.fabric, args.set)
    points = json.loads(args.out.read_text()) if args.out.is_file() else []
    for mode in args.mode or ["off"]:
        for npus in args.npus:
            measured = measure(scenario(npus, mode), args.timeout)
            result = {"npus": npus, "mode": mode, "fabric": args.fabric, "set": args.set, **measured}
            points = [p for p in points if (p["npus"], p["mode"], setting(p)) != (npus, mode, ours)] + [result]
            args.out.write_text(json.dumps(sorted(points, key=lambda p: (p["mode"], p["npus"])), indent=1) + "\n")
            print(json.dumps(result), flush=True)
    default = args.out == ap.get_default("out")
    figure(
        [p for p in points if setting(p) == ours],
        ROOT.parent / "docs" / "scaling.png" if default else args.out.with_suffix(".png"),
        args.fabric.replace("_", "-"),
    )


if __name__ == "__main__":
    main()
