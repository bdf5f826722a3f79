"""Paired comparison of method variants from a benchmark report (``long.csv`` of
``run_benchmarks.py``): the tables of ``benchmarks/RESULTS.md`` that weigh an option against
the default.

Each comparison is ``VARIANT:REFERENCE`` (method names as in the runner). Only (task, seed)
pairs both have are used, per benchmark family (LCBench: lcbench + lcbench-extra; TaskSet)
and number of workers. For the anytime and the fully-trained regret at 25/50/100 % of the
budget it prints both means and the Wilcoxon signed-rank p-value of the paired differences
(``benchmarks.report.signed_rank_test``: two-sided, ties dropped; "-" when all are ties)::

    PYTHONPATH=. python benchmarks/ablation.py results/dev/report/long.csv \\
        DyHPO-no-completion:DyHPO DeepPowerLaw-no-completion:DeepPowerLaw DyHPO-believer:DyHPO

With ``--draws N`` it also estimates how often a check of another size (issue 15's held-back
check: 10 LCBench tasks, seeds 0-2) would find the variant behind the reference beyond seed
noise: ``N`` times, tasks are drawn with replacement from the family's common tasks and seeds
without replacement from their common seeds, and the draw counts as "behind" when the
variant's mean is above the reference's and the signed-rank test on the draw's pairs gives
p < 0.05 (a task drawn twice enters its pairs twice)::

    PYTHONPATH=. python benchmarks/ablation.py R/report/long.csv DeepPowerLaw:DeepPowerLaw-v0.1 \\
        --draws 1000 --draw-tasks LCBench=10 --draw-seeds 3
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from benchmarks.report import signed_rank_test

FAMILIES = {"lcbench": "LCBench", "lcbench-extra": "LCBench", "taskset": "TaskSet"}
POINTS = (0.25, 0.5, 1.0)
KINDS = {"regret": "anytime", "trained_regret": "fully trained"}


def common_runs(long: pd.DataFrame, variant: str, reference: str, keys: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows of ``variant`` and of ``reference`` on the ``keys`` both have (``family`` among
    them: LCBench folders pooled), indexed by ``keys`` in the same order."""
    df = long.assign(family=long["benchmark"].map(FAMILIES).fillna(long["benchmark"]))
    a = df[df["method"] == variant].set_index(keys)
    b = df[df["method"] == reference].set_index(keys)
    common = a.index.intersection(b.index)
    return a.loc[common], b.loc[common]


def paired_table(long: pd.DataFrame, variant: str, reference: str) -> str:
    """Markdown table of ``variant`` against ``reference`` on their common runs."""
    a, b = common_runs(long, variant, reference, ["family", "task", "seed", "n_workers", "budget_point"])
    common = a.index
    if common.empty:
        return f"(no common runs of {variant} and {reference})\n"
    lines = [
        f"**{variant}** vs **{reference}** (means over common task-seed pairs; p: Wilcoxon signed-rank)",
        "",
        "| family | workers | pairs | regret at 25 / 50 / 100 % (p) | fully-trained regret at 25 / 50 / 100 % (p) |",
        "|---|---|---|---|---|",
    ]
    groups = sorted({(f, w) for f, _, _, w, _ in common})
    for family, workers in groups:
        cells, pairs = [], 0
        for column in ("regret", "trained_regret"):
            entries = []
            for point in POINTS:
                sel = (common.get_level_values("family") == family) & (common.get_level_values("n_workers") == workers) & (
                    common.get_level_values("budget_point") == point
                )
                x, y = a[column].to_numpy()[sel], b[column].to_numpy()[sel]
                pairs = len(x)
                test = signed_rank_test(x, y)
                pvalue = "-" if test["ties"] == test["pairs"] else f"{test['p']:.2f}"
                entries.append(f"{x.mean():.4f} / {y.mean():.4f} ({pvalue})")
            cells.append("<br>".join(entries))
        lines.append(f"| {family} | {workers} | {pairs} | {cells[0]} | {cells[1]} |")
    lines.append("")
    lines.append(f"(each line: {variant} / {reference}; 25, 50 and 100 % of the budget from top to bottom)")
    return "\n".join(lines) + "\n"


def check_draw_counts(seeds_per_draw: int, draws: int) -> None:
    """Refuses a draw of no seed, or no draw, naming the argument."""
    if seeds_per_draw < 1:
        raise ValueError(f"seeds_per_draw must be >= 1, got {seeds_per_draw}")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")


def draw_task_seed_indices(
    rng: np.random.RandomState, num_tasks: int, num_seeds: int, tasks_per_draw: int, seeds_per_draw: int, draws: int,
    cell: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of ``draws`` draws of tasks (with replacement) and seeds (without replacement;
    the same seeds for every task of a draw, as a benchmark protocol runs them).

    :param cell: Names the runs drawn from in the error when they have too few seeds
    :return: Task indices ``(draws, tasks_per_draw)`` and seed indices ``(draws, seeds_per_draw)``
    """
    if seeds_per_draw > num_seeds:
        raise ValueError(f"seeds_per_draw={seeds_per_draw} but {cell} has {num_seeds} seeds")
    task_idx = rng.randint(num_tasks, size=(draws, tasks_per_draw))
    seed_idx = rng.rand(draws, num_seeds).argsort(axis=1)[:, :seeds_per_draw]
    return task_idx, seed_idx


def parse_draw_tasks(items: list[str]) -> dict[str, int]:
    """``--draw-tasks`` values ``FAMILY=N`` as ``{FAMILY: N}``; a bad one is refused by name."""
    tasks_per_family = {}
    for item in items:
        family, _, count = item.partition("=")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--draw-tasks takes FAMILY=N with N >= 1, got {item!r}")
        tasks_per_family[family] = int(count)
    return tasks_per_family


def behind_rates(
    long: pd.DataFrame,
    variant: str,
    reference: str,
    tasks_per_family: dict[str, int],
    seeds_per_draw: int,
    draws: int = 1000,
    alpha: float = 0.05,
    random_seed: int = 0,
) -> pd.DataFrame:
    """How often ``variant`` would be behind ``reference`` beyond seed noise on random draws of
    tasks and seeds of their common runs.

    :param long: ``long.csv`` of a report
    :param variant: Method name
    :param reference: Method name
    :param tasks_per_family: Tasks per draw of each family (with replacement from its common
        tasks); a family not named is drawn at its own number of tasks
    :param seeds_per_draw: Seeds per draw (without replacement; the same for every task)
    :param draws: Number of draws
    :param alpha: A draw is "behind" when the variant's mean regret is above the reference's
        and the two-sided signed-rank p-value on the draw's pairs is below ``alpha``
    :param random_seed: Seed of the draws
    :return: One row per family, workers and regret: the draw's size, and per budget point the
        share of draws that are behind (``behind@25%`` ...) and of draws whose variant mean is
        at or below the reference's (``level or ahead@25%`` ...)
    """
    check_draw_counts(seeds_per_draw, draws)
    a, b = common_runs(long, variant, reference, ["family", "n_workers", "task", "seed", "budget_point"])
    common = a.index
    rng = np.random.RandomState(random_seed)
    rows = []
    for family, workers in sorted({(f, w) for f, w, *_ in common}):
        tasks = sorted({t for f, w, t, *_ in common if (f, w) == (family, workers)})
        seeds = sorted({s for f, w, _, s, _ in common if (f, w) == (family, workers)})
        n = tasks_per_family.get(family, len(tasks))
        task_draws, seed_draws = draw_task_seed_indices(
            rng, len(tasks), len(seeds), n, seeds_per_draw, draws, cell=f"{family} with {workers} workers")
        for column in KINDS:
            row = {"family": family, "workers": workers, "regret": KINDS[column], "tasks": n, "seeds": seeds_per_draw,
                   "draws": draws}
            for point in POINTS:
                # (tasks, seeds) grids of both methods' regrets; NaN where a pair is missing
                grid = {
                    name: frame[column].xs((family, workers, point), level=("family", "n_workers", "budget_point"))
                    .unstack("seed").reindex(index=tasks, columns=seeds).to_numpy()
                    for name, frame in (("variant", a), ("reference", b))
                }
                behind = level = 0
                for task_idx, seed_idx in zip(task_draws, seed_draws):
                    x = grid["variant"][np.ix_(task_idx, seed_idx)].ravel()
                    y = grid["reference"][np.ix_(task_idx, seed_idx)].ravel()
                    present = ~(np.isnan(x) | np.isnan(y))
                    x, y = x[present], y[present]
                    if x.mean() <= y.mean():
                        level += 1
                    elif signed_rank_test(x, y)["p"] < alpha:
                        behind += 1
                row[f"behind@{point:.0%}"] = behind / draws
                row[f"level or ahead@{point:.0%}"] = level / draws
            rows.append(row)
    return pd.DataFrame(rows)


def behind_markdown(rates: pd.DataFrame, variant: str, reference: str) -> str:
    """Markdown table of :func:`behind_rates`."""
    lines = [f"**{variant}** behind **{reference}** beyond seed noise on draws (share of draws; "
             "in brackets: share with the variant's mean at or below the reference's)", "",
             "| family | workers | regret | tasks x seeds per draw | 25 % | 50 % | 100 % |", "|---|---|---|---|---|---|---|"]
    for _, r in rates.iterrows():
        cells = [f"{r[f'behind@{p:.0%}']:.2f} ({r[f'level or ahead@{p:.0%}']:.2f})" for p in POINTS]
        lines.append(f"| {r['family']} | {r['workers']} | {r['regret']} | {r['tasks']} x {r['seeds']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"({rates['draws'].iloc[0] if len(rates) else 0} draws)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("long_csv", help="long.csv of a report of run_benchmarks.py")
    p.add_argument("comparisons", nargs="+", help="VARIANT:REFERENCE")
    p.add_argument("--draws", type=int, default=0,
                   help="also estimate on this many draws how often the variant would be behind (default 0: not)")
    p.add_argument("--draw-tasks", nargs="*", default=[], metavar="FAMILY=N",
                   help="tasks per draw of a family, e.g. LCBench=10 (default: the family's own number)")
    p.add_argument("--draw-seeds", type=int, default=3, help="seeds per draw (default 3)")
    args = p.parse_args(argv)
    try:
        tasks_per_family = parse_draw_tasks(args.draw_tasks)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    long = pd.read_csv(args.long_csv)
    for comparison in args.comparisons:
        if ":" not in comparison:
            print(f"comparison must be VARIANT:REFERENCE, got {comparison!r}", file=sys.stderr)
            return 2
        variant, reference = comparison.split(":", 1)
        print(paired_table(long, variant, reference))
        if args.draws:
            rates = behind_rates(long, variant, reference, tasks_per_family, args.draw_seeds, args.draws)
            print(behind_markdown(rates, variant, reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
