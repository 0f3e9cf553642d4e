"""Why HPCC slows ResNet-50's per-layer all-reduces: iteration time, how far apart one ring
step's flows finish, and how busy the host uplinks are, under PFC alone, HPCC, and HPCC with a
100x additive step.

    python benchmarks/hpcc_fairness.py

One iteration of scenarios/training_resnet50.yaml (k=4 fat-tree, 16 ranks, 100 Gb/s) with
bucket_bytes 0 (54 all-reduces, run at once: concurrent_all_reduces) and a queue pair per flow
(network.nic.queue_pair: flow), so that the all-reduces in flight share each NIC round robin.
"step spread" is, for the largest all-reduce (grad_ar.fc), the median over its 30 ring steps of
the last minus the first finish of the step's 16 flows. "uplink busy" is the bytes each host
sends over 100 Gb/s, divided by the time from the first collective flow's start to the last
one's finish.
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roce_emu.api import prepare, run  # noqa: E402

CASES = {
    "PFC alone": ["network.cc.algorithm=none"],
    "HPCC": ["network.cc.algorithm=hpcc"],
    "HPCC, R_AI x 100": ["network.cc.algorithm=hpcc", "network.cc.params.rate_ai_mbps=4000"],
}


def main() -> None:
    print("| case | iteration (ms) | ratio to PFC alone | step spread, grad_ar.fc (us) | uplink busy |")
    print("|---|---|---|---|---|")
    base = None
    for name, overrides in CASES.items():
        prepared = prepare(
            ROOT / "scenarios" / "training_resnet50.yaml",
            [
                "workload.iterations=1",
                "workload.training.bucket_bytes=0",
                "workload.training.concurrent_all_reduces=true",
                "network.nic.queue_pair=flow",  # the all-reduces share each NIC round robin
                *overrides,
            ],
        )
        result = run(prepared, write=False, progress=False)
        flow = result.outcome.world.flow
        (fc,) = [c for c in prepared.workload.collectives if c.name == "grad_ar.fc"]
        ranks = len(fc.ranks)
        finish = flow["finish_ps"][np.array(fc.flows)].reshape(-1, ranks)  # one row per ring step
        spread_us = float(np.median(finish.max(axis=1) - finish.min(axis=1))) / 1e6
        mine = np.array([k for c in prepared.workload.collectives for k in c.flows])
        span_s = (flow["finish_ps"][mine].max() - flow["start_ps"][mine].min()) / 1e12
        per_host = np.bincount(flow["src"][mine], weights=flow["size_bytes"][mine])
        busy = float(per_host.mean() * 8 / 100e9 / span_s)
        iteration = result.summary["mean_iteration_ns"] / 1e6
        base = base or iteration
        print(f"| {name} | {iteration:.2f} | {iteration / base:.3f} | {spread_us:.0f} | {busy:.0%} |", flush=True)


if __name__ == "__main__":
    main()
