"""Statistics over seeds: the mean, the sample standard deviation and the 95 % confidence interval of
the mean (Student t) of one result over runs that differ only in their seed. ``run --seeds N``
writes them (seeds.csv, seeds.json), and the sweep figures draw the interval as their error bars,
from this one module."""

import math
from dataclasses import dataclass

import numpy as np

#: the confidence level of every interval
LEVEL = 0.95
#: Student t's 0.975 quantile for 1 ... 30 degrees of freedom
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip
_Z975 = 1.959963984540054


def t_quantile(df: int) -> float:
    """Student t's 0.975 quantile for df degrees of freedom: tabled to 30, beyond by the
    Cornish-Fisher expansion about the normal quantile (within 1e-7)."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))


@dataclass(frozen=True)
class Spread:
    """One result over n seeds. With one seed the deviation is 0 and there is no interval (NaN)."""

    n: int
    mean: float
    sd: float  #: sample standard deviation (n - 1)
    half: float  #: half the width of the 95 % interval of the mean: t(n - 1) sd / sqrt(n)

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    @property
    def bar(self) -> float:
        """The error bar a figure draws: the interval's half width, 0 where there is none."""
        return self.half if self.half == self.half else 0.0


def spread(values) -> Spread:
    """The Spread of the values that are numbers (NaN and None are left out)."""
    xs = np.asarray([v for v in values if v is not None and v == v], float)
    n = len(xs)
    if n == 0:
        return Spread(0, math.nan, math.nan, math.nan)
    if n == 1:
        return Spread(1, float(xs[0]), 0.0, math.nan)
    sd = float(xs.std(ddof=1))
    return Spread(n, float(xs.mean()), sd, t_quantile(n - 1) * sd / math.sqrt(n))


def seed_metric(summaries: list[dict]) -> tuple[str, str]:
    """(summary field, label) of the result the seeds are compared by: the mean iteration time where
    the runs have iterations, else the last flow's finish."""
    if any(s.get("mean_iteration_ns") is not None for s in summaries):
        return "mean_iteration_ns", "iteration time"
    return "last_finish_ns", "last finish"


#: seeds.csv: one row per seed
SEED_COLUMNS = (
    "seed",
    "status",
    "mean_iteration_ns",
    "last_finish_ns",
    "data_packets_dropped",
    "pfc_pauses_sent",
    "ecn_marks",
    "events",
    "directory",
)


def seed_rows(runs: list[tuple[int, str, dict]]) -> list[dict]:
    """seeds.csv's rows from (seed, sub-folder, summary) of each run."""
    return [
        {c: s.get(c, "") if s.get(c) is not None else "" for c in SEED_COLUMNS} | {"seed": seed, "directory": folder}
        for seed, folder, s in runs
    ]


def seeds_summary(runs: list[tuple[int, str, dict]]) -> dict:
    """seeds.json: the metric's statistics over the seeds whose run finished, and the seeds that did not."""
    summaries = [s for _, _, s in runs]
    column, label = seed_metric(summaries)
    finished = [(seed, s) for seed, _, s in runs if s.get("status") == "finished"]
    st = spread([s.get(column) for _, s in finished])
    return {
        "scenario": summaries[0].get("scenario", "") if summaries else "",
        "metric": column,
        "label": label,
        "seeds": [seed for seed, _, _ in runs],
        "seeds_not_finished": [seed for seed, _, s in runs if s.get("status") != "finished"],
        "n": st.n,
        "mean_ns": _finite(st.mean),
        "sd_ns": _finite(st.sd),
        "level": LEVEL,
        "interval_low_ns": _finite(st.low),
        "interval_high_ns": _finite(st.high),
        "values_ns": [s.get(column) for _, s in finished],
    }


def _finite(x: float) -> float | None:
    return None if x != x else x


def failed_seed_lines(runs) -> list[str]:
    """``run --seeds``: an error line for each seed's run that did not finish (RunResult)."""
    return [f"error: seed {r.summary['seed']}: {r.summary['status']}: {r.summary['reason']}" for r in runs if not r.ok]


def seeds_line(info: dict, out) -> str:
    """The line ``run --seeds`` prints at the end."""
    from .console import fmt_ns

    if not info["n"]:
        return f"{info['scenario']}: no seed finished -> {out}"
    text = f"{info['scenario']}: {info['label']} over {info['n']} seeds: mean {fmt_ns(info['mean_ns'])}"
    if info["n"] > 1:
        text += (
            f", s.d. {fmt_ns(info['sd_ns'])}, {LEVEL:.0%} interval "
            f"{fmt_ns(info['interval_low_ns'])} .. {fmt_ns(info['interval_high_ns'])}"
        )
    if info["seeds_not_finished"]:
        text += f" (not finished: seeds {', '.join(map(str, info['seeds_not_finished']))})"
    return f"{text} -> {out}"
