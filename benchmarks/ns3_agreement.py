"""Agreement with the HPCC ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control) under
``network.profile: hpcc_ns3``: the same input files run in both tools, flow-completion times side
by side, and both tools' wall times.

    python benchmarks/ns3_agreement.py --ns3 /work/hpcc-ns3/simulation      (or HPCC_NS3=...)
    python benchmarks/ns3_agreement.py --cases shipped --cc hpcc --runs 1
    python benchmarks/ns3_agreement.py --cases pfc_join                     # PFC alone, a fourth flow joins

For every case and congestion control, the script writes the simulator's config, topology and
flow files into a folder (``--work``), runs the simulator there ``--runs`` times (its outputs are
deterministic; its wall time is the median), imports the same files with
``roce_emu.importers.ns3`` (what ``roce-emu import ns3`` does) and runs roce-emu once in this
process after a warm-up run. Both FCTs are the simulator's definition: start to the sender's
last ACK. Slowdown is FCT over the simulator's standalone FCT of the flow (its fct.txt column 8).

Cases:

- ``shipped``: the simulator's own mix/topology.txt and flow.txt (two 200 MB flows into one
  host of a 65-host switch; the files' further lines are ignored by both tools), under its
  mix/config.txt (HPCC) as shipped, and under run.py's DCQCN;
- ``fat_websearch``: the simulator's mix/fat.txt (320 hosts at 100 Gb/s, 400 Gb/s above the
  edge) with web-search traffic at 30 % load for ``--websearch-us`` (the HPCC paper's setting,
  drawn as its traffic_gen.py draws it, with a seed);
- ``fat_tree_k8``: a k=8 fat-tree (128 hosts, 100 Gb/s, 1 us links), a random permutation of
  ``--perm-bytes`` flows;
- ``pfc_join``: PFC alone on one switch (CC_MODE 1 with ENABLE_QCN 0: no marks, so line rate):
  three 16 MB flows into one host, a fourth of ``--join-bytes`` joining at 300 us;
- ``incast2``, ``incast3``: 2 or 3 flows of 1 MB into one host of one switch (no ECMP), all
  starting together: DCQCN's dynamics alone.

The ECN marks are random draws in both tools: the simulator draws from ns-3's generator (its run
number, ``NS_GLOBAL_VALUE=RngRun=N``; 1 by default), roce-emu from the scenario seed, which also
draws the ECMP hashes. ``--ns3-seeds N`` and ``--emu-seeds N`` run each tool with runs (seeds)
1..N and report the range and the mean of the median and p99 FCT over them.

The configuration of each congestion control is the simulator's run.py at 100 Gb/s (DCQCN:
CC_MODE 1, RP_TIMER 300, RATE_AI 20 Mb/s, ACKs at high priority; HPCC: CC_MODE 3, eta 0.95,
RATE_AI 40 Mb/s, INT_MULTI 4; both MIN_RATE 1 Gb/s, a 32 MB buffer, the ECN maps kmin 400 KB,
kmax 1600 KB, pmax 0.2 per 100 Gb/s), with traces and queue monitoring off.

The simulator has no event counter; when its ``third`` prints a line ``events N`` (a one-line
addition after ``Simulator::Run()``: ``printf("events %u\\n", Simulator::Schedule(Seconds(0),
&noop).GetUid());``, the scheduler's count of events scheduled), the table shows it. Timed runs
of both tools hold ``/tmp/timing.lock`` (as ``flock`` does) so that no two measurements overlap.
Without the simulator the script says so and exits 0.
"""

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.importers import ns3  # noqa: E402
from roce_emu.results.ns3_format import source_ports  # noqa: E402

CASES = ("shipped", "fat_websearch", "fat_tree_k8", "pfc_join", "incast2", "incast3")
CCS = ("dcqcn", "hpcc")
START_S = 2.0  # the simulator's flows start at 2 s by convention
TIMING_LOCK = "/tmp/timing.lock"

#: the simulator's run.py at 100 Gb/s, per congestion control
RUN_PY = {
    "dcqcn": dict(
        CC_MODE=1,
        RATE_AI="20Mb/s",
        RATE_HAI="200Mb/s",
        HAS_WIN=0,
        VAR_WIN=0,
        FAST_REACT=0,
        INT_MULTI=1,
        ACK_HIGH_PRIO=1,
    ),
    "hpcc": dict(
        CC_MODE=3, RATE_AI="40Mb/s", RATE_HAI="40Mb/s", HAS_WIN=1, VAR_WIN=1, FAST_REACT=1, INT_MULTI=4, ACK_HIGH_PRIO=0
    ),
}
COMMON = dict(
    ENABLE_QCN=1,
    USE_DYNAMIC_PFC_THRESHOLD=1,
    PACKET_PAYLOAD_SIZE=1000,
    ALPHA_RESUME_INTERVAL=1,
    RATE_DECREASE_INTERVAL=4,
    CLAMP_TARGET_RATE=0,
    RP_TIMER=300,
    EWMA_GAIN=0.00390625,
    FAST_RECOVERY_TIMES=1,
    MIN_RATE="1000Mb/s",
    DCTCP_RATE_AI="1000Mb/s",
    ERROR_RATE_PER_LINK="0.0000",
    L2_CHUNK_SIZE=4000,
    L2_ACK_INTERVAL=1,
    L2_BACK_TO_ZERO=0,
    GLOBAL_T=1,
    U_TARGET=0.95,
    MI_THRESH=0,
    MULTI_RATE=0,
    SAMPLE_FEEDBACK=0,
    PINT_LOG_BASE=1.05,
    PINT_PROB=1.0,
    RATE_BOUND=1,
    LINK_DOWN="0 0 0",
    KMAX_MAP="2 100000000000 1600 400000000000 6400",
    KMIN_MAP="2 100000000000 400 400000000000 1600",
    PMAX_MAP="2 100000000000 0.2 400000000000 0.2",
    BUFFER_SIZE=32,
)
#: files and monitors: outputs in the case folder, traces and queue monitoring off
IO = dict(
    TOPOLOGY_FILE="topology.txt",
    FLOW_FILE="flow.txt",
    TRACE_FILE="trace.txt",
    TRACE_OUTPUT_FILE="mix.tr",
    FCT_OUTPUT_FILE="fct.txt",
    PFC_OUTPUT_FILE="pfc.txt",
    ENABLE_TRACE=0,
    QLEN_MON_FILE="qlen.txt",
)


# ---- the simulator's files -------------------------------------------------------------------
def config_text(keys: dict) -> str:
    return "".join(f"{k} {v}\n" for k, v in keys.items())


def read_config_keys(path: Path) -> dict:
    """A config file as {key: value text}, in its order."""
    return {line.split()[0]: " ".join(line.split()[1:]) for line in path.read_text().splitlines() if line.strip()}


def run_py_config(cc: str, stop_s: float) -> dict:
    """The simulator's run.py configuration of ``cc`` at 100 Gb/s, traces and monitors off."""
    return {**COMMON, **RUN_PY[cc], **_io(stop_s)}


def _io(stop_s: float) -> dict:
    after = int((stop_s + 1) * 1e9)  # the queue monitor starts after the run ends: never
    return {**IO, "SIMULATOR_STOP_TIME": f"{stop_s:g}", "QLEN_MON_START": after, "QLEN_MON_END": after}


def fat_tree_section(k: int, gbps: float = 100.0, delay_ns: float = 1000.0) -> dict:
    """A k-ary fat-tree as a ``custom`` topology section: hosts 0..k^3/4-1, then the edge,
    aggregation and core switches."""
    hosts, half = k**3 // 4, k // 2
    edge0, agg0 = hosts, hosts + k * half
    core0 = agg0 + k * half
    links = []
    for pod in range(k):
        for e in range(half):
            edge = edge0 + pod * half + e
            links += [[(pod * half + e) * half + h, edge, gbps, delay_ns] for h in range(half)]
            links += [[edge, agg0 + pod * half + a, gbps, delay_ns] for a in range(half)]
        for a in range(half):
            links += [[agg0 + pod * half + a, core0 + a * half + c, gbps, delay_ns] for c in range(half)]
    return {"kind": "custom", "switches": list(range(edge0, core0 + half * half)), "links": links}


def permutation_flows(n_hosts: int, nbytes: int, seed: int) -> list[dict]:
    """Every host sends ``nbytes`` to another, each receiving one flow (a random derangement)."""
    rng = np.random.default_rng(seed)
    while True:
        dst = rng.permutation(n_hosts)
        if not np.any(dst == np.arange(n_hosts)):
            break
    return [{"src": s, "dst": int(d), "bytes": nbytes, "start_ns": START_S * 1e9} for s, d in enumerate(dst)]


def websearch_flows(topology: ns3.Ns3Topology, load: float, duration_ns: float, seed: int) -> list[dict]:
    """Web-search flows as the simulator's traffic_gen.py draws them (each host a Poisson process
    offering ``load`` of its link, a uniform other host, sizes from the CDF), by roce-emu's
    generator, starting at 2 s on whole nanoseconds."""
    from roce_emu.workload.background import poisson_flows

    hosts = sorted(topology.host_index().values())
    pattern = SimpleNamespace(cdf="websearch", load=load, start_ns=START_S * 1e9, duration_ns=duration_ns)
    rate = np.full(len(hosts), 100e9)
    src, dst, nbytes, t = poisson_flows(pattern, hosts, rate, np.random.default_rng(seed), "websearch", "pattern")
    return [
        {"src": int(s), "dst": int(d), "bytes": int(b), "start_ns": float(round(x))}
        for s, d, b, x in zip(src, dst, nbytes, t)
    ]


@dataclass
class Case:
    name: str
    what: str
    topology: str  # the topology file's text
    flows: str  # the flow file's text
    config: dict = field(default_factory=dict)  # config keys per cc are filled in by ``configs``
    stop_s: float = 3.0
    ccs: tuple = CCS


def build_case(name: str, args, shipped: Path) -> Case:
    if name == "shipped":
        return Case(
            name,
            "shipped mix/: 2 x 200 MB into one host",
            (shipped / "topology.txt").read_text(),
            (shipped / "flow.txt").read_text(),
            config=read_config_keys(shipped / "config.txt"),
            stop_s=4.0,
        )
    if name == "fat_websearch":
        text = (shipped / "fat.txt").read_text()
        path = Path(args.work) / "fat.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        topo = ns3.read_topology(path)
        flows = websearch_flows(topo, 0.3, args.websearch_us * 1e3, args.seed)
        section = topo.custom()
        return Case(
            name,
            f"mix/fat.txt, web search 30 % load for {args.websearch_us:g} us ({len(flows)} flows)",
            text,
            ns3.flows_text(flows, section),
        )
    if name == "fat_tree_k8":
        section = fat_tree_section(8)
        flows = permutation_flows(128, args.perm_bytes, args.seed)
        return Case(
            name,
            f"k=8 fat-tree permutation, 128 x {args.perm_bytes / 1e6:g} MB",
            ns3.topology_text(section),
            ns3.flows_text(flows, section),
        )
    if name == "pfc_join":
        section = {"kind": "custom", "switches": [0], "links": [[0, h, 100.0, 1000.0] for h in range(1, 6)]}
        flows = [{"src": s, "dst": 0, "bytes": 16_000_000, "start_ns": START_S * 1e9} for s in (1, 2, 3)]
        flows.append({"src": 4, "dst": 0, "bytes": args.join_bytes, "start_ns": START_S * 1e9 + 300e3})
        return Case(
            name,
            f"PFC alone, 3 x 16 MB into one host, a {args.join_bytes / 1e6:g} MB flow joins at 300 us",
            ns3.topology_text(section),
            ns3.flows_text(flows, section),
            ccs=("none",),
        )
    if name in ("incast2", "incast3"):
        n = int(name[-1])
        section = {"kind": "custom", "switches": [0], "links": [[0, h, 100.0, 1000.0] for h in range(1, n + 2)]}
        flows = [{"src": s, "dst": 0, "bytes": 1_000_000, "start_ns": START_S * 1e9} for s in range(1, n + 1)]
        return Case(
            name, f"{n} x 1 MB into one host of one switch", ns3.topology_text(section), ns3.flows_text(flows, section)
        )
    raise SystemExit(f"--cases: '{name}' is not a case (allowed: {', '.join(CASES)})")


def configs(case: Case, cc: str) -> dict:
    """The config keys of one run of ``case``."""
    if case.name == "shipped" and cc == "hpcc":  # the shipped configuration (HPCC), as it is
        return {**case.config, **_io(case.stop_s)}
    if cc == "none":  # PFC alone: DCQCN that is never marked keeps line rate
        return {**run_py_config("dcqcn", case.stop_s), "ENABLE_QCN": 0}
    return run_py_config(cc, case.stop_s)


def write_case(folder: Path, case: Case, cc: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topology.txt").write_text(case.topology)
    (folder / "flow.txt").write_text(case.flows)
    (folder / "trace.txt").write_text("0\n\n")
    path = folder / "config.txt"
    path.write_text(config_text(configs(case, cc)))
    return path


# ---- reading and comparing -------------------------------------------------------------------
def read_fct(text: str) -> dict:
    """The simulator's fct.txt (``sip dip sport dport size start_ns fct_ns standalone_ns`` per
    line, hex IPs) as columns; node ids from the IPs (``(ip >> 8) & 0xffff``)."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    sip = np.array([int(r[0], 16) for r in rows], np.int64)
    dip = np.array([int(r[1], 16) for r in rows], np.int64)
    cols = np.array([[int(x) for x in r[2:8]] for r in rows], np.int64).reshape(-1, 6)
    return {
        "src": (sip >> 8) & 0xFFFF,
        "dst": (dip >> 8) & 0xFFFF,
        "sport": cols[:, 0],
        "bytes": cols[:, 2],
        "start_ns": cols[:, 3],
        "fct_ns": cols[:, 4],
        "standalone_ns": cols[:, 5],
    }


def flow_keys(flow_file_text: str) -> list[tuple[int, int, int]]:
    """(src node, dst node, source port) of each flow the file announces, in file order: the
    simulator numbers a flow's source port from 10000 per (src, dst) pair, in file order."""
    lines = [line.split() for line in flow_file_text.splitlines() if line.strip()]
    rows = lines[1 : 1 + int(lines[0][0])]
    src, dst = [int(r[0]) for r in rows], [int(r[1]) for r in rows]
    return list(zip(src, dst, source_ports(src, dst)))


def align(fct: dict, keys: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The simulator's FCT and standalone FCT (ns) per flow in file order; -1 for a flow that
    did not finish."""
    where = {(int(s), int(d), int(p)): i for i, (s, d, p) in enumerate(zip(fct["src"], fct["dst"], fct["sport"]))}
    out = np.full((2, len(keys)), -1, np.int64)
    for f, key in enumerate(keys):
        if key in where:
            out[:, f] = fct["fct_ns"][where[key]], fct["standalone_ns"][where[key]]
    return out[0], out[1]


def stats(values: np.ndarray) -> tuple[float, float]:
    """(median, 99th percentile), linear interpolation, as NumPy computes them."""
    return float(np.median(values)), float(np.percentile(values, 99))


def diff_pct(ours: float, theirs: float) -> float:
    return 100.0 * (ours - theirs) / theirs


# ---- running both tools ----------------------------------------------------------------------
@contextlib.contextmanager
def timing_lock():
    """Hold /tmp/timing.lock (flock(2), as the flock command takes it) while timing."""
    with open(TIMING_LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def find_ns3(option: str | None) -> Path | None:
    """The simulator's ``third`` binary from --ns3 or HPCC_NS3: the binary itself, the checkout,
    or its simulation/ folder."""
    given = option or os.environ.get("HPCC_NS3")
    if not given:
        return None
    base = Path(given)
    for candidate in (base, base / "build/scratch/third", base / "simulation/build/scratch/third"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _ns3_once(binary: Path, folder: Path, timeout: float, rng_run: int = 1) -> tuple[float, str]:
    """One timed run of the simulator in ``folder`` with ns-3's run number ``rng_run``: (wall s, its output)."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(binary.parent.parent), NS_GLOBAL_VALUE=f"RngRun={rng_run}")
    with timing_lock():
        began = time.perf_counter()
        proc = subprocess.run(
            [str(binary), "config.txt"], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
        )
        wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise RuntimeError(f"ns-3 failed in {folder}: {proc.stderr[-500:]}")
    return wall, proc.stdout


def run_ns3(binary: Path, folder: Path, runs: int, timeout: float) -> dict:
    """``runs`` runs of the case, and one with no flows: the simulator's setup (reading the
    files, routes, its global routing tables), which the event rate leaves out."""
    walls, out = [], ""
    for _ in range(runs):
        wall, out = _ns3_once(binary, folder, timeout)
        walls.append(wall)
    empty = folder / "setup"
    empty.mkdir(exist_ok=True)
    for name in ("config.txt", "topology.txt", "trace.txt"):
        shutil.copy(folder / name, empty / name)
    (empty / "flow.txt").write_text("0\n")
    setup = _ns3_once(binary, empty, timeout)[0]
    events = [int(line.split()[1]) for line in out.splitlines() if line.startswith("events ")]
    return {
        "fct": read_fct((folder / "fct.txt").read_text()),
        "walls": walls,
        "setup_s": setup,
        "events": events[0] if events else None,
        "pauses": sum(1 for line in (folder / "pfc.txt").read_text().splitlines() if line.endswith(" 1")),
    }


def run_roce(config: Path, overrides: list[str], timed: bool = True) -> dict:
    from roce_emu.api import prepare, run

    doc, _, _ = ns3.scenario(config)
    path = config.with_name("roce_emu.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with timing_lock() if timed else contextlib.nullcontext():
        began = time.perf_counter()
        prepared = prepare(path, overrides)
        setup_s = time.perf_counter() - began
        result = run(prepared, write=False, progress=False)
    table = result.flow_table
    fct = np.where(table["fct_ps"] >= 0, table["fct_ps"] // 1000, -1)
    return {
        "fct_ns": fct,
        "wall_s": result.summary["wall_s"],
        "setup_s": setup_s,
        "events": result.summary["events"],
        "pauses": result.summary.get("pfc_pauses_sent"),
    }


def warm_up(work: Path) -> None:
    """One small run so that the timed ones find the kernels loaded."""
    case = Case(
        "warm",
        "",
        "3 1 2\n0\n0 1 100Gbps 1000ns 0\n0 2 100Gbps 1000ns 0\n",
        "1\n1 2 3 100 100000 2\n",
    )
    run_roce(write_case(work / "warm", case, "hpcc"), [])


def seed_spread(config: Path, overrides: list[str], seeds: int, keys_done) -> dict:
    """roce-emu's median and p99 FCT (us) over scenario seeds 1..seeds (ECMP hashes and ECN
    draws; the simulator's hashes are fixed)."""
    fcts = [run_roce(config, [*overrides, f"seed={seed}"], timed=False)["fct_ns"] for seed in range(1, seeds + 1)]
    return _spread("emu", [fct[keys_done(fct)] for fct in fcts])


def ns3_seed_spread(binary: Path, folder: Path, runs: int, timeout: float, keys: list) -> dict:
    """The simulator's median and p99 FCT (us) over its run numbers 1..runs (its ECN draws)."""
    fcts = []
    for rng_run in range(1, runs + 1):
        _ns3_once(binary, folder, timeout, rng_run)
        fct = align(read_fct((folder / "fct.txt").read_text()), keys)[0]
        fcts.append(fct[fct >= 0])
    return _spread("ns3", fcts)


def _spread(tool: str, fcts: list[np.ndarray]) -> dict:
    """Lowest, highest and mean over runs of each run's median and p99 FCT (us)."""
    medians, p99s = np.array([stats(fct.astype(float) / 1e3) for fct in fcts]).T
    return {
        f"{tool}_seed_median_us": (medians.min(), medians.max(), medians.mean()),
        f"{tool}_seed_p99_us": (p99s.min(), p99s.max(), p99s.mean()),
    }


def compare(case: Case, cc: str, ours: dict, theirs: dict) -> dict:
    keys = flow_keys(case.flows)
    fct, standalone = align(theirs["fct"], keys)
    done = (fct >= 0) & (ours["fct_ns"] >= 0)
    row = {
        "case": case.name,
        "cc": cc,
        "flows": len(keys),
        "finished": f"{int((fct >= 0).sum())} / {int((ours['fct_ns'] >= 0).sum())}",
        "ns3_wall_s": statistics.median(theirs["walls"]),
        "ns3_walls": [round(w, 2) for w in theirs["walls"]],
        "ns3_setup_s": theirs["setup_s"],
        "ns3_events": theirs["events"],
        "ns3_pauses": theirs["pauses"],
        "emu_wall_s": ours["wall_s"],
        "emu_setup_s": ours["setup_s"],
        "emu_events": ours["events"],
        "emu_pauses": ours["pauses"],
    }
    if done.any():
        a, b = fct[done].astype(float), ours["fct_ns"][done].astype(float)
        (m3, p3), (me, pe) = stats(a), stats(b)
        (sm3, sp3), (sme, spe) = stats(a / standalone[done]), stats(b / standalone[done])
        row.update(
            ns3_median_us=m3 / 1e3,
            emu_median_us=me / 1e3,
            median_diff=diff_pct(me, m3),
            ns3_p99_us=p3 / 1e3,
            emu_p99_us=pe / 1e3,
            p99_diff=diff_pct(pe, p3),
            ns3_slow_median=sm3,
            emu_slow_median=sme,
            ns3_slow_p99=sp3,
            emu_slow_p99=spe,
            per_flow_median_abs_diff=float(np.median(np.abs(b - a) / a)) * 100,
            fcts_ns3_us=[round(x / 1e3, 1) for x in fct.tolist()] if len(keys) <= 8 else None,
            fcts_emu_us=[round(x / 1e3, 1) for x in ours["fct_ns"].tolist()] if len(keys) <= 8 else None,
        )
    return row


AGREEMENT = (
    "| case | CC | flows | FCT median us: ns-3 / roce-emu (diff) | FCT p99 us: ns-3 / roce-emu (diff) | "
    "over seeds, ns-3 / roce-emu: median us | p99 us | slowdown median: ns-3 / roce-emu | slowdown p99 |"
)
COST = (
    "| case | CC | ns-3 wall s (setup) | ns-3 events | ns-3 Mevents/s | roce-emu wall s (setup + engine) | "
    "roce-emu events | roce-emu Mevents/s |"
)


def _rule(header: str) -> str:
    return "|" + "---|" * header.count(" | ") + "---|"


def agreement_line(row: dict) -> str:
    head = f"| {row['case']} | {row['cc']} | {row['flows']} | "
    if "ns3_median_us" not in row:
        return head + "no flow finished in both | | | | | |"
    return head + (
        f"{row['ns3_median_us']:.1f} / {row['emu_median_us']:.1f} ({row['median_diff']:+.1f} %) | "
        f"{row['ns3_p99_us']:.1f} / {row['emu_p99_us']:.1f} ({row['p99_diff']:+.1f} %) | "
        f"{_seeds(row, 'median')} | {_seeds(row, 'p99')} | "
        f"{row['ns3_slow_median']:.2f} / {row['emu_slow_median']:.2f} | "
        f"{row['ns3_slow_p99']:.2f} / {row['emu_slow_p99']:.2f} |"
    )


def _seeds(row: dict, stat: str) -> str:
    """``low-high (mean)`` of one statistic over each tool's seeds; a single run's value without them."""
    out = []
    for tool in ("ns3", "emu"):
        spread = row.get(f"{tool}_seed_{stat}_us")
        single = row[f"{tool}_{stat}_us"]
        out.append(f"{spread[0]:.1f}-{spread[1]:.1f} ({spread[2]:.1f})" if spread else f"{single:.1f}")
    return " / ".join(out)


def cost_line(row: dict) -> str:
    ns3_run = row["ns3_wall_s"] - row["ns3_setup_s"]
    ns3_rate = f"{row['ns3_events'] / ns3_run / 1e6:.2f}" if row["ns3_events"] and ns3_run > 0 else "-"
    ns3_events = f"{row['ns3_events'] / 1e6:.1f} M" if row["ns3_events"] else "-"
    return (
        f"| {row['case']} | {row['cc']} | {row['ns3_wall_s']:.2f} ({row['ns3_setup_s']:.2f}) | {ns3_events} | "
        f"{ns3_rate} | {row['emu_setup_s'] + row['emu_wall_s']:.2f} ({row['emu_setup_s']:.2f} + "
        f"{row['emu_wall_s']:.2f}) | {row['emu_events'] / 1e6:.1f} M | "
        f"{row['emu_events'] / row['emu_wall_s'] / 1e6:.2f} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns3", help="the simulator's third binary, checkout or simulation/ folder (or HPCC_NS3)")
    ap.add_argument("--cases", default="shipped,fat_websearch,fat_tree_k8", help=f"of {', '.join(CASES)}")
    ap.add_argument("--cc", default="dcqcn,hpcc", help="of dcqcn, hpcc (pfc_join runs PFC alone)")
    ap.add_argument("--runs", type=int, default=3, help="simulator runs per case (wall time: their median)")
    ap.add_argument("--work", default="/tmp/ns3_agreement", help="folder for the cases' files and outputs")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated flows")
    ap.add_argument("--websearch-us", type=float, default=300.0, help="fat_websearch: microseconds of arrivals")
    ap.add_argument("--perm-bytes", type=int, default=1_000_000, help="fat_tree_k8: bytes per flow")
    ap.add_argument("--join-bytes", type=int, default=8_000_000, help="pfc_join: the joining flow's bytes")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per simulator run")
    ap.add_argument("--emu-seeds", type=int, default=1, help="also run roce-emu with seeds 1..N: FCT range")
    ap.add_argument("--ns3-seeds", type=int, default=1, help="also run the simulator with RngRun 1..N: FCT range")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--set", action="append", default=[], help="an override for roce-emu's runs (KEY=VALUE)")
    args = ap.parse_args()
    binary = find_ns3(args.ns3)
    if binary is None:
        print(
            "skipped: the HPCC ns-3 simulator is not built (give --ns3 or HPCC_NS3: its checkout, simulation/ "
            "folder or build/scratch/third; build it with build-hpcc-ns3.sh)"
        )
        return 0
    shipped = binary.parent.parent.parent / "mix"
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    warm_up(work)
    rows = []
    for name in args.cases.split(","):
        case = build_case(name, args, shipped)
        for cc in case.ccs if name == "pfc_join" else args.cc.split(","):
            print(f"{name} {cc} ...", file=sys.stderr, flush=True)
            folder = work / f"{name}_{cc}"
            config = write_case(folder, case, cc)
            theirs = run_ns3(binary, folder, args.runs, args.timeout)
            ours = run_roce(config, args.set)
            row = compare(case, cc, ours, theirs)
            if args.ns3_seeds > 1:
                row.update(ns3_seed_spread(binary, folder, args.ns3_seeds, args.timeout, flow_keys(case.flows)))
            if args.emu_seeds > 1:
                ns3_done = align(theirs["fct"], flow_keys(case.flows))[0] >= 0
                row.update(seed_spread(config, args.set, args.emu_seeds, lambda fct: ns3_done & (fct >= 0)))
            row["what"] = case.what
            rows.append(row)
    for header, line in ((AGREEMENT, agreement_line), (COST, cost_line)):
        print("\n".join([header, _rule(header), *map(line, rows)]) + "\n")
    for what in dict.fromkeys(f"{row['case']}: {row['what']}" for row in rows):
        print(what)
    for row in rows:
        if row.get("fcts_ns3_us"):
            print(
                f"{row['case']} {row['cc']}: FCT us per flow, ns-3 {row['fcts_ns3_us']}, roce-emu {row['fcts_emu_us']}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
