"""Depth: how much of a run's epoch budget the incumbent completion spends, and how much of it
goes to trials other than the best trained configuration.

Read from the decision log a freeze-thaw scheduler writes (``decision_log.csv``, columns in
:mod:`syne_dyhpo.core.decision_log`; :mod:`benchmarks.runner` copies it next to ``run.json``)
and the run's results (``results.csv.gz``: one row per epoch the scheduler saw). Runs without
a decision log (other methods, or runs made before the runner copied it) are skipped.
Both definitions are the run report's (:mod:`syne_dyhpo.report`), applied to the run as
:func:`syne_dyhpo.report.loading.run_from_frames` reads it (a log row repeated by a continued
run counts once, its last copy):

* The *completion's epochs*: the result rows whose reason is "completion" by
  :func:`syne_dyhpo.report.timeline.epoch_reasons` (the epochs the report's timeline draws
  as the completion's; :func:`~syne_dyhpo.report.timeline.reasons_by_trial` for all trials at
  once): an epoch of a trial is trained for the reason of the decision, among those that gave
  the trial a segment (``next`` in "start", "resume", "continue"), with the smallest
  ``next_epoch`` at or above the epoch (of equal ones, the first in the log).
* The *best trained configuration*: the report's model to take home,
  :func:`syne_dyhpo.report.summary.take_home`: the trial trained to ``max_t`` with the best
  finite value there (one trial; of tied ones the smallest trial id). If no trial reached
  ``max_t``, there is none, and every completion epoch went elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syne_dyhpo.report.loading import run_from_frames
from syne_dyhpo.report.summary import take_home, trial_histories
from syne_dyhpo.report.timeline import reasons_by_trial

#: decision log file a freeze-thaw scheduler writes (:data:`syne_dyhpo.core.decision_log.LOG_FILENAME`)
DECISION_LOG = "decision_log.csv"
#: the reason (:func:`~syne_dyhpo.report.timeline.epoch_reasons`) of the completion's epochs
COMPLETION = "completion"


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

    :param log: The run's decision log (columns :data:`syne_dyhpo.core.decision_log.COLUMNS`;
        empty for none)
    :param results: The run's results, one row per epoch the scheduler saw, in the order seen
        (columns ``trial_id``, ``time_attr``, ``metric``; ``st_tuner_time``, ``st_decision``
        where present)
    :param metric: Metric column of ``results``
    :param do_minimize: Whether smaller is better
    :param time_attr: Fidelity column of ``results``
    :param max_t: Maximum fidelity
    :return: ``epochs`` (result rows), ``completion_epochs``, ``completion_elsewhere``
        (completion epochs of trials other than the best trained configuration), their shares
        of ``epochs`` (``completion_share``, ``elsewhere_share``; NaN for a run without epochs)
        and ``best_trained`` (the best trained configuration's trial id; None if there is none)
    """
    run = run_from_frames(results, log, metric, "min" if do_minimize else "max", time_attr, max_t)
    histories = trial_histories(run)
    best = take_home(run, histories).trial_id
    spent = elsewhere = 0
    for trial_id, reasons in reasons_by_trial(run, histories).items():
        n_completion = sum(r == COMPLETION for r in reasons)
        spent += n_completion
        elsewhere += n_completion if trial_id != best else 0
    n = len(results)
    return {
        "epochs": n,
        "completion_epochs": spent,
        "completion_elsewhere": elsewhere,
        "completion_share": spent / n if n else np.nan,
        "elsewhere_share": elsewhere / n if n else np.nan,
        "best_trained": best,
    }


def depth_per_run(results_dir: str | Path) -> pd.DataFrame:
    """
    :param results_dir: Root folder given to :mod:`benchmarks.runner`
    :return: One row per finished run (``run.json``) of the epoch protocol with a decision log next to it:
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
        if s.get("protocol", "epochs") != "epochs":  # a wall-clock run (benchmarks.wallclock)
            continue
        d = s["definition"]
        depth = completion_depth(
            pd.read_csv(log_file), pd.read_csv(run_file.parent / RESULTS_FILE),
            d["metric"], d["do_minimize"], d["time_attr"], d["max_t"],
        )
        rows.append({"benchmark": s["benchmark"], "task": s["task"], "method": s["method"], "seed": s["seed"],
                     "n_workers": s["n_workers"], **depth})
    per_run = pd.DataFrame(rows, columns=["benchmark", "task", "method", "seed", "n_workers", "epochs",
                                          "completion_epochs", "completion_elsewhere", "completion_share",
                                          "elsewhere_share", "best_trained"])
    per_run["best_trained"] = per_run["best_trained"].astype("Int64")  # a trial id, <NA> for none
    return per_run
