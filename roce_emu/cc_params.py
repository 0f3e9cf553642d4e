"""Congestion-control parameters: names, units, defaults and sources (docs/model.md §1-4).

One table per algorithm. Users write ``network.cc.params`` in the units of the names
(us, ns, Mb/s, bytes); ``engine_params`` turns them into the float array the jitted
modules index (ps, bit/s, bytes). Defaults follow the HPCC ns-3 simulator's run.py
profiles (the field's reference tool) unless a row says otherwise; rate steps that
that tool scales with the NIC rate are scaled here the same way.
"""
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from .core import cc_dcqcn, cc_dctcp, cc_hpcc, cc_timely
from .errors import AT

Default = Union[float, str, bool, None, Callable[[float], float]]

US = 1e6  # ps per us
NS = 1e3  # ps per ns
MBPS = 1e6  # bit/s per Mb/s


@dataclass(frozen=True)
class Param:
    name: str
    index: int  # into World.ccp
    unit: str  # as the user writes it
    scale: float  # engine value = user value * scale
    default: Default  # a value, a function of the NIC rate in Gb/s, or {variant: ...}
    low: float  # allowed range (inclusive)
    high: float
    help: str
    source: str
    choices: tuple = ()  # for string parameters

    def default_for(self, variant: str, line_gbps: float):
        value = self.default
        if isinstance(value, dict):
            value = value[variant]
        if callable(value):
            value = value(line_gbps)
        return value

    def describe_default(self, variant: str) -> str:
        if self.choices:
            return variant
        value = self.default[variant] if isinstance(self.default, dict) else self.default
        if callable(value):
            return f"{_number(value(100.0))} at 100 Gb/s ({value.rule})"
        if value is None:
            return "computed (the largest base RTT of the fabric)"
        return str(value).lower() if isinstance(value, bool) else _number(value)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def per_line(mbps_per_gbps: float, rule: str):
    """A rate step that scales with the NIC rate, as the HPCC run.py profiles scale it."""
    def default(line_gbps: float) -> float:
        return mbps_per_gbps * line_gbps
    default.rule = rule
    return default


HUGE = 1e18
HPCC_RUN = "HPCC ns-3 run.py profile (docs/model.md §{})"

DCQCN = (
    Param("variant", cc_dcqcn.P_VARIANT, "", 1, "cx", 0, 1,
          "cx: the ConnectX model of the HPCC simulator (timer-driven cuts, CNP flag on ACKs); "
          "paper: Zhu et al. (cut per CNP packet, byte counter)", "docs/model.md §1.4-1.5", ("cx", "paper")),
    Param("g", cc_dcqcn.P_G, "", 1, 1 / 256, 0, 1, "alpha EWMA gain", "paper; HPCC run.py (§1.1)"),
    Param("alpha_interval_us", cc_dcqcn.P_ALPHA_PS, "us", US, {"cx": 1.0, "paper": 55.0}, 1e-3, 1e6,
          "alpha update period (cx: every period; paper: K without a CNP)", "HPCC run.py dcqcn; paper K (§1.1)"),
    Param("decrease_interval_us", cc_dcqcn.P_DEC_PS, "us", US, 4.0, 1e-3, 1e6,
          "cx only: rate-decrease check period T_dec", "HPCC run.py dcqcn (§1.1)"),
    Param("increase_interval_us", cc_dcqcn.P_INC_PS, "us", US, {"cx": 300.0, "paper": 55.0}, 1e-3, 1e6,
          "rate-increase timer period (cx: T_inc; paper: T)", "HPCC run.py dcqcn; htsim / paper (§1.1)"),
    Param("byte_counter_bytes", cc_dcqcn.P_BYTES, "bytes", 1, 10_000_000.0, 1, HUGE,
          "paper only: one increase event per this many bytes sent", "paper; htsim (§1.1)"),
    Param("fast_recovery_steps", cc_dcqcn.P_F, "", 1, {"cx": 1.0, "paper": 5.0}, 0, 1e6,
          "F: fast-recovery stages before additive increase", "HPCC run.py dcqcn; paper (§1.1)"),
    Param("rate_ai_mbps", cc_dcqcn.P_RAI, "Mb/s", MBPS, per_line(0.2, "5 Mb/s per 25 Gb/s of NIC rate"),
          0, HUGE, "additive increase R_AI", HPCC_RUN.format("1.1")),
    Param("rate_hai_mbps", cc_dcqcn.P_RHAI, "Mb/s", MBPS, per_line(2.0, "50 Mb/s per 25 Gb/s of NIC rate"),
          0, HUGE, "hyper increase R_HAI", HPCC_RUN.format("1.1")),
    Param("min_rate_mbps", cc_dcqcn.P_MIN_RATE, "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below",
          HPCC_RUN.format("1.1")),
    Param("cnp_interval_us", cc_dcqcn.P_CNP_PS, "us", US, 50.0, 0, 1e6,
          "paper only: at most one CNP per flow per interval N at the receiver", "paper; htsim (§1.3)"),
    Param("rate_on_first_cnp", cc_dcqcn.P_FIRST_CNP, "", 1, 1.0, 1e-6, 1,
          "cx only: fraction of the rate kept on a flow's first CNP", "HPCC RdmaHw default (§1.1)"),
    Param("clamp_target_rate", cc_dcqcn.P_CLAMP, "", 1, False, 0, 1,
          "cx only: the target rate follows every cut", "HPCC run.py dcqcn (§1.1)"),
)

HPCC = (
    Param("eta", cc_hpcc.P_ETA, "", 1, 0.95, 0.01, 1, "target utilisation", "paper; HPCC run.py (§2.1)"),
    Param("max_stage", cc_hpcc.P_MAX_STAGE, "", 1, 0.0, 0, 1e6,
          "additive-increase stages before multiplicative ones (the paper suggests 5)", HPCC_RUN.format("2.1")),
    Param("rate_ai_mbps", cc_hpcc.P_RAI, "Mb/s", MBPS, per_line(0.4, "10 Mb/s per 25 Gb/s of NIC rate"),
          0, HUGE, "R_AI = W_AI / T, the additive step", HPCC_RUN.format("2.1")),
    Param("min_rate_mbps", cc_hpcc.P_MIN_RATE, "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below",
          HPCC_RUN.format("2.1")),
    Param("base_rtt_ns", cc_hpcc.P_BASE_RTT_PS, "ns", NS, None, 1, 1e12,
          "T: reference RTT for U and the window", "paper: the network's largest base RTT (§2.4)"),
)

TIMELY = (
    Param("alpha", cc_timely.P_ALPHA, "", 1, 0.875, 0, 1, "EWMA weight of the newest RTT difference",
          "HPCC RdmaHw default (§3; the authors' snippet uses 0.02)"),
    Param("beta", cc_timely.P_BETA, "", 1, 0.8, 0, 1, "multiplicative decrease factor", "paper; HPCC (§3)"),
    Param("t_low_us", cc_timely.P_T_LOW_PS, "us", US, 50.0, 0, 1e6, "below this RTT: additive increase",
          "HPCC RdmaHw default (§3)"),
    Param("t_high_us", cc_timely.P_T_HIGH_PS, "us", US, 500.0, 1e-3, 1e6, "above this RTT: cut by beta",
          "HPCC RdmaHw default (§3)"),
    Param("min_rtt_us", cc_timely.P_MIN_RTT_PS, "us", US, 20.0, 1e-3, 1e6, "normaliser of the RTT gradient",
          "HPCC RdmaHw default (§3)"),
    Param("rate_ai_mbps", cc_timely.P_RAI, "Mb/s", MBPS, per_line(1.0, "1 Mb/s per Gb/s of NIC rate"),
          0, HUGE, "additive increase delta", HPCC_RUN.format("3")),
    Param("rate_hai_mbps", cc_timely.P_RHAI, "Mb/s", MBPS, per_line(5.0, "5 Mb/s per Gb/s of NIC rate"),
          0, HUGE, "hyperactive increase", HPCC_RUN.format("3")),
    Param("hai_after", cc_timely.P_HAI_N, "", 1, 5.0, 0, 1e6, "increases in a row before the hyperactive step",
          "paper N = 5; HPCC (§3)"),
    Param("min_rate_mbps", cc_timely.P_MIN_RATE, "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below",
          HPCC_RUN.format("3")),
)

DCTCP = (
    Param("g", cc_dctcp.P_G, "", 1, 1 / 16, 0, 1, "alpha EWMA gain", "paper; RFC 8257; HPCC run.py (§4)"),
    Param("rate_ai_mbps", cc_dctcp.P_RAI, "Mb/s", MBPS, 615.0, 0, HUGE,
          "additive increase per window (one 1 KB MTU per 13 us RTT)", HPCC_RUN.format("4")),
    Param("min_rate_mbps", cc_dctcp.P_MIN_RATE, "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below",
          HPCC_RUN.format("4")),
    Param("base_rtt_ns", cc_dctcp.P_BASE_RTT_PS, "ns", NS, None, 1, 1e12,
          "T: the window is rate x T", "HPCC VAR_WIN: maxBdp = line x largest base RTT (§2.4, §4)"),
)

TABLES: dict[str, tuple[Param, ...]] = {"none": (), "dcqcn": DCQCN, "hpcc": HPCC, "timely": TIMELY,
                                        "dctcp": DCTCP}
SIZES = {"none": 1, "dcqcn": cc_dcqcn.N_PARAMS, "hpcc": cc_hpcc.N_PARAMS, "timely": cc_timely.N_PARAMS,
         "dctcp": cc_dctcp.N_PARAMS}

#: extra header bytes a data packet (and its ACK) carries per algorithm: HPCC's INT stack
#: (5 hops x 8 B + 2 B hop count, the HPCC simulator's NORMAL mode); the rest carry none
#: on the wire (TIMELY's timestamps are NIC completion times)
INT_HEADER_BYTES = {"hpcc": 42}

#: RED defaults of network.switch.ecn per algorithm: DCTCP marks at one threshold K
#: (300 KB at 100 Gb/s, Pmax 1: the HPCC run.py dctcp profile); the others use the
#: HPCC simulator's 100 Gb/s DCQCN map
ECN_DEFAULTS = {"dctcp": (300_000, 300_000, 1.0)}
ECN_DEFAULT = (400_000, 1_600_000, 0.2)


def check_params(algorithm: str, params: dict) -> None:
    """Raise ValueError (one line) for an unknown name, a wrong type or an out-of-range value."""
    table = {p.name: p for p in TABLES[algorithm]}
    for name, value in params.items():
        at = f"{AT}params.{name} "
        if name not in table:
            if not table:
                raise ValueError(f"{at}unknown parameter '{name}': algorithm '{algorithm}' has no parameters")
            raise ValueError(f"{at}unknown parameter '{name}' for algorithm '{algorithm}' "
                             f"(allowed: {', '.join(table)})")
        param = table[name]
        if param.choices:
            if value not in param.choices:
                raise ValueError(f"{at}{value!r} is not allowed (allowed: {', '.join(param.choices)})")
        elif isinstance(param.default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{at}{value!r} is not allowed (allowed: true, false)")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{at}{value!r} is not allowed (a number{' in ' + param.unit if param.unit else ''})")
        elif not (param.low <= value <= param.high) or value != value:
            raise ValueError(f"{at}{value!r} is not allowed (range {param.low:g} to {param.high:g}"
                             f"{' ' + param.unit if param.unit else ''})")


def resolved_params(algorithm: str, params: dict, line_gbps: float) -> dict:
    """Every parameter of the algorithm in user units, defaults filled in (None = computed)."""
    variant = params.get("variant", "cx")
    return {p.name: params.get(p.name, p.default_for(variant, line_gbps)) for p in TABLES[algorithm]}


def needs_fabric_rtt(algorithm: str) -> bool:
    """True if a parameter of the algorithm defaults to the fabric's largest base RTT."""
    return any(p.default is None for p in TABLES[algorithm])


def engine_params(algorithm: str, values: dict, base_rtt_ps: int) -> np.ndarray:
    """The float array the engine indexes: user units scaled to ps, bit/s and bytes."""
    out = np.zeros(SIZES[algorithm], np.float64)
    for p in TABLES[algorithm]:
        value = values[p.name]
        if p.choices:
            value = p.choices.index(value)
        elif value is None:  # the reference RTT, computed from the fabric
            out[p.index] = float(base_rtt_ps)
            continue
        out[p.index] = float(value) * p.scale
    return out


def params_from_engine(algorithm: str, ccp: np.ndarray) -> dict:
    """The parameters a run used, in user units (for summary.json): the inverse of engine_params."""
    out = {}
    for p in TABLES[algorithm]:
        value = float(ccp[p.index])
        if p.choices:
            out[p.name] = p.choices[int(value)]
        elif isinstance(p.default, bool):
            out[p.name] = bool(value)
        else:
            out[p.name] = value / p.scale
    return out


def markdown_table(algorithm: str) -> str:
    """The algorithm's parameters as a Markdown table (README and ``roce-emu cc``)."""
    table = TABLES[algorithm]
    if not table:
        return f"`{algorithm}` has no parameters."
    variants = table[0].choices if table[0].name == "variant" else ("",)
    head = "| parameter | unit | " + " | ".join(f"default ({v})" if v else "default" for v in variants) + \
        " | meaning | source |"
    lines = [head, "|" + "---|" * (4 + len(variants))]
    for p in table:
        defaults = " | ".join(p.describe_default(v or "cx") for v in variants)
        lines.append(f"| `{p.name}` | {p.unit or '-'} | {defaults} | {p.help} | {p.source} |")
    return "\n".join(lines)
