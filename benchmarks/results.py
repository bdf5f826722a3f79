"""Writes ``benchmarks/RESULTS.md`` and its figures from a results folder of the benchmark grid.

    PYTHONPATH=. python -m benchmarks.results RESULTS_DIR \\
        [--out benchmarks/RESULTS.md] [--figures benchmarks/figures] \\
        [--reseeded RESEEDED_DIR] [--more-seeds MORE_SEEDS_DIR] [--wallclock WALLCLOCK_DIR] \\
        [--wallclock-more-seeds WALLCLOCK_MORE_SEEDS_DIR]
    PYTHONPATH=. python -m benchmarks.results RESULTS_DIR --list-tasks-over
    PYTHONPATH=. python -m benchmarks.results --wallclock WALLCLOCK_DIR --list-tasks-over [--start-delay 0]

Everything in the written file comes from the finished runs under ``RESULTS_DIR`` (the
``run.json``, ``results.csv.gz`` and, where there is one, ``decision_log.csv`` of each,
:mod:`benchmarks.runner`): the same runs give the same file. A partial folder (a grid still
running) is reported as far as it goes, and the section "Runs" says which cells are incomplete.
LCBench's two data folders (``lcbench``, ``lcbench-extra``) are one family in every table and
figure, and so are TaskSet's (``taskset``, ``taskset-extra``). Runs of the wall-clock protocol
(:mod:`benchmarks.wallclock`) never enter the epoch protocol's sections; ``--wallclock`` adds
their own section, one table per start delay, and ``--wallclock-more-seeds`` the tasks over its
target there compared again with more seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.depth import depth_per_run
from benchmarks.provenance import versions_text
from benchmarks.report import (
    FRACTIONS,
    OURS,
    REFERENCES,
    REGRET_KINDS,
    TIE_TOLERANCE,
    RunRecord,
    load_runs,
    long_table,
    method_order,
    signed_rank_test,
    to_markdown,
    wallclock_long_table,
)
from benchmarks.wallclock import STOP_SECONDS, WALLCLOCK

#: Benchmark (data folder) -> family: the tables and figures pool a family's tasks
FAMILIES = {"lcbench": "LCBench", "lcbench-extra": "LCBench", "taskset": "TaskSet", "taskset-extra": "TaskSet"}

#: The target per task: each of ours at most this multiple of the better reference's mean
#: regret at the full budget, in both regrets (the worst-task view counts the tasks over it)
RATIO_LIMIT = 1.5

#: The wall-clock protocol's target per task (issue 50's "catastrophic" task-cell): over
#: :data:`RATIO_LIMIT` times the better reference's mean *and* more than this much normalised
#: regret above it, so that a reference mean of 0 does not make every non-zero mean fail
CATASTROPHE_MARGIN = 0.01

#: The decisions measured, one table each: (our default, a variant, what the variant changes).
#: A variant sets one deviation from the papers to the papers' setting, or all of them
DEVIATIONS = (
    ("DyHPO", "DyHPO-no-completion", "the incumbent completion off (`completion=None`)"),
    ("DeepPowerLaw", "DeepPowerLaw-no-completion", "the incumbent completion off (`completion=None`)"),
    ("DyHPO", "DyHPO-no-depth-gate", "the depth gate off (`depth_gate=None`)"),
    ("DeepPowerLaw", "DeepPowerLaw-no-depth-gate", "the depth gate off (`depth_gate=None`)"),
    (
        "DyHPO",
        "DyHPO-papers",
        "both the completion and the depth gate off, deciding as the papers do (`completion=None, depth_gate=None`)",
    ),
    (
        "DeepPowerLaw",
        "DeepPowerLaw-papers",
        "both the completion and the depth gate off, deciding as the papers do (`completion=None, depth_gate=None`)",
    ),
)

GRID_COMMAND = """\
DEV=/path/to/development/data  # the folder holding lcbench, lcbench-extra, taskset
PYTHONPATH=. python benchmarks/run_benchmarks.py --data $DEV/lcbench $DEV/lcbench-extra $DEV/taskset \\
    --methods ASHA BOHB RandomSearch DyHPO DeepPowerLaw DyHPO-no-completion DeepPowerLaw-no-completion \\
              DyHPO-no-depth-gate DeepPowerLaw-no-depth-gate DyHPO-papers DeepPowerLaw-papers \\
    --seeds 0 1 2 3 4 --n-workers 1 4 --n-jobs 2 --results-dir results/dev
# ASHA again with other seeds, for the worst-task target's noise floor
PYTHONPATH=. python benchmarks/run_benchmarks.py --data $DEV/lcbench $DEV/lcbench-extra $DEV/taskset \\
    --methods ASHA --seeds 5 6 7 8 9 --n-workers 1 4 --n-jobs 2 --results-dir results/reseeded
# ours and the references again with seeds 5-9 on the tasks over the worst-task target
PYTHONPATH=. python benchmarks/run_benchmarks.py --data $DEV/lcbench $DEV/lcbench-extra $DEV/taskset \\
    --tasks $(PYTHONPATH=. python -m benchmarks.results results/dev --list-tasks-over) \\
    --methods ASHA BOHB DyHPO DeepPowerLaw --seeds 5 6 7 8 9 --n-workers 1 4 --n-jobs 2 \\
    --results-dir results/more-seeds"""

PROTOCOL = """\
- **Tasks run:** {tasks}. LCBench: `lcbench` (6 tasks) and `lcbench-extra` (18), YAHPO surrogate
  values on the 2000 real LCBench configurations (*surrogate values, not measured curves*);
  TaskSet: IMDB text-RNN tasks (real curves, 1000 configurations, some diverge). The
  development data is not shipped (the repo ships a 300-row subset of 4 tasks for the demo and
  the tests, `benchmarks/data`); pass its folders with `--data`.
- **Seeds:** {seeds} (simulator seed = scheduler seed). **Budget:** {budgets} epochs per run
  (20 x max fidelity), counted as epochs actually simulated. **Workers:** {workers}, on Syne
  Tune's simulator (`UserBlackboxBackend`).
- **Candidates:** every method draws configurations only from the table, each row at most
  once: ours sample unused rows uniformly (`CandidateOptions(configs=...)`), RandomSearch and ASHA draw
  unused rows uniformly, BOHB's proposals are mapped to the nearest unused row
  (`benchmarks.table.TableRestricted`). Our schedulers get exact segments (`max_resource_attr`).
- **Regrets:** normalised regret = (best - incumbent) / (best - worst), best = best table value
  at any fidelity, worst = 0.9 quantile of the finite final-fidelity values, clipped to [0, 1].
  *Anytime*: incumbent = best value seen at any epoch. *Fully trained*: incumbent = the value
  at `max_t` of the best configuration trained to `max_t` so far (1 while there is none): what
  a user takes home. 25/50/100 %: after that share of the epoch budget.
- **Simulated time is training time only** (the scheduler's compute is measured apart, see
  "Speed"), so a run is reproducible from its seed.
- **Paired tests:** a pair is one (task, seed) both methods ran; two-sided Wilcoxon
  signed-rank test on the non-tied pairs (`benchmarks.report.signed_rank_test`; differences of
  at most {tie:g} are ties, p = 1 when all pairs tie)."""


WALLCLOCK_COMMAND = """\
PYTHONPATH=. python benchmarks/run_benchmarks.py --protocol wallclock --start-delay 0 1 10 \\
    --data $DEV/lcbench $DEV/lcbench-extra $DEV/taskset $DEV/taskset-extra \\
    --methods ASHA BOHB DyHPO DeepPowerLaw DyHPO-costs DeepPowerLaw-costs \\
    --seeds 0 1 2 3 4 --n-workers 1 4 --n-jobs 2 --results-dir results/wallclock
# seeds 5-9 at a delay of 0 on the tasks over the target there
PYTHONPATH=. python benchmarks/run_benchmarks.py --protocol wallclock --start-delay 0 \\
    --data $DEV/lcbench $DEV/lcbench-extra $DEV/taskset $DEV/taskset-extra \\
    --tasks $(PYTHONPATH=. python -m benchmarks.results --wallclock results/wallclock \\
              --list-tasks-over --start-delay 0) \\
    --methods ASHA BOHB DyHPO DeepPowerLaw DyHPO-costs DeepPowerLaw-costs \\
    --seeds 5 6 7 8 9 --n-workers 1 4 --n-jobs 2 --results-dir results/wallclock-more-seeds"""

WALLCLOCK_PROTOCOL = """\
- **Budget:** simulated wall-clock time, the epoch budget (20 x max fidelity) times the task's
  mean epoch time (the mean over every epoch of every configuration of its table), divided by
  the number of workers: the worker time the epoch budget takes on average when whole curves
  are trained, shared by the workers, so that with free starts both protocols spend about the
  same. Epoch times are the table's: LCBench's `time` column (its
  first epoch costs about three times the median), TaskSet has no runtimes and every step costs
  1 s.
- **Start delay:** every job the Tuner starts, a new trial or a paused one resumed, begins that
  long after it is scheduled (Syne Tune's simulator, `SimulatorConfig.delay_start`; a resume
  costs what a start costs, a trial that keeps running pays nothing). The delay is 0, 1 or 10
  times the task's median epoch time (a task's own median and mean, not its family's: LCBench's
  tasks differ more than ten times in their median epoch time). Every other delay of the
  simulator is 0, except Syne Tune's fixed {stop_ms:g} ms of simulated time per pause or stop.
  Our schedulers' defaults make a job of each segment (`max_resource_attr`); with `JobCosts`
  (the `-costs` variants) a job runs until its trial loses a decision. Syne Tune's ASHA and
  BOHB run a job until they stop it.
- **Clock:** the Tuner sleeps until the simulator's next event, so a result reaches the
  scheduler when it is reported and a free worker is refilled at once.
- **Regrets** as in the epoch protocol, with 25/50/100 % the share of the wall-clock budget
  (the incumbent among the results reported by then). **Job starts per epoch:** jobs started or
  resumed within the budget / epochs trained within it, per run, averaged; **epochs:** epochs
  trained within the budget, per run."""


def family_of(benchmark: str) -> str:
    """
    :param benchmark: Benchmark (data folder) name of a run
    :return: Its family in the tables (:data:`FAMILIES`; other names stand for themselves)
    """
    return FAMILIES.get(benchmark, benchmark)


def _pct(f: float) -> str:
    return f"{int(round(100 * f))} %"


def _fmt(v: float, digits: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.{digits}f}"


def _p(p: float) -> str:
    return "-" if np.isnan(p) else (f"{p:.2g}" if p >= 0.001 else "<0.001")


def _versions_line(long: pd.DataFrame) -> str:
    """The protocol's line naming the package versions and processors the runs of ``long`` were
    made with."""
    if "versions" not in long or (long["versions"] == "not recorded").all():
        return "- **Versions:** not recorded (runs written before `run.json` recorded them)."
    per_run = long.drop_duplicates(["benchmark", "n_workers", "method", "task", "seed"]
                                   + (["start_delay"] if "start_delay" in long else []))
    return (f"- **Versions:** {versions_text(per_run['versions'])} (the figures repeat with these "
            "versions on such a processor; on another, or with other releases, they move by about the seed noise).")


def _source_tasks(source: str) -> list[str]:
    """Task names of a serialized data folder (its ``metadata.json``); none if unreadable."""
    try:
        return list(json.loads((Path(source) / "metadata.json").read_text()).get("task_names", []))
    except (OSError, ValueError):
        return []


def completeness(long: pd.DataFrame, runs: Sequence[RunRecord]) -> tuple[pd.DataFrame, list[str]]:
    """
    The grid the runs span: per family, every task of the data folders its runs came from (or,
    where a folder is not readable here, every task seen in a run), every seed seen, every
    method of :data:`benchmarks.runner.VARIANTS` and every method seen, per worker count seen.

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param runs: The runs of ``long`` (their ``run.json`` name their data folders)
    :return: Table (family, workers, one column per method: runs present / expected) and the
        lines naming the incomplete cells
    """
    from benchmarks.runner import VARIANTS

    done = long.drop_duplicates(["benchmark", "n_workers", "method", "task", "seed"])
    methods = method_order(set(VARIANTS) | set(done["method"]), OURS, REFERENCES)
    seeds = sorted(done["seed"].unique())
    tasks: dict[str, set[str]] = {}
    for r in runs:
        s = r.summary
        tasks.setdefault(s["benchmark"], set()).update(_source_tasks(s["source"]) or [s["task"]])
    rows, missing = [], []
    for family in sorted(tasks):
        expected = len(tasks[family]) * len(seeds)
        for n_workers in sorted(done["n_workers"].unique()):
            g = done[(done["benchmark"] == family) & (done["n_workers"] == n_workers)]
            row = {"family": family, "workers": n_workers}
            for m in methods:
                have = g[g["method"] == m]
                row[m] = f"{len(have)}/{expected}"
                if len(have) < expected:
                    absent = sorted(tasks[family] - set(have["task"]))
                    cell = f"{family}, {n_workers} worker{'s' if n_workers > 1 else ''}, {m}"
                    if len(have) == 0:
                        missing.append(f"{cell}: no runs")
                    elif absent:
                        missing.append(
                            f"{cell}: {expected - len(have)} runs missing; no run on "
                            + (", ".join(absent) if len(absent) <= 6 else f"{len(absent)} tasks")
                        )
                    else:
                        missing.append(f"{cell}: {expected - len(have)} runs missing")
            rows.append(row)
    return pd.DataFrame(rows), missing


def means_table(long: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :return: Per (family, workers, method): runs, mean anytime and fully-trained regret at each
        budget point, mean trials trained to ``max_t`` at the end
    """
    rows = []
    last = long["budget_point"].max()
    for (family, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for m in method_order(g["method"].unique(), OURS, REFERENCES):
            gm = g[g["method"] == m]
            row = {"family": family, "workers": n_workers, "method": m, "runs": int((gm["budget_point"] == last).sum())}
            for col, kind in REGRET_KINDS.items():
                for f, gf in gm.groupby("budget_point"):
                    row[f"{kind} {_pct(f)}"] = _fmt(gf[col].mean())
            row["trained"] = f"{gm[gm['budget_point'] == last]['trials_trained'].mean():.1f}"
            rows.append(row)
    return pd.DataFrame(rows)


def _pairs(g: pd.DataFrame, a: str, b: str, column: str) -> pd.DataFrame:
    wide = g[g["method"].isin([a, b])].pivot_table(index=["task", "seed"], columns="method", values=column)
    return wide[[a, b]].dropna() if a in wide and b in wide else pd.DataFrame(columns=[a, b])


def _test_cell(pairs: pd.DataFrame, a: str, b: str) -> str:
    t = signed_rank_test(pairs[a], pairs[b])
    if not t["pairs"]:
        return "-"
    return f"{t['mean_diff']:+.3f} ({t['wins']}/{t['ties']}/{t['losses']}, p {_p(t['p'])})"


def headline_tests(long: pd.DataFrame, ours: Sequence[str] = OURS) -> pd.DataFrame:
    """
    Each of ``ours`` against the better of :data:`REFERENCES` (the lower mean regret over
    the pairs compared, per cell and budget point).

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param ours: our methods compared, in this order (default: :data:`~benchmarks.report.OURS`, the defaults)
    :return: Per (family, workers, method, regret kind): one column per budget point,
        ``diff (W/T/L, p) vs reference``
    """
    rows = []
    for (family, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for m in [m for m in ours if m in set(g["method"])]:
            for col, kind in REGRET_KINDS.items():
                row = {"family": family, "workers": n_workers, "method": m, "regret": kind}
                for f, gf in g.groupby("budget_point", sort=True):
                    best = None
                    for ref in REFERENCES:
                        pairs = _pairs(gf, m, ref, col)
                        if len(pairs) and (best is None or pairs[ref].mean() < best[1][best[0]].mean()):
                            best = (ref, pairs)
                    row[_pct(f)] = "-" if best is None else f"{_test_cell(best[1], m, best[0])} vs {best[0]}"
                rows.append(row)
    return pd.DataFrame(rows)


def deviation_tests(long: pd.DataFrame, default: str, variant: str) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param default: Our default
    :param variant: The same with one setting changed (see :data:`DEVIATIONS`)
    :return: Per (family, workers, regret kind): one column per budget point, ``default mean /
        variant mean, diff (W/T/L, p)`` (diff = default - variant; negative: the default better)
    """
    rows = []
    for (family, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for col, kind in REGRET_KINDS.items():
            row = {"family": family, "workers": n_workers, "regret": kind}
            for f, gf in g.groupby("budget_point", sort=True):
                pairs = _pairs(gf, default, variant, col)
                row[_pct(f)] = (
                    "-"
                    if pairs.empty
                    else f"{pairs[default].mean():.3f} / {pairs[variant].mean():.3f}, "
                    f"{_test_cell(pairs, default, variant)}"
                )
            if any(row[_pct(f)] != "-" for f in sorted(g["budget_point"].unique())):
                rows.append(row)
    return pd.DataFrame(rows)


def _choice(pairs: pd.DataFrame, default: str, variant: str) -> str:
    """The one of ``default`` and ``variant`` with the lower mean regret over ``pairs``;
    "tie" when the means differ by at most :data:`~benchmarks.report.TIE_TOLERANCE`."""
    diff = pairs[default].mean() - pairs[variant].mean()
    return "tie" if abs(diff) <= TIE_TOLERANCE else (default if diff < 0 else variant)


def _paired_cells(long: pd.DataFrame, default: str, variant: str):
    """The cells at the full budget where both ran: ``(family, workers, regret kind, pairs)``,
    ``pairs`` as :func:`_pairs` (by family, workers, then :data:`REGRET_KINDS`)."""
    last = long[long["budget_point"] == long["budget_point"].max()]
    for (family, n_workers), g in last.groupby(["benchmark", "n_workers"], sort=True):
        for col, kind in REGRET_KINDS.items():
            pairs = _pairs(g, default, variant, col)
            if not pairs.empty:
                yield family, n_workers, kind, pairs


def leave_one_task_out(long: pd.DataFrame, default: str, variant: str) -> pd.DataFrame:
    """
    Whether the choice between a default and its variant holds with each task left out. Per
    (family, workers, regret kind) at the full budget: the choice on all tasks is the method
    with the lower mean regret over the paired (task, seed) runs ("tie" on equal means); then
    the same choice is made on the pairs of the other tasks, for each task in turn.

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param default: Our default
    :param variant: The same with one setting changed
    :return: Columns family, workers, regret, ``chosen on all`` (``method (default mean /
        variant mean)``), ``same with each task left out`` (``k/n``, n = tasks compared) and
        ``flipped by`` (the tasks whose removal changes the choice, with the choice then;
        "-" if none); a family with a single task has n = 0
    """
    rows = []
    for family, n_workers, kind, pairs in _paired_cells(long, default, variant):
        chosen = _choice(pairs, default, variant)
        task_of = pairs.index.get_level_values("task")
        flips, compared = [], 0
        for task in sorted(set(task_of)):
            rest = pairs[task_of != task]
            if rest.empty:  # a single task: nothing left to choose on
                continue
            compared += 1
            choice = _choice(rest, default, variant)
            if choice != chosen:
                flips.append(f"{task} ({choice})")
        rows.append(
            {
                "family": family,
                "workers": n_workers,
                "regret": kind,
                "chosen on all": f"{chosen} ({pairs[default].mean():.3f} / {pairs[variant].mean():.3f})",
                "same with each task left out": f"{compared - len(flips)}/{compared}",
                "flipped by": ", ".join(flips) if flips else "-",
            }
        )
    return pd.DataFrame(rows)


def setting_left_out(long: pd.DataFrame, comparisons: Sequence[tuple[str, str]]) -> dict[str, object] | None:
    """
    Whether the choice of a setting holds with each task left out, over every cell it is
    measured in. A cell is (default, family, workers, regret kind) at the full budget, its
    diff the mean of (default - variant) over the paired (task, seed) runs; the setting's diff
    is the mean of its cells' diffs (each cell weighs the same), taken on all tasks and then
    with each task in turn left out.

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param comparisons: ``(default, variant)`` pairs that differ in the same setting (e.g. both
        methods with and without it)
    :return: None if no cell has pairs; else ``cells``, ``diff`` (on all tasks), ``largest`` and
        ``smallest`` (the extreme diffs with one task left out, each as ``(diff, task)``) and
        ``tasks`` (how many were left out in turn)
    """
    # per cell: the paired differences, indexed by (task, seed)
    cells = [
        pairs[default] - pairs[variant]
        for default, variant in comparisons
        for *_, pairs in _paired_cells(long, default, variant)
    ]
    if not cells:
        return None
    tasks = sorted({task for diffs in cells for task in diffs.index.get_level_values("task")})

    def setting_diff(left_out: str | None) -> float:
        means = [d[d.index.get_level_values("task") != left_out].mean() for d in cells]
        return float(np.nanmean(means))

    left_out = [(setting_diff(task), task) for task in tasks]
    return {
        "cells": len(cells),
        "diff": setting_diff(None),
        "largest": max(left_out),
        "smallest": min(left_out),
        "tasks": len(tasks),
    }


def settings_left_out_table(long: pd.DataFrame) -> pd.DataFrame:
    """:func:`setting_left_out` for each setting of :data:`DEVIATIONS` (its comparisons grouped
    by what the variant changes), one row each."""
    settings: dict[str, list[tuple[str, str]]] = {}
    for default, variant, what in DEVIATIONS:
        settings.setdefault(what, []).append((default, variant))
    rows = []
    for what, comparisons in settings.items():
        r = setting_left_out(long, comparisons)
        if r is None:
            continue
        (hi, hi_task), (lo, lo_task) = r["largest"], r["smallest"]
        rows.append(
            {
                "variants": ", ".join(v for _, v in comparisons),
                "what they change": what,
                "cells": r["cells"],
                "diff on all tasks": f"{r['diff']:+.4f}",
                "one task left out: largest": f"{hi:+.4f} ({hi_task})",
                "smallest": f"{lo:+.4f} ({lo_task})",
                "tasks": r["tasks"],
                "chosen in every case": (
                    "the defaults" if hi < -TIE_TOLERANCE else "the variants" if lo > TIE_TOLERANCE else "no"
                ),
            }
        )
    return pd.DataFrame(rows)


#: Mean regrets at most this are 0 in the worst-task ratios: a run that reached the table's best
#: value can keep a regret of about 1e-9 from the normalisation's floating point
ZERO_REGRET = 1e-6


def _ratio(mine: float, ref: float) -> float:
    """``mine / ref``; inf for ``ref == 0 < mine``, 1 for 0 / 0 (0: at most :data:`ZERO_REGRET`)."""
    if ref <= ZERO_REGRET:
        return 1.0 if mine <= ZERO_REGRET else np.inf
    return mine / ref


def _over(mine: float, ref: float, limit: float, margin: float = 0.0) -> bool:
    """Whether a mean regret is over ``limit`` times the reference mean (the worst-task target),
    by more than :data:`~benchmarks.report.TIE_TOLERANCE`, and more than ``margin`` above it."""
    return mine - limit * ref > TIE_TOLERANCE and mine - ref > margin


def _nearness(ratio: float, above: float, limit: float, margin: float) -> float:
    """How near a task is to the worst-task target: the ratio without a margin; with one, the
    smaller of ``ratio / limit`` and ``above / margin`` (both over 1 when the task is over), so
    that a mean of 0.0002 against a reference's 0 (inf, far under the margin) is not nearer
    than 1.4x and 0.04 above."""
    return ratio if not margin else min(ratio / limit, above / margin)


def _over_label(limit: float, margin: float = 0.0) -> str:
    """The target :func:`_over` checks, as a column name: ``LIMITx`` or ``LIMITx and +MARGIN``."""
    return f"{limit:g}x" + (f" and +{margin:g}" if margin else "")


def worst_tasks(
    long: pd.DataFrame,
    limit: float = RATIO_LIMIT,
    candidates: pd.DataFrame | None = None,
    references: Sequence[str] = REFERENCES,
    margin: float = 0.0,
) -> pd.DataFrame:
    """
    Per (family, workers, method of ours), for both regrets at the full budget: the task where
    its mean regret is the largest multiple of the better reference's there (the lower of the
    references' means on that task), with both means, and how many of the tasks compared are
    over ``limit`` times the better reference's mean. A ratio to a reference mean of 0 is inf
    (0 / 0: 1); of equal ratios (several inf), the task with the larger mean of the method is
    the worst. A task is over when ``mean > limit * reference mean`` by more than
    :data:`~benchmarks.report.TIE_TOLERANCE` (and more than ``margin`` above it); a task over
    is worse than any that is not, so that with a margin the worst shown is one over the target
    whenever there is one, not a mean of 0.0002 against a reference's 0. With a margin, tasks
    on the same side of the target rank by the smaller of ``ratio / limit`` and ``(mean -
    reference mean) / margin`` instead of the ratio (:func:`_nearness`).

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param limit: The ratio a task may reach (default :data:`RATIO_LIMIT`)
    :param candidates: The runs held to the target, in the layout of ``long`` (default: the
        runs of ours and their variants in ``long``); the references are always ``long``'s
    :param references: The methods whose better mean on a task is the reference (default
        :data:`~benchmarks.report.REFERENCES`)
    :param margin: A task is over only when its mean is also more than this above the
        reference mean (0: the ratio alone; the wall-clock protocol's target:
        :data:`CATASTROPHE_MARGIN`)
    :return: Columns family, workers, method, then per regret kind ``KIND worst``
        (``ratio x (task: mean vs reference mean)``) and ``KIND > LIMIT x`` (``over/compared``;
        ``KIND > LIMIT x and +MARGIN`` with a margin)
    """
    last = long[long["budget_point"] == long["budget_point"].max()]
    if candidates is None:
        candidates = last[last["method"].isin(ours_in(last))]
    else:
        candidates = candidates[candidates["budget_point"] == candidates["budget_point"].max()]
    means = (
        pd.concat([last[last["method"].isin(references)], candidates])
        .groupby(["benchmark", "n_workers", "method", "task"])[list(REGRET_KINDS)]
        .mean()
    )
    rows = []
    for (family, n_workers), g in candidates.groupby(["benchmark", "n_workers"], sort=True):
        in_cell = last[(last["benchmark"] == family) & (last["n_workers"] == n_workers)]
        refs = [r for r in references if r in set(in_cell["method"])]
        if not refs:
            continue
        for m in method_order(g["method"].unique(), OURS, references):
            row = {"family": family, "workers": n_workers, "method": m}
            for col, kind in REGRET_KINDS.items():
                worst, over, compared = None, 0, 0
                for task in sorted(g[g["method"] == m]["task"].unique()):
                    ref_means = [
                        means.loc[(family, n_workers, r, task), col]
                        for r in refs
                        if (family, n_workers, r, task) in means.index
                    ]
                    if not ref_means:
                        continue
                    mine, ref = means.loc[(family, n_workers, m, task), col], min(ref_means)
                    ratio, is_over = _ratio(mine, ref), _over(mine, ref, limit, margin)
                    compared += 1
                    over += int(is_over)
                    rank = (is_over, _nearness(ratio, mine - ref, limit, margin), mine)
                    if worst is None or rank > worst[4]:
                        worst = (ratio, task, mine, ref, rank)
                row[f"{kind} worst"] = (
                    "-" if worst is None else f"{worst[0]:.2f}x ({worst[1]}: {_fmt(worst[2])} vs {_fmt(worst[3])})"
                )
                row[f"{kind} > {_over_label(limit, margin)}"] = (
                    f"{over}/{compared}" if compared else "-"
                )
            rows.append(row)
    return pd.DataFrame(rows)


def reseeded_long_from(long: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` of references run with other seeds than
        the grid's
    :return: ``long`` with each method named ``NAME, seeds A-B`` (its lowest and highest seed),
        so that it is not taken for the reference itself, and its own name in ``reference``
    """
    seeds = long.groupby("method")["seed"].agg(["min", "max"])
    return long.assign(
        method=long["method"].map(lambda m: f"{m}, seeds {seeds.loc[m, 'min']}-{seeds.loc[m, 'max']}"),
        reference=long["method"],
    )


def reseeded_worst_tasks(long: pd.DataFrame, reseeded: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` of the grid, families as ``benchmark``
    :param reseeded: :func:`reseeded_long_from` of references run with other seeds
    :return: :func:`worst_tasks` of each re-seeded reference against the better of
        :data:`~benchmarks.report.REFERENCES`, then against its own runs in ``long`` alone
        (column ``against``)
    """
    tables = [worst_tasks(long, candidates=reseeded).assign(against=f"better of {', '.join(REFERENCES)}")]
    for name in sorted(reseeded["method"].unique()):
        runs = reseeded[reseeded["method"] == name]
        reference = runs["reference"].iloc[0]
        itself = worst_tasks(long, candidates=runs, references=(reference,))
        tables.append(itself.assign(against=f"{reference} alone"))
    table = pd.concat(tables, ignore_index=True)
    columns = ["family", "workers", "method", "against"]
    return (
        table[columns + [c for c in table.columns if c not in columns]]
        .sort_values(["family", "workers", "method"], kind="stable")
        .reset_index(drop=True)
    )


def split_seed_worst_tasks(long: pd.DataFrame, methods: Sequence[str] = OURS + REFERENCES) -> pd.DataFrame:
    """
    Each method against itself: per (family, workers), its runs of the second half of the seeds
    it ran there held to the worst-task target against its runs of the first half alone (the
    lower half of the sorted seeds; an odd seed out is left out). A method differs from itself
    only by its seeds, so the tasks counted are the target's noise floor at half the seeds.

    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :param methods: The methods split (default: ours and the references)
    :return: :func:`worst_tasks` rows, method ``NAME, seeds C-D against A-B``
    """
    tables = []
    for (_family, _n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for m in methods:
            seeds = sorted(g.loc[g["method"] == m, "seed"].unique())
            half = len(seeds) // 2
            if half == 0:
                continue
            first, second = seeds[:half], seeds[half : 2 * half]
            runs = g[g["method"] == m]
            name = f"{m}, seeds {second[0]}-{second[-1]} against {first[0]}-{first[-1]}"
            tables.append(
                worst_tasks(
                    runs[runs["seed"].isin(first)],
                    candidates=runs[runs["seed"].isin(second)].assign(method=name),
                    references=(m,),
                )
            )
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _task_cells_over(
    last: pd.DataFrame,
    limit: float,
    references: Sequence[str],
    margin: float = 0.0,
    methods: Sequence[str] = OURS,
):
    """The task-cells over the worst-task target: ``(family, workers, method, regret column,
    regret kind, task, mean, reference mean, references run there)`` for each of ``methods``
    whose mean regret on a task is over ``limit`` times the better reference's there and more
    than ``margin`` above it (``last``: the rows of the full budget), ordered by family,
    workers, method (as in ``methods``), regret (as in :data:`REGRET_KINDS`) and task."""
    means = last.groupby(["benchmark", "n_workers", "method", "task"])[list(REGRET_KINDS)].mean()
    for (family, n_workers), cell in means.groupby(level=[0, 1], sort=True):
        cell = cell.droplevel([0, 1])
        # each task's means by method, and the references run on it
        by_task = {task: cell.xs(task, level=1) for task in cell.index.get_level_values(1).unique()}
        refs = {task: [r for r in references if r in on_task.index] for task, on_task in by_task.items()}
        for m in (m for m in methods if m in cell.index.get_level_values(0)):
            for col, kind in REGRET_KINDS.items():
                for task in sorted(cell.loc[m].index):
                    if not refs[task]:
                        continue
                    mine, ref = by_task[task].loc[m, col], by_task[task].loc[refs[task], col].min()
                    if _over(mine, ref, limit, margin):
                        yield family, n_workers, m, col, kind, task, mine, ref, refs[task]


def tasks_over(
    long: pd.DataFrame,
    limit: float = RATIO_LIMIT,
    references: Sequence[str] = REFERENCES,
    margin: float = 0.0,
    methods: Sequence[str] = OURS,
) -> list[str]:
    """The tasks where one of ``methods`` is over the worst-task target in some cell (family,
    workers) and regret at the full budget: the tasks to run again with more seeds
    (:func:`tasks_over_on_more_seeds`).

    :param long: :func:`~benchmarks.report.long_table` of the grid, families as ``benchmark``
    :param limit: the ratio a task may reach (default :data:`RATIO_LIMIT`)
    :param references: the methods whose better mean on a task is the reference
    :param margin: a task is over only when also more than this above the reference mean (0: the
        ratio alone; the wall-clock protocol's target: :data:`CATASTROPHE_MARGIN`)
    :param methods: the methods held to the target (default :data:`~benchmarks.report.OURS`)
    :return: their names, sorted
    """
    last = long[long["budget_point"] == long["budget_point"].max()]
    return sorted({cell[5] for cell in _task_cells_over(last, limit, references, margin, methods)})


def tasks_over_on_more_seeds(
    long: pd.DataFrame,
    more: pd.DataFrame,
    limit: float = RATIO_LIMIT,
    references: Sequence[str] = REFERENCES,
    margin: float = 0.0,
    methods: Sequence[str] = OURS,
) -> pd.DataFrame:
    """
    The tasks over the worst-task target on the grid's seeds, again on all the seeds there are:
    per (family, workers, one of ``methods``, regret) and task where the method's mean regret
    at the full budget is over ``limit`` times the better reference's in ``long`` (and more than
    ``margin`` above it), the same comparison on the seeds of ``long`` and ``more`` together
    where the method and every reference ran, with the paired test against the better
    reference there.

    :param long: :func:`~benchmarks.report.long_table` of the grid, families as ``benchmark``
    :param more: the same methods run with other seeds (on some tasks), in the layout of ``long``
    :param limit: the ratio a task may reach (default :data:`RATIO_LIMIT`)
    :param references: the methods whose better mean on a task is the reference
    :param margin: as in :func:`tasks_over`
    :param methods: the methods held to the target (default :data:`~benchmarks.report.OURS`)
    :return: columns family, workers, method, regret, task, ``grid`` (``ratio x (mean vs
        reference mean)`` on the grid's seeds), ``seeds`` (how many are compared now),
        ``all seeds`` (``ratio x (mean vs REFERENCE mean)``), ``W/T/L, p`` (of the method
        against that reference) and ``over LIMIT x`` (yes / no on all seeds)
    :raises ValueError: if ``more`` holds a run of ``long`` (the same cell, task and seed)
    """
    key = ["benchmark", "n_workers", "method", "task", "seed"]
    last = long[long["budget_point"] == long["budget_point"].max()]
    extra = more[more["budget_point"] == more["budget_point"].max()]
    twice = last[key].drop_duplicates().merge(extra[key].drop_duplicates())
    if not twice.empty:
        raise ValueError(f"more: runs already in the grid, e.g. {twice.iloc[0].to_dict()}")
    both = pd.concat([last, extra], ignore_index=True)
    rows = []
    cells = _task_cells_over(last, limit, references, margin, methods)
    for family, n_workers, m, col, kind, task, grid_mine, grid_ref, refs in cells:
        on_task = both[(both["benchmark"] == family) & (both["n_workers"] == n_workers) & (both["task"] == task)]
        # the seeds where the method and every reference ran
        runs = on_task.pivot_table(index="seed", columns="method", values=col, aggfunc="first")[[m, *refs]].dropna()
        reference = min(refs, key=lambda r: runs[r].mean())
        mine, ref = runs[m].mean(), runs[reference].mean()
        test = signed_rank_test(runs[m], runs[reference])
        rows.append(
            {
                "family": family,
                "workers": n_workers,
                "method": m,
                "regret": kind,
                "task": task,
                "grid": f"{_ratio(grid_mine, grid_ref):.2f}x ({_fmt(grid_mine)} vs {_fmt(grid_ref)})",
                "seeds": len(runs),
                "all seeds": f"{_ratio(mine, ref):.2f}x ({_fmt(mine)} vs {reference} {_fmt(ref)})",
                "W/T/L, p": f"{test['wins']}/{test['ties']}/{test['losses']}, p {_p(test['p'])}",
                f"over {_over_label(limit, margin)}": (
                    "yes" if _over(mine, ref, limit, margin) else "no"
                ),
            }
        )
    return pd.DataFrame(rows)


def depth_table(depth: pd.DataFrame, long: pd.DataFrame) -> pd.DataFrame:
    """
    :param depth: :func:`benchmarks.depth.depth_per_run` with families as ``benchmark``
    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark`` (the
        finished runs, for the coverage)
    :return: Per (family, workers, method) with a decision log: ``runs`` (runs with a log /
        finished runs), mean share of the run's epochs the completion gave
        (``completion``), and gave to trials other than the best trained one
        (``completion, not the best trained``)
    """
    cols = ["family", "workers", "method", "runs", "completion", "completion, not the best trained"]
    if depth.empty:
        return pd.DataFrame(columns=cols)
    finished = long.drop_duplicates(["benchmark", "n_workers", "method", "task", "seed"])
    finished = finished.groupby(["benchmark", "n_workers", "method"]).size()
    rows = []
    for (family, n_workers), g in depth.groupby(["benchmark", "n_workers"], sort=True):
        for m in method_order(g["method"].unique(), OURS, REFERENCES):
            gm = g[g["method"] == m]
            rows.append(
                {
                    "family": family,
                    "workers": n_workers,
                    "method": m,
                    "runs": f"{len(gm)}/{finished.get((family, n_workers, m), len(gm))}",
                    "completion": _fmt(gm["completion_share"].mean()),
                    "completion, not the best trained": _fmt(gm["elsewhere_share"].mean()),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def speed_table(long: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.long_table` with families as ``benchmark``
    :return: Per (family, workers): mean scheduler seconds per run of each method
    """
    last = long[long["budget_point"] == long["budget_point"].max()]
    methods = method_order(last["method"].unique(), OURS, REFERENCES)
    wide = last.pivot_table(index=["benchmark", "n_workers"], columns="method", values="scheduler_seconds")
    wide = wide[[m for m in methods if m in wide.columns]].reset_index()
    wide = wide.rename(columns={"benchmark": "family", "n_workers": "workers"})
    for m in methods:
        if m in wide:
            wide[m] = wide[m].map(lambda v: _fmt(v, 2))
    wide.columns.name = None
    return wide


def wallclock_table(long: pd.DataFrame) -> pd.DataFrame:
    """
    :param long: :func:`~benchmarks.report.wallclock_long_table` of one start delay, with
        families as ``benchmark``
    :return: Per (family, workers, method): runs, mean anytime and fully-trained regret at each
        fraction of the wall-clock budget, mean epochs trained and mean job starts per epoch
        within the budget
    """
    rows = []
    last = long["budget_point"].max()
    for (family, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for m in method_order(g["method"].unique(), OURS, REFERENCES):
            gm = g[g["method"] == m]
            end = gm[gm["budget_point"] == last]
            row = {"family": family, "workers": n_workers, "method": m, "runs": len(end)}
            for col, kind in REGRET_KINDS.items():
                for f, gf in gm.groupby("budget_point"):
                    row[f"{kind} {_pct(f)}"] = _fmt(gf[col].mean())
            row["epochs"] = f"{end['epochs'].mean():.0f}"
            row["job starts per epoch"] = _fmt(end["starts_per_epoch"].mean())
            rows.append(row)
    return pd.DataFrame(rows)


def ours_in(long: pd.DataFrame) -> list[str]:
    """The methods of ``long`` that are ours, variants included (named after one of :data:`~benchmarks.report.OURS`)."""
    names = long["method"].unique()
    return method_order([m for m in names if m.startswith(OURS) and m not in REFERENCES], OURS, REFERENCES)


def wallclock_tasks_over(long: pd.DataFrame, start_delays: Sequence[float] | None = None) -> list[str]:
    """The tasks where one of ours, variants included, is over the wall-clock target
    (:func:`tasks_over` with :data:`CATASTROPHE_MARGIN`) at one of ``start_delays`` (None: any
    delay run): the tasks to run again with more seeds.

    :param long: :func:`~benchmarks.report.wallclock_long_table` with families as ``benchmark``
    :param start_delays: The start delays looked at
    :return: their names, sorted
    """
    tasks: set[str] = set()
    for delay, g in long.groupby("start_delay", sort=True):
        if start_delays is None or any(np.isclose(delay, d) for d in start_delays):
            tasks.update(tasks_over(g, margin=CATASTROPHE_MARGIN, methods=ours_in(g)))
    return sorted(tasks)


def wallclock_sections(
    long: pd.DataFrame,
    results_dir: str,
    more_seeds: tuple[str, pd.DataFrame] | None = None,
) -> list[str]:
    """
    The markdown of the wall-clock protocol: its protocol, then per start delay the means
    (:func:`wallclock_table`), each of ours, variants included, against the better of ASHA
    and BOHB (:func:`headline_tests`), their worst tasks (:func:`worst_tasks` with
    :data:`CATASTROPHE_MARGIN`) and, where ``more_seeds`` has runs at that delay, the tasks over
    that target compared again on all seeds (:func:`tasks_over_on_more_seeds`).

    :param long: :func:`~benchmarks.report.wallclock_long_table` with families as ``benchmark``
    :param results_dir: The folder of its runs (named in the text)
    :param more_seeds: The folder of runs of the same protocol with other seeds on the tasks
        over the target (:func:`wallclock_tasks_over`) and their long table (None: none)
    :return: Sections, to be joined by blank lines
    """
    n_runs = len(long.drop_duplicates(["start_delay", "benchmark", "n_workers", "method", "task", "seed"]))
    parts = [
        "## Wall-clock protocol: every job start costs a delay",
        f"From the {n_runs} finished runs under `{results_dir}`, made by (from the repository "
        f"root; `make benchmark-wallclock DEV=...`), or the part of its grid that was run (the "
        f"`runs` column counts each cell's runs):\n\n```bash\n{WALLCLOCK_COMMAND}\n```",
        WALLCLOCK_PROTOCOL.format(stop_ms=1000 * STOP_SECONDS) + "\n" + _versions_line(long),
    ]
    for delay, g in long.groupby("start_delay", sort=True):
        tests = headline_tests(g, ours_in(g))
        parts += [
            f"### Start delay {delay:g} x the median epoch time",
            "Mean normalised regret over the family's tasks and seeds (lower is better) at "
            "25/50/100 % of the wall-clock budget.\n\n" + to_markdown(wallclock_table(g)),
            "Ours against the better of ASHA and BOHB in each cell, as in the headline "
            "(diff = mean(ours - reference), negative = ours better; W/T/L; p of the paired "
            "test).\n\n" + (to_markdown(tests) if not tests.empty else "(no runs of our defaults)"),
        ]
        worst = worst_tasks(g, margin=CATASTROPHE_MARGIN)
        if not worst.empty:
            parts.append(
                "The worst task of each of ours at 100 % of the time, as in \"Worst task\", but a "
                f"task counts as over only when its mean is over {RATIO_LIMIT:g}x the better "
                f"reference's there and more than {CATASTROPHE_MARGIN:g} above it (tasks over / "
                "tasks compared).\n\n" + to_markdown(worst)
            )
        more = None if more_seeds is None else more_seeds[1][np.isclose(more_seeds[1]["start_delay"], delay)]
        if more is not None and not more.empty:
            over = tasks_over_on_more_seeds(g, more, margin=CATASTROPHE_MARGIN, methods=ours_in(g))
            parts.append(
                "The task-cells over that target, compared again on the seeds above and those "
                f"under `{more_seeds[0]}` together (the seeds where the method and both references "
                "ran): the ratio on the seeds above, the seeds compared now, the ratio on them "
                "against the better reference there, and the paired test against it (W/T/L: "
                "pairs where ours is lower / tied / higher).\n\n"
                + (to_markdown(over) if not over.empty else "(no task is over the target)")
            )
    return parts


WALLCLOCK_HEADING = "## Wall-clock protocol"


def splice_wallclock(text: str, sections: Sequence[str]) -> str:
    """
    ``text`` (a written RESULTS.md) with its wall-clock section replaced by ``sections``
    (:func:`wallclock_sections`), or inserted before "## Figures" (else at the end) when it has
    none; every other section is kept as it is.

    :param text: The markdown file's text
    :param sections: The new wall-clock section's parts
    :return: The new text
    """
    new = "\n\n".join(sections) + "\n"
    lines = text.splitlines(keepends=True)
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    start = next((i for i in heads if lines[i].startswith(WALLCLOCK_HEADING)), None)
    if start is None:
        figures = next((i for i in heads if lines[i].startswith("## Figures")), None)
        if figures is None:
            return text.rstrip("\n") + "\n\n" + new
        return "".join(lines[:figures]) + new + "\n" + "".join(lines[figures:])
    end = next((i for i in heads if i > start), len(lines))
    return "".join(lines[:start]) + new + ("\n" + "".join(lines[end:]) if end < len(lines) else "")


def _as_families(runs: Sequence[RunRecord]) -> list[RunRecord]:
    return [replace(r, summary={**r.summary, "benchmark": family_of(r.summary["benchmark"])}) for r in runs]


def write_figures(runs: Sequence[RunRecord], figures: Path) -> list[Path]:
    """Anytime and fully-trained regret curves per family and worker count; removes the other
    PNG files of ``figures`` (figures of an earlier report)."""
    from benchmarks.plots import plot_regret_curves

    figures.mkdir(parents=True, exist_ok=True)
    keyed = [replace(r, summary={**r.summary, "benchmark": r.summary["benchmark"].lower()}) for r in runs]
    paths = plot_regret_curves(keyed, figures) + plot_regret_curves(keyed, figures, column="trained_incumbent")
    for old in figures.glob("*.png"):
        if old not in paths:
            old.unlink()
    return sorted(paths)


def render(
    results_dir: str,
    runs: Sequence[RunRecord],
    long: pd.DataFrame,
    figures: Sequence[Path],
    out: Path,
    command: str,
    depth: pd.DataFrame | None = None,
    reseeded: pd.DataFrame | None = None,
    more_seeds: pd.DataFrame | None = None,
    wallclock: tuple[str, pd.DataFrame] | None = None,
    wallclock_more_seeds: tuple[str, pd.DataFrame] | None = None,
) -> str:
    """The markdown of RESULTS.md (see :func:`main`).

    :param depth: :func:`benchmarks.depth.depth_per_run` of ``results_dir`` with families as
        ``benchmark`` (None: no runs with a decision log)
    :param reseeded: :func:`reseeded_long_from` of references run again with other seeds (None: no
        such runs)
    :param more_seeds: :func:`~benchmarks.report.long_table` of ours and the references run with
        other seeds on the tasks over the worst-task target (None: no such runs)
    :param wallclock: The folder of runs of the wall-clock protocol and their
        :func:`~benchmarks.report.wallclock_long_table` with families as ``benchmark`` (None:
        no such section)
    :param wallclock_more_seeds: The folder of wall-clock runs with other seeds on the tasks
        over its target and their long table (None: none; :func:`wallclock_sections`)
    """
    runs_table, missing = completeness(long, runs)
    tasks = long.drop_duplicates(["benchmark", "task"]).groupby("benchmark")["task"].count()
    protocol = PROTOCOL.format(
        tasks=" and ".join(f"{n} {family}" for family, n in tasks.items()),
        seeds=", ".join(str(s) for s in sorted(long["seed"].unique())),
        budgets=" or ".join(str(b) for b in sorted(long["budget"].unique())),
        workers=" and ".join(str(w) for w in sorted(long["n_workers"].unique())),
        tie=TIE_TOLERANCE,
    ) + "\n" + _versions_line(long)
    n_runs = len(long.drop_duplicates(["benchmark", "n_workers", "method", "task", "seed"]))
    parts = [
        "# Benchmark results",
        f"Written by `{command}` from the {n_runs} finished runs under `{results_dir}`, made by the "
        "development grid (from the repository root; `make benchmark DEV=...` runs the three commands):"
        f"\n\n```bash\n{GRID_COMMAND}\n```\n\n"
        "Every number below comes from those runs; rerunning the commands reproduces the file with the "
        "package versions and on a processor like the one the protocol names (on another processor the "
        "surrogates' fits round differently and the runs differ by about the seed noise).",
        "## Protocol",
        protocol,
        "## Runs",
        "Finished runs per cell / runs of the grid the folder spans: every task of the data "
        "folders the family's runs came from, every seed and worker count seen, every method of "
        "`benchmarks/runner.py`. Tables pair and average the runs there are.\n\n"
        + to_markdown(runs_table)
        + (
            "\n\nIncomplete cells:\n\n" + "\n".join(f"- {line}" for line in missing)
            if missing
            else "\n\nEvery cell is complete."
        ),
        "## Headline: regret against Syne Tune's ASHA and BOHB",
        "Mean normalised regret over the family's tasks and seeds (lower is better); trained: "
        "trials trained to `max_t` per run at the end.\n\n" + to_markdown(means_table(long)),
        "Our defaults against the better of ASHA and BOHB in each cell (the one with the lower "
        "mean regret over the pairs compared): diff = mean(ours - reference), negative = ours "
        "better; W/T/L = pairs where ours is lower / tied / higher; p of the paired test.\n\n"
        + to_markdown(headline_tests(long)),
    ]
    for default, variant, what in DEVIATIONS:
        table = deviation_tests(long, default, variant)
        parts += [
            f"## {default} against {variant}",
            f"`{variant}`: {default}'s defaults with {what}. Cells: mean "
            f"regret of {default} / of {variant} on the pairs both ran, then diff = mean({default} "
            f"- {variant}) (negative: the default better), W/T/L for {default}, p of the paired "
            "test.\n\n" + (to_markdown(table) if not table.empty else f"(no runs of both {default} and {variant})"),
        ]
        if not table.empty:
            parts.append(
                f"Leave one task out, at 100 %: the choice on all tasks (the lower mean regret over "
                f"the pairs; {default} / {variant} means), then in how many of the family's tasks "
                "the same choice is made on the other tasks' pairs when that task is left out, and "
                "the tasks whose removal changes it (with the choice then).\n\n"
                + to_markdown(leave_one_task_out(long, default, variant))
            )
    settings = settings_left_out_table(long)
    if not settings.empty:
        parts += [
            "## Each setting with each task left out",
            "The choice of a setting over all the cells it is measured in (both methods, families, "
            "worker counts and regrets, at 100 %): diff = the mean over those cells of each cell's "
            "mean(default - variant) (negative: the defaults better), on all tasks, then with each "
            "task in turn left out (the largest and smallest such diff, with the task left out). "
            "The choice holds with every task left out when both have the same sign.\n\n" + to_markdown(settings),
        ]
    worst = worst_tasks(long)
    depth = depth if depth is not None else pd.DataFrame(columns=["benchmark"])
    n_logged = len(depth)
    parts += [
        "## Worst task",
        "Per method and regret: the task with the largest ratio of its mean regret at 100 % of "
        "the budget to the better reference's mean there (the lower of ASHA's and BOHB's on that "
        "task), with the two means (inf: the reference's mean is 0), and the tasks where the "
        f"ratio is over {RATIO_LIMIT:g} / the tasks compared.\n\n"
        + (to_markdown(worst) if not worst.empty else "(no references)"),
    ]
    split = split_seed_worst_tasks(long)
    if not split.empty:
        parts += [
            "### The same target for a method against itself",
            "Each of ours and each reference against itself: the runs of the second half of its "
            "seeds held to the target against the runs of the first half alone. The method is "
            f"the same, only the seeds differ: the tasks over {RATIO_LIMIT:g}x are the target's "
            "noise floor at half the seeds.\n\n" + to_markdown(split),
        ]
    if reseeded is not None and not reseeded.empty:
        parts += [
            "### The same target for a reference run again",
            "A reference run again with other seeds (the folder given with `--reseeded`; method "
            "`NAME, seeds A-B`), held to the target as ours are: against the better of the "
            "references above, then against its own runs above alone. The second is the target's "
            f"noise floor: the tasks where the same method, with other seeds, is over {RATIO_LIMIT:g}x "
            "its own mean.\n\n" + to_markdown(reseeded_worst_tasks(long, reseeded)),
        ]
    if more_seeds is not None and not more_seeds.empty:
        over = tasks_over_on_more_seeds(long, more_seeds)
        parts += [
            "### The tasks over the target, on more seeds",
            "Each task where one of our defaults is over the target above, compared again on the "
            "grid's seeds and those of the folder given with `--more-seeds` together (the seeds "
            "where the method and both references ran): the ratio on the grid's seeds, the seeds "
            "compared now, the ratio on them against the better reference there, and the paired "
            "test against it (W/T/L: pairs where ours is lower / tied / higher).\n\n"
            + (to_markdown(over) if not over.empty else "(no task is over the target)"),
        ]
    parts += [
        "## Depth: the completion's share of the budget",
        f"From the decision logs (`decision_log.csv`) of {n_logged} of the {n_runs} runs (runs made "
        "before the runner kept the log, and methods without one, are not covered; runs: with a "
        "log / finished). Mean over runs of the share of the run's epochs trained in segments "
        "the incumbent completion gave (`reason` completion), and of the share it gave to trials "
        "other than the best trained configuration at the end of the run (the best value at "
        "`max_t`; every completion epoch counts there when no trial reached `max_t`); "
        "definitions in `benchmarks/depth.py`.\n\n"
        + (to_markdown(depth_table(depth, long)) if n_logged else "(no run with a decision log)"),
        "## Speed",
        "Mean wall seconds spent inside the scheduler's calls per run (`scheduler_seconds` of "
        "`run.json`: simulated runs charge no compute, this is measured apart; it depends on "
        "the machine and its load).\n\n" + to_markdown(speed_table(long)),
    ]
    if wallclock is not None:
        parts += wallclock_sections(wallclock[1], wallclock[0], wallclock_more_seeds)
    if figures:
        parts += [
            "## Figures",
            "Mean regret over the family's tasks and seeds against epochs, "
            "+- one standard error:\n\n"
            + "\n".join(f"- [`{p.name}`]({os.path.relpath(p, out.parent)})" for p in figures),
        ]
    return "\n\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "results_dir",
        nargs="?",
        default=None,
        help="results folder of the grid (benchmarks/run_benchmarks.py --results-dir); without it, "
        "--wallclock replaces the wall-clock section of the existing --out and keeps the rest",
    )
    p.add_argument("--out", default="benchmarks/RESULTS.md", help="markdown file to write")
    p.add_argument("--figures", default="benchmarks/figures", help="folder of the figures ('' for none)")
    p.add_argument(
        "--reseeded",
        default=None,
        help="results folder of references run with other seeds: held to the worst-task target",
    )
    p.add_argument(
        "--more-seeds",
        default=None,
        help="results folder of ours and the references run with other seeds on the tasks "
        "over the worst-task target (--list-tasks-over): those tasks compared again",
    )
    p.add_argument(
        "--wallclock",
        default=None,
        help="results folder of the wall-clock protocol (run_benchmarks.py --protocol "
        "wallclock): adds its section, one table per start delay",
    )
    p.add_argument(
        "--wallclock-more-seeds",
        default=None,
        help="results folder of the wall-clock protocol with other seeds on the tasks over its "
        "target (--wallclock W --list-tasks-over): those tasks compared again, per start delay",
    )
    p.add_argument(
        "--list-tasks-over",
        action="store_true",
        help="print the tasks over the worst-task target (space-separated) and exit; with "
        "--wallclock and no results_dir, those over the wall-clock target",
    )
    p.add_argument(
        "--start-delay",
        type=float,
        nargs="+",
        default=None,
        help="with --wallclock --list-tasks-over: only the tasks over at these start delays "
        "(default: any)",
    )
    args = p.parse_args(argv)
    if args.wallclock_more_seeds is not None and args.wallclock is None:
        p.error("--wallclock-more-seeds needs --wallclock")
    if args.start_delay is not None and not (args.list_tasks_over and args.results_dir is None):
        p.error("--start-delay goes with --wallclock --list-tasks-over (no results_dir)")
    for name in ("results_dir", "reseeded", "more_seeds", "wallclock", "wallclock_more_seeds"):
        folder = getattr(args, name)
        if folder is not None and not Path(folder).is_dir():
            p.error(f"{name} {folder}: not a folder")
    if args.results_dir is None:
        return _splice_main(p, args)
    runs = _as_families(load_runs(args.results_dir))
    if not runs:
        p.error(f"results_dir {args.results_dir}: no finished runs (run.json) under it")
    long = long_table(runs, FRACTIONS)
    if args.list_tasks_over:
        print(" ".join(tasks_over(long)))
        return 0
    figures = write_figures(runs, Path(args.figures)) if args.figures else []
    command = f"PYTHONPATH=. python -m benchmarks.results {args.results_dir} --out {args.out}"
    command += f" --figures {args.figures}" if args.figures else " --figures ''"
    reseeded = None
    if args.reseeded is not None:
        reseeded_runs = _as_families(load_runs(args.reseeded))
        if not reseeded_runs or any(r.summary["method"] not in REFERENCES for r in reseeded_runs):
            p.error(f"reseeded {args.reseeded}: must hold finished runs of {' or '.join(REFERENCES)} only")
        reseeded = reseeded_long_from(long_table(reseeded_runs, FRACTIONS))
        command += f" --reseeded {args.reseeded}"
    more_seeds = None
    if args.more_seeds is not None:
        more_runs = _as_families(load_runs(args.more_seeds))
        if not more_runs:
            p.error(f"more_seeds {args.more_seeds}: no finished runs (run.json) under it")
        more_seeds = long_table(more_runs, FRACTIONS)
        command += f" --more-seeds {args.more_seeds}"
    wallclock = wallclock_more = None
    if args.wallclock is not None:
        wallclock = (args.wallclock, _wallclock_long(p, args.wallclock))
        command += f" --wallclock {args.wallclock}"
        wallclock_more = _wallclock_more(p, args.wallclock_more_seeds)
        if wallclock_more is not None:
            command += f" --wallclock-more-seeds {args.wallclock_more_seeds}"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    depth = depth_per_run(args.results_dir)
    depth["benchmark"] = depth["benchmark"].map(family_of)
    text = render(
        args.results_dir, runs, long, figures, out, command, depth, reseeded, more_seeds, wallclock, wallclock_more
    )
    out.write_text(text)
    print(f"{out}: {len(out.read_text().splitlines())} lines; figures: {len(figures)} in {args.figures or '-'}")
    return 0


def _wallclock_long(p: argparse.ArgumentParser, folder: str, name: str = "wallclock") -> pd.DataFrame:
    wallclock_runs = _as_families(load_runs(folder, protocol=WALLCLOCK))
    if not wallclock_runs:
        p.error(f"{name} {folder}: no finished runs of the wall-clock protocol under it")
    return wallclock_long_table(wallclock_runs, FRACTIONS)


def _wallclock_more(p: argparse.ArgumentParser, folder: str | None) -> tuple[str, pd.DataFrame] | None:
    return None if folder is None else (folder, _wallclock_long(p, folder, "wallclock_more_seeds"))


def _splice_main(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Without ``results_dir``: the wall-clock section of the existing ``--out`` rewritten."""
    out = Path(args.out)
    if args.wallclock is None:
        p.error(
            "results_dir is required unless --wallclock is given (then the wall-clock section of --out "
            "is rewritten)"
        )
    if args.reseeded is not None or args.more_seeds is not None:
        p.error("--reseeded and --more-seeds need results_dir")
    if args.list_tasks_over:
        print(" ".join(wallclock_tasks_over(_wallclock_long(p, args.wallclock), args.start_delay)))
        return 0
    if not out.is_file():
        p.error(f"out {out}: not a file; without results_dir --wallclock rewrites the section of an existing file")
    long = _wallclock_long(p, args.wallclock)
    sections = wallclock_sections(long, args.wallclock, _wallclock_more(p, args.wallclock_more_seeds))
    out.write_text(splice_wallclock(out.read_text(), sections))
    print(f"{out}: wall-clock section rewritten from {args.wallclock}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
