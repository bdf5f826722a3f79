"""Decisions that pay for job starts: a winning trial keeps running, and the acquisition is
weighed by the seconds each candidate costs.

The papers treat a resume as free. On a real backend every segment given to a paused or new
trial is a job start (a new process on ``LocalBackend``, a new training job on SageMaker),
and its price is paid before the first epoch. With :class:`JobCosts` passed to the scheduler:

1. **A winning trial keeps running.** A started or resumed job is told (through
   ``max_resource_attr``) to run to ``max_t``. At each segment end the reporting trial gets
   CONTINUE when it wins the decision, and PAUSE only when it loses. On Syne Tune's simulator
   nothing is lost; on a real backend the job trains on between its report and the pause, and
   Syne Tune drops what it reports after the pause: those epochs are lost, an expected loss
   (:class:`~syne_dyhpo.core.trials.TrialLifecycle` logs it at INFO and records the epochs as
   missing, and a resumed job whose checkpoint is ahead of the last result leaves a gap).
2. **Costs learned from the results' own timestamps** (:class:`JobTimer`): the seconds of an
   epoch from consecutive results of one job, for each trial and over all trials, and the
   seconds of a start from the time
   between the decision that started or resumed a job and its first result, less the epochs
   it reports, apart for new trials and resumes (a new trial's first epoch may take longer
   than later ones, as LCBench's do: that is part of the price of a new trial, not of a
   resume). A user may pass the start cost instead (``JobCosts.start_seconds``).
3. **A segment grows with the square root of the start** (``segment_factor``). A job started
   or resumed now trains ``ceil(segment_factor x sqrt(start / epoch))`` epochs (at least 1)
   before the trial is decided on again (:meth:`JobTimer.start_segment_epochs`). This is the
   square-root rule of checkpoint intervals (Young, 1974) and of order sizes: a segment of
   ``n`` epochs spends ``start / n`` epochs' seconds per epoch on its start, and commits
   ``n`` epochs to a trial before the model can revise the choice, a loss that grows about
   linearly in ``n``; their sum is smallest at ``n`` proportional to ``sqrt(start / epoch)``.
   The factor stands for that loss's unknown slope; its default was set on the development
   tasks (``docs/deviations.md``). A free start gives one ``budget_step``, the papers' segment.
4. **Expected improvement per expected second** (Snoek et al., 2012, Sec. 3.2). The
   acquisition value (log expected improvement) of each candidate has the log of its expected
   seconds subtracted: the epochs of its next segment times the seconds of one of its epochs,
   plus a start for a paused or new trial; the reporting trial, whose job is running, pays no
   start. A trial's epoch is its own mean; a new configuration's is predicted from its
   encoding by a ridge regression of the trials' log epoch seconds
   (:meth:`JobTimer.epoch_seconds_of`), so that a configuration whose epochs are slow (a wide
   network, a small batch) pays for them, as in Snoek et al., who model each configuration's
   duration with a GP of its own. When every epoch costs the same and starts are free and
   segments equal, this shifts every value by the same amount, and the decisions are those
   of the papers.
5. **The completion waits as long in time as with free starts.** The incumbent completion's
   waits (``IncumbentCompletion.after`` first epochs, ``delay`` epochs observed) are waits in
   the epoch budget; each job start so far counts in them as the epochs its seconds would
   have trained (:meth:`JobTimer.start_epochs_spent`), so that a run whose starts cost time
   does not explore longer before it trains a leader to ``max_t``.
6. **A start counts as free until resumes show that it costs** (``free_until_se``). Until
   then, segments are one ``budget_step``, as in the papers. Each resume is priced at its
   job's second result: the seconds from the resume to its first result, less the epochs
   that result reports at the mean of the trial's last epoch before the pause and the job's
   second epoch (a central difference: an epoch time that shrinks or grows along the curve,
   as LCBench's do, cancels). Once the resumes' mean price, less ``free_until_se`` standard
   errors, is above 0, the square-root segments of 3. apply for the rest of the run. To
   price resumes early, the scheduler pauses and resumes the first trial that reaches a
   segment end ``timed_resumes`` times, two epochs each (decision reason ``time_resume``).
   A given ``start_seconds`` is used at once, without timed resumes. This keeps a run whose
   starts are free close to the papers' schedule (one-epoch segments), where the learned
   start, a small difference of noisy times, would otherwise often come out above 0. A new
   trial's start of at least ``new_start_shows_at`` epochs opens the gate at once, without
   timed resumes: a slow first epoch explains a new trial's start of an epoch or a few
   (LCBench's first epochs, which resumes do not pay), not one of many, and each timed resume
   costs a start (two of ten epochs are twenty epochs' time with one worker).

The clock of a result is Syne Tune's simulated time ``st_tuner_time`` when the result has it
(the simulator adds it to every result, and the decisions happen at the time of the last
result); else the worker's ``st_worker_timestamp`` (``time.time()`` on the worker, added by
Syne Tune's ``Reporter``) against ``time.time()`` at the decision; else the time the result
reached the scheduler.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from syne_dyhpo.checks import checked_integer, checked_number

#: the result key of Syne Tune's simulated time (its simulator adds it to every result)
SIMULATED_TIME = "st_tuner_time"
#: the result key of the worker's ``time.time()`` (Syne Tune's ``Reporter`` adds it)
WORKER_TIMESTAMP = "st_worker_timestamp"
#: the two kinds of job start
NEW, RESUME = "new", "resume"
#: epochs of each timed resume (a resume is priced at its job's second result)
TIMED_RESUME_EPOCHS = 2
#: prior precision of the coefficients of :meth:`JobTimer.epoch_seconds_of`'s regression of
#: log epoch seconds on the encodings in [0, 1]^d (1: a coefficient's prior standard deviation
#: is the residuals')
EPOCH_MODEL_RIDGE = 1.0


@dataclass(frozen=True)
class JobCosts:
    """Decisions that pay for job starts (see the module docstring): a winning trial keeps
    running, and each candidate's acquisition value is divided by its expected seconds (its
    own epochs' seconds, a paused or new trial paying a job start). Not in the papers, which
    treat resumes as free and epochs as equal.

    :param start_seconds: seconds a job start (or resume) costs before its first epoch. None
        (default): learned from the results' timestamps
    :param segment_factor: a job started or resumed trains
        ``ceil(segment_factor x sqrt(start / epoch))`` epochs (at least 1) before it is decided
        on again (a finite number >= 0; default 3; 0: the segment is one ``budget_step``, as in
        the papers)
    :param free_until_se: a learned start counts as free (segments of one ``budget_step``)
        until the resumes' mean price (:meth:`JobTimer.resume_prices`) less this many standard
        errors is above 0 (a finite number >= 0; default 2). None: the learned start is used
        from the first start timed
    :param timed_resumes: how often the scheduler pauses and resumes the first trial that
        reaches a segment end, two epochs each, to price resumes early (an integer >= 0;
        default 2, the fewest a standard error needs; used with ``free_until_se`` and a
        learned start)
    :param new_start_shows_at: a new trial's learned start (:meth:`JobTimer.start_seconds_of`)
        of at least this many epochs (:attr:`JobTimer.epoch_seconds`) shows that a start costs,
        as the resumes' prices do for ``free_until_se``, so the timed resumes not yet given are
        skipped (a finite number >= 0; default 5: a slow first epoch reaches it in some runs
        whose starts are free, docs/deviations.md). None: only resumes show it (the rule of
        the gate alone)
    """

    start_seconds: float | None = None
    segment_factor: float = 3.0
    free_until_se: float | None = 2.0
    timed_resumes: int = 2
    new_start_shows_at: float | None = 5.0

    def __post_init__(self) -> None:
        for field, expected in (
            ("start_seconds", "a finite number >= 0 or None (learned)"),
            ("free_until_se", "a finite number >= 0 or None (the learned start is used at once)"),
            ("new_start_shows_at", "a finite number >= 0 or None (only resumes show that a start costs)"),
        ):
            value = getattr(self, field)
            if value is not None:
                checked = checked_number(f"JobCosts.{field}", value, 0.0, np.finfo(float).max, expected)
                object.__setattr__(self, field, checked)
        factor = checked_number(
            "JobCosts.segment_factor", self.segment_factor, 0.0, np.finfo(float).max, "a finite number >= 0"
        )
        object.__setattr__(self, "segment_factor", factor)
        object.__setattr__(self, "timed_resumes", checked_integer("JobCosts.timed_resumes", self.timed_resumes, 0))


@dataclass
class _Job:
    """A running job: when it was started or resumed, and its last result."""

    simulated_start: float | None  # the simulated clock at the start (None: none seen yet, 0)
    wall_start: float  # time.time() at the start
    last_epoch: int  # the trial's last epoch when the job started, then the job's last result's
    new: bool  # a new trial's first job (else a resume)
    last_time: float | None = None  # time of the job's last result (None: none yet)
    first_result: tuple[float, int] | None = None  # seconds from the start to its first result, epochs
    epoch_before: float | None = None  # seconds of the trial's last epoch timed before this job
    priced: bool = False  # a resume priced at its second result (resume_prices)


class JobTimer:
    """Learns what an epoch and a job start cost from the timestamps of the results, and gives
    the log of each candidate's expected seconds.

    :param costs: the settings (a given ``start_seconds`` is used instead of the learned one)
    """

    def __init__(self, costs: JobCosts):
        self.costs = costs
        self._simulated_now: float | None = None  # the last simulated time seen
        self._jobs: dict[int, _Job] = {}
        self._epoch_seconds_sum = 0.0
        self._epochs_timed = 0
        # per kind of start (NEW, RESUME): [seconds from the starts to their first results,
        # epochs those results reported, starts timed]
        self._first_results = {NEW: [0.0, 0, 0], RESUME: [0.0, 0, 0]}
        self._starts = {NEW: 0, RESUME: 0}  # jobs started, per kind of start
        # per trial: [seconds of its timed epochs, epochs timed]; and its encoding
        self._trial_epochs: dict[int, list[float]] = {}
        self._encodings: dict[int, np.ndarray] = {}
        self._last_epoch_seconds: dict[int, float] = {}  # per trial: seconds of its last epoch timed
        self._resume_prices: list[float] = []  # each priced resume's start (see resume_prices)
        self._start_shown = costs.free_until_se is None or costs.start_seconds is not None
        self._shown_by: str | None = None  # what showed that a start costs (see shown_by)
        self.timed_trial: int | None = None  # the trial paused and resumed to time resumes
        self.timed_resumes_done = 0

    # ----- what the scheduler tells it ---------------------------------------------------

    def job_started(self, trial_id: int, last_epoch: int, encoded: np.ndarray | None = None) -> None:
        """A job of the trial was started or resumed now.

        :param last_epoch: the trial's last epoch seen (0 for a new trial)
        :param encoded: the trial's configuration in [0, 1]^d, so that its epoch times teach
            :meth:`epoch_seconds_of` what other configurations' epochs cost (None: they don't)
        """
        self._jobs[trial_id] = _Job(
            self._simulated_now, time.time(), int(last_epoch), new=last_epoch == 0,
            epoch_before=self._last_epoch_seconds.get(trial_id),
        )
        if encoded is not None:
            self._encodings[trial_id] = np.asarray(encoded, dtype=float)
        self._starts[NEW if last_epoch == 0 else RESUME] += 1

    def job_ended(self, trial_id: int) -> None:
        """The trial's job was paused, stopped, completed or failed: later reports of it are
        not timed."""
        self._jobs.pop(trial_id, None)

    def on_result(self, trial_id: int, epoch: int, result: dict[str, Any]) -> None:
        """A result of the trial's running job (stale epochs, and trials without a job started
        through :meth:`job_started`, are ignored)."""
        now, simulated = self._result_time(result)
        job = self._jobs.get(trial_id)
        if job is None or epoch <= job.last_epoch:
            return
        epochs = epoch - job.last_epoch
        if job.last_time is None:
            start = (job.simulated_start or 0.0) if simulated else job.wall_start
            if now >= start:
                timed = self._first_results[NEW if job.new else RESUME]
                timed[0] += now - start
                timed[1] += epochs
                timed[2] += 1
                job.first_result = (now - start, epochs)
        elif now >= job.last_time:
            self._epoch_seconds_sum += now - job.last_time
            self._epochs_timed += epochs
            timed = self._trial_epochs.setdefault(trial_id, [0.0, 0])
            timed[0] += now - job.last_time
            timed[1] += epochs
            epoch_seconds = (now - job.last_time) / epochs
            self._last_epoch_seconds[trial_id] = epoch_seconds
            if not job.new and not job.priced and job.first_result is not None:
                self._price_resume(job, epoch_seconds)
        job.last_epoch, job.last_time = epoch, now
        if not self._start_shown:
            self._show_by_new_start()

    def _show_by_new_start(self) -> None:
        """Opens the gate of ``JobCosts.free_until_se`` when a new trial's learned start is at
        least ``JobCosts.new_start_shows_at`` epochs."""
        shows_at = self.costs.new_start_shows_at
        if shows_at is None:
            return
        new_start, epoch = self.start_seconds_of(NEW), self.epoch_seconds
        if new_start is not None and epoch and new_start >= shows_at * epoch:
            self._start_shown, self._shown_by = True, "new_start"

    def _price_resume(self, job: _Job, second_epoch: float) -> None:
        """Prices a resume at its job's second result (see :meth:`resume_prices`), and opens
        the gate of ``JobCosts.free_until_se`` once the prices show that a start costs."""
        job.priced = True
        seconds, epochs = job.first_result  # type: ignore[misc]
        epoch = second_epoch if job.epoch_before is None else (job.epoch_before + second_epoch) / 2.0
        self._resume_prices.append(seconds - epochs * epoch)
        if self._start_shown or len(self._resume_prices) < 2:
            return
        prices = np.asarray(self._resume_prices)
        standard_error = prices.std(ddof=1) / math.sqrt(len(prices))
        margin = self.costs.free_until_se or 0.0
        if prices.mean() - margin * standard_error > 0.0:
            self._start_shown, self._shown_by = True, "resumes"

    def _result_time(self, result: dict[str, Any]) -> tuple[float, bool]:
        """The result's time, and whether it is simulated time."""
        value = result.get(SIMULATED_TIME)
        if value is not None and math.isfinite(float(value)):
            self._simulated_now = float(value)
            return self._simulated_now, True
        value = result.get(WORKER_TIMESTAMP)
        if value is not None and math.isfinite(float(value)):
            return float(value), False
        return time.time(), False

    def wants_timed_resume(self, trial_id: int) -> bool:
        """Whether the trial, at its segment end, is to be paused and resumed at once for
        ``TIMED_RESUME_EPOCHS`` epochs to price a resume (``JobCosts.timed_resumes``): while a
        learned start counts as free, the first trial that asks, up to ``timed_resumes``
        times. The caller tells :meth:`timed_resume_given`."""
        return (
            not self._start_shown
            and self.timed_resumes_done < self.costs.timed_resumes
            and self.timed_trial in (None, trial_id)
        )

    def timed_resume_given(self, trial_id: int) -> None:
        """The trial was paused to be resumed at once (:meth:`wants_timed_resume`)."""
        self.timed_trial = trial_id
        self.timed_resumes_done += 1

    # ----- what it learned ----------------------------------------------------------------

    @property
    def resume_prices(self) -> list[float]:
        """Each priced resume's start, in seconds: the time from the resume to the job's first
        result, less the epochs it reports at the mean of the trial's last epoch timed before
        the pause and the job's second epoch (the second epoch alone when the trial had none
        timed). A resume is priced at its job's second result; one that reports once is not."""
        return list(self._resume_prices)

    @property
    def start_shown(self) -> bool:
        """Whether a start is known to cost: ``JobCosts.free_until_se`` is None, or the start
        is given, or the resumes' mean price less ``free_until_se`` standard errors was above 0
        (:meth:`resume_prices`), or a new trial's learned start was at least
        ``JobCosts.new_start_shows_at`` epochs; then for the rest of the run. :attr:`shown_by`
        says which of the last two (None: neither)."""
        return self._start_shown

    @property
    def shown_by(self) -> str | None:
        """What showed that a learned start costs: ``"resumes"`` (their prices) or
        ``"new_start"`` (``JobCosts.new_start_shows_at``); None while nothing has, or when the
        gate is off or the start given."""
        return self._shown_by

    @property
    def epoch_seconds(self) -> float | None:
        """Mean seconds of an epoch between consecutive results of one job (None: none timed)."""
        return self._epoch_seconds_sum / self._epochs_timed if self._epochs_timed else None

    @property
    def start_seconds(self) -> float | None:
        """Seconds of a job start, new trials and resumes together (see :meth:`start_seconds_of`)."""
        return self._start_seconds([NEW, RESUME])

    def start_seconds_of(self, kind: str) -> float | None:
        """``JobCosts.start_seconds`` if given, else the mean time from a job's start to its
        first result less the epochs that result reports, over the starts of ``kind`` (NEW or
        RESUME), or over all starts while none of ``kind`` was timed (at least 0; None: not
        learned yet)."""
        seconds = self._start_seconds([kind])
        return self.start_seconds if seconds is None else seconds

    def _start_seconds(self, kinds: list[str]) -> float | None:
        if self.costs.start_seconds is not None:
            return self.costs.start_seconds
        epoch = self.epoch_seconds
        seconds, epochs, count = (sum(self._first_results[k][i] for k in kinds) for i in range(3))
        if not count or epoch is None:
            return None
        return max(0.0, (seconds - epochs * epoch) / count)

    def start_segment_epochs(self, new: bool) -> int:
        """Epochs a job started now trains before its trial is decided on again:
        ``ceil(JobCosts.segment_factor x sqrt(start / epoch))``, at least 1, the start being a
        new trial's (``new``) or a resume's (:meth:`start_seconds_of`). 2 while no epoch has
        been timed (a job's second result times one; a one-epoch job would leave the costs
        unknown) unless the start is given as free; 1 when the start is free, not shown to
        cost yet (:attr:`start_shown`) or the factor is 0."""
        factor = self.costs.segment_factor
        epoch = self.epoch_seconds
        if factor > 0.0 and epoch is None and self.costs.start_seconds != 0.0:
            return 2  # no epoch timed yet: the job's second result times one
        start = self.start_seconds_of(NEW if new else RESUME)
        if factor == 0.0 or not epoch or not start or not self._start_shown:
            return 1
        # a relative tolerance: a factor of 3 and start = epoch is 3 epochs, not 4
        return max(1, math.ceil(factor * math.sqrt(start / epoch) * (1.0 - 1e-9)))

    def start_epochs_spent(self) -> tuple[float, float]:
        """The job starts so far counted in epochs, each as the epochs its seconds would have
        trained (:meth:`start_seconds_of` / :attr:`epoch_seconds`): the new trials' starts, and
        all starts. (0, 0) while no epoch has been timed or the starts are free."""
        epoch = self.epoch_seconds
        if not epoch:
            return 0.0, 0.0
        new, resume = ((self.start_seconds_of(kind) or 0.0) * self._starts[kind] / epoch for kind in (NEW, RESUME))
        return new, new + resume

    def epoch_seconds_of(self, x: np.ndarray, trial_ids: Sequence[int | None]) -> np.ndarray | None:
        """Expected seconds of an epoch of each candidate. A trial with timed epochs: its own
        mean. Any other (a new configuration, a trial with no timed epoch): the prediction of
        a ridge regression of the timed trials' log mean epoch seconds on their encodings,
        the coefficients shrunk towards 0 with a prior precision of :data:`EPOCH_MODEL_RIDGE`
        (the cost model of "expected improvement per second", Snoek et al., 2012, Sec. 3.2,
        which models a job's log duration as a function of its configuration); the mean
        epoch (:attr:`epoch_seconds`) while fewer than two timed trials have an encoding.

        :param x: the candidates' encodings, shape (m, d)
        :param trial_ids: each candidate's trial id, None for a new configuration
        :return: shape (m,), or None while no epoch has been timed
        """
        epoch = self.epoch_seconds
        if epoch is None:
            return None
        x = np.asarray(x, dtype=float)
        own = np.array(
            [np.nan if t is None or t not in self._trial_epochs else self._own_epoch(t) for t in trial_ids],
            dtype=float,
        )
        missing = np.isnan(own)
        if missing.any():
            own[missing] = self._predicted_epoch(x[missing], epoch)
        return own

    def _own_epoch(self, trial_id: int) -> float:
        seconds, epochs = self._trial_epochs[trial_id]
        return seconds / epochs

    def _predicted_epoch(self, x: np.ndarray, epoch: float) -> np.ndarray:
        """Ridge regression of log epoch seconds on the encodings (see :meth:`epoch_seconds_of`)."""
        timed = [
            t for t, (seconds, _) in self._trial_epochs.items()
            if t in self._encodings and seconds > 0 and len(self._encodings[t]) == x.shape[1]
        ]
        if len(timed) < 2:
            return np.full(len(x), epoch)
        features = np.stack([self._encodings[t] for t in timed])
        targets = np.log([self._own_epoch(t) for t in timed])
        centre, mean = features.mean(axis=0), targets.mean()
        centred = features - centre
        gram = centred.T @ centred + EPOCH_MODEL_RIDGE * np.eye(features.shape[1])
        weights = np.linalg.solve(gram, centred.T @ (targets - mean))
        return np.exp(mean + (x - centre) @ weights)

    def log_seconds(
        self,
        epochs: np.ndarray,
        pays_start: np.ndarray,
        new: np.ndarray | None = None,
        x: np.ndarray | None = None,
        trial_ids: Sequence[int | None] | None = None,
    ) -> np.ndarray | None:
        """Log of the expected seconds of each candidate's next segment: its epochs times its
        epoch's expected seconds (:meth:`epoch_seconds_of`), plus a job start if it pays one.

        :param epochs: epochs of each candidate's next segment (>= 1)
        :param pays_start: whether each candidate needs a job start (paused and new trials)
        :param new: whether each candidate is a new trial (its start is a NEW one, else a
            RESUME); None: all resumes
        :param x: the candidates' encodings, shape (m, d); with ``trial_ids``, each
            candidate's epoch is its own (:meth:`epoch_seconds_of`); None: the mean epoch for all
        :param trial_ids: each candidate's trial id, None for a new configuration
        :return: the logs, or None while no epoch has been timed (costs unknown: the
            acquisition is used as it is). A start not learned yet counts as free
        """
        epoch = self.epoch_seconds
        if epoch is None:
            return None
        pays_start = np.asarray(pays_start, dtype=bool)
        new = np.zeros(len(pays_start), dtype=bool) if new is None else np.asarray(new, dtype=bool)
        start = np.where(new, self.start_seconds_of(NEW) or 0.0, self.start_seconds_of(RESUME) or 0.0)
        epoch_seconds = epoch if x is None or trial_ids is None else self.epoch_seconds_of(x, trial_ids)
        seconds = np.asarray(epochs, dtype=float) * epoch_seconds + pays_start * start
        # an epoch timed at 0 s (e.g. results reported together): the smallest positive cost
        return np.log(np.maximum(seconds, np.finfo(float).tiny))

    def metadata(self) -> dict[str, Any]:
        return {
            "start_seconds_given": self.costs.start_seconds,
            "segment_factor": self.costs.segment_factor,
            "free_until_se": self.costs.free_until_se,
            "start_shown": self._start_shown,
            "shown_by": self._shown_by,
            "resume_prices": len(self._resume_prices),
            "timed_resumes": self.timed_resumes_done,
            "epoch_seconds": self.epoch_seconds,
            "start_seconds": self.start_seconds,
            "new_start_seconds": self.start_seconds_of(NEW),
            "resume_seconds": self.start_seconds_of(RESUME),
            "epochs_timed": self._epochs_timed,
            "trials_timed": len(self._trial_epochs),
            "starts_timed": self._first_results[NEW][2] + self._first_results[RESUME][2],
            "starts": dict(self._starts),
        }
