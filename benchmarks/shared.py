"""Two training jobs on one fabric: each job's slowdown against running alone, per policy.

    python benchmarks/shared.py                  # scenarios/two_jobs.yaml under every policy below
    python benchmarks/shared.py --csv out.csv    # also write the rows as tidy CSV
    python benchmarks/shared.py --scenario S     # another scenario with (at least two) jobs
    python benchmarks/shared.py --policy "DCQCN + HPCC"   # only that policy (repeatable)

Each policy runs the scenario once with its jobs together, then each job alone on the hosts it
had under its own congestion control (api.jobs_alone, what `roce-emu plot RUN --baseline alone`
does). Policies: PFC alone (no congestion control), DCQCN and HPCC over RoCE with PFC, IRN
without PFC, with no congestion control and with DCQCN, and two mixes in which the first job
runs DCQCN and the second its own algorithm (a job's cc): HPCC, or none (PFC alone). Times are
simulated, so they do not depend on the machine.
"""

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import jobs_alone, prepare, run  # noqa: E402
from tables import print_markdown, write_csv  # noqa: E402

POLICIES = [
    ("PFC alone", ["network.cc.algorithm=none"]),
    ("DCQCN", ["network.cc.algorithm=dcqcn"]),
    ("HPCC", ["network.cc.algorithm=hpcc"]),
    ("IRN, no PFC", ["network.cc.algorithm=none", "network.transport=irn", "network.switch.pfc.enabled=false"]),
    (
        "IRN + DCQCN, no PFC",
        ["network.cc.algorithm=dcqcn", "network.transport=irn", "network.switch.pfc.enabled=false"],
    ),
    ("DCQCN + HPCC", ["network.cc.algorithm=dcqcn", "jobs.1.cc.algorithm=hpcc"]),
    ("DCQCN + PFC alone", ["network.cc.algorithm=dcqcn", "jobs.1.cc.algorithm=none"]),
]


def policy_rows(scenario: Path, name: str, overrides: list[str], scratch: Path) -> list[dict]:
    """One policy: the jobs together, then each alone; a row per job."""
    out = scratch / name.replace(" ", "_").replace(",", "").replace("+", "")
    together = run(prepare(scenario, overrides), out, progress=False)
    alone = jobs_alone(out)
    rows = []
    for job in together.summary["jobs"]:
        solo = alone[job["job"]]
        rows.append(
            {
                "policy": name,
                "job": job["job"],
                "cc": job["cc"],
                "alone_ms": round(solo["mean_iteration_ns"] / 1e6, 3),
                "together_ms": round(job["mean_iteration_ns"] / 1e6, 3),
                "slowdown": round(job["mean_iteration_ns"] / solo["mean_iteration_ns"], 3),
                "ecn_marks": together.summary["ecn_marks"],
                "pfc_pauses": together.summary["pfc_pauses_sent"],
                "drops": together.summary["data_packets_dropped"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "two_jobs.yaml")
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    names = [name for name, _ in POLICIES]
    parser.add_argument("--policy", action="append", choices=names, help="only this policy (repeatable)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, overrides in POLICIES:
            if args.policy and name not in args.policy:
                continue
            rows += policy_rows(args.scenario, name, overrides, Path(scratch))
            print(f"{name}: done", file=sys.stderr, flush=True)
    print_markdown(rows)
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
