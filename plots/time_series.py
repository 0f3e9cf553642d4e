"""Queues and rates over time of one run with traces (traces_queue.csv, traces_rate.csv).

roce-emu run scenarios/cc_dcqcn.yaml && python plots/time_series.py runs/cc_dcqcn
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import run_script  # noqa: E402
from roce_emu.results.figures import queue_figure, rate_figure  # noqa: E402

MAKERS = {"queues": queue_figure, "rates": rate_figure}

if __name__ == "__main__":
    run_script(__doc__, MAKERS)
