"""The HOTI'22 study reproduced: PFC alone, DCQCN, DCTCP, TIMELY and HPCC on training over a two-level Clos
(Khan et al., "Impact of RoCE congestion control policies on distributed training of DNNs", HOTI 2022,
arXiv 2207.10898), and the settings where its finding (the policy matters little) holds or breaks.

    python benchmarks/hoti22.py                       # the reduced scale: 2 leaves x 8 NPUs, 3 seeds
    python benchmarks/hoti22.py --leaves 8 --hosts-per-leaf 16     # the paper's 128 NPUs (hours here)
    python benchmarks/hoti22.py --only paper --seeds 5 --jobs 2 --out sweeps/hoti22
    python benchmarks/hoti22.py --queue-pair channel --out sweeps/hoti22_channel  # NCCL's ordered connections

Settings (docs/hoti22.md has the table of where each value comes from):

- paper: ResNet-50 data parallel on every NPU, the leaves' uplinks 2:1 oversubscribed (the authors'
  128-NPU topology file), one iteration;
- 1:1 and 4:1: the same with as many spines as NPUs per leaf, or a quarter of them;
- dlrm: DLRM hybrid parallel (ASTRA-sim's DLRM_HybridParallel sizes: an embedding all-to-all forward and
  backward) on the paper's fabric;
- moe: a mixture-of-experts GPT, one expert per NPU, Zipf-skewed expert popularity (imbalance 1.5): four
  all-to-alls of 8 MiB per NPU per layer;
- two_jobs: two ResNet-50 jobs of half the NPUs each, half of each job on every leaf (placement spread),
  so that each leaf sends two ring flows, one per job, over its uplinks at a time.

Every setting runs under the five policies, SEEDS seeds each (the scenario's seed: ECMP hashes and the
per-packet draws of typical NIC and switch latency jitter, docs/model.md 6.6). Each setting is a
resumable sweep in OUT/<setting>/ (run the command again to finish an interrupted one). Written:
OUT/hoti22_runs.csv (a row per run), OUT/hoti22.csv (a row per setting and policy: mean iteration time,
its 95 % interval (Student t) and standard deviation over seeds, and the ratio to PFC alone), a Markdown
table on stdout, and the figure OUT/hoti22.png (.pdf), copied to docs/hoti22.png with --docs.
"""

import argparse
import csv
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from roce_emu.results.seeds import spread  # noqa: E402
from roce_emu.sweep import SweepSpec, run_sweep  # noqa: E402
from tables import print_markdown, write_csv  # noqa: E402

#: the authors' ns-3 configuration (astra-sim/deprecated-astra-network-ns3, simulation/mix/config.txt): one rate
#: floor for every policy (MIN_RATE 100 Mb/s), DCQCN's timers and steps, HPCC's target and step, DCTCP's step.
#: TIMELY's own thresholds are the HPCC simulator's defaults, its steps the shared RATE_AI / RATE_HAI.
MIN_RATE = {"min_rate_mbps": 100}
POLICIES = {
    "PFC alone": {"algorithm": "none"},
    "DCQCN": {
        "algorithm": "dcqcn",
        "params": {
            "g": 1 / 256,  # EWMA_GAIN
            "alpha_interval_us": 1,  # ALPHA_RESUME_INTERVAL
            "decrease_interval_us": 4,  # RATE_DECREASE_INTERVAL
            "increase_interval_us": 900,  # RP_TIMER
            "fast_recovery_steps": 1,  # FAST_RECOVERY_TIMES
            "rate_ai_mbps": 50,  # RATE_AI
            "rate_hai_mbps": 100,  # RATE_HAI
            "clamp_target_rate": False,  # CLAMP_TARGET_RATE
            **MIN_RATE,
        },
    },
    "DCTCP": {"algorithm": "dctcp", "params": {"rate_ai_mbps": 1000, **MIN_RATE}},  # DCTCP_RATE_AI
    "TIMELY": {"algorithm": "timely", "params": {"rate_ai_mbps": 50, "rate_hai_mbps": 100, **MIN_RATE}},
    "HPCC": {"algorithm": "hpcc", "params": {"eta": 0.95, "max_stage": 0, "rate_ai_mbps": 50, **MIN_RATE}},
}
LABEL_OF = {cc["algorithm"]: label for label, cc in POLICIES.items()}

#: the authors' 128-NPU two-level Clos (simulation/mix/128_nodes_16_switch_topology.txt)
PAPER_LEAVES, PAPER_HOSTS_PER_LEAF, PAPER_OVERSUBSCRIPTION = 8, 16, 2
RATE_GBPS, HOST_DELAY_NS, UPLINK_DELAY_NS = 200, 5000, 12500

RESNET50 = {"name": "resnet50", "batch_per_rank": 32, "device_tflops": 100}
DLRM = {"name": "dlrm", "batch_per_rank": 512, "device_tflops": 100}
MOE = {  # scenarios/training_moe_rail.yaml's model, one expert per NPU
    "kind": "moe",
    "layers": 2,
    "hidden": 512,
    "heads": 8,
    "kv_heads": 2,
    "ffn_hidden": 1792,
    "seq_len": 4096,
    "vocab": 1000,
    "micro_batch": 1,
    "top_k": 2,
    "imbalance": 1.5,
    "device_tflops": 989,
}
SETTINGS = ("paper", "1:1", "4:1", "dlrm", "moe", "two_jobs")
TITLE = {
    "paper": "ResNet-50, 2:1 (paper)",
    "1:1": "ResNet-50, 1:1",
    "4:1": "ResNet-50, 4:1",
    "dlrm": "DLRM, 2:1",
    "moe": "MoE, 2:1",
    "two_jobs": "2 x ResNet-50, 2:1",
}


def scenario(setting: str, leaves: int = 2, hosts_per_leaf: int = 8, seed: int = 1, queue_pair: str = "flow") -> dict:
    """The scenario of one setting on LEAVES x HOSTS_PER_LEAF NPUs, under PFC alone (the sweep sets the policy);
    queue_pair: network.nic.queue_pair (flow: the simulator's queue pair per flow)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting '{setting}' (allowed: {', '.join(SETTINGS)})")
    oversubscription = {"1:1": 1, "4:1": 4}.get(setting, PAPER_OVERSUBSCRIPTION)
    npus = leaves * hosts_per_leaf
    doc: dict = {
        "name": f"hoti22_{setting.replace(':', 'to')}",
        "seed": seed,
        "topology": {
            "kind": "leaf_spine",
            "leaves": leaves,
            "spines": max(1, hosts_per_leaf // oversubscription),
            "hosts_per_leaf": hosts_per_leaf,
            "link": {"rate_gbps": RATE_GBPS, "delay_ns": HOST_DELAY_NS},
            "tiers": {"leaf_spine": {"delay_ns": UPLINK_DELAY_NS}},
        },
        "network": {
            "profile": "hpcc_ns3",
            "mtu_bytes": 1000,  # PACKET_PAYLOAD_SIZE
            "nic": {"ack_every_packets": 1, "queue_pair": queue_pair},  # L2_ACK_INTERVAL
            "switch": {
                "buffer_bytes": 32 * 2**20,  # BUFFER_SIZE 32 (MiB: third.cc multiplies by 1024 x 1024)
                # KMIN_MAP / KMAX_MAP / PMAX_MAP at 200 Gb/s (KB; switch-mmu.cc multiplies by 1000)
                "ecn": {"kmin_bytes": 600_000, "kmax_bytes": 2_400_000, "pmax": 0.2, "scale_with_rate": False},
            },
            "cc": POLICIES["PFC alone"],
            "jitter": {"nic": {"distribution": "exponential"}, "switch": {"distribution": "exponential"}},
        },
    }
    if setting == "two_jobs":
        job = {"training": {"model": RESNET50, "dp_algorithm": "ring"}, "iterations": 1}
        doc["jobs"] = [{"name": name, "placement": "spread", "ranks": npus // 2, "workload": job} for name in "ab"]
        return doc
    if setting == "moe":
        training = {"model": MOE | {"experts": npus, "ep": npus}, "dp": npus}
    else:
        training = {"model": DLRM if setting == "dlrm" else RESNET50, "dp_algorithm": "ring"}
    doc["workload"] = {"training": training, "iterations": 1}
    return doc


def iteration_ns(point_dir: Path, row: dict) -> float | None:
    """The run's mean iteration time; with jobs, the mean over the jobs of each job's."""
    if row["status"] != "finished":
        return None
    summary = json.loads((point_dir / "summary.json").read_text())
    jobs = summary.get("jobs")
    if jobs:
        return sum(j["mean_iteration_ns"] for j in jobs) / len(jobs)
    return float(summary["mean_iteration_ns"])


def run_setting(setting: str, args) -> list[dict]:
    """Run (or resume) the setting's sweep; a row per run."""
    scenarios = args.out / "scenarios"
    scenarios.mkdir(parents=True, exist_ok=True)
    path = scenarios / f"{setting.replace(':', 'to')}.yaml"
    doc = scenario(setting, args.leaves, args.hosts_per_leaf, queue_pair=args.queue_pair)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    sweep_dir = args.out / setting.replace(":", "to")
    began = time.perf_counter()
    ran, total, results = run_sweep(
        SweepSpec(path, {"network.cc": list(POLICIES.values())}, args.seeds), sweep_dir, jobs=args.jobs, progress=True
    )
    print(f"{setting}: {ran} of {total} runs in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    with open(results, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        ns = iteration_ns(sweep_dir / "points" / r["point"], r)
        out.append(
            {
                "setting": setting,
                "npus": args.leaves * args.hosts_per_leaf,
                "policy": LABEL_OF[r["network.cc.algorithm"]],
                "seed": int(r["seed"]),
                "status": r["status"],
                "iteration_ms": round(ns / 1e6, 4) if ns is not None else "",
                "pfc_pauses": r["pfc_pauses_sent"],
                "ecn_marks": r["ecn_marks"],
                "max_queue_bytes": r["max_queue_bytes"],
                "drops": r["data_packets_dropped"],
                "events": r["events"],
                "wall_s": r["wall_s"],
            }
        )
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """A row per setting and policy: the spread of the iteration time over seeds, and its mean / PFC alone's."""
    table = []
    for setting in dict.fromkeys(r["setting"] for r in runs):
        base = None
        for policy in POLICIES:
            times = [r["iteration_ms"] for r in runs if (r["setting"], r["policy"]) == (setting, policy)]
            st = spread([t for t in times if t != ""])
            base = st.mean if policy == "PFC alone" else base
            table.append(
                {
                    "setting": setting,
                    "policy": policy,
                    "seeds": st.n,
                    "iteration_ms": round(st.mean, 3),
                    "ci95_ms": round(st.half, 3) if st.n > 1 else "",
                    "sd_ms": round(st.sd, 3) if st.n > 1 else "",
                    "vs_pfc_alone": round(st.mean / base, 3) if base else "",
                }
            )
    return table


def figure(table: list[dict], path: Path) -> list[Path]:
    """One panel per setting: each policy's mean iteration time with its 95 % interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from roce_emu.results.figures import save

    settings = [s for s in SETTINGS if any(r["setting"] == s for r in table)]
    columns = min(3, len(settings))
    rows_of_panels = -(-len(settings) // columns)
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(3.2 * columns, 2.9 * rows_of_panels), squeeze=False)
    colours = plt.get_cmap("tab10").colors
    for ax, setting in zip(axes.flat, settings):
        rows = [r for r in table if r["setting"] == setting]
        means = [r["iteration_ms"] for r in rows]
        errs = [r["ci95_ms"] or 0.0 for r in rows]
        ax.bar(range(len(rows)), means, yerr=errs, capsize=3, color=colours[: len(rows)])
        ax.set_xticks(range(len(rows)), [r["policy"] for r in rows], fontsize=7, rotation=30, ha="right")
        ax.set_title(TITLE[setting], fontsize=8)
        ax.set_ylim(0, max(m + e for m, e in zip(means, errs)) * 1.15)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_ylabel("iteration (ms)", fontsize=7)
    for ax in list(axes.flat)[len(settings) :]:
        ax.set_visible(False)
    fig.suptitle("Mean iteration time over seeds, with its 95 % interval", fontsize=9)
    fig.tight_layout()
    return save(fig, path.parent, path.stem)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leaves", type=int, default=2, help=f"leaf switches (the paper's: {PAPER_LEAVES})")
    ap.add_argument(
        "--hosts-per-leaf", type=int, default=8, help=f"NPUs per leaf (the paper's: {PAPER_HOSTS_PER_LEAF})"
    )
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--queue-pair",
        choices=("flow", "channel", "connection"),
        default="flow",
        help="network.nic.queue_pair (flow: a queue pair per flow, as the simulator; channel: NCCL's connections)",
    )
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--only", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    ap.add_argument("--out", type=Path, default=ROOT / "sweeps" / "hoti22")
    ap.add_argument("--docs", action="store_true", help="copy the figure to docs/hoti22.png")
    args = ap.parse_args()
    runs = [row for setting in args.only for row in run_setting(setting, args)]
    write_csv(args.out / "hoti22_runs.csv", runs)
    table = summarize(runs)
    write_csv(args.out / "hoti22.csv", table)
    print_markdown(table)
    png = figure(table, args.out / "hoti22.png")[-1]
    if args.docs:
        shutil.copy(png, ROOT / "docs" / "hoti22.png")


if __name__ == "__main__":
    main()
