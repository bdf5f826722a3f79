"""Issue 15's targets from a report's ``long.csv``: in each family (LCBench tasks pooled,
TaskSet) and number of workers, each of ours against the better of ASHA and BOHB at 25, 50 and
100 % of the budget, in both regrets (mean over task-seed runs), and ours relative to ASHA at
100 %::

    PYTHONPATH=. python benchmarks/targets.py benchmarks/figures/long.csv
    PYTHONPATH=. python benchmarks/targets.py results/dev/report-all/long.csv --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.ablation import FAMILIES

OURS = ("DyHPO", "DeepPowerLaw")
REFERENCES = ("ASHA", "BOHB")
KINDS = {"regret": "anytime", "trained_regret": "fully trained"}
BUDGETS = (0.25, 0.5, 1.0)


def target_table(long: pd.DataFrame) -> pd.DataFrame:
    """One row per (family, workers, regret kind, method of ours): its mean regret and the
    better reference's at each budget point, on the task-seed runs that every method of the
    cell has, and whether it is at or below."""
    long = long.assign(family=long["benchmark"].map(FAMILIES).fillna(long["benchmark"]))
    rows = []
    for (fam, workers), cell in long.groupby(["family", "n_workers"], sort=True):
        present = [m for m in (*OURS, *REFERENCES) if m in set(cell["method"])]
        if not any(m in present for m in OURS) or not any(m in present for m in REFERENCES):
            continue
        runs = cell[cell["method"].isin(present)]
        common = runs.groupby(["task", "seed"])["method"].nunique()
        common = common[common == len(present)].index
        runs = runs.set_index(["task", "seed"]).loc[common].reset_index()
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
    args = p.parse_args()
    long = pd.read_csv(args.long_csv)
    if args.seeds is not None:
        long = long[long["seed"].isin(args.seeds)]
    print(to_markdown(target_table(long)))


if __name__ == "__main__":
    main()
