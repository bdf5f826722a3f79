"""Where the workers' time went in wall-clock runs (a study of issue 50's open question: why
ours are over the target on some LCBench tasks at a delay of 0): per (family or task, workers,
method), the trials started and epochs trained within the budget, and the shares of the worker
time (``budget_seconds x n_workers``) spent in the new trials' first epochs, in all later
epochs, and in neither (job starts, idle workers, the epochs the budget's end cut off).

A job's training time is the ``elapsed_time_attr`` of its last result within the budget: Syne
Tune's simulator reports it from the job's start (a resumed job's from its resume). A trial's
first epoch is the ``elapsed_time_attr`` of its result at epoch 1. LCBench's first epoch costs
about three times the median epoch, so a method that starts many trials pays for it in time.

It also says when the first configuration was trained to ``max_t`` (the fully-trained regret is 1
until then), as a share of the budget, the share of the runs that had one by 25 % of it, and
that configuration's seconds per epoch over the task's mean epoch time (a slow leader takes
longer to complete). From the decision log: when the incumbent completion first resumed a trial,
and that trial's seconds per epoch, as far as the results showed them then, over the median
trial's (a leader whose slowness shows only later cannot be avoided when it is chosen).

Command line::

    python -m benchmarks.worker_time results/wallclock results/wallclock-more-seeds \\
        --start-delay 0 --tasks credit-g car
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.depth import DECISION_LOG
from benchmarks.report import FRACTIONS, RESULTS_FILE, RUN_FILE, method_order, protocol_of, to_markdown
from benchmarks.results import FAMILIES
from benchmarks.wallclock import JOB_STARTS, JOBS_FILE, WALLCLOCK

#: the report's first point of the budget, and the column of the runs with a configuration
#: trained to ``max_t`` by then
FIRST_POINT = min(FRACTIONS)
TRAINED_BY = f"trained by {round(100 * FIRST_POINT)} %"
#: the columns of :func:`first_completion`
COMPLETION_FROM, LEADER_SLOWNESS = "completion from", "its leader's epoch / median"
COMPLETION_COLUMNS = (COMPLETION_FROM, LEADER_SLOWNESS)


def _with_jobs(results: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """``results`` with the column ``job``: the index of the result's job among its trial's
    (the last one begun before it: a job's first result comes after its start; a result at a
    resume's time ends the job before)."""
    begins = jobs[jobs["kind"].isin(JOB_STARTS)]
    job = pd.Series(0, index=results.index, dtype=int)
    for trial_id, of_trial in results.groupby("trial_id"):
        starts = np.sort(begins.loc[begins["trial_id"] == trial_id, "time"].to_numpy())
        job[of_trial.index] = np.searchsorted(starts, of_trial["st_tuner_time"].to_numpy(), side="left")
    return results.assign(job=job)


def _later_epoch_seconds(results: pd.DataFrame, epoch_attr: str, elapsed_attr: str) -> pd.Series:
    """Per trial, its mean seconds per epoch after each job's first result (which holds the
    job's start), from ``results`` with the column ``job``; trials with none are left out."""
    ordered = results.sort_values(["trial_id", "job", epoch_attr])
    steps = ordered.groupby(["trial_id", "job"])[[epoch_attr, elapsed_attr]].diff().dropna()
    steps = steps[steps[epoch_attr] > 0].join(ordered["trial_id"])
    totals = steps.groupby("trial_id")[[elapsed_attr, epoch_attr]].sum()
    return totals[elapsed_attr] / totals[epoch_attr]


def first_completion(results: pd.DataFrame, log: pd.DataFrame | None, summary: dict) -> tuple[float, float]:
    """When the incumbent completion first resumed a trial, and how slow that trial was known
    to be then.

    :param results: the run's results with the column ``job`` (:func:`_with_jobs`)
    :param log: its decision log (``time``, ``reason``, ``next_trial_id``), None if it has none
    :param summary: its ``run.json``
    :return: the share of the budget at the first decision whose reason is ``completion``, and
        that trial's mean seconds per later epoch over the median of all trials' (both from
        the results seen by then); NaN where there is no such decision or the trial had no
        later epoch yet
    """
    if log is None or "reason" not in log.columns:
        return np.nan, np.nan
    completions = log[log["reason"] == "completion"]
    if completions.empty:
        return np.nan, np.nan
    first = completions.iloc[0]
    definition = summary["definition"]
    seen = results[results["st_tuner_time"] <= first["time"]]
    seconds = _later_epoch_seconds(seen, definition["time_attr"], definition["elapsed_time_attr"])
    leader = int(first["next_trial_id"])
    slowness = seconds[leader] / seconds.median() if leader in seconds.index else np.nan
    return float(first["time"]) / summary["budget_seconds"], float(slowness)


def run_worker_time(
    results: pd.DataFrame, jobs: pd.DataFrame, summary: dict, log: pd.DataFrame | None = None
) -> dict:
    """One wall-clock run's use of its workers' time.

    :param results: the run's results (``trial_id``, ``st_tuner_time``, the time attribute and
        the elapsed-time attribute of its definition)
    :param jobs: its job log (``time``, ``trial_id``, ``kind``)
    :param summary: its ``run.json``
    :param log: its decision log, None if it has none (the completion's columns are NaN)
    :return: trials, epochs, ``first epochs`` / ``later epochs`` / ``rest`` (shares of the worker
        time), ``seconds per later epoch``, ``first trained`` (the share of the budget when the
        first configuration reached ``max_t``; NaN when none did within it), ``trained by 25 %``
        (:data:`TRAINED_BY`, by the report's first point of the budget: 1.0 or 0.0), ``its
        epoch / mean`` (that configuration's training seconds per epoch over
        ``epoch_time_mean``; NaN when none), and ``completion from`` and ``its leader's epoch /
        median`` (:func:`first_completion`)
    """
    definition, budget = summary["definition"], summary["budget_seconds"]
    epoch_attr, elapsed_attr = definition["time_attr"], definition["elapsed_time_attr"]
    within = _with_jobs(results[results["st_tuner_time"] <= budget], jobs)
    trained_of_trial = within.groupby(["trial_id", "job"])[elapsed_attr].last().groupby("trial_id").sum().to_dict()
    trained = sum(trained_of_trial.values())
    max_t = definition["max_t"]
    at_max_t = within[within[epoch_attr] >= max_t].sort_values("st_tuner_time")
    if at_max_t.empty:
        first_trained, its_epoch = np.nan, np.nan
    else:
        first_trained = at_max_t["st_tuner_time"].iloc[0] / budget
        its_epoch = trained_of_trial[at_max_t["trial_id"].iloc[0]] / max_t / summary["epoch_time_mean"]
    first = within.loc[within[epoch_attr] == 1, elapsed_attr]
    worker_seconds = budget * summary["n_workers"]
    later_epochs = len(within) - len(first)
    return {
        "trials": within["trial_id"].nunique(),
        "epochs": len(within),
        "first epochs": first.sum() / worker_seconds,
        "later epochs": (trained - first.sum()) / worker_seconds,
        "rest": 1.0 - trained / worker_seconds,
        "seconds per later epoch": (trained - first.sum()) / later_epochs if later_epochs else np.nan,
        "first trained": first_trained,
        TRAINED_BY: float(first_trained <= FIRST_POINT),
        "its epoch / mean": its_epoch,
        **dict(zip(COMPLETION_COLUMNS, first_completion(within, log, summary))),
    }


def worker_time_table(
    results_dirs: Sequence[str | Path],
    start_delay: float | None = None,
    tasks: Sequence[str] | None = None,
    by_trained: bool = False,
) -> pd.DataFrame:
    """
    :param results_dirs: folders of wall-clock runs (searched recursively)
    :param start_delay: only the runs of this start delay (None: all)
    :param tasks: one row per task of these (None: one row per family)
    :param by_trained: rows of the runs with and without a configuration trained to ``max_t``
        by the first point of the budget (:data:`TRAINED_BY`) apart (default: together)
    :return: per (start delay, family or task, workers, method): runs and the means of
        :func:`run_worker_time` (``first trained`` and ``its epoch / mean``: over the runs that
        trained a configuration to ``max_t`` within the budget; the completion's columns over
        the runs where they are defined)
    """
    rows = []
    for run_file in sorted(f for d in results_dirs for f in Path(d).rglob(RUN_FILE)):
        summary = json.loads(run_file.read_text())
        if protocol_of(summary) != WALLCLOCK:
            continue
        if start_delay is not None and not np.isclose(summary["start_delay"], start_delay):
            continue
        if tasks is not None and summary["task"] not in tasks:
            continue
        results = pd.read_csv(run_file.parent / RESULTS_FILE)
        jobs = pd.read_csv(run_file.parent / JOBS_FILE)
        log_file = run_file.parent / DECISION_LOG
        log = pd.read_csv(log_file) if log_file.is_file() else None
        where = summary["task"] if tasks is not None else FAMILIES.get(summary["benchmark"], summary["benchmark"])
        rows.append({"start delay": summary["start_delay"], "where": where, "workers": summary["n_workers"],
                     "method": summary["method"], **run_worker_time(results, jobs, summary, log)})
    if not rows:
        return pd.DataFrame()
    per_run = pd.DataFrame(rows)
    keys = ["start delay", "where", "workers", *([TRAINED_BY] if by_trained else [])]
    table = per_run.groupby([*keys, "method"], sort=False).agg(
        runs=("trials", "size"), **{c: (c, "mean") for c in per_run.columns if c not in [*keys, "method"]}
    ).reset_index()
    order = {m: i for i, m in enumerate(method_order(table["method"].unique()))}
    table = table.sort_values([*keys, "method"], key=lambda c: c.map(order) if c.name == "method" else c)
    table = table.round({"trials": 1, "first epochs": 3, "later epochs": 3, "rest": 3, "seconds per later epoch": 2,
                         "first trained": 3, TRAINED_BY: 3, "its epoch / mean": 2,
                         COMPLETION_FROM: 3, LEADER_SLOWNESS: 2})
    return table.assign(epochs=table["epochs"].round().astype(int))


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("results_dirs", nargs="+", help="folders of wall-clock runs")
    p.add_argument("--start-delay", type=float, default=None, help="only the runs of this start delay")
    p.add_argument("--tasks", nargs="+", default=None, help="a row per task of these (default: per family)")
    p.add_argument("--by-trained", action="store_true",
                   help=f"rows of the runs with and without a configuration trained to max_t by "
                   f"{round(100 * FIRST_POINT)} %% of the budget apart")
    args = p.parse_args(argv)
    for d in args.results_dirs:
        if not Path(d).is_dir():
            p.error(f"results_dirs: {d!r} is not a folder")
    table = worker_time_table(args.results_dirs, args.start_delay, args.tasks, args.by_trained)
    print(to_markdown(table) if not table.empty else "(no wall-clock runs)")


if __name__ == "__main__":
    main()
