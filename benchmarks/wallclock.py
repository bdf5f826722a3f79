"""The wall-clock protocol of the lab: the budget is simulated time, and every job start costs a
start delay.

A run of this protocol (:class:`benchmarks.runner.RunSpec` with ``protocol="wallclock"``) is
simulated by Syne Tune's simulator with these settings:

* **Epoch times** are the table's (the blackbox's elapsed-time objective, LCBench's ``time``;
  TaskSet's ``time`` counts steps, so every step costs one second). The simulator charges a
  job the table's cumulative time since the level it started from (Syne Tune forces each
  result's elapsed time to grow by at least 0.01 s).
* **Job starts**: Syne Tune's ``SimulatorBackend._schedule`` serves both ``start_trial`` (a new
  trial) and ``resume_trial`` (a paused one) and begins the job ``delay_start`` after it was
  scheduled: a start and a resume cost the same. A trial that keeps running (decision
  ``CONTINUE``) is not scheduled again and pays nothing. :func:`simulator_config` sets
  ``delay_start`` to the start delay and every other delay of :class:`SimulatorConfig` to 0.
  Each pause or stop of a running job still advances the clock by 2 ms (two fixed steps of
  ``1e-3`` in ``SimulatorBackend._stop_or_pause_trial``).
* **The Tuner's sleep** advances the clock to the next event of the simulator (a result, a job
  beginning or ending; :class:`EventDrivenSimulatorCallback`) instead of a fixed step: a
  result reaches the scheduler at the time it is reported, and a worker is never idle waiting
  for the Tuner's next poll.

With one worker the clock then follows exactly: the ``k``-th result (in time order) arrives at
``sum of the epoch times of results 1..k + d x (job starts scheduled before it) + 0.002 x
(pauses and stops before it)``.

* **Units**: per task, the *median* and the *mean* epoch time of the table (every epoch of every
  configuration and seed, an epoch's time being the increase of the cumulative time; the first
  epoch's is its cumulative time). The start delay is a multiple of the median (0, 1x, 10x); the
  wall-clock budget is the epoch budget times the mean, divided by the number of workers: the
  worker time the epoch budget takes on average when whole curves are trained, shared by the
  workers, so that at delay 0 the two protocols spend about the same. A task's own median and
  mean are taken (not its family's): LCBench's tasks differ in their median epoch time by more
  than ten times (0.6 s to 8 s), and a family-wide unit would give a slow task a fraction of its
  epoch budget and a fast one a start delay of many epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from syne_tune.backend.simulator_backend.simulator_backend import SimulatorConfig
from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
from syne_tune.backend.trial_status import Status, Trial
from syne_tune.optimizer.scheduler import SchedulerDecision
from syne_tune.tuner_callback import TunerCallback

EPOCHS = "epochs"
"""The epoch-budget protocol (the papers'): the budget counts epochs, job starts are free."""
WALLCLOCK = "wallclock"
"""The wall-clock protocol: the budget is simulated time, every job start costs a delay."""
PROTOCOLS = (EPOCHS, WALLCLOCK)

#: Start delays the lab runs, in multiples of the task's median epoch time
START_DELAYS = (0.0, 1.0, 10.0)

JOBS_FILE = "jobs.csv"
"""File of a wall-clock run listing its job starts, resumes, pauses and stops (:class:`JobLog`)."""

#: :class:`JobLog` kinds that begin a job (each costs the start delay)
JOB_STARTS = ("start", "resume")

#: Simulated seconds one pause or stop of a running job takes in Syne Tune's simulator
#: (``SimulatorBackend._stop_or_pause_trial`` advances its clock by ``1e-3`` twice)
STOP_SECONDS = 2e-3


@dataclass(frozen=True)
class EpochTimes:
    """
    A task's epoch times (see the module docstring).

    :param median: Median epoch time (s): the unit of the start delay
    :param mean: Mean epoch time (s): the unit of the wall-clock budget
    """

    median: float
    mean: float


def epoch_times(bb, elapsed_time_attr: str) -> EpochTimes:
    """
    :param bb: Blackbox of one task (``BlackboxTabular``)
    :param elapsed_time_attr: Its objective holding the cumulative training time
    :return: Median and mean over every finite epoch time of the table
    :raises ValueError: if the table has no finite epoch time
    """
    j = bb.objectives_names.index(elapsed_time_attr)
    cumulative = bb.objectives_evaluations[..., j].astype(np.float64)
    per_epoch = np.diff(cumulative, axis=-1, prepend=0.0)
    per_epoch = per_epoch[np.isfinite(per_epoch)]
    if per_epoch.size == 0:
        raise ValueError(f"elapsed_time_attr={elapsed_time_attr!r}: no finite epoch time in the table")
    return EpochTimes(median=float(np.median(per_epoch)), mean=float(np.mean(per_epoch)))


def simulator_config(start_delay_seconds: float) -> SimulatorConfig:
    """
    :param start_delay_seconds: Simulated seconds between scheduling a job (a new trial or a
        resume) and its first epoch
    :return: Syne Tune's simulator settings charging that delay and no other
    :raises ValueError: for a negative or non-finite delay
    """
    if not np.isfinite(start_delay_seconds) or start_delay_seconds < 0:
        raise ValueError(f"start_delay_seconds={start_delay_seconds}: must be finite and >= 0")
    return SimulatorConfig(
        delay_on_trial_result=0.0,
        delay_complete_after_final_report=0.0,
        delay_complete_after_stop=0.0,
        delay_start=float(start_delay_seconds),
        delay_stop=0.0,
    )


def next_event_time(backend) -> float | None:
    """
    :param backend: A Syne Tune ``SimulatorBackend``
    :return: Simulated time of its next event, None when none is pending
    """
    state = getattr(backend, "_simulator_state", None)
    heap = getattr(state, "event_heap", None)
    if heap is None:
        raise RuntimeError(
            "This Syne Tune version's SimulatorBackend has no _simulator_state.event_heap; "
            "update benchmarks.wallclock.next_event_time"
        )
    return float(heap[0][0]) if heap else None


class EventDrivenSimulatorCallback(SimulatorCallback):
    """
    Syne Tune's :class:`SimulatorCallback` whose Tuner sleeps until the simulator's next event
    (a fixed ``tuner_sleep_time`` when none is pending), so that results are seen and workers
    refilled at the simulated time they happen.
    """

    def on_tuning_start(self, tuner):
        super().on_tuning_start(tuner)
        self._backend = tuner.trial_backend

    def on_tuning_sleep(self, sleep_time: float):
        when = next_event_time(self._backend)
        if when is None:
            self._time_keeper.advance(self._tuner_sleep_time)
        else:
            self._time_keeper.advance_to(when)


class JobLog(TunerCallback):
    """
    Records, with its simulated time, every job the Tuner starts (``start``: a new trial;
    ``resume``: a paused one; the time is when it was scheduled, the job's first epoch begins
    the start delay later) and every job the scheduler ends (``pause``; ``stop``: a ``STOP`` of
    a job not completed yet; the time is the result's, before the backend's 2 ms of
    :data:`STOP_SECONDS`).
    """

    COLUMNS = ("time", "trial_id", "kind")

    def __init__(self):
        self.rows: list[tuple[float, int, str]] = []
        self._time_keeper = None

    def on_tuning_start(self, tuner):
        self._time_keeper = tuner.trial_backend.time_keeper

    def _add(self, trial_id: int, kind: str) -> None:
        self.rows.append((float(self._time_keeper.time()), int(trial_id), kind))

    def on_start_trial(self, trial: Trial):
        self._add(trial.trial_id, "start")

    def on_resume_trial(self, trial: Trial):
        self._add(trial.trial_id, "resume")

    def on_trial_result(self, trial: Trial, status: str, result: dict[str, Any], decision: str):
        # called before the Tuner acts on the decision: it pauses on every PAUSE, and on a STOP
        # stops a job whose status is not completed
        if decision == SchedulerDecision.PAUSE:
            self._add(trial.trial_id, "pause")
        elif decision == SchedulerDecision.STOP and status != Status.completed:
            self._add(trial.trial_id, "stop")

    def frame(self) -> pd.DataFrame:
        """:return: One row per event: ``time``, ``trial_id``, ``kind``"""
        return pd.DataFrame(self.rows, columns=list(self.COLUMNS))


def job_starts_until(jobs: pd.DataFrame, times: np.ndarray | list[float]) -> np.ndarray:
    """
    :param jobs: A :class:`JobLog` frame (``jobs.csv``)
    :param times: Simulated times
    :return: Jobs started or resumed (scheduled) at or before each time
    """
    starts = np.sort(jobs.loc[jobs["kind"].isin(JOB_STARTS), "time"].to_numpy(dtype=np.float64))
    return np.searchsorted(starts, np.asarray(times, dtype=np.float64), side="right")
