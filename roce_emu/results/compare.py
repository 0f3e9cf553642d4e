"""Compare run directories side by side: their summaries, iteration times and collective times.

``compare`` reads two or more run directories (CSV or Parquet tables) and returns Markdown
tables whose first value column is the first run, the reference: every other run's number is
followed by its ratio to the reference's (``1.250x``: 25 % more). Only what the runs hold is
shown: the iteration table for runs with iterations (summary.json iteration_ns), the collective
table for runs with collectives.csv (mean time_ns per collective over its iterations).
"""

from dataclasses import dataclass, field
from pathlib import Path

from .output import read_rows, read_summary

#: summary.json fields that are not one value per run (their own table, or too long for one cell)
NOT_SCALAR = ("iteration_ns", "hottest_links", "workload_notes", "warnings", "stragglers", "slow_links", "update_delay")


@dataclass
class Run:
    """One run directory as compare reads it."""

    label: str
    summary: dict
    collectives: list[dict] | None = field(default=None)


def load_runs(paths) -> list[Run]:
    """Each directory's summary and collectives.csv; ScenarioError for one that is not a run
    directory. Runs are labelled by their directory's name, or by the path given where two
    names are the same."""
    paths = [Path(p) for p in paths]
    names = [p.name or str(p) for p in paths]
    labels = [str(p) if names.count(n) > 1 else n for p, n in zip(paths, names)]
    return [Run(label, read_summary(p), read_rows(p, "collectives")) for label, p in zip(labels, paths)]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt(value) -> str:
    """A cell: numbers to ten significant digits, None as empty."""
    if value is None or value == "":
        return ""
    if _number(value):
        return str(value) if isinstance(value, int) else format(value, ".10g")
    return str(value)


def with_ratio(value, reference) -> str:
    """A value and, if both are numbers and the reference is not zero, its ratio to it."""
    if _number(value) and _number(reference) and reference != 0:
        return f"{fmt(value)} ({value / reference:.3f}x)"
    return fmt(value)


def flat_summary(summary: dict, prefix: str = "") -> dict:
    """The summary's single values, nested mappings as dotted keys (cc_params.eta,
    provenance.version); lists and NOT_SCALAR fields left out."""
    out: dict = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if (key in NOT_SCALAR and not prefix) or isinstance(value, list):
            continue
        if isinstance(value, dict):
            out.update(flat_summary(value, f"{name}."))
        else:
            out[name] = value
    return out


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (pipes in cells escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _side_by_side(first: str, keys: list, values: list[dict], runs: list[Run]) -> str:
    """One row per key, one column per run; the later runs' numbers with their ratio to the first."""
    rows = []
    for key in keys:
        ref = values[0].get(key)
        cells = [fmt(ref)] + [with_ratio(v.get(key), ref) for v in values[1:]]
        rows.append([fmt(key) if not isinstance(key, tuple) else " / ".join(map(str, key)), *cells])
    return table([first, *[r.label for r in runs]], rows)


def summary_table(runs: list[Run], differing: bool = False) -> str:
    """Every summary key any run has, in the first run's order then the others'; with
    ``differing`` only the keys whose values are not all the same."""
    flats = [flat_summary(r.summary) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    if differing:
        keys = [k for k in keys if len({repr(f.get(k)) for f in flats}) > 1]
    return _side_by_side("summary key", keys, flats, runs)


def iteration_times(run: Run) -> list[float] | None:
    times = run.summary.get("iteration_ns")
    return [float(t) for t in times] if isinstance(times, list) and times else None


def iteration_table(runs: list[Run]) -> str | None:
    """Iteration time (ns) per iteration and their mean, per run; None if no run has iterations."""
    per_run = [iteration_times(r) or [] for r in runs]
    n = max(map(len, per_run))
    if n == 0:
        return None
    values: list[dict[int | str, float]] = [dict(enumerate(times)) for times in per_run]
    for v, times in zip(values, per_run):
        if times:
            v["mean"] = sum(times) / len(times)
    return _side_by_side("iteration_ns", [*range(n), "mean"], values, runs)


def _collective_means(rows: list[dict]) -> dict:
    """(name, group) -> mean time_ns over the iterations it finished in."""
    times: dict[tuple, list[float]] = {}
    for r in rows:
        try:
            t = float(r["time_ns"])
        except (TypeError, ValueError):
            continue  # not finished
        if t == t:  # NaN: not finished (Parquet)
            times.setdefault((str(r["name"]), str(r["group"])), []).append(t)
    return {key: sum(v) / len(v) for key, v in times.items()}


def collective_table(runs: list[Run]) -> str | None:
    """Mean time (ns) of each collective (name / group) per run, in the order of the first
    run's collectives.csv; None if no run has collectives.csv."""
    if all(r.collectives is None for r in runs):
        return None
    values = [_collective_means(r.collectives or []) for r in runs]
    keys = list(dict.fromkeys(k for v in values for k in v))
    return _side_by_side("collective / group: mean time_ns", keys, values, runs)


def compare(runs: list[Run], differing: bool = False) -> str:
    """The Markdown report comparing the runs (load_runs; the first is the reference)."""
    parts = [f"Ratios are to the first run, {runs[0].label}.", "", summary_table(runs, differing)]
    for title, text in (("Iteration times", iteration_table(runs)), ("Collectives", collective_table(runs))):
        if text is not None:
            parts += ["", f"{title}:", "", text]
    return "\n".join(parts)
