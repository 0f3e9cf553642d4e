"""The HPCC ns-3 simulator's inputs (alibaba-edu/High-Precision-Congestion-Control): its
``KEY value`` run configuration, topology file and flow file, read into a roce-emu scenario.

- topology: line 1 ``nodes switches links``, line 2 the switch ids, then ``src dst rate delay
  error_rate`` per link (rates and delays as ns-3 writes them: ``100Gbps``, ``0.001ms``);
- flows: line 1 the count, then ``src dst priority dport bytes start_time_s`` per flow, sorted
  by start time;
- configuration: every key of ``simulation/scratch/third.cc`` is either mapped (``CONFIG``
  below) or named in the notes as not carried over; none is dropped silently.

docs/importers.md gives the mapping. Every error is one line naming the file, the key or line,
and what is allowed.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ScenarioError
from ..units import bps_to_gbps
from .astra_sim import read_text

_SI = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_RATE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(k|K|M|G|T|Ki|Mi|Gi|Ti)?(bps|b/s|Bps|B/s)$")
_TIME = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(s|ms|us|ns|ps|min|h)?$")
_TIME_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "min": 60e9, "h": 3600e9, None: 1e9}


def rate_bps(text: str, source: str, key: str) -> float:
    """An ns-3 DataRate string (``100Gbps``, ``50Mb/s``, ``1.5GB/s``) in bits per second."""
    m = _RATE.match(text.strip())
    if not m:
        raise ScenarioError(
            source,
            key,
            f"'{text}' is not a rate ns-3 reads (e.g. 100Gbps, 50Mb/s; units bps, b/s, "
            f"Bps, B/s with k, M, G, T or Ki, Mi, Gi, Ti)",
        )
    value, prefix, unit = float(m.group(1)), m.group(2) or "", m.group(3)
    scale = _IEC.get(prefix) or _SI[prefix]
    return value * scale * (8 if unit.startswith("B") else 1)


def time_ns(text: str, source: str, key: str) -> float:
    """An ns-3 Time string (``0.001ms``, ``1000ns``; a bare number is seconds) in ns."""
    m = _TIME.match(text.strip())
    if not m:
        raise ScenarioError(
            source, key, f"'{text}' is not a time ns-3 reads (e.g. 1000ns, 0.001ms, 1us; units s, ms, us, ns, ps)"
        )
    return float(m.group(1)) * _TIME_NS[m.group(2)]


@dataclass
class Ns3Topology:
    """A topology file: nodes, the switch ids, and links (a, b, rate b/s, delay ns, error rate)."""

    path: str
    n_nodes: int
    switches: list
    ignored_lines: int = 0  # after the links line 1 announces (the simulator ignores them too)
    links: list = field(default_factory=list)

    def host_index(self) -> dict:
        """ns-3 node id -> roce-emu host id (hosts in ascending node order)."""
        switches = set(self.switches)
        return {v: i for i, v in enumerate(v for v in range(self.n_nodes) if v not in switches)}

    def section(self) -> dict:
        """The roce-emu ``topology`` mapping (kind custom). A link with an error rate needs a
        lossy_port fault, which only the import command writes: refused here."""
        for a, b, _, _, err, line in self.links:
            if err > 0:
                raise ScenarioError(
                    self.path,
                    f"line {line}",
                    f"error rate {err:g} on link {a}-{b}: write the "
                    f"scenario with 'roce-emu import ns3', which turns it into lossy_port faults",
                )
        return self.custom()

    def custom(self) -> dict:
        """The links and switches as a ``custom`` topology section (error rates left out: the
        importer writes them as faults)."""
        return {
            "kind": "custom",
            "switches": list(self.switches),
            "links": [[a, b, bps_to_gbps(rate), delay] for a, b, rate, delay, _, _ in self.links],
        }


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, tokens) of the non-blank lines."""
    return [(i, line.split()) for i, line in enumerate(read_text(path).splitlines(), start=1) if line.strip()]


def _int(token: str, source: str, where: str, what: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise ScenarioError(source, where, f"'{token}' is not a whole number ({what})") from None


def read_topology(path: Path | str) -> Ns3Topology:
    path = Path(path)
    source = str(path)
    lines = _lines(path)
    if len(lines) < 2 or len(lines[0][1]) < 3:
        raise ScenarioError(source, "line 1", "expected 'nodes switches links', then the switch ids")
    n_nodes, n_switches, n_links = (_int(t, source, "line 1", "nodes switches links") for t in lines[0][1][:3])
    switch_line, ids = lines[1]
    switches = [_int(t, source, f"line {switch_line}", "a switch id") for t in ids]
    if len(switches) != n_switches:
        raise ScenarioError(source, f"line {switch_line}", f"{len(switches)} switch ids; line 1 says {n_switches}")
    for s in switches:
        if not 0 <= s < n_nodes:
            raise ScenarioError(
                source, f"line {switch_line}", f"switch {s} is not a node (nodes are 0 to {n_nodes - 1})"
            )
    rows = lines[2 : 2 + n_links]  # the simulator reads as many as line 1 says, and ignores the rest
    if len(rows) != n_links:
        raise ScenarioError(source, "line 1", f"says {n_links} links; the file has {len(rows)}")
    topo = Ns3Topology(source, n_nodes, switches, ignored_lines=len(lines) - 2 - n_links)
    for line, tokens in rows:
        where = f"line {line}"
        if len(tokens) < 4:
            raise ScenarioError(source, where, "expected 'src dst rate delay error_rate'")
        a, b = (_int(t, source, where, "a node id") for t in tokens[:2])
        for v in (a, b):
            if not 0 <= v < n_nodes:
                raise ScenarioError(source, where, f"node {v} is out of range (nodes are 0 to {n_nodes - 1})")
        err = float(tokens[4]) if len(tokens) > 4 else 0.0
        topo.links.append((a, b, rate_bps(tokens[2], source, where), time_ns(tokens[3], source, where), err, line))
    return topo


def read_flows(path: Path | str, topo: Ns3Topology, priority_default: int = 3) -> tuple[list[dict], list[str]]:
    """The flow file as roce-emu ``workload.flows`` (hosts renumbered), and notes."""
    path = Path(path)
    source = str(path)
    lines = _lines(path)
    if not lines:
        raise ScenarioError(source, "line 1", "expected the number of flows")
    count = _int(lines[0][1][0], source, "line 1", "the number of flows")
    rows = lines[1 : 1 + count]  # the simulator reads as many as line 1 says
    if len(rows) != count:
        raise ScenarioError(source, "line 1", f"says {count} flows; the file has {len(rows)}")
    extra = len(lines) - 1 - count
    hosts = topo.host_index()
    flows, last = [], -1.0
    for line, tokens in rows:
        where = f"line {line}"
        if len(tokens) < 6:
            raise ScenarioError(source, where, "expected 'src dst priority dport bytes start_time_s'")
        src, dst, prio = (_int(t, source, where, w) for t, w in zip(tokens[:3], ("src", "dst", "priority")))
        nbytes = _int(tokens[4], source, where, "bytes")
        for end, v in (("src", src), ("dst", dst)):
            if v not in hosts:
                what = "a switch" if 0 <= v < topo.n_nodes else f"out of range (nodes are 0 to {topo.n_nodes - 1})"
                raise ScenarioError(source, where, f"{end} {v} is {what}; flows run between hosts")
        try:
            start_s = float(tokens[5])
        except ValueError:
            raise ScenarioError(source, where, f"'{tokens[5]}' is not a start time in seconds") from None
        if start_s < last:
            raise ScenarioError(
                source,
                where,
                f"starts at {start_s:g} s, before the line above ({last:g} s): the "
                f"HPCC simulator reads flows sorted by start time",
            )
        last = start_s
        if nbytes < 1:
            raise ScenarioError(source, where, f"{nbytes} bytes: a flow needs at least one")
        if not 1 <= prio <= 7:
            raise ScenarioError(
                source, where, f"priority {prio}: roce-emu's data priorities are 1 to 7 (0 carries the control packets)"
            )
        flows.append(
            {"src": hosts[src], "dst": hosts[dst], "bytes": nbytes, "start_ns": start_s * 1e9, "priority": prio}
        )
    notes = ["flow dport: ns-3's port numbers are not modelled (flows are told apart by their index)"]
    if extra:
        notes.append(
            f"{source}: {extra} lines after the {count} flows line 1 announces: ignored, as the simulator does"
        )
    return flows, notes


# ---- the run configuration ------------------------------------------------------------------
CC_MODES = {1: "dcqcn", 3: "hpcc", 7: "timely", 8: "dctcp"}
#: per algorithm: config key -> (parameter, converter name)
CC_KEYS = {
    "dcqcn": {
        "ALPHA_RESUME_INTERVAL": ("alpha_interval_us", "float"),
        "RATE_DECREASE_INTERVAL": ("decrease_interval_us", "float"),
        "RP_TIMER": ("increase_interval_us", "float"),
        "EWMA_GAIN": ("g", "float"),
        "FAST_RECOVERY_TIMES": ("fast_recovery_steps", "int"),
        "RATE_AI": ("rate_ai_mbps", "rate"),
        "RATE_HAI": ("rate_hai_mbps", "rate"),
        "MIN_RATE": ("min_rate_mbps", "rate"),
        "CLAMP_TARGET_RATE": ("clamp_target_rate", "bool"),
    },
    "hpcc": {
        "U_TARGET": ("eta", "float"),
        "MI_THRESH": ("max_stage", "int"),
        "RATE_AI": ("rate_ai_mbps", "rate"),
        "MIN_RATE": ("min_rate_mbps", "rate"),
    },
    "timely": {
        "RATE_AI": ("rate_ai_mbps", "rate"),
        "RATE_HAI": ("rate_hai_mbps", "rate"),
        "MIN_RATE": ("min_rate_mbps", "rate"),
    },
    "dctcp": {
        "EWMA_GAIN": ("g", "float"),
        "DCTCP_RATE_AI": ("rate_ai_mbps", "rate"),
        "MIN_RATE": ("min_rate_mbps", "rate"),
    },
}
#: keys roce-emu models with one value only: another value is named in the notes
FIXED = {
    "USE_DYNAMIC_PFC_THRESHOLD": ("1", "roce-emu's PFC thresholds are dynamic (alpha_shift)"),
    # rdma-hw.cc's ReceiveUdp sets the receiver's ACK milestone to the interval at every packet,
    # so ReceiverCheckSeq ACKs every packet once a flow's first interval bytes are in
    "L2_ACK_INTERVAL": (
        "1",
        "the simulator resets its ACK milestone to the interval at every packet (rdma-hw.cc, "
        "ReceiveUdp), so it acknowledges every packet past a flow's first L2_ACK_INTERVAL bytes; "
        "roce-emu acknowledges every packet",
    ),
    "GLOBAL_T": ("1", "roce-emu's base RTT is the fabric's largest"),
    "VAR_WIN": ("1", "roce-emu's window follows the rate"),
    "FAST_REACT": ("1", "roce-emu's HPCC reacts to every ACK"),
    "MULTI_RATE": ("0", "roce-emu's HPCC keeps one rate for all hops"),
    "SAMPLE_FEEDBACK": ("0", "roce-emu's HPCC reads INT on every ACK"),
    "RATE_BOUND": ("1", "roce-emu paces every queue pair at its rate"),
}
#: keys roce-emu has no equivalent for: named in the notes with the reason
NOT_MODELLED = {
    "TRACE_FILE": "packet traces: roce-emu samples queues and rates with output.traces",
    "TRACE_OUTPUT_FILE": "packet traces: roce-emu samples queues and rates with output.traces",
    "ENABLE_TRACE": "packet traces: roce-emu samples queues and rates with output.traces",
    "FCT_OUTPUT_FILE": "roce-emu writes flows.csv (FCT per flow), and fct.txt in the simulator's layout "
    "with output.formats: [ns3]",
    "PFC_OUTPUT_FILE": "roce-emu counts pauses in summary.json (pfc_pauses_sent), and writes pfc.txt in the "
    "simulator's layout with output.formats: [ns3] (traces_pfc.csv with output.traces: [pfc])",
    "QLEN_MON_FILE": "roce-emu samples queues with output.traces: [queue]",
    "QLEN_MON_START": "roce-emu samples queues with output.traces: [queue]",
    "QLEN_MON_END": "roce-emu samples queues with output.traces: [queue]",
    "L2_CHUNK_SIZE": "not modelled (roce-emu sends each queue pair's packets one at a time, round robin)",
    "L2_BACK_TO_ZERO": "roce-emu goes back N (to the first unacknowledged packet)",
    "INT_MULTI": "INT field units: roce-emu keeps exact byte counts",
    "ACK_HIGH_PRIO": "roce-emu sends ACKs in the NICs' control queue, ahead of data",
    "PINT_LOG_BASE": "HPCC-PINT (CC_MODE 10) is not modelled",
    "PINT_PROB": "HPCC-PINT (CC_MODE 10) is not modelled",
    "PAUSE_TIME": "roce-emu's PFC pauses until resumed (XON)",
}


def read_config(path: Path | str) -> tuple[dict, Path]:
    """``KEY value...`` per line: {key: (line number, [values])}, and the config's folder."""
    path = Path(path)
    out = {}
    for line, tokens in _lines(path):
        out[tokens[0]] = (line, tokens[1:])
    return out, path.parent


class _Config:
    """A run configuration being mapped: its keys, and which of them were read, so that every
    key left over is named in the notes."""

    def __init__(self, path: Path):
        self.source = str(path)
        self.keys, self.folder = read_config(path)
        self.used: set[str] = set()

    def entry(self, key: str) -> tuple[int, list[str]] | None:
        """(line number, values) of a key, marked as read; None when the configuration lacks it."""
        if key not in self.keys:
            return None
        self.used.add(key)
        return self.keys[key]

    def value(self, key: str) -> str | None:
        """A key's first value, marked as read; None when the configuration lacks it."""
        entry = self.entry(key)
        if entry is None:
            return None
        line, values = entry
        if not values:
            raise ScenarioError(self.source, key, f"line {line}: the key has no value")
        return values[0]

    def input_file(self, key: str, default: str) -> Path:
        """A file the configuration names (``mix/topology.txt``, relative to where the simulator
        ran): beside the configuration, or under it as written."""
        name = self.value(key) or default
        direct = self.folder / name
        return direct if direct.is_file() else self.folder / Path(name).name


def scenario(
    config_path: Path | str, topology: Path | None = None, flows: Path | None = None, name: str | None = None
) -> tuple[dict, list[str], list[str]]:
    """A scenario document from an HPCC ns-3 run configuration (with its topology and flow
    files), the notes of what was not carried over, and the files read. Each section of the
    document comes from a function of its own, called in the order the keys are checked."""
    config_path = Path(config_path)
    cfg = _Config(config_path)
    topo_path = topology or cfg.input_file("TOPOLOGY_FILE", "topology.txt")
    flow_path = flows or cfg.input_file("FLOW_FILE", "flow.txt")
    topo = read_topology(topo_path)
    workload, notes = _workload(flow_path, topo, topo_path)
    cc, cc_notes = _congestion_control(cfg)
    network: dict = {"profile": "hpcc_ns3", "cc": cc}  # its frame sizes, ACKs queued with data, its headroom
    payload = cfg.value("PACKET_PAYLOAD_SIZE")
    if payload is not None:
        network["mtu_bytes"] = _int(payload, cfg.source, "PACKET_PAYLOAD_SIZE", "bytes")
    switch = _buffer(cfg)
    ecn = _ecn(cfg, topo)
    if ecn:
        switch["ecn"] = ecn
    if switch:
        network["switch"] = switch
    doc: dict = {
        "name": name or config_path.stem,
        "topology": topo.custom(),
        "workload": workload,
        "network": network,
        "sim": _sim(cfg),
    }
    faults = _faults(cfg, topo)
    if faults:
        doc["faults"] = faults
    notes += cc_notes + _not_carried_over(cfg, cc["algorithm"])
    return doc, notes, [cfg.source, str(topo_path), str(flow_path)]


def _workload(flow_path: Path, topo: Ns3Topology, topo_path: Path) -> tuple[dict, list[str]]:
    """``workload.flows`` from the flow file, and the notes on both input files (lines after
    those their first line announces)."""
    flow_list, notes = read_flows(flow_path, topo)
    if topo.ignored_lines:
        notes.append(
            f"{topo_path}: {topo.ignored_lines} lines after the {len(topo.links)} links line 1 announces: "
            f"ignored, as the simulator does"
        )
    return {"flows": flow_list}, notes


def _congestion_control(cfg: _Config) -> tuple[dict, list[str]]:
    """``network.cc``: CC_MODE's algorithm and its parameters, and a note per parameter of
    another algorithm the configuration sets."""
    code = _int(cfg.value("CC_MODE") or "1", cfg.source, "CC_MODE", "the congestion-control mode")
    if code not in CC_MODES:
        raise ScenarioError(
            cfg.source,
            "CC_MODE",
            f"{code} is not a mode roce-emu runs (allowed: 1 DCQCN, 3 HPCC, "
            f"7 TIMELY, 8 DCTCP; 10 HPCC-PINT is not modelled)",
        )
    algorithm = CC_MODES[code]
    params: dict[str, object] = {"variant": "cx"} if algorithm == "dcqcn" else {}
    for key, (param, kind) in CC_KEYS[algorithm].items():
        text = cfg.value(key)
        if text is None:
            continue
        if kind == "rate":
            params[param] = rate_bps(text, cfg.source, key) / 1e6
        elif kind == "int":
            params[param] = _int(text, cfg.source, key, param)
        elif kind == "bool":
            params[param] = _int(text, cfg.source, key, "0 or 1") != 0
        else:
            params[param] = _float(text, cfg.source, key)
    notes = [
        f"{key}: not used by {algorithm} (CC_MODE {code})"
        for key in sorted({k for keys in CC_KEYS.values() for k in keys} - set(CC_KEYS[algorithm]))
        if cfg.value(key) is not None
    ]
    return {"algorithm": algorithm, "params": params}, notes


def _buffer(cfg: _Config) -> dict:
    """``network.switch.buffer_bytes`` from BUFFER_SIZE (MB of 2^20 bytes), if set."""
    size = cfg.value("BUFFER_SIZE")
    return {} if size is None else {"buffer_bytes": _int(size, cfg.source, "BUFFER_SIZE", "MB") * 1024 * 1024}


def _ecn(cfg: _Config, topo: Ns3Topology) -> dict:
    """``network.switch.ecn``: ENABLE_QCN and the ECN maps."""
    ecn: dict = {}
    qcn = cfg.value("ENABLE_QCN")
    if qcn is not None:
        ecn["enabled"] = _int(qcn, cfg.source, "ENABLE_QCN", "0 or 1") != 0
    ecn.update(_ecn_maps(cfg, topo))
    return ecn


def _sim(cfg: _Config) -> dict:
    """``sim.max_time_ns`` from SIMULATOR_STOP_TIME (the simulator's default 3.01 s; its flows start at 2 s)."""
    stop = cfg.value("SIMULATOR_STOP_TIME") or "3.01"
    return {"max_time_ns": _float(stop, cfg.source, "SIMULATOR_STOP_TIME") * 1e9}


def _not_carried_over(cfg: _Config, algorithm: str) -> list[str]:
    """The notes on the keys roce-emu models with one value only (when set otherwise), those it
    has no equivalent for, and those the simulator does not know; read last, after every
    mapped key."""
    notes = []
    windowed = algorithm in ("hpcc", "dctcp")
    shape = "windowed" if windowed else "rate-based, without a window"
    fixed = {**FIXED, "HAS_WIN": ("1" if windowed else "0", f"roce-emu's {algorithm} is {shape}")}
    for key, (want, why) in fixed.items():
        got = cfg.value(key)
        if got is not None and got != want:
            notes.append(f"{key} {got}: not modelled ({why}, as with {want})")
    for key, why in NOT_MODELLED.items():
        if cfg.value(key) is not None:
            notes.append(f"{key}: {why}")
    for key in cfg.keys:
        if key not in cfg.used:
            notes.append(f"{key}: not a key of the HPCC simulator's third.cc (it ignores it too)")
    return notes


def _float(text: str, source: str, key: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ScenarioError(source, key, f"'{text}' is not a number") from None


def _ecn_maps(cfg: _Config, topo: Ns3Topology) -> dict:
    """KMIN_MAP / KMAX_MAP / PMAX_MAP (per link rate, thresholds in KB of 1000 B) as roce-emu's
    one pair scaled with the rate: they must be proportional to rate over the rates in use."""
    source = cfg.source
    maps = {}
    for key in ("KMIN_MAP", "KMAX_MAP", "PMAX_MAP"):
        entry = cfg.entry(key)
        if entry is None:
            continue
        line, values = entry
        n = _int(values[0], source, key, "the number of rates") if values else 0
        if len(values) != 1 + 2 * n:
            raise ScenarioError(source, key, f"line {line}: expected the count, then {n} pairs of rate (b/s) and value")
        maps[key] = {
            _int(values[1 + 2 * i], source, key, "a rate in b/s"): _float(values[2 + 2 * i], source, key)
            for i in range(n)
        }
    if not maps:
        return {}
    rates = sorted({int(round(rate)) for _, _, rate, _, _, _ in topo.links})
    for key, table in maps.items():
        missing = [r for r in rates if r not in table]
        if missing:
            raise ScenarioError(
                source,
                key,
                f"no entry for {missing[0]} b/s, a link rate of the topology (the HPCC "
                f"simulator needs one per link rate too)",
            )
    ref = rates[-1]
    out = {"scale_with_rate": len(rates) > 1, "reference_rate_gbps": ref / 1e9}
    targets = (("KMIN_MAP", "kmin_bytes", 1000), ("KMAX_MAP", "kmax_bytes", 1000), ("PMAX_MAP", "pmax", 1))
    for key, name, unit in targets:
        if key not in maps:
            continue
        table = maps[key]
        for r in rates:
            expected = table[ref] * (r / ref if unit > 1 else 1)
            if abs(table[r] - expected) > 1e-9 * max(1.0, abs(expected)):
                what = "keeps one pmax for all rates" if unit == 1 else "scales one threshold with the rate"
                raise ScenarioError(
                    source, key, f"{table[r]:g} at {r} b/s against {table[ref]:g} at {ref} b/s: roce-emu {what}"
                )
        out[name] = int(round(table[ref] * unit)) if unit > 1 else table[ref]
    return out


def _faults(cfg: _Config, topo: Ns3Topology) -> list[dict]:
    """LINK_DOWN (at 2 s + t us, as the simulator schedules it), and the topology's link error
    rates and ERROR_RATE_PER_LINK, as faults."""
    source = cfg.source
    per_link = cfg.value("ERROR_RATE_PER_LINK")
    faults = []
    host = topo.host_index()

    def name(v):
        return f"h{host[v]}" if v in host else f"sw{v}"

    link_down = cfg.entry("LINK_DOWN")
    if link_down is not None:
        line, values = link_down
        if len(values) != 3:
            raise ScenarioError(source, "LINK_DOWN", f"line {line}: expected 'time_us node_a node_b'")
        t_us, a, b = (_int(v, source, "LINK_DOWN", "time_us node_a node_b") for v in values)
        if t_us > 0:
            if not any({a, b} == {x, y} for x, y, _, _, _, _ in topo.links):
                raise ScenarioError(source, "LINK_DOWN", f"nodes {a} and {b} share no link in {topo.path}")
            faults.append({"kind": "link_down", "link": [name(a), name(b)], "at_ns": 2e9 + t_us * 1e3})
    rate = _float(per_link, source, "ERROR_RATE_PER_LINK") if per_link is not None else 0.0
    lossy = {(a, b): e for a, b, _, _, e, _ in topo.links if e > 0}
    if rate > 0:
        for a, b, _, _, _, _ in topo.links:
            lossy.setdefault((a, b), rate)
    for (a, b), e in lossy.items():
        for x, y in ((a, b), (b, a)):  # the simulator's error model sits on each receiving device
            faults.append({"kind": "lossy_port", "port": [name(x), name(y)], "loss": e})
    return faults


# ---- writing the simulator's input files back ----------------------------------------------------
def _rate_text(gbps: float) -> str:
    return f"{gbps:g}Gbps"


def topology_text(section: dict) -> str:
    """A ``custom`` topology section as the simulator's topology file (rates in Gbps, delays
    in ns, no error rate)."""
    switches, links = section["switches"], section["links"]
    n = 1 + max(max(switches), max(max(a, b) for a, b, _, _ in links))
    lines = [f"{n} {len(switches)} {len(links)}", " ".join(map(str, switches))]
    lines += [f"{a} {b} {_rate_text(rate)} {delay:g}ns 0" for a, b, rate, delay in links]
    return "\n".join(lines) + "\n"


def flows_text(flows: list[dict], section: dict) -> str:
    """``workload.flows`` (roce-emu host ids) as the simulator's flow file, sorted by start time
    as it requires; the destination port is 100."""
    switches = set(section["switches"])
    n = 1 + max(max(switches), max(max(a, b) for a, b, _, _ in section["links"]))
    node = [v for v in range(n) if v not in switches]
    ordered = sorted(flows, key=lambda f: f.get("start_ns", 0.0))
    lines = [str(len(ordered))]
    lines += [
        f"{node[f['src']]} {node[f['dst']]} {f.get('priority') or 3} 100 {f['bytes']} "
        f"{f.get('start_ns', 0.0) / 1e9:.9f}"
        for f in ordered
    ]
    return "\n".join(lines) + "\n"
