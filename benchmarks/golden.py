"""Golden outputs: a digest of every table and summary value of every shipped scenario's run, to
check that a change leaves the exact engine's results identical to the picosecond.

    python benchmarks/golden.py record /tmp/before.json      # before the change
    python benchmarks/golden.py compare /tmp/before.json     # after it: exit 1 on any difference

Each scenario in ``scenarios/`` runs in-process with collective flows written (so every flow of
every collective is compared) and nothing on disk. What is compared per scenario: a SHA-256 of
each table (flows, tasks, collectives, timeline, fct_by_size, traces) as written, and every
summary value except those that measure the machine (wall time, events per second, engine load
time, provenance) or name the run's own warnings. ``--set KEY=VALUE`` applies to every scenario
(e.g. ``--set sim.fast_forward=exact`` to check that exact fast-forward changes nothing);
``-k TEXT`` keeps the scenarios whose name contains TEXT.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
#: summary keys that describe the machine or the run's wording, not the simulated network
MACHINE_KEYS = {"wall_s", "events_per_s", "engine_load_s", "provenance", "warnings", "workload_notes"}


def digest_run(path: Path, overrides: list[str]) -> dict:
    from roce_emu import api

    prepared = api.prepare(path, [*overrides, "output.collective_flows=true"])
    result = api.run(prepared, write=False, progress=False)
    tables = {}
    for name, (columns, rows) in sorted(result.tables().items()):
        h = hashlib.sha256(json.dumps(list(columns)).encode())
        for row in rows:
            cells = [row[c] for c in columns] if isinstance(row, dict) else list(row)
            h.update(json.dumps(cells, default=str).encode())
        tables[name] = h.hexdigest()[:16]
    summary = {k: v for k, v in result.summary.items() if k not in MACHINE_KEYS}
    return {"tables": tables, "summary": json.loads(json.dumps(summary, default=str))}


def digest_all(overrides: list[str], keep: str) -> dict:
    out = {}
    for path in sorted(SCENARIOS.glob("*.yaml")):
        if keep and keep not in path.stem:
            continue
        print(f"{path.stem} ...", file=sys.stderr, flush=True)
        out[path.stem] = digest_run(path, overrides)
    return out


def differences(before: dict, after: dict) -> list[str]:
    lines = []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            lines.append(f"{name}: only {'after' if name in after else 'before'}")
            continue
        b, a = before[name], after[name]
        for table in sorted(set(b["tables"]) | set(a["tables"])):
            if b["tables"].get(table) != a["tables"].get(table):
                lines.append(f"{name}: {table} differs")
        for key in sorted(set(b["summary"]) | set(a["summary"])):
            if b["summary"].get(key) != a["summary"].get(key):
                lines.append(f"{name}: summary {key}: {b['summary'].get(key)!r} -> {a['summary'].get(key)!r}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["record", "compare"])
    ap.add_argument("file", type=Path, help="the digest file to write (record) or to compare with (compare)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("-k", dest="keep", default="", help="only the scenarios whose name contains this")
    args = ap.parse_args()
    now = digest_all(args.overrides, args.keep)
    if args.action == "record":
        args.file.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} scenarios recorded in {args.file}", file=sys.stderr)
        return 0
    before = json.loads(args.file.read_text())
    if args.keep:
        before = {k: v for k, v in before.items() if args.keep in k}
    diff = differences(before, now)
    for line in diff:
        print(line)
    print(f"{len(now)} scenarios: {'identical' if not diff else f'{len(diff)} differences'}", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
