"""Issue 15's targets from a report's ``long.csv``: in each family (LCBench tasks pooled,
TaskSet) and number of workers, each of ours against the better of ASHA and BOHB at 25, 50 and
100 % of the budget, in both regrets (mean over task-seed runs), and ours relative to ASHA at
100 %::

    PYTHONPATH=. python benchmarks/targets.py benchmarks/figures/long.csv
    PYTHONPATH=. python benchmarks/targets.py results/dev/report-all/long.csv --seeds 0 1 2 3 4

With ``--draws N`` it also estimates how often each cell would hold on a draw of tasks and
seeds of another size, such as the held-back check of issue 15 (10 LCBench and 8 TaskSet tasks,
seeds 0-2): ``N`` times, tasks are drawn with replacement from the development tasks of the
family and seeds without replacement from the seeds run, the same draw for every method (the
comparison stays paired), and the cell is checked on the draw's means::

    PYTHONPATH=. python benchmarks/targets.py R/report09/long.csv --draws 2000 \\
        --draw-tasks LCBench=10 TaskSet=8 --draw-seeds 3
"""

from __future__ import annotations

import argparse
import functools

import numpy as np
import pandas as pd

from benchmarks.ablation import FAMILIES, KINDS, check_draw_counts, draw_task_seed_indices, parse_draw_tasks

OURS = ("DyHPO", "DeepPowerLaw")
REFERENCES = ("ASHA", "BOHB")
BUDGETS = (0.25, 0.5, 1.0)
#: issue 15's bound on TaskSet at 100 %: at most this multiple of ASHA's regret
ASHA_RATIO_TARGET = 0.7


def _common_runs(long: pd.DataFrame) -> dict[tuple[str, int], tuple[list[str], pd.DataFrame]]:
    """Per (family, workers): the methods present and their runs on the task-seed pairs that
    every one of them has."""
    long = long.assign(family=long["benchmark"].map(FAMILIES).fillna(long["benchmark"]))
    cells = {}
    for (fam, workers), cell in long.groupby(["family", "n_workers"], sort=True):
        present = [m for m in (*OURS, *REFERENCES) if m in set(cell["method"])]
        if not any(m in present for m in OURS) or not any(m in present for m in REFERENCES):
            continue
        runs = cell[cell["method"].isin(present)]
        common = runs.groupby(["task", "seed"])["method"].nunique()
        common = common[common == len(present)].index
        cells[(fam, workers)] = present, runs.set_index(["task", "seed"]).loc[common].reset_index()
    return cells


def target_table(long: pd.DataFrame) -> pd.DataFrame:
    """One row per (family, workers, regret kind, method of ours): its mean regret and the
    better reference's at each budget point, on the task-seed runs that every method of the
    cell has, and whether it is at or below."""
    rows = []
    for (fam, workers), (present, runs) in _common_runs(long).items():
        common = runs[["task", "seed"]].drop_duplicates()
        means = runs.groupby(["method", "budget_point"])[list(KINDS)].mean()
        for column, kind in KINDS.items():
            for method in (m for m in OURS if m in present):
                row = {"family": fam, "workers": workers, "regret": kind, "method": method, "runs": len(common)}
                for b in BUDGETS:
                    ours = means.loc[(method, b), column]
                    best_ref = min(means.loc[(r, b), column] for r in REFERENCES if r in present)
                    row[f"ours@{b:.0%}"], row[f"reference@{b:.0%}"] = ours, best_ref
                    row[f"met@{b:.0%}"] = bool(ours <= best_ref)
                if "ASHA" in present:
                    row["vs ASHA@100%"] = means.loc[(method, 1.0), column] / means.loc[("ASHA", 1.0), column]
                rows.append(row)
    return pd.DataFrame(rows)


def holding_rates(
    long: pd.DataFrame,
    tasks_per_family: dict[str, int],
    seeds_per_draw: int,
    draws: int = 2000,
    random_seed: int = 0,
) -> pd.DataFrame:
    """How often each cell of :func:`target_table` holds on random draws of tasks and seeds.

    :param long: A report's ``long.csv``
    :param tasks_per_family: Tasks per draw of each family (drawn with replacement from its
        tasks); a family not named is drawn at its own number of tasks
    :param seeds_per_draw: Seeds per draw (without replacement; the same seeds for every task
        of the draw, as a benchmark protocol runs them)
    :param draws: Number of draws
    :param random_seed: Seed of the draws
    :return: One row per (family, workers, regret kind, method of ours), with ``holds@B``: the
        share of draws in which its mean regret is at or below the better reference's
    """
    check_draw_counts(seeds_per_draw, draws)
    rng = np.random.RandomState(random_seed)
    rows = []
    for (fam, workers), (present, runs) in _common_runs(long).items():
        tasks = sorted(set(runs["task"]))
        seeds = sorted(set(runs["seed"]))
        n = tasks_per_family.get(fam, len(tasks))
        task_idx, seed_idx = draw_task_seed_indices(
            rng, len(tasks), len(seeds), n, seeds_per_draw, draws, cell=f"{fam} with {workers} workers")
        task_idx, seed_idx = task_idx[:, :, None], seed_idx[:, None, :]  # broadcast to (draws, tasks, seeds)

        @functools.cache  # the references' means are shared by both of ours
        def draw_means(method: str, column: str, budget: float) -> np.ndarray:
            # (tasks, seeds) with NaN where a task lacks a seed: the draw's mean skips those
            grid = runs[(runs["method"] == method) & (runs["budget_point"] == budget)].pivot_table(
                index="task", columns="seed", values=column).reindex(index=tasks, columns=seeds)
            with np.errstate(invalid="ignore"):
                return np.nanmean(grid.to_numpy()[task_idx, seed_idx], axis=(1, 2))

        for column, kind in KINDS.items():
            for method in (m for m in OURS if m in present):
                row = {"family": fam, "workers": workers, "regret": kind, "method": method, "tasks": n,
                       "seeds": seeds_per_draw, "draws": draws}
                for b in BUDGETS:
                    best_ref = np.min([draw_means(r, column, b) for r in REFERENCES if r in present], axis=0)
                    row[f"holds@{b:.0%}"] = float(np.mean(draw_means(method, column, b) <= best_ref))
                if "ASHA" in present:
                    ratio_bound = ASHA_RATIO_TARGET * draw_means("ASHA", column, 1.0)
                    row["within ASHA ratio@100%"] = float(np.mean(draw_means(method, column, 1.0) <= ratio_bound))
                rows.append(row)
    return pd.DataFrame(rows)


def holding_markdown(rates: pd.DataFrame) -> str:
    lines = ["| benchmark | workers | regret | method | tasks x seeds per draw | 25 % | 50 % | 100 % "
             f"| <= {ASHA_RATIO_TARGET}x ASHA at 100 % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in rates.iterrows():
        cells = " | ".join(f"{r[f'holds@{b:.0%}']:.2f}" for b in BUDGETS)
        ratio = r.get("within ASHA ratio@100%", np.nan)
        lines.append(f"| {r['family']} | {r['workers']} | {r['regret']} | {r['method']} | "
                     f"{r['tasks']} x {r['seeds']} | {cells} | {'' if pd.isna(ratio) else f'{ratio:.2f}'} |")
    expected = sum(rates[f"holds@{b:.0%}"].sum() for b in BUDGETS)
    lines.append("")
    lines.append(f"Share of {rates['draws'].iloc[0] if len(rates) else 0} draws in which the cell holds "
                 "(ours at or below the better of ASHA and BOHB, mean regret of the draw); "
                 f"cells expected to hold on a draw: {expected:.1f} of {len(rates) * len(BUDGETS)}.")
    return "\n".join(lines)


def to_markdown(table: pd.DataFrame) -> str:
    lines = ["| benchmark | workers | regret | method | runs | 25 % | 50 % | 100 % | / ASHA at 100 % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        cells = []
        for b in BUDGETS:
            met = "yes" if r[f"met@{b:.0%}"] else "**no**"
            cells.append(f"{r[f'ours@{b:.0%}']:.3f} / {r[f'reference@{b:.0%}']:.3f} {met}")
        ratio = f"{r['vs ASHA@100%']:.2f}" if "vs ASHA@100%" in r and pd.notna(r["vs ASHA@100%"]) else ""
        lines.append(f"| {r['family']} | {r['workers']} | {r['regret']} | {r['method']} | {r['runs']} | "
                     + " | ".join(cells) + f" | {ratio} |")
    met = sum(int(r[f"met@{b:.0%}"]) for _, r in table.iterrows() for b in BUDGETS)
    lines.append("")
    lines.append(f"{met} of {len(table) * len(BUDGETS)} cells at or below the better of ASHA and BOHB "
                 "(ours / better reference, mean regret).")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("long_csv")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="only these seeds")
    p.add_argument("--draws", type=int, default=0, help="also estimate how often each cell holds on this many draws")
    p.add_argument("--draw-tasks", nargs="*", default=[], metavar="FAMILY=N",
                   help="tasks per draw of a family (e.g. LCBench=10 TaskSet=8; default: its own number)")
    p.add_argument("--draw-seeds", type=int, default=3, help="seeds per draw (default 3)")
    args = p.parse_args()
    long = pd.read_csv(args.long_csv)
    if args.seeds is not None:
        long = long[long["seed"].isin(args.seeds)]
    print(to_markdown(target_table(long)))
    if args.draws > 0:
        try:
            tasks = parse_draw_tasks(args.draw_tasks)
        except ValueError as error:
            p.error(str(error))
        print()
        print(holding_markdown(holding_rates(long, tasks, args.draw_seeds, args.draws)))


if __name__ == "__main__":
    main()
