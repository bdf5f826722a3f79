"""Pairs the runs of two results folders (or two methods) by task and seed: the paired tests that
``docs/deviations.md`` reports for a rule against another.

    PYTHONPATH=. python -m benchmarks.pair BASE_DIR NEW_DIR [--protocol wallclock] \\
        [--methods DyHPO-costs ...] [--seeds 0 1 2] [--out FILE]
    PYTHONPATH=. python -m benchmarks.pair DIR DIR --base-method DyHPO --new-method DyHPO-costs
    PYTHONPATH=. python -m benchmarks.pair DIR DIR --base-method BOHB --new-method DyHPO \
        --by-task --tasks car credit-g

Without ``--base-method``/``--new-method`` each method found in both folders is paired with
itself (the runs of a rule before and after a change, run into two folders). With them, the
one method of ``BASE_DIR`` is paired with the other of ``NEW_DIR`` (which may be the same
folder): a variant against the default.

A pair is one (task, seed) both sides ran, in the same family (LCBench's two data folders are
one family, and TaskSet's), number of workers and, for the wall-clock protocol, start delay.
Each cell (regret kind and share of the budget) gives the means of the pairs, base -> new, and
p of the two-sided Wilcoxon signed-rank test (:func:`benchmarks.report.signed_rank_test`). The
wall-clock protocol also gives job starts per epoch within the budget. With ``--by-task`` each
task is a cell of its own, its pairs the seeds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchmarks.provenance import versions_text
from benchmarks.report import (
    FRACTIONS,
    REGRET_KINDS,
    load_runs,
    long_table,
    signed_rank_test,
    to_markdown,
    wallclock_long_table,
)
from benchmarks.results import _as_families, _p, _pct
from benchmarks.wallclock import PROTOCOLS, WALLCLOCK

#: columns that name a cell (a row of the output) besides the method
CELL = ["benchmark", "n_workers", "start_delay"]
#: columns that name a pair within a cell
PAIR = ["task", "seed"]
#: columns that name a run
RUN = CELL + ["method"] + PAIR


def _long(folder: str, protocol: str, fractions: Sequence[float]) -> pd.DataFrame:
    runs = _as_families(load_runs(folder, protocol=protocol))
    if not runs:
        raise SystemExit(f"{folder!r}: no finished runs of the {protocol} protocol")
    if protocol == WALLCLOCK:
        return wallclock_long_table(runs, fractions)
    long = long_table(runs, fractions)
    long["start_delay"] = np.nan
    long["starts_per_epoch"] = np.nan
    return long


def _mean_p(pairs: pd.DataFrame) -> str:
    p = signed_rank_test(pairs["new"], pairs["base"])["p"]
    return f"{pairs['base'].mean():.3f} -> {pairs['new'].mean():.3f} (p {_p(p)})"


def selected(
    base: pd.DataFrame,
    new: pd.DataFrame,
    base_method: str | None = None,
    new_method: str | None = None,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    tasks: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of each side to pair.

    :param base: Long table of the base runs (see :func:`paired_table`)
    :param new: The same of the new runs
    :param base_method: The method of ``base`` paired with ``new_method`` of ``new``, renamed
        ``new_method`` (None: every method of both paired with itself)
    :param new_method: See ``base_method``
    :param methods: Only these methods (None: all)
    :param seeds: Only these seeds (None: all)
    :param tasks: Only these tasks (None: all)
    """
    if (base_method is None) != (new_method is None):
        raise ValueError(f"base_method={base_method!r}, new_method={new_method!r}: give both or neither")
    if base_method is not None:
        base = base[base["method"] == base_method].assign(method=new_method)
        new = new[new["method"] == new_method]
    if methods is not None:
        base, new = base[base["method"].isin(methods)], new[new["method"].isin(methods)]
    if seeds is not None:
        base, new = base[base["seed"].isin(seeds)], new[new["seed"].isin(seeds)]
    if tasks is not None:
        base, new = base[base["task"].isin(tasks)], new[new["task"].isin(tasks)]
    return base, new


def paired_table(base: pd.DataFrame, new: pd.DataFrame, by_task: bool = False) -> pd.DataFrame:
    """
    :param base: Long table (:func:`benchmarks.report.long_table` or
        :func:`benchmarks.report.wallclock_long_table`, families as ``benchmark``, with
        ``start_delay`` and ``starts_per_epoch``) of the base runs, as :func:`selected` gives it
    :param new: The same of the new runs
    :param by_task: One cell per task (its pairs: the seeds), else per family
    :return: One row per (family, workers, start delay, method, and with ``by_task`` task) of
        both: ``pairs``, then per regret kind and budget point ``base mean -> new mean (p
        ...)``, then ``job starts per epoch`` (base -> new, at the full budget; wall-clock
        protocol only)
    """
    key = CELL + ["method", "budget_point"] + PAIR
    value_columns = list(REGRET_KINDS) + ["starts_per_epoch"]
    merged = base[key + value_columns].merge(new[key + value_columns], on=key, suffixes=("_base", "_new"))
    rows = []
    last = max(FRACTIONS)
    for cell, g in merged.groupby(CELL + ["method"] + (["task"] if by_task else []), sort=True, dropna=False):
        family, workers, delay, method = cell[:4]
        row = {"family": family, "workers": workers, "start delay": delay, "method": method}
        if by_task:
            row["task"] = cell[4]
        row["pairs"] = int((g["budget_point"] == g["budget_point"].max()).sum())
        for column, kind in REGRET_KINDS.items():
            for f, gf in g.groupby("budget_point", sort=True):
                pairs = gf[[f"{column}_base", f"{column}_new"]].set_axis(["base", "new"], axis=1).dropna()
                row[f"{kind} {_pct(f)}"] = _mean_p(pairs) if len(pairs) else "-"
        end = g[g["budget_point"] == g["budget_point"].max()]
        if end["starts_per_epoch_base"].notna().any() and g["budget_point"].max() == last:
            row["job starts per epoch"] = (
                f"{end['starts_per_epoch_base'].mean():.3f} -> {end['starts_per_epoch_new'].mean():.3f}"
            )
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty and table["start delay"].isna().all():
        table = table.drop(columns="start delay")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", help="results folder of the base runs")
    p.add_argument("new", help="results folder of the new runs (may be the same folder)")
    p.add_argument("--protocol", choices=list(PROTOCOLS), default=WALLCLOCK, help="default: %(default)s")
    p.add_argument("--base-method", help="the method of BASE paired with --new-method of NEW")
    p.add_argument("--new-method", help="see --base-method")
    p.add_argument("--methods", nargs="+", help="only these methods (default: all in both)")
    p.add_argument("--seeds", nargs="+", type=int, help="only these seeds (default: all in both)")
    p.add_argument("--tasks", nargs="+", help="only these tasks (default: all in both)")
    p.add_argument("--by-task", action="store_true", help="a row per task (its pairs: the seeds)")
    p.add_argument("--out", help="also write the markdown table to this file")
    args = p.parse_args(argv)
    if (args.base_method is None) != (args.new_method is None):
        p.error("--base-method and --new-method go together")
    base = _long(args.base, args.protocol, FRACTIONS)
    new = base if args.new == args.base else _long(args.new, args.protocol, FRACTIONS)
    base, new = selected(base, new, args.base_method, args.new_method, args.methods, args.seeds, args.tasks)
    table = paired_table(base, new, by_task=args.by_task)
    if table.empty:
        print("no pairs: no (task, seed) of the same method, family, workers and start delay in both", file=sys.stderr)
        return 1
    text = to_markdown(table)
    base_versions, new_versions = (versions_text(long.drop_duplicates(RUN)["versions"]) for long in (base, new))
    if base_versions != new_versions:
        text += (f"\n\nThe two sides were run with other package versions or on another processor (base: "
                 f"{base_versions}; new: {new_versions}): a difference may be theirs, not the rule's.")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
