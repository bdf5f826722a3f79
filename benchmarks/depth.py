"""Depth: how much of a run's epoch budget the incumbent completion spends, and how much of it
goes to leaders that did not end up the best trained configuration.

Read from the decision log a freeze-thaw scheduler writes (``decision_log.csv``, columns in
:mod:`syne_dyhpo.core.decision_log`; :mod:`benchmarks.runner` copies it next to ``run.json``)
and the run's results (``results.csv.gz``: one row per epoch the scheduler saw). Runs without
a decision log (other methods, or runs made before the runner copied it) are skipped.

* A *completion segment*: every log row with ``reason == "completion"`` and ``next`` in
  ("continue", "resume") gives trial ``next_trial_id`` the epochs ``(start, next_epoch]``.
  ``start`` is the row's own ``epoch`` for a "continue" row; for a "resume" row it is the
  trial's last epoch before the row: the ``epoch`` of the latest row of that trial (its
  ``trial_id``) up to and including this one, in decision order (``session``, ``decision``);
  if the log has none, the trial's last epoch in the results at or before the row's ``time``
  (``st_tuner_time``), else 0.
* The *completion's epochs*: the result rows of a trial whose epoch (``time_attr``) falls into
  one of its completion segments.
* The *best trained configuration*: the trial(s) whose finite value at ``max_t``
  (``time_attr >= max_t``) is the best of the run (ties: every tied trial). If no trial
  reached ``max_t``, there is none, and every completion epoch went elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: decision log file a freeze-thaw scheduler writes (:data:`syne_dyhpo.core.decision_log.LOG_FILENAME`)
DECISION_LOG = "decision_log.csv"
#: ``reason`` of the completion's decisions in the decision log
COMPLETION = "completion"
#: ``next`` of the decisions that give a trial more epochs
SCHEDULES = ("continue", "resume")
ST_TUNER_TIME = "st_tuner_time"


def best_trained_trials(
    results: pd.DataFrame, metric: str, do_minimize: bool, time_attr: str, max_t: float
) -> set:
    """
    :param results: One row per reported epoch (columns ``trial_id``, ``time_attr``, ``metric``)
    :param metric: Metric column
    :param do_minimize: Whether smaller is better
    :param time_attr: Fidelity column
    :param max_t: Maximum fidelity
    :return: The trials with the best finite value at ``max_t`` (every tied one; empty if no
        trial has a finite value there)
    """
    at_max = results[(results[time_attr] >= max_t) & np.isfinite(results[metric].astype(float))]
    if at_max.empty:
        return set()
    values = at_max[metric].astype(float)
    best = values.min() if do_minimize else values.max()
    return set(at_max.loc[values == best, "trial_id"].tolist())


def _last_epoch_in_results(results: pd.DataFrame, trial_id: Any, time_attr: str, when: float) -> float:
    if ST_TUNER_TIME not in results.columns or not np.isfinite(when):
        return 0.0
    seen = results[(results["trial_id"] == trial_id) & (results[ST_TUNER_TIME] <= when)]
    return float(seen.sort_values(ST_TUNER_TIME, kind="stable")[time_attr].iloc[-1]) if len(seen) else 0.0


def completion_segments(log: pd.DataFrame, results: pd.DataFrame, time_attr: str) -> pd.DataFrame:
    """
    :param log: A run's decision log (columns ``trial_id``, ``epoch``, ``next``,
        ``next_trial_id``, ``next_epoch``, ``reason``; ``session``, ``decision`` and ``time``
        where present)
    :param results: The run's results (see :func:`best_trained_trials`; ``st_tuner_time`` where
        present)
    :param time_attr: Fidelity column of ``results``
    :return: One row per completion segment (module docstring): ``trial_id``, ``start``, ``end``
    """
    order = [c for c in ("session", "decision") if c in log.columns]
    log = log.sort_values(order, kind="stable") if order else log
    last_epoch: dict[Any, float] = {}
    segments = []
    for row in log.itertuples(index=False):
        if pd.notna(row.trial_id) and pd.notna(row.epoch):
            last_epoch[row.trial_id] = float(row.epoch)
        if row.reason != COMPLETION or row.next not in SCHEDULES:
            continue
        trial = row.next_trial_id
        if row.next == "continue":
            start = float(row.epoch)
        elif trial in last_epoch:
            start = last_epoch[trial]
        else:
            start = _last_epoch_in_results(results, trial, time_attr, float(getattr(row, "time", np.nan)))
        segments.append({"trial_id": trial, "start": start, "end": float(row.next_epoch)})
    return pd.DataFrame(segments, columns=["trial_id", "start", "end"])


def completion_depth(
    log: pd.DataFrame,
    results: pd.DataFrame,
    metric: str,
    do_minimize: bool,
    time_attr: str,
    max_t: float,
) -> dict[str, Any]:
    """
    The epochs of one run the completion spent, and those it spent on trials other than the
    best trained configuration (definitions in the module docstring).

    :param log: The run's decision log (see :func:`completion_segments`)
    :param results: The run's results, one row per epoch the scheduler saw (columns
        ``trial_id``, ``time_attr``, ``metric``)
    :param metric: Metric column of ``results``
    :param do_minimize: Whether smaller is better
    :param time_attr: Fidelity column of ``results``
    :param max_t: Maximum fidelity
    :return: ``epochs`` (result rows), ``completion_epochs``, ``completion_elsewhere``
        (completion epochs of trials other than the best trained ones), their shares of
        ``epochs`` (``completion_share``, ``elsewhere_share``; NaN for a run without epochs)
        and ``best_trained`` (sorted trial ids)
    """
    if log.empty:
        segments = pd.DataFrame(columns=["trial_id", "start", "end"])
    else:
        segments = completion_segments(log, results, time_attr)
    trials = results["trial_id"].to_numpy()
    level = results[time_attr].to_numpy(dtype=np.float64)
    spent = np.zeros(len(results), dtype=bool)
    for seg in segments.itertuples(index=False):
        spent |= (trials == seg.trial_id) & (level > seg.start) & (level <= seg.end)
    best = best_trained_trials(results, metric, do_minimize, time_attr, max_t)
    elsewhere = spent & ~np.isin(trials, list(best))
    n = len(results)
    return {
        "epochs": n,
        "completion_epochs": int(spent.sum()),
        "completion_elsewhere": int(elsewhere.sum()),
        "completion_share": spent.sum() / n if n else np.nan,
        "elsewhere_share": elsewhere.sum() / n if n else np.nan,
        "best_trained": sorted(best),
    }


def depth_per_run(results_dir: str | Path) -> pd.DataFrame:
    """
    :param results_dir: Root folder given to :mod:`benchmarks.runner`
    :return: One row per finished run (``run.json``) with a decision log next to it:
        ``benchmark``, ``task``, ``method``, ``seed``, ``n_workers`` and the numbers of
        :func:`completion_depth`
    """
    from benchmarks.runner import RESULTS_FILE, RUN_FILE

    rows = []
    for run_file in sorted(Path(results_dir).rglob(RUN_FILE)):
        log_file = run_file.parent / DECISION_LOG
        if not log_file.exists():
            continue
        s = json.loads(run_file.read_text())
        d = s["definition"]
        depth = completion_depth(
            pd.read_csv(log_file), pd.read_csv(run_file.parent / RESULTS_FILE),
            d["metric"], d["do_minimize"], d["time_attr"], d["max_t"],
        )
        rows.append({"benchmark": s["benchmark"], "task": s["task"], "method": s["method"], "seed": s["seed"],
                     "n_workers": s["n_workers"], **depth})
    return pd.DataFrame(rows, columns=["benchmark", "task", "method", "seed", "n_workers", "epochs",
                                       "completion_epochs", "completion_elsewhere", "completion_share",
                                       "elsewhere_share", "best_trained"])
