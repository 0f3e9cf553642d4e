"""The congestion-control algorithms: one entry each, the one place that lists them.

Everything about an algorithm that is not its jitted code comes from its entry here: its
name in scenarios and on the command line, its kind code in the engine (its position in
``ALGORITHMS``), its label in figures, its parameter table (names, units, defaults,
sources; a parameter's column in ``World.ccp`` is its position in the table), the INT bytes
its packets carry, its ECN marking defaults and whether it reacts to the marks, and whether
it needs the fabric's base RTT (a parameter whose default is None). Its jitted code is its
own module in this folder, hooked into the engine by ``dispatch.py``.

Adding an algorithm: write its module, add its entry to ``ALGORITHMS`` and its hooks to
``dispatch.py``. This module imports no Numba, so the configuration can use it without
loading the engine. Units and sources: docs/model.md §1-4.
"""

from dataclasses import dataclass
from typing import Callable, Union

Default = Union[float, str, bool, None, Callable[[float], float], dict]

US = 1e6  #: ps per us
NS = 1e3  #: ps per ns
MBPS = 1e6  #: bit/s per Mb/s
HUGE = 1e18


@dataclass(frozen=True)
class Param:
    name: str
    unit: str  #: as the user writes it
    scale: float  #: engine value = user value * scale
    default: Default  #: a value, a function of the NIC rate in Gb/s, None (computed) or {variant: ...}
    low: float  #: allowed range (inclusive)
    high: float
    help: str
    source: str
    choices: tuple = ()  #: for string parameters (the engine holds the index)


@dataclass(frozen=True)
class Algorithm:
    name: str  #: as scenarios and the command line write it
    label: str  #: in figures and tables
    params: tuple = ()
    int_header_bytes: int = 0  #: extra bytes every data packet and ACK carries
    ecn: tuple = (400_000, 1_600_000, 0.2)  #: RED (kmin_bytes, kmax_bytes, pmax) at 100 Gb/s
    reacts_to_ecn: bool = False  #: its senders slow down on ECN marks (so the fabric's marking is tuned for it)
    ordered: tuple = ()  #: (low, high) parameter pairs whose values must not cross
    windowed: bool = False  #: clocked by a window (cc.dispatch.on_open opens it): it sends no packet trains

    def slot(self, name: str) -> int:
        """The parameter's column in World.ccp."""
        for i, p in enumerate(self.params):
            if p.name == name:
                return i
        raise KeyError(f"{self.name} has no parameter {name!r}")

    @property
    def n_params(self) -> int:
        return max(len(self.params), 1)

    @property
    def needs_fabric_rtt(self) -> bool:
        """A parameter defaults to the fabric's largest base RTT."""
        return any(p.default is None for p in self.params)


def per_line(mbps_per_gbps: float, rule: str):
    """A rate step that scales with the NIC rate, as the HPCC run.py profiles scale it."""

    def default(line_gbps: float) -> float:
        return mbps_per_gbps * line_gbps

    default.rule = rule
    return default


HPCC_RUN = "HPCC ns-3 run.py profile (docs/model.md §{})"

NONE = Algorithm("none", "PFC only")

DCQCN = Algorithm(
    "dcqcn",
    "DCQCN",
    (
        Param(
            "variant",
            "",
            1,
            "cx",
            0,
            1,
            "cx: the ConnectX model of the HPCC simulator (timer-driven cuts, CNP flag on ACKs); "
            "paper: Zhu et al. (cut per CNP packet, byte counter)",
            "docs/model.md §1.4-1.5",
            ("cx", "paper"),
        ),
        Param("g", "", 1, 1 / 256, 0, 1, "alpha EWMA gain", "paper; HPCC run.py (§1.1)"),
        Param(
            "alpha_interval_us",
            "us",
            US,
            {"cx": 1.0, "paper": 55.0},
            1e-3,
            1e6,
            "alpha update period (cx: every period; paper: K without a CNP)",
            "HPCC run.py dcqcn; paper K (§1.1)",
        ),
        Param(
            "decrease_interval_us",
            "us",
            US,
            4.0,
            1e-3,
            1e6,
            "cx only: rate-decrease check period T_dec",
            "HPCC run.py dcqcn (§1.1)",
        ),
        Param(
            "increase_interval_us",
            "us",
            US,
            {"cx": 300.0, "paper": 55.0},
            1e-3,
            1e6,
            "rate-increase timer period (cx: T_inc; paper: T)",
            "HPCC run.py dcqcn; htsim / paper (§1.1)",
        ),
        Param(
            "byte_counter_bytes",
            "bytes",
            1,
            10_000_000.0,
            1,
            HUGE,
            "paper only: one increase event per this many bytes sent",
            "paper; htsim (§1.1)",
        ),
        Param(
            "fast_recovery_steps",
            "",
            1,
            {"cx": 1.0, "paper": 5.0},
            0,
            1e6,
            "F: fast-recovery stages before additive increase",
            "HPCC run.py dcqcn; paper (§1.1)",
        ),
        Param(
            "rate_ai_mbps",
            "Mb/s",
            MBPS,
            per_line(0.2, "5 Mb/s per 25 Gb/s of NIC rate"),
            0,
            HUGE,
            "additive increase R_AI",
            HPCC_RUN.format("1.1"),
        ),
        Param(
            "rate_hai_mbps",
            "Mb/s",
            MBPS,
            per_line(2.0, "50 Mb/s per 25 Gb/s of NIC rate"),
            0,
            HUGE,
            "hyper increase R_HAI",
            HPCC_RUN.format("1.1"),
        ),
        Param("min_rate_mbps", "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below", HPCC_RUN.format("1.1")),
        Param(
            "cnp_interval_us",
            "us",
            US,
            50.0,
            0,
            1e6,
            "paper only: at most one CNP per flow per interval N at the receiver",
            "paper; htsim (§1.3)",
        ),
        Param(
            "rate_on_first_cnp",
            "",
            1,
            1.0,
            1e-6,
            1,
            "cx only: fraction of the rate kept on a flow's first CNP",
            "HPCC RdmaHw default (§1.1)",
        ),
        Param(
            "clamp_target_rate",
            "",
            1,
            False,
            0,
            1,
            "cx only: the target rate follows every cut",
            "HPCC run.py dcqcn (§1.1)",
        ),
    ),
    reacts_to_ecn=True,
)

HPCC = Algorithm(
    "hpcc",
    "HPCC",
    (
        Param("eta", "", 1, 0.95, 0.01, 1, "target utilisation", "paper; HPCC run.py (§2.1)"),
        Param(
            "max_stage",
            "",
            1,
            0.0,
            0,
            1e6,
            "additive-increase stages before multiplicative ones (the paper suggests 5)",
            HPCC_RUN.format("2.1"),
        ),
        Param(
            "rate_ai_mbps",
            "Mb/s",
            MBPS,
            per_line(0.4, "10 Mb/s per 25 Gb/s of NIC rate"),
            0,
            HUGE,
            "R_AI = W_AI / T, the additive step",
            HPCC_RUN.format("2.1"),
        ),
        Param("min_rate_mbps", "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below", HPCC_RUN.format("2.1")),
        Param(
            "base_rtt_ns",
            "ns",
            NS,
            None,
            1,
            1e12,
            "T: reference RTT for U and the window",
            "paper: the network's largest base RTT (§2.4)",
        ),
    ),
    int_header_bytes=42,
    windowed=True,
)  # the INT stack: 5 hops x 8 B + 2 B hop count (the HPCC simulator's NORMAL mode)

TIMELY = Algorithm(
    "timely",
    "TIMELY",
    (  # its timestamps are NIC completion times: no header bytes
        Param(
            "alpha",
            "",
            1,
            0.875,
            0,
            1,
            "EWMA weight of the newest RTT difference",
            "HPCC RdmaHw default (§3; the authors' snippet uses 0.02)",
        ),
        Param("beta", "", 1, 0.8, 0, 1, "multiplicative decrease factor", "paper; HPCC (§3)"),
        Param("t_low_us", "us", US, 50.0, 0, 1e6, "below this RTT: additive increase", "HPCC RdmaHw default (§3)"),
        Param("t_high_us", "us", US, 500.0, 1e-3, 1e6, "above this RTT: cut by beta", "HPCC RdmaHw default (§3)"),
        Param("min_rtt_us", "us", US, 20.0, 1e-3, 1e6, "normaliser of the RTT gradient", "HPCC RdmaHw default (§3)"),
        Param(
            "rate_ai_mbps",
            "Mb/s",
            MBPS,
            per_line(1.0, "1 Mb/s per Gb/s of NIC rate"),
            0,
            HUGE,
            "additive increase delta",
            HPCC_RUN.format("3"),
        ),
        Param(
            "rate_hai_mbps",
            "Mb/s",
            MBPS,
            per_line(5.0, "5 Mb/s per Gb/s of NIC rate"),
            0,
            HUGE,
            "hyperactive increase",
            HPCC_RUN.format("3"),
        ),
        Param(
            "hai_after", "", 1, 5.0, 0, 1e6, "increases in a row before the hyperactive step", "paper N = 5; HPCC (§3)"
        ),
        Param("min_rate_mbps", "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below", HPCC_RUN.format("3")),
    ),
    ordered=(("t_low_us", "t_high_us"),),
)  # below T_low the rule adds delta before it looks at T_high

DCTCP = Algorithm(
    "dctcp",
    "DCTCP",
    (
        Param("g", "", 1, 1 / 16, 0, 1, "alpha EWMA gain", "paper; RFC 8257; HPCC run.py (§4)"),
        Param(
            "rate_ai_mbps",
            "Mb/s",
            MBPS,
            615.0,
            0,
            HUGE,
            "additive increase per window (one 1 KB MTU per 13 us RTT)",
            HPCC_RUN.format("4"),
        ),
        Param("min_rate_mbps", "Mb/s", MBPS, 1000.0, 1e-3, HUGE, "the rate never goes below", HPCC_RUN.format("4")),
        Param(
            "base_rtt_ns",
            "ns",
            NS,
            None,
            1,
            1e12,
            "T: the window is rate x T",
            "HPCC VAR_WIN: maxBdp = line x largest base RTT (§2.4, §4)",
        ),
    ),
    ecn=(300_000, 300_000, 1.0),
    reacts_to_ecn=True,
    windowed=True,
)  # one threshold K, 300 KB at 100 Gb/s (the HPCC run.py dctcp profile)

#: every algorithm; the position is the engine's kind code (CC_*, a queue pair's "cc")
ALGORITHMS = (NONE, DCQCN, HPCC, TIMELY, DCTCP)
NAMES = tuple(a.name for a in ALGORITHMS)
BY_NAME = {a.name: a for a in ALGORITHMS}


def code(name: str) -> int:
    """The engine's kind code of an algorithm (kinds.CC_*)."""
    return NAMES.index(name)
