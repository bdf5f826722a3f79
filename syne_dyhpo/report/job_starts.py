"""Job starts, and the share of worker time they took (docs/report.md defines both).

Every segment a scheduler grants is a job start: the first start of a trial and each resume (a
new process on ``LocalBackend``, a new training job on SageMaker, a restarted actor under Ray
Tune). A trial's job starts are the larger of its segments seen in the results and the starts
and resumes the decision log gave it (a job started at the end of a run may not have reported);
a trial known only to have started counts one.

The time a job start took is measured per job: from the decision that started or resumed it
(the decision log's ``t``, the Tuner's clock) to the job's first result, less the time of one
epoch of that trial: the median time between consecutive results within its segments, else the
median over all trials of the run. A job measured faster than that epoch time counts 0. The
share is the sum over the jobs measured, divided by the worker time, ``n_workers`` times the
run's time (from 0 to the last result or decision). It is unknown, with the reason, when the
number of workers is not known, no epoch time can be measured (every segment one epoch long),
the results are not on the log's clock, or no job has both its decision and its first result.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from syne_dyhpo.report.loading import Run


@dataclass
class JobStarts:
    """Job starts of a run and the time they took.

    :param count: job starts (first starts and resumes)
    :param first_starts: trials started
    :param measured: job starts whose time was measured (decision and first result known)
    :param seconds: their time beyond an epoch, summed (None: unknown)
    :param epoch_seconds: the run's median epoch time (None: unknown)
    :param run_seconds: the run's time, from 0 to its last result or decision
    :param n_workers: the number of workers (None: unknown)
    :param worker_seconds: ``n_workers`` times the run's time (None: unknown)
    :param share: ``seconds / worker_seconds`` (None: unknown)
    :param unknown: why the share is unknown (None if it is known)
    """

    count: int
    first_starts: int
    measured: int = 0
    seconds: float | None = None
    epoch_seconds: float | None = None
    run_seconds: float = 0.0
    n_workers: int | None = None
    worker_seconds: float | None = None
    share: float | None = None
    unknown: str | None = None


#: ``next`` of the decisions that start a job
JOB_DECISIONS = ("start", "resume")


def segment_start_times(run: Run, h) -> dict[int, float]:
    """Index of a segment's first result -> ``t`` of the decision that gave the trial that
    segment (a start or resume of the trial ending at or after the segment's first epoch, made
    before its first result; of several, the one with the nearest end, the latest of those).

    :param h: the trial's :class:`~syne_dyhpo.report.summary.TrialHistory`
    """
    log = run.log
    if not len(log) or "t" not in log or not run.clocks_aligned:
        return {}
    chosen = log[(log["next_trial_id"] == h.trial_id) & log["next"].isin(JOB_DECISIONS)]
    rows = list(zip(chosen["next_epoch"].astype(float), chosen["t"].astype(float)))
    out = {}
    for i in h.segment_starts:
        if i >= len(h.times):
            continue
        fits = [(e, t) for e, t in rows if e >= h.epochs[i] and t <= h.times[i]]
        if fits:
            out[i] = min(fits, key=lambda p: (p[0], -p[1]))[1]
    return out


def epoch_times(h) -> list[float]:
    """Seconds between consecutive results within the trial's segments."""
    bounds = [*h.segment_starts, len(h.times)]
    gaps = []
    for start, end in itertools.pairwise(bounds):
        times = h.times[start:end]
        gaps += [b - a for a, b in itertools.pairwise(times)]
    return gaps


def job_starts(run: Run, histories: dict) -> JobStarts:
    """Counts the run's job starts and measures their share of worker time (module docstring).

    :param histories: :func:`~syne_dyhpo.report.summary.trial_histories` of ``run``
    """
    log = run.log
    granted: dict[int, int] = {}
    if len(log):
        jobs = log[log["next"].isin(JOB_DECISIONS)].dropna(subset=["next_trial_id"])
        granted = {int(k): int(v) for k, v in jobs["next_trial_id"].astype(int).value_counts().items()}
    count = sum(max(len(h.segment_starts) if h.epochs else 0, granted.get(tid, 0), 1) for tid, h in histories.items())
    result = JobStarts(count=count, first_starts=len(histories))
    all_gaps = [g for h in histories.values() for g in epoch_times(h)]
    result.epoch_seconds = float(np.median(all_gaps)) if all_gaps else None
    end = max([0.0, *(t for h in histories.values() for t in h.times)]
              + ([float(log["t"].max())] if len(log) and "t" in log else []))
    result.run_seconds, result.n_workers = end, run.n_workers
    if run.n_workers is not None:
        result.worker_seconds = run.n_workers * end
    overheads = []
    if result.epoch_seconds is not None:
        for h in histories.values():
            gaps = epoch_times(h)
            epoch = float(np.median(gaps)) if gaps else result.epoch_seconds
            for i, decided in segment_start_times(run, h).items():
                overheads.append(max(h.times[i] - decided - epoch, 0.0))
    result.measured = len(overheads)
    if not run.clocks_aligned:
        result.unknown = ("Ray Tune's results are not on the decision log's clock (syne_dyhpo_run.json has no "
                          "start_timestamp, or the log has several sessions)")
    elif not len(log):
        result.unknown = "no decision log: when each job was started is not known"
    elif result.epoch_seconds is None:
        result.unknown = ("no segment of two or more epochs: an epoch's time cannot be told apart from a job "
                          "start's")
    elif not overheads:
        result.unknown = "no job has both its start decision in the log and a result"
    if result.unknown is None:
        result.seconds = float(sum(overheads))
        if result.worker_seconds is None:
            result.unknown = "the number of workers is not recorded (syne_dyhpo_run.json); give --n-workers"
        elif result.worker_seconds > 0 and math.isfinite(result.worker_seconds):
            result.share = result.seconds / result.worker_seconds
        else:
            result.unknown = "the run took no time"
    return result
