"""Metrics of benchmark runs: anytime incumbent, normalised regret, ranks,
speed-up against random search.

Conventions (all documented here once):

* Each result row of a run is one simulated epoch (one fidelity step), so the
  number of epochs after row ``i`` (rows sorted by simulated time
  ``st_tuner_time``, ties kept in reporting order) is ``i + 1``.
* The incumbent is the best *finite* metric value seen so far at any epoch.
  NaN/inf values (diverged curves) never become incumbent; before the first
  finite value the incumbent is NaN.
* Normalised regret = ``(best - incumbent) / (best - worst)`` with ``best`` and
  ``worst`` from :class:`~benchmarks.table.MetricBounds` (this
  formula is sign-correct for both directions). It is clipped to ``[0, 1]``;
  a NaN incumbent (nothing finite seen) has regret 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

ST_TUNER_TIME = "st_tuner_time"


def incumbent_trajectory(
    df: pd.DataFrame,
    metric: str,
    do_minimize: bool,
    time_col: str = ST_TUNER_TIME,
) -> pd.DataFrame:
    """
    Anytime incumbent of one run, one row per reported epoch.

    :param df: Results of one run (one row per result, columns ``metric`` and
        optionally ``time_col``)
    :param metric: Metric column
    :param do_minimize: Whether smaller is better
    :param time_col: Simulated-time column used for ordering (if present)
    :return: DataFrame with columns ``epochs`` (1, 2, ...), ``time`` (simulated
        time of the result, NaN if unknown), ``value`` (the reported value) and
        ``incumbent``
    """
    if time_col in df.columns:
        df = df.sort_values(time_col, kind="stable")
        times = df[time_col].to_numpy(dtype=np.float64)
    else:
        times = np.full(len(df), np.nan)
    values = df[metric].to_numpy(dtype=np.float64)
    sign = 1.0 if do_minimize else -1.0
    loss = np.where(np.isfinite(values), sign * values, np.inf)
    running = np.minimum.accumulate(loss) if len(loss) else loss
    incumbent = np.where(np.isfinite(running), sign * running, np.nan)
    return pd.DataFrame(
        {
            "epochs": np.arange(1, len(values) + 1),
            "time": times,
            "value": values,
            "incumbent": incumbent,
        }
    )


def normalized_regret(
    incumbent: float | np.ndarray, best: float, worst: float
) -> float | np.ndarray:
    """
    :param incumbent: Incumbent value(s), NaN for "nothing finite seen yet"
    :param best: Best value over the table
    :param worst: Worst value used for normalisation
    :return: ``(best - incumbent) / (best - worst)`` clipped to [0, 1]; NaN
        incumbents give 1
    """
    inc = np.asarray(incumbent, dtype=np.float64)
    denom = best - worst
    if denom == 0 or not np.isfinite(denom):
        raise ValueError(f"Degenerate normalisation: best={best}, worst={worst}")
    r = np.clip((best - inc) / denom, 0.0, 1.0)
    r = np.where(np.isnan(r), 1.0, r)
    return float(r) if r.ndim == 0 else r


def incumbent_at_epochs(
    trajectory: pd.DataFrame, epochs: Sequence[int] | np.ndarray
) -> np.ndarray:
    """
    :param trajectory: Output of :func:`incumbent_trajectory`
    :param epochs: Epoch counts (>= 1); counts beyond the run's length use
        its last incumbent
    :return: Incumbent after that many epochs (NaN for 0 epochs)
    """
    inc = trajectory["incumbent"].to_numpy()
    out = np.full(len(epochs), np.nan)
    if len(inc) == 0:
        return out
    for i, e in enumerate(epochs):
        if e >= 1:
            out[i] = inc[min(int(e), len(inc)) - 1]
    return out


def regret_at_fractions(
    trajectory: pd.DataFrame,
    budget: int,
    best: float,
    worst: float,
    fractions: Sequence[float] = (0.25, 0.5, 1.0),
) -> dict[float, float]:
    """
    Normalised regret after ``round(f * budget)`` epochs for each fraction.

    :param trajectory: Output of :func:`incumbent_trajectory`
    :param budget: Epoch budget of the run
    :param best: See :func:`normalized_regret`
    :param worst: See :func:`normalized_regret`
    :param fractions: Budget fractions
    :return: ``{fraction: regret}``
    """
    epochs = [int(round(f * budget)) for f in fractions]
    inc = incumbent_at_epochs(trajectory, epochs)
    return {f: float(normalized_regret(v, best, worst)) for f, v in zip(fractions, inc)}


def regret_curve(
    trajectory: pd.DataFrame, epochs: Sequence[int] | np.ndarray, best: float, worst: float
) -> np.ndarray:
    """
    :return: Normalised regret after each number of ``epochs``
    """
    return normalized_regret(incumbent_at_epochs(trajectory, epochs), best, worst)


def average_ranks(
    df: pd.DataFrame,
    value_col: str = "regret",
    method_col: str = "method",
    group_cols: Sequence[str] = ("task", "seed", "budget_point"),
) -> pd.Series:
    """
    Ranks methods within each group (lower value = better = rank 1, ties get
    the average rank), then averages each method's ranks over all groups.

    :param df: Long table, one row per (method, group)
    :param value_col: Column to rank (e.g. normalised regret)
    :param method_col: Method column
    :param group_cols: Columns defining a group, e.g. (task, seed, budget point)
    :return: Mean rank per method, sorted ascending
    """
    ranks = df.groupby(list(group_cols))[value_col].rank(method="average")
    return ranks.groupby(df[method_col]).mean().sort_values()


def first_epoch_reaching(
    trajectory: pd.DataFrame, target: float, do_minimize: bool
) -> float:
    """
    :param trajectory: Output of :func:`incumbent_trajectory`
    :param target: Value to reach
    :param do_minimize: Whether smaller is better
    :return: First number of epochs whose incumbent is at least as good as
        ``target``, or NaN if never reached (or target is NaN)
    """
    if not np.isfinite(target):
        return np.nan
    inc = trajectory["incumbent"].to_numpy()
    ok = (inc <= target) if do_minimize else (inc >= target)
    ok &= np.isfinite(inc)
    idx = np.flatnonzero(ok)
    return float(trajectory["epochs"].to_numpy()[idx[0]]) if idx.size else np.nan


def speedup_vs_random(
    trajectory: pd.DataFrame,
    random_trajectory: pd.DataFrame,
    do_minimize: bool,
    budget: int | None = None,
) -> float:
    """
    Speed-up over random search on the same (task, seed, budget):
    ``epochs random search needs to reach its final incumbent`` divided by
    ``epochs the method needs to reach that same value``.

    * Random search never found a finite value: NaN (undefined, left out of
      averages).
    * The method never reaches the target within its budget: 0.0 (a
      pessimistic value; the report also gives the fraction of runs that reach
      it, so this is visible).

    :param trajectory: Method's trajectory (:func:`incumbent_trajectory`)
    :param random_trajectory: Random search's trajectory
    :param do_minimize: Whether smaller is better
    :param budget: If given, both trajectories are cut to this many epochs
    :return: Speed-up factor (> 1: faster than random search)
    """
    if budget is not None:
        trajectory = trajectory[trajectory["epochs"] <= budget]
        random_trajectory = random_trajectory[random_trajectory["epochs"] <= budget]
    if len(random_trajectory) == 0:
        return np.nan
    target = random_trajectory["incumbent"].to_numpy()[-1]
    if not np.isfinite(target):
        return np.nan
    e_rs = first_epoch_reaching(random_trajectory, target, do_minimize)
    e_m = first_epoch_reaching(trajectory, target, do_minimize)
    if np.isnan(e_m):
        return 0.0
    return float(e_rs / e_m)
