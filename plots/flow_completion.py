"""Flow completion of one run (flows.csv): FCT slowdown CDF and percentiles by flow size.

python plots/flow_completion.py runs/fat_tree_permutation [--out figures/]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import run_script  # noqa: E402
from roce_emu.results.figures import fct_figure  # noqa: E402

MAKERS = {"fct_slowdown": fct_figure}

if __name__ == "__main__":
    run_script(__doc__, MAKERS)
