"""How far packet trains (sim.fast_forward: trains) land from the exact engine, on every shipped scenario.

    python benchmarks/fast_forward_accuracy.py                    # every scenarios/*.yaml
    python benchmarks/fast_forward_accuracy.py scenarios/incast.yaml --csv ff.csv --markdown ff.md
    python benchmarks/fast_forward_accuracy.py --seeds 1 2 --csv benchmarks/fast_forward_accuracy.csv

Each scenario runs twice per seed, as shipped (the exact engine, sim.fast_forward: off) and
with ``--set sim.fast_forward=trains``, nothing written; ``--seeds`` sets the scenario's seed
(as shipped if not given), ``--set`` changes every run (e.g. network.nic.queue_pair=flow). A
scenario with iterations (training or collectives) is compared per iteration (summary.json
``iteration_ns``); any other by the last flow's finish and the median flow completion time. An
error is (trains - off) / off in percent: positive means trains run late. ``trains`` is how many
packet trains the `trains` run sent (0: it ran as the exact engine), ``events`` how many times
fewer events it took than `off`; ``warned`` whether roce-emu warns about the accuracy of
`trains` for it (run.inputs.accuracy_warnings). A run with no finished flow (a deadlock) leaves
its cells empty. The table goes to stdout as markdown, and to --csv (tidy, one row per scenario,
seed and measure) and --markdown if given.
"""

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare, run  # noqa: E402
from roce_emu.run.inputs import accuracy_warnings  # noqa: E402

COLUMNS = ["scenario", "seed", "status", "measure", "off_ns", "trains_ns", "error_pct", "trains", "events", "warned"]


def measures(result) -> list[tuple[str, float]]:
    """(measure, ns) pairs of a run: every iteration of a training run, else the last finish
    and the median flow completion time."""
    s = result.summary
    if s.get("iteration_ns"):
        return [(f"iteration {i + 1}", float(t)) for i, t in enumerate(s["iteration_ns"])]
    fct_ps = result.flow_table["fct_ps"]
    done = fct_ps[fct_ps >= 0]
    last = s["last_finish_ns"]
    return [
        ("last finish", float("nan") if last is None else float(last)),
        ("median FCT", float(np.median(done)) / 1e3 if len(done) else float("nan")),
    ]


def compare(path: Path, seed: int | None = None, overrides: list[str] = ()) -> list[dict]:
    """One row per measure of one scenario, off against trains; ``seed`` None keeps the file's."""
    given = [*overrides, *([] if seed is None else [f"seed={seed}"])]
    off = run(prepare(path, given), write=False, progress=False)
    prepared_on = prepare(path, [*given, "sim.fast_forward=trains"])
    on = run(prepared_on, write=False, progress=False)
    warned = "yes" if accuracy_warnings(prepared_on.scenario, prepared_on.fabric, prepared_on.workload) else "no"
    rows = []
    for (name, t_off), (_, t_on) in zip(measures(off), measures(on)):
        rows.append(
            {
                "scenario": path.stem,
                "seed": prepared_on.scenario.seed,
                "status": on.summary["status"],
                "measure": name,
                "off_ns": round(t_off, 3) if t_off == t_off else "",
                "trains_ns": round(t_on, 3) if t_on == t_on else "",
                "error_pct": round(100 * (t_on - t_off) / t_off, 3) if t_off and t_on == t_on else "",
                "trains": int(on.summary.get("trains_sent", 0)),
                "events": round(off.summary["events"] / max(on.summary["events"], 1), 2),
                "warned": warned,
            }
        )
    return rows


def _us(ns) -> str:
    return "-" if ns == "" else f"{ns / 1e3:,.3f} us"


def _pct(error) -> str:
    return "-" if error == "" else f"{error:+.2f} %"


def markdown(rows: list[dict]) -> str:
    lines = [
        "| scenario | seed | status | measure | off | trains mode | trains vs off | trains sent "
        "| events off / trains | warned |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['seed']} | {r['status']} | {r['measure']} | {_us(r['off_ns'])} | "
            f"{_us(r['trains_ns'])} | {_pct(r['error_pct'])} | {r['trains']:,} | {r['events']}x | {r['warned']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", type=Path, help="scenario files (default: scenarios/*.yaml)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[None], help="seeds to run (default: as shipped)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    parser.add_argument("--csv", type=Path, default=None, help="also write the table as tidy CSV")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the markdown table")
    args = parser.parse_args()
    paths = args.scenarios or sorted((ROOT / "scenarios").glob("*.yaml"))
    rows = []
    for path in paths:
        for seed in args.seeds:
            new = compare(path, seed, args.set)
            rows.extend(new)
            print("\n".join(markdown(new).splitlines()[2:]), file=sys.stderr, flush=True)
    text = markdown(rows)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
