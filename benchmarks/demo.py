"""Main demo job: a short comparison on the benchmark data shipped with the repo.

Runs DyHPO, DeepPowerLaw and Syne Tune 0.16's RandomSearch, ASHA and BOHB on the 4 tasks in
benchmarks/data (2 LCBench, 2 TaskSet; 300 configurations each), seed 0, a budget of
10 x max fidelity epochs each, on Syne Tune's simulator with one worker. Prints one table (mean
over the runs of each method) and the paths of the plots, written to ``results/demo/``; library
warnings and log records go to ``results/demo/warnings.log``. Finished runs are reused.

    python benchmarks/demo.py [--seeds 0 1] [--budget-factor 10] [--n-jobs 2]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# run as a script, sys.path[0] is benchmarks/ itself, whose modules have generic names
# (runner, metrics, report): import them as the benchmarks package from the repo root instead
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

import pandas as pd  # noqa: E402

DATA = [REPO / "benchmarks/data/lcbench", REPO / "benchmarks/data/taskset"]
METHODS = ["DyHPO", "DeepPowerLaw", "RandomSearch", "ASHA", "BOHB"]


def demo_table(long: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` of the demo's runs
    :return: Per method (in :data:`METHODS` order): runs, mean anytime regret at 25/50/100 % of
        the budget, mean fully-trained regret at 100 %, mean trials trained to ``max_t``
    """
    rows = []
    for method in [m for m in METHODS if m in set(long["method"])] + sorted(set(long["method"]) - set(METHODS)):
        g = long[long["method"] == method]
        end = g[g["budget_point"] == 1.0]
        rows.append({
            "method": method, "runs": len(end),
            **{f"regret {int(100 * f)} %": g[g["budget_point"] == f]["regret"].mean() for f in (0.25, 0.5, 1.0)},
            "fully trained 100 %": end["trained_regret"].mean(),
            "trials trained": end["trials_trained"].mean(),
        })
    return pd.DataFrame(rows)


def format_table(table: pd.DataFrame) -> str:
    """Plain-text columns, three decimals for regrets, one for trials."""
    cells = [[str(v) if not isinstance(v, float) else (f"{v:.1f}" if c == "trials trained" else f"{v:.3f}")
              for c, v in row.items()] for _, row in table.iterrows()]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(table.columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    return "\n".join([line(list(table.columns))] + [line(r) for r in cells])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--budget-factor", type=float, default=10.0, help="epoch budget = factor x max fidelity")
    p.add_argument("--n-jobs", type=int, default=2, help="parallel processes")
    p.add_argument("--results-dir", type=Path, default=REPO / "results/demo")
    args = p.parse_args(argv)

    from benchmarks.blackboxes import list_tasks, load_benchmark
    from benchmarks.plots import plot_regret_curves
    from benchmarks.report import load_runs, long_table
    from benchmarks.runner import make_grid, run_dir, run_grid

    pairs = [(str(source), task) for source in DATA for task in list_tasks(source)]
    budgets = {(s, t): int(round(args.budget_factor * load_benchmark(s, task=t)[0].max_t)) for s, t in pairs}
    specs = make_grid(pairs, METHODS, args.seeds, budgets)
    print(
        f"{len(specs)} runs: {len(METHODS)} methods x {len(pairs)} tasks x {len(args.seeds)} seeds, "
        f"{args.budget_factor:g} x max_t epochs each, 1 worker"
    )
    _, errors = run_grid(specs, args.results_dir, n_jobs=args.n_jobs)
    for spec, msg in errors:
        print(f"FAILED {spec}: {msg.splitlines()[0]}", file=sys.stderr)
    wanted = {run_dir(s, args.results_dir) for s in specs}
    runs = [r for r in load_runs(args.results_dir) if run_dir(_spec_of(r), args.results_dir) in wanted]
    if not runs:
        return 1
    print(
        "\nMean normalised regret over the runs (0 = the table's best; anytime: best value seen; "
        "fully trained: the best configuration trained to max_t), trials trained to max_t per run:\n"
    )
    print(format_table(demo_table(long_table(runs))))
    figures = args.results_dir / "report"
    figures.mkdir(parents=True, exist_ok=True)
    paths = plot_regret_curves(runs, figures) + plot_regret_curves(runs, figures, column="trained_incumbent")
    print("\nPlots (regret against epochs, per benchmark):\n" + "\n".join(f"  {path}" for path in sorted(paths)))
    write_timeline(args.results_dir)
    return 1 if errors else 0


def write_timeline(results_dir: Path) -> None:
    """The report (``syne-dyhpo report``) of the demo's first DyHPO run: its timeline."""
    from syne_dyhpo.report import make_report

    logs = sorted(results_dir.glob("*/*/DyHPO/*/decision_log.csv"))
    if logs:
        report = make_report(logs[0].parent)
        print(f"\nWhat DyHPO did in {logs[0].parent}:\n" + "\n".join(f"  {line}" for line in report.paths_lines()))


def _spec_of(run):
    from benchmarks.runner import RunSpec

    s = run.summary
    return RunSpec(s["method"], s["source"], s["task"], s["seed"], s["budget_epochs"], s["n_workers"])


if __name__ == "__main__":
    sys.exit(main())
