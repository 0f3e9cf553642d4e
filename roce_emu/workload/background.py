"""Background traffic: Poisson flow arrivals at a target load, sizes from a flow-size CDF.

Each chosen host starts flows as a Poisson process whose rate fills ``load`` of its link on
average: ``load x link rate / (8 x mean flow size)`` flows per second. Each flow goes to
another chosen host, uniformly, and its size is drawn from the CDF by inverse transform,
linear between the CDF's points (as the HPCC simulator's traffic generator does). Arrivals
fall in ``[start_ns, start_ns + duration_ns)``.

CDF files hold ``size_bytes,cumulative_percent`` rows (``#`` comments and a header allowed),
or the HPCC simulator's ``size percent`` lines; the shipped ones are in ``traffic_cdf/``.
"""

from pathlib import Path

import numpy as np

from ..config.schema import SHIPPED_CDFS as BUILTIN
from ..errors import ScenarioError

CDF_DIR = Path(__file__).resolve().parent / "traffic_cdf"


def cdf_path(name: str) -> Path:
    """A shipped distribution by name, or the user's file."""
    return CDF_DIR / f"{name}.csv" if name in BUILTIN else Path(name)


def read_cdf(name: str, source: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(sizes in bytes, cumulative fractions) of a CDF: a shipped name or a file. Errors name the
    file and line (or the scenario key for a missing file)."""
    path = cdf_path(name)
    if not path.is_file():
        raise ScenarioError(
            source, key, f"'{name}' is neither a shipped distribution ({', '.join(BUILTIN)}) nor a file"
        )
    sizes: list[float] = []
    cum: list[float] = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("size"):
            continue
        parts = text.replace(",", " ").split()
        try:
            size, pct = float(parts[0]), float(parts[1])
        except (ValueError, IndexError):
            raise ScenarioError(str(path), f"line {i}", "expected 'size_bytes cumulative_percent'") from None
        if (sizes and (size < sizes[-1] or pct < cum[-1])) or not 0 <= pct <= 100 or size < 0:
            raise ScenarioError(str(path), f"line {i}", "sizes and percentages must grow, percentages within 0-100")
        sizes.append(size)
        cum.append(pct)
    if len(sizes) < 2 or cum[-1] != 100:
        raise ScenarioError(str(path), "", "a CDF needs at least two points and must end at 100 %")
    return np.array(sizes), np.array(cum) / 100


def mean_size(sizes: np.ndarray, cum: np.ndarray) -> float:
    """Mean of the piecewise-linear CDF: each step's probability times its midpoint."""
    return float(np.sum(np.diff(cum) * (sizes[1:] + sizes[:-1]) / 2))


def draw_sizes(sizes: np.ndarray, cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sizes for uniform draws u, by inverse transform (at least one byte)."""
    keep = np.concatenate(([True], np.diff(cum) > 0))  # flat steps carry no probability
    return np.maximum(np.round(np.interp(u, cum[keep], sizes[keep])), 1).astype(np.int64)


def poisson_flows(
    pattern, hosts: list[int], rate_bps: np.ndarray, rng: np.random.Generator, source: str, key: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, bytes, start_ns) of the pattern's flows, in start order. ``rate_bps[h]`` is
    host h's link rate."""
    sizes, cum = read_cdf(pattern.cdf, source, f"{key}.cdf")
    mean = mean_size(sizes, cum)
    out = []
    host_ids = np.asarray(hosts)
    for h in host_ids.tolist():
        t = poisson_times(rng, _per_second(pattern, rate_bps[h], mean), pattern.start_ns, pattern.duration_ns)
        others = host_ids[host_ids != h]
        dst = others[rng.integers(0, len(others), len(t))]
        out.append((np.full(len(t), h), dst, draw_sizes(sizes, cum, rng.random(len(t))), t))
    src, dst, nbytes, t = (np.concatenate(c) for c in zip(*out))
    order = np.argsort(t, kind="stable")
    return src[order], dst[order], nbytes[order], t[order]


def poisson_times(rng: np.random.Generator, per_s: float, start_ns: float, duration_ns: float) -> np.ndarray:
    """The arrival times (ns) of a Poisson process of ``per_s`` arrivals per second in
    [start_ns, start_ns + duration_ns): exponential gaps from ``rng``, drawn in blocks."""
    end_ns = start_ns + duration_ns
    expected = per_s * duration_ns * 1e-9
    n = max(16, int(expected + 6 * np.sqrt(expected) + 16))  # enough gaps to pass the end, almost surely
    t = start_ns + np.cumsum(rng.exponential(1e9 / per_s, n))
    while t[-1] < end_ns:  # extend in the rare case it is not
        t = np.concatenate((t, t[-1] + np.cumsum(rng.exponential(1e9 / per_s, n))))
    return t[t < end_ns]


def _per_second(pattern, rate_bps: float, mean_bytes: float) -> float:
    """Flows a host starts per second: ``load`` of its link rate, in flows of the mean size."""
    return pattern.load * rate_bps / (8 * mean_bytes)


def expected_flows(pattern, hosts: list[int], rate_bps: np.ndarray, source: str, key: str) -> float:
    """How many flows poisson_flows draws for the pattern on average (for sizing, before drawing)."""
    sizes, cum = read_cdf(pattern.cdf, source, f"{key}.cdf")
    mean = mean_size(sizes, cum)
    return sum(_per_second(pattern, rate_bps[h], mean) * pattern.duration_ns * 1e-9 for h in hosts)
