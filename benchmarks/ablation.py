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
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from benchmarks.report import signed_rank_test

FAMILIES = {"lcbench": "LCBench", "lcbench-extra": "LCBench", "taskset": "TaskSet"}
POINTS = (0.25, 0.5, 1.0)


def paired_table(long: pd.DataFrame, variant: str, reference: str) -> str:
    """Markdown table of ``variant`` against ``reference`` on their common runs."""
    df = long.assign(family=long["benchmark"].map(FAMILIES).fillna(long["benchmark"]))
    keys = ["family", "task", "seed", "n_workers", "budget_point"]
    a = df[df["method"] == variant].set_index(keys)
    b = df[df["method"] == reference].set_index(keys)
    common = a.index.intersection(b.index)
    if common.empty:
        return f"(no common runs of {variant} and {reference})\n"
    a, b = a.loc[common], b.loc[common]
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("long_csv", help="long.csv of a report of run_benchmarks.py")
    p.add_argument("comparisons", nargs="+", help="VARIANT:REFERENCE")
    args = p.parse_args(argv)
    long = pd.read_csv(args.long_csv)
    for comparison in args.comparisons:
        if ":" not in comparison:
            print(f"comparison must be VARIANT:REFERENCE, got {comparison!r}", file=sys.stderr)
            return 2
        variant, reference = comparison.split(":", 1)
        print(paired_table(long, variant, reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
