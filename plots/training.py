"""A training run (timeline.csv, collectives.csv): each rank's compute, exposed communication and
idle time through the run, and when each collective ran with its bus bandwidth.

    python plots/training.py runs/training_resnet50 [--out figures/]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import run_script  # noqa: E402
from roce_emu.results.figures import collectives_figure, timeline_figure  # noqa: E402

MAKERS = {"rank_timeline": timeline_figure, "collective_times": collectives_figure}

if __name__ == "__main__":
    run_script(__doc__, MAKERS)
