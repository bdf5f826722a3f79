"""Main demo job: a short comparison on the benchmark data shipped with the repo.

Runs DyHPO, DeepPowerLaw and Syne Tune 0.16's RandomSearch, ASHA and BOHB on the 4 tasks in
benchmarks/data (2 LCBench, 2 TaskSet; 300 configurations each), 2 seeds, a budget of
10 x max fidelity epochs each, on Syne Tune's simulator; prints the regret table and writes
it with the plots to results/demo/ (a few minutes on 2 cores). Finished runs are reused.

    python benchmarks/demo.py [--seeds 0 1] [--budget-factor 10] [--n-jobs 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# run as a script, sys.path[0] is benchmarks/ itself, whose modules have generic names
# (runner, metrics, report): import them as the benchmarks package from the repo root instead
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks import run_benchmarks  # noqa: E402

DEFAULTS = [
    "--data", str(REPO / "benchmarks/data/lcbench"), str(REPO / "benchmarks/data/taskset"),
    "--methods", "DyHPO", "DeepPowerLaw", "RandomSearch", "ASHA", "BOHB",
    "--seeds", "0", "1",
    "--budget-factor", "10",
    "--results-dir", str(REPO / "results/demo"),
]


def write_timeline(results_dir: Path) -> None:
    """The report (``syne-dyhpo report``) of the demo's first DyHPO run: its timeline."""
    from syne_dyhpo.report import make_report

    logs = sorted(results_dir.glob("*/*/DyHPO/*/decision_log.csv"))
    if logs:
        report = make_report(logs[0].parent)
        print(f"\nWhat DyHPO did in {logs[0].parent}: " + " ".join(report.paths_lines()))


if __name__ == "__main__":
    status = run_benchmarks.main(DEFAULTS + sys.argv[1:])
    write_timeline(REPO / "results/demo")
    sys.exit(status)
