"""Metrics of benchmark runs: anytime and fully-trained incumbents, normalised
regret, how a run spends its epoch budget, ranks, speed-up against random search.

Conventions (all documented here once):

* Each result row of a run is one simulated epoch (one fidelity step), so the
  number of epochs after row ``i`` (rows sorted by simulated time
  ``st_tuner_time``, ties kept in reporting order) is ``i + 1``. "After ``k``
  epochs" means the first ``k`` rows in that order; runs longer than their
  budget (several workers overshoot by a few epochs) are cut at the budget, and
  a run shorter than ``k`` epochs (table exhausted) is taken as it ended.
* The (anytime) incumbent is the best *finite* metric value seen so far at any
  epoch of any trial. NaN/inf values (diverged curves) never become incumbent;
  before the first finite value the incumbent is NaN.
* The *fully-trained* incumbent is what a user takes home: among the trials
  whose curve reached ``max_t`` within the epochs counted so far, the best
  value *at* ``max_t`` (the trained model's value, not the best epoch of such a
  trial). NaN while no trial has reached ``max_t`` (or all of those diverged).
* Normalised regret = ``(best - incumbent) / (best - worst)`` with ``best`` and
  ``worst`` from :class:`~benchmarks.table.MetricBounds` (``best_any`` and
  ``worst`` in ``run.json``; this formula is sign-correct for both directions).
  It is clipped to ``[0, 1]``; a NaN incumbent has regret 1. The fully-trained
  regret uses the same bounds, so it is never below the anytime regret, and it
  is 1 as long as no trial was trained to ``max_t``.
* Budget use after ``k`` epochs (:func:`budget_use_at_fractions`), with
  ``n = min(k, epochs of the run)``:

  - *trials started*: distinct trials with a result among the first ``n``
    epochs;
  - *trials trained*: distinct trials with a result at ``max_t`` among them;
  - *first-epoch share*: ``trials started / n``, the share of the epochs spent
    on first epochs (each started trial has exactly one);
  - *stopped-after-1 share*: the share of the ``n`` epochs spent on trials that
    never got past their first epoch, as of the end of the run (a trial paused
    after epoch 1 and resumed later does not count, even at 25 %);
  - *deepest epoch*: the highest epoch any trial reached among them (``max_t`` once
    a trial is trained; how near a run with none trained came).
* The wall-clock protocol (:mod:`benchmarks.wallclock`) counts simulated time instead:
  "after ``t`` seconds" means the results with ``st_tuner_time <= t`` (epochs trained by
  then), and 25/50/100 % are shares of the wall-clock budget (:func:`regret_at_time_fractions`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

ST_TUNER_TIME = "st_tuner_time"


def _running_best(
    values: np.ndarray, do_minimize: bool, mask: np.ndarray | None = None
) -> np.ndarray:
    """Best finite value among ``values[: i + 1]`` (only where ``mask``), NaN before the first."""
    sign = 1.0 if do_minimize else -1.0
    ok = np.isfinite(values) if mask is None else np.isfinite(values) & mask
    loss = np.where(ok, sign * values, np.inf)
    running = np.minimum.accumulate(loss) if len(loss) else loss
    return np.where(np.isfinite(running), sign * running, np.nan)


def incumbent_trajectory(
    df: pd.DataFrame,
    metric: str,
    do_minimize: bool,
    time_col: str = ST_TUNER_TIME,
    time_attr: str | None = None,
    max_t: float | None = None,
) -> pd.DataFrame:
    """
    Anytime incumbent of one run, one row per reported epoch.

    :param df: Results of one run (one row per result, columns ``metric`` and
        optionally ``time_col``, ``trial_id`` and ``time_attr``)
    :param metric: Metric column
    :param do_minimize: Whether smaller is better
    :param time_col: Simulated-time column used for ordering (if present)
    :param time_attr: Fidelity column (e.g. "epoch"); with ``max_t``, adds the
        fully-trained incumbent
    :param max_t: Maximum fidelity: a trial with a result at ``time_attr >= max_t``
        is trained to the end
    :return: DataFrame with columns ``epochs`` (1, 2, ...), ``time`` (simulated
        time of the result, NaN if unknown), ``value`` (the reported value) and
        ``incumbent``; ``trial_id`` if ``df`` has it; with ``time_attr`` and
        ``max_t``: ``level`` (the fidelity of the result) and
        ``trained_incumbent`` (best value at ``max_t`` so far, NaN before any)
    """
    if time_col in df.columns:
        df = df.sort_values(time_col, kind="stable")
        times = df[time_col].to_numpy(dtype=np.float64)
    else:
        times = np.full(len(df), np.nan)
    values = df[metric].to_numpy(dtype=np.float64)
    out = pd.DataFrame(
        {
            "epochs": np.arange(1, len(values) + 1),
            "time": times,
            "value": values,
            "incumbent": _running_best(values, do_minimize),
        }
    )
    if "trial_id" in df.columns:
        out["trial_id"] = df["trial_id"].to_numpy()
    if time_attr is not None and max_t is not None:
        level = df[time_attr].to_numpy(dtype=np.float64)
        out["level"] = level
        out["trained_incumbent"] = _running_best(values, do_minimize, mask=level >= max_t)
    return out


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
    trajectory: pd.DataFrame, epochs: Sequence[int] | np.ndarray, column: str = "incumbent"
) -> np.ndarray:
    """
    :param trajectory: Output of :func:`incumbent_trajectory`
    :param epochs: Epoch counts (>= 1); counts beyond the run's length use
        its last incumbent
    :param column: "incumbent" (anytime) or "trained_incumbent" (fully trained)
    :return: Incumbent after that many epochs (NaN for 0 epochs)
    """
    inc = trajectory[column].to_numpy()
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
    column: str = "incumbent",
) -> dict[float, float]:
    """
    Normalised regret after ``round(f * budget)`` epochs for each fraction.

    :param trajectory: Output of :func:`incumbent_trajectory`
    :param budget: Epoch budget of the run
    :param best: See :func:`normalized_regret`
    :param worst: See :func:`normalized_regret`
    :param fractions: Budget fractions
    :param column: "incumbent" (anytime regret) or "trained_incumbent"
        (fully-trained regret)
    :return: ``{fraction: regret}``
    """
    epochs = [int(round(f * budget)) for f in fractions]
    return _regret_at_epochs(trajectory, epochs, fractions, best, worst, column)


def epochs_until(trajectory: pd.DataFrame, times: Sequence[float] | np.ndarray) -> np.ndarray:
    """
    :param trajectory: Output of :func:`incumbent_trajectory` (sorted by time)
    :param times: Simulated times
    :return: Results (epochs) reported at or before each time
    """
    t = trajectory["time"].to_numpy(dtype=np.float64)
    if np.isnan(t).any():
        raise ValueError("trajectory: results without a simulated time (st_tuner_time) cannot be cut by time")
    return np.searchsorted(t, np.asarray(times, dtype=np.float64), side="right")


def regret_at_time_fractions(
    trajectory: pd.DataFrame,
    budget_seconds: float,
    best: float,
    worst: float,
    fractions: Sequence[float] = (0.25, 0.5, 1.0),
    column: str = "incumbent",
) -> dict[float, float]:
    """
    Normalised regret after ``f * budget_seconds`` of simulated time for each fraction (the
    incumbent among the results reported by then; regret 1 before the first).

    :param trajectory: Output of :func:`incumbent_trajectory`
    :param budget_seconds: Wall-clock budget of the run
    :param best: See :func:`normalized_regret`
    :param worst: See :func:`normalized_regret`
    :param fractions: Budget fractions
    :param column: "incumbent" (anytime regret) or "trained_incumbent" (fully-trained regret)
    :return: ``{fraction: regret}``
    """
    epochs = epochs_until(trajectory, [f * budget_seconds for f in fractions])
    return _regret_at_epochs(trajectory, epochs, fractions, best, worst, column)


def _regret_at_epochs(
    trajectory: pd.DataFrame,
    epochs: Sequence[int] | np.ndarray,
    fractions: Sequence[float],
    best: float,
    worst: float,
    column: str,
) -> dict[float, float]:
    """``{fraction: normalised regret of the incumbent after its epochs}`` (:func:`regret_at_fractions`,
    :func:`regret_at_time_fractions`)."""
    inc = incumbent_at_epochs(trajectory, epochs, column)
    return {f: float(normalized_regret(v, best, worst)) for f, v in zip(fractions, inc)}


def regret_curve(
    trajectory: pd.DataFrame,
    epochs: Sequence[int] | np.ndarray,
    best: float,
    worst: float,
    column: str = "incumbent",
) -> np.ndarray:
    """
    :param column: See :func:`incumbent_at_epochs`
    :return: Normalised regret after each number of ``epochs``
    """
    return normalized_regret(incumbent_at_epochs(trajectory, epochs, column), best, worst)


BUDGET_USE_KEYS = (
    "epochs", "trials_started", "trials_trained", "first_epoch_share", "stopped_after_first_share",
    "deepest_epoch",
)


def budget_use_at_fractions(
    trajectory: pd.DataFrame,
    budget: int,
    max_t: float,
    fractions: Sequence[float] = (0.25, 0.5, 1.0),
) -> dict[float, dict[str, float]]:
    """
    How a run spent its epochs after ``round(f * budget)`` epochs for each
    fraction: trials started, trials trained to ``max_t``, first-epoch share,
    stopped-after-1 share and deepest epoch (definitions in the module docstring; "the end
    of the run" is its first ``budget`` epochs).

    :param trajectory: Output of :func:`incumbent_trajectory` with ``time_attr``
        and ``max_t`` given, from results with a ``trial_id`` column
    :param budget: Epoch budget of the run
    :param max_t: Maximum fidelity
    :param fractions: Budget fractions
    :return: ``{fraction: {key: value}}`` with the keys of :data:`BUDGET_USE_KEYS`
        (``epochs`` is the number of epochs counted; shares are NaN for 0 epochs)
    """
    counts = [int(round(f * budget)) for f in fractions]
    return dict(zip(fractions, budget_use_at_epochs(trajectory, counts, budget, max_t)))


def budget_use_at_epochs(
    trajectory: pd.DataFrame, epochs: Sequence[int] | np.ndarray, end: int, max_t: float
) -> list[dict[str, float]]:
    """
    How a run spent its first epochs, after each number of ``epochs`` (see
    :func:`budget_use_at_fractions`).

    :param trajectory: See :func:`budget_use_at_fractions`
    :param epochs: Epoch counts
    :param end: Epochs of the run that count ("the end of the run")
    :param max_t: Maximum fidelity
    :return: One dict per count, with the keys of :data:`BUDGET_USE_KEYS`
    """
    run = trajectory.iloc[: max(int(end), 0)]
    ids = run["trial_id"].to_numpy()
    levels = run["level"].to_numpy(dtype=np.float64)
    at_max_t = levels >= max_t
    first_seen = ~pd.Series(ids).duplicated().to_numpy()
    if len(ids):
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        only_epoch = counts[inverse.ravel()] == 1  # row of a trial with a single epoch in the run
    else:
        only_epoch = np.zeros(0, dtype=bool)
    out = []
    for e in epochs:
        n = min(int(e), len(ids))
        started = int(first_seen[:n].sum())
        out.append({
            "epochs": n,
            "trials_started": started,
            "trials_trained": int(pd.unique(ids[:n][at_max_t[:n]]).size),
            "first_epoch_share": started / n if n else np.nan,
            "stopped_after_first_share": int(only_epoch[:n].sum()) / n if n else np.nan,
            "deepest_epoch": float(np.nanmax(levels[:n])) if n else np.nan,
        })
    return out


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
