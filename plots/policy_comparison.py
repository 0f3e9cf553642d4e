"""Congestion-control policies compared across a sweep (results.csv): time per policy per topology
normalised to PFC only, the iteration breakdown, and PFC pauses and ECN marks per policy.

    python plots/policy_comparison.py sweeps/cc_ablation [--out figures/]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import run_script  # noqa: E402
from roce_emu.results.figures import breakdown_figure, pauses_marks_figure, policy_time_figure  # noqa: E402

MAKERS = {"policy_time": policy_time_figure, "comm_breakdown": breakdown_figure, "pauses_marks": pauses_marks_figure}

if __name__ == "__main__":
    run_script(__doc__, MAKERS)
