"""Learning curves of all trials, keyed by the reported epoch, and the data they yield.

Internally every value is a *score to maximise* (``-value`` when the metric is minimised), so
the rest of the package has one direction. A curve stores ``scores[e - 1]`` for epoch ``e``:
NaN marks an epoch never reported (a gap), -inf a diverged one (NaN or inf reported).
Nothing here is normalised: the surrogate policy owns its outcome transform
(:class:`~syne_dyhpo.surrogates.outcome_transform.ScoreTransform`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np


class TrialStatus(str, Enum):
    """Life cycle of a trial as the freeze-thaw scheduler sees it."""

    RUNNING = "running"  # has a worker
    PAUSED = "paused"  # may be resumed
    FINISHED = "finished"  # reached max_t
    DIVERGED = "diverged"  # reported NaN/inf; never resumed
    FAILED = "failed"  # crashed; never resumed
    COMPLETED = "completed"  # ended by itself before max_t; Syne Tune cannot resume it
    RETIRED = "retired"  # paused, ranked hopeless, checkpoint deleted; never resumed
    INTERRUPTED = "interrupted"  # was running when its tuner was saved; resumable once restored

    @property
    def resumable(self) -> bool:
        return self is TrialStatus.PAUSED


@dataclass
class TrialRecord:
    """One trial's configuration, learning curve and status.

    :param trial_id: Syne Tune's trial id (negative for archived curves, see
        :meth:`Observations.archive`)
    :param config: configuration the trial runs with
    :param encoded: the configuration in [0, 1]^d
    :param scores: ``scores[e - 1]`` is the score at epoch ``e`` (NaN: gap, -inf: diverged)
    :param status: life-cycle state
    :param segment_end: epoch at which the next decision about this trial is due
    :param job_end: epoch at which the trial's current job stops by itself (its segment end
        when the job is told it, else ``max_t``)
    """

    trial_id: int
    config: dict[str, Any]
    encoded: np.ndarray
    scores: list[float] = field(default_factory=list)
    status: TrialStatus = TrialStatus.RUNNING
    segment_end: int = 1
    job_end: int = 0

    @property
    def last_epoch(self) -> int:
        return len(self.scores)


@dataclass
class TrainingData:
    """Observed (config, budget, curve before budget, score) rows, in arrival order.

    :param x: encoded configs, shape (n, d)
    :param budget: epoch of each row, shape (n,)
    :param curves: scores at epochs 1..budget-1 per row, NaN elsewhere, shape (n, max_t)
    :param y: score at ``budget``, shape (n,)
    :param max_t: maximum budget
    :param version: rows are in arrival order; two datasets with the same version agree on
        their common prefix of rows (surrogates may reuse factorisations of that prefix)
    """

    x: np.ndarray
    budget: np.ndarray
    curves: np.ndarray
    y: np.ndarray
    max_t: int
    version: Hashable = 0

    def __len__(self) -> int:
        return len(self.y)


class RowBuffer:
    """Append-only rows of fixed-width numpy columns, grown by doubling: appending a row is
    O(width) amortised and the first ``n`` rows are views, not copies.

    :param widths: column name -> row width (0: a scalar per row)
    """

    def __init__(self, widths: dict[str, int], capacity: int = 64):
        self.widths = widths
        self.n = 0
        self._columns = {k: np.full((capacity, w) if w else capacity, np.nan) for k, w in widths.items()}

    def append(self, **values: Any) -> None:
        """Appends one row (a value per column)."""
        self._reserve(self.n + 1)
        for k, v in values.items():
            self._columns[k][self.n] = v
        self.n += 1

    def extend(self, **values: np.ndarray) -> None:
        """Appends as many rows as the arrays have (an array per column)."""
        num = len(next(iter(values.values())))
        self._reserve(self.n + num)
        for k, v in values.items():
            self._columns[k][self.n : self.n + num] = v
        self.n += num

    def _reserve(self, size: int) -> None:
        capacity = len(next(iter(self._columns.values())))
        if size <= capacity:
            return
        while capacity < size:
            capacity *= 2
        for k, col in self._columns.items():
            grown = np.full((capacity,) + col.shape[1:], np.nan)
            grown[: self.n] = col[: self.n]
            self._columns[k] = grown

    def view(self, name: str) -> np.ndarray:
        """The first ``n`` rows of a column, read-only."""
        out = self._columns[name][: self.n]
        out.flags.writeable = False
        return out


class Observations:
    """Learning curves of all trials (keyed by the reported epoch) and derived data.

    The training rows (:meth:`training_data`), all scores and the best score per budget are
    kept up to date as results arrive (a row never changes once observed: an epoch at or below
    a trial's last one is ignored), so reading them costs nothing that grows with the data.

    :param max_t: maximum budget (epochs)
    :param do_minimize: whether the metric is minimised
    """

    def __init__(self, max_t: int, do_minimize: bool):
        self.max_t = max_t
        self.sign = -1.0 if do_minimize else 1.0
        self.trials: dict[int, TrialRecord] = {}
        self.num_observations = 0  # finite or diverged values recorded
        self._row_log: list[tuple[int, int]] = []  # (trial_id, epoch) in arrival order
        self.data_version = 0  # bumped when existing rows change (archiving)
        self._rows: RowBuffer | None = None  # training rows in arrival order (see training_data)
        self._best_per_budget = np.full(max_t, -np.inf)
        self._best_per_trial: dict[int, float] = {}  # trial id -> best finite score of its curve
        self._latest_per_trial: dict[int, float] = {}  # trial id -> its curve's last finite score
        self.num_first_epochs = 0  # curves with a result at epoch 1 (archived ones included)

    def add_trial(self, trial_id: int, config: dict[str, Any], encoded: np.ndarray) -> TrialRecord:
        record = TrialRecord(trial_id=trial_id, config=config, encoded=encoded)
        self.trials[trial_id] = record
        return record

    def add_result(self, trial_id: int, epoch: int, value: float) -> bool:
        """Records ``value`` reported at ``epoch``.

        :return: False if the epoch is at or below the last one recorded (a repeated or stale
            report, ignored) or beyond ``max_t``, True otherwise. Skipped epochs are NaN gaps.
        """
        record = self.trials[trial_id]
        if epoch <= record.last_epoch or epoch > self.max_t:
            return False
        record.scores.extend([np.nan] * (epoch - 1 - record.last_epoch))
        score = self.sign * float(value)
        # -inf marks divergence explicitly (NaN is reserved for gaps)
        record.scores.append(score if np.isfinite(score) else -np.inf)
        self.num_observations += 1
        self._row_log.append((trial_id, epoch))
        self._record_row(record, epoch)
        return True

    def _record_row(self, record: TrialRecord, epoch: int) -> None:
        if self._rows is None:
            self._rows = RowBuffer({"x": len(record.encoded), "budget": 0, "curves": self.max_t, "y": 0})
        curve = np.full(self.max_t, np.nan)
        curve[: epoch - 1] = record.scores[: epoch - 1]  # a row for epoch b sees only epochs 1..b-1
        score = record.scores[epoch - 1]
        self._rows.append(x=record.encoded, budget=epoch, curves=curve, y=score)
        if epoch == 1:
            self.num_first_epochs += 1
        if np.isfinite(score):
            if score > self._best_per_budget[epoch - 1]:
                self._best_per_budget[epoch - 1] = score
            if score > self._best_per_trial.get(record.trial_id, -np.inf):
                self._best_per_trial[record.trial_id] = score
            self._latest_per_trial[record.trial_id] = score

    def new_archive_id(self) -> int:
        """A fresh negative id for an archived curve (never one of Syne Tune's trial ids)."""
        return min([0, *self.trials]) - 1

    def archive(self, trial_id: int) -> TrialRecord:
        """Moves a trial's curve to a new record with a fresh negative id (status FAILED, never
        resumed) and empties the trial's curve, e.g. when the trial restarts from scratch."""
        archive_id = self.new_archive_id()
        record = self.trials[trial_id]
        archived = self.add_trial(archive_id, record.config, record.encoded)
        archived.scores, archived.status = record.scores, TrialStatus.FAILED
        record.scores = []
        for per_trial in (self._best_per_trial, self._latest_per_trial):
            if trial_id in per_trial:
                per_trial[archive_id] = per_trial.pop(trial_id)
        self._row_log = [(archive_id if t == trial_id else t, e) for t, e in self._row_log]
        # the rows themselves are unchanged (they moved to the archived record with the curve);
        # the version still tells surrogates that the rows' owners changed
        self.data_version += 1
        return archived

    def with_status(self, *statuses: TrialStatus) -> list[TrialRecord]:
        """Records in one of ``statuses``, in order of their trial ids' arrival."""
        return [r for r in self.trials.values() if r.status in statuses]

    def all_scores(self) -> np.ndarray:
        """Every observed score (one per reported epoch, in arrival order; -inf: diverged),
        read-only."""
        return self._rows.view("y") if self._rows is not None else np.zeros(0)

    def best_scores_per_trial(self) -> np.ndarray:
        """Each trial's best finite score, one per trial with one (archived curves included)."""
        return np.fromiter(self._best_per_trial.values(), dtype=float, count=len(self._best_per_trial))

    def best_score(self) -> float:
        """Best score observed at any budget (-inf if none is finite)."""
        return float(self._best_per_budget.max())

    def any_trained(self) -> bool:
        """Whether some trial reported a finite score at ``max_t``."""
        return bool(np.isfinite(self._best_per_budget[-1]))

    def best_of(self, record: TrialRecord) -> float:
        """Best finite score of the trial's curve (-inf if none)."""
        return self._best_per_trial.get(record.trial_id, -np.inf)

    def latest_of(self, record: TrialRecord) -> float:
        """The trial's score at the last epoch it reported a finite one (-inf if none)."""
        return self._latest_per_trial.get(record.trial_id, -np.inf)

    def leader_threshold(self, num_leaders: int, latest: bool = False) -> float:
        """The ``num_leaders``-th highest best score among the trials' curves (the lowest if
        fewer have a finite score; -inf if none has): a trial leads if its best score is at
        least this. With ``latest``, of their latest scores (:meth:`latest_of`) instead."""
        if num_leaders == 1 and not latest:
            return self.best_score()
        scores = self._latest_per_trial if latest else self._best_per_trial
        top = heapq.nlargest(num_leaders, scores.values())
        return top[-1] if top else -np.inf

    def best_value(self) -> float | None:
        """Best metric value observed, in the metric's own units and direction."""
        best = self.best_score()
        return None if not np.isfinite(best) else self.sign * best

    def best_score_per_budget(self) -> np.ndarray:
        """Best score observed at each epoch 1..max_t (-inf where nothing finite was seen)."""
        return self._best_per_budget.copy()

    def scores_at(self, epoch: int) -> np.ndarray:
        """Scores of all trials that reported ``epoch`` (diverged ones as -inf; archived curves
        included), in arrival order: read from the training rows, one per reported epoch."""
        if self._rows is None:
            return np.zeros(0)
        return self._rows.view("y")[self._rows.view("budget") == epoch]

    def curves(self, records: list[TrialRecord]) -> np.ndarray:
        """Observed curves, shape (len(records), max_t), NaN past their last epoch and in gaps."""
        curves = np.full((len(records), self.max_t), np.nan)
        lengths = np.fromiter((r.last_epoch for r in records), dtype=np.int64, count=len(records))
        total = int(lengths.sum())
        if total:
            flat = np.fromiter(itertools.chain.from_iterable(r.scores for r in records), dtype=float, count=total)
            starts = np.cumsum(lengths) - lengths
            rows = np.repeat(np.arange(len(records)), lengths)
            curves[rows, np.arange(total) - np.repeat(starts, lengths)] = flat
        return curves

    def training_data(self) -> TrainingData:
        """One row per reported (trial, epoch), in arrival order: the config, the epoch, the
        curve before the epoch and the score at it (read-only views, kept up to date as
        results arrive)."""
        if self._rows is None:
            d = next(iter(self.trials.values())).encoded.shape[0] if self.trials else 0
            return TrainingData(x=np.zeros((0, d)), budget=np.zeros(0, dtype=int), curves=np.zeros((0, self.max_t)),
                                y=np.zeros(0), max_t=self.max_t, version=self.data_version)
        rows = self._rows
        return TrainingData(
            x=rows.view("x"),
            budget=rows.view("budget").astype(int),
            curves=rows.view("curves"),
            y=rows.view("y"),
            max_t=self.max_t,
            version=self.data_version,
        )

    def metadata(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.trials.values():
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        return {"num_trials": len(self.trials), "num_observations": self.num_observations, "status_counts": counts}
