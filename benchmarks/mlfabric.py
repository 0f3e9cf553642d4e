"""MLFabric's update scheduling against plain FIFO pushes: a parameter server on a shared fabric
with a straggler (scenarios/mlfabric.yaml), per schedule its server load, update delay and
iteration time.

    python benchmarks/mlfabric.py                  # every schedule below, a markdown table
    python benchmarks/mlfabric.py --csv out.csv    # also write the rows as tidy CSV
    python benchmarks/mlfabric.py --scenario S     # another parameter-server scenario
    python benchmarks/mlfabric.py --set "workload.patterns=[]"   # overrides for every run (no background)

Schedules (workload.training.parameter_server): fifo, every push at once sharing the server's
port; mlfabric, one push at a time per server, shortest first; mlfabric with the updates of
pairs of workers summed at the faster one (aggregation 2); mlfabric dropping the updates that
would reach the server more than 200 us after they were ready; and with a replica server (host
10) fed directly by the workers, against chain replication through the server under FIFO. Times are
simulated, so they do not depend on the machine.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare, run  # noqa: E402
from tables import print_markdown, write_csv  # noqa: E402

KEY = "workload.training.parameter_server"
SCHEDULES = [
    ("fifo", [f"{KEY}.scheduling=fifo"]),
    ("mlfabric", [f"{KEY}.scheduling=mlfabric"]),
    ("mlfabric, aggregation 2", [f"{KEY}.scheduling=mlfabric", f"{KEY}.aggregation=2"]),
    ("mlfabric, deadline 200 us", [f"{KEY}.scheduling=mlfabric", f"{KEY}.deadline_ns=200000"]),
    ("fifo, chain replica", [f"{KEY}.scheduling=fifo", f"{KEY}.replicas=[10]", f"{KEY}.replication=chain"]),
    ("mlfabric, direct replica", [f"{KEY}.scheduling=mlfabric", f"{KEY}.replicas=[10]"]),
]


def schedule_row(scenario: Path, name: str, overrides: list[str]) -> dict:
    """One schedule's run: the server's bytes, the updates dropped, their delays and the iteration times."""
    summary = run(prepare(scenario, overrides), None, progress=False).summary
    server = next(row for row in summary["server_load"] if row["role"] == "server")
    delay = summary["update_delay"]
    iterations = summary["iteration_ns"]
    return {
        "schedule": name,
        "server_in_MB": round(server["bytes_in"] / 1e6, 1),
        "server_out_MB": round(server["bytes_out"] / 1e6, 1),
        "dropped": delay["dropped"],
        "mean_delay": round(delay["mean"], 2),
        "max_delay": delay["max"],
        "mean_iteration_ms": round(sum(iterations) / len(iterations) / 1e6, 3),
        "training_ms": round(sum(iterations) / 1e6, 3),
        "events": summary["events"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "mlfabric.yaml")
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every run")
    args = parser.parse_args()
    rows = []
    for name, overrides in SCHEDULES:
        rows.append(schedule_row(args.scenario, name, args.set + overrides))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print_markdown(rows)
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
