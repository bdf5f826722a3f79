"""Learning curves of all trials, keyed by the reported epoch, and the data they yield.

Internally every value is a *score to maximise* (``-value`` when the metric is minimised), so
the rest of the package has one direction. A curve stores ``scores[e - 1]`` for epoch ``e``:
NaN marks an epoch never reported (a gap), -inf a diverged one (NaN or inf reported).
Nothing here is normalised: the surrogate policy owns its outcome transform
(:class:`~syne_dyhpo.surrogates.outcome_transform.ScoreTransform`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Hashable

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


class Observations:
    """Learning curves of all trials (keyed by the reported epoch) and derived data.

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
        return True

    def archive(self, trial_id: int) -> TrialRecord:
        """Moves a trial's curve to a new record with a fresh negative id (status FAILED, never
        resumed) and empties the trial's curve, e.g. when the trial restarts from scratch."""
        archive_id = min([0, *self.trials]) - 1
        record = self.trials[trial_id]
        archived = self.add_trial(archive_id, record.config, record.encoded)
        archived.scores, archived.status = record.scores, TrialStatus.FAILED
        record.scores = []
        self._row_log = [(archive_id if t == trial_id else t, e) for t, e in self._row_log]
        self.data_version += 1
        return archived

    def with_status(self, *statuses: TrialStatus) -> list[TrialRecord]:
        """Records in one of ``statuses``, in order of their trial ids' arrival."""
        return [r for r in self.trials.values() if r.status in statuses]

    def all_scores(self) -> np.ndarray:
        if not self.trials:
            return np.zeros(0)
        return np.concatenate([np.asarray(r.scores, dtype=float) for r in self.trials.values()])

    def best_score(self) -> float:
        """Best score observed at any budget (-inf if none is finite)."""
        scores = self.all_scores()
        finite = scores[np.isfinite(scores)]
        return float(finite.max()) if len(finite) else -np.inf

    def best_value(self) -> float | None:
        """Best metric value observed, in the metric's own units and direction."""
        best = self.best_score()
        return None if not np.isfinite(best) else self.sign * best

    def best_score_per_budget(self) -> np.ndarray:
        """Best score observed at each epoch 1..max_t (-inf where nothing finite was seen)."""
        best = np.full(self.max_t, -np.inf)
        for r in self.trials.values():
            if r.scores:
                s = np.asarray(r.scores, dtype=float)
                s = np.where(np.isfinite(s), s, -np.inf)
                best[: len(s)] = np.maximum(best[: len(s)], s)
        return best

    def scores_at(self, epoch: int) -> np.ndarray:
        """Scores of all trials that reported ``epoch`` (diverged ones as -inf)."""
        return np.array(
            [r.scores[epoch - 1] for r in self.trials.values() if r.last_epoch >= epoch and not np.isnan(r.scores[epoch - 1])],
            dtype=float,
        )

    def curves(self, records: list[TrialRecord]) -> np.ndarray:
        """Observed curves, shape (len(records), max_t), NaN past their last epoch and in gaps."""
        curves = np.full((len(records), self.max_t), np.nan)
        for i, r in enumerate(records):
            curves[i, : r.last_epoch] = r.scores
        return curves

    def training_data(self) -> TrainingData:
        """One row per reported (trial, epoch), in arrival order: the config, the epoch, the
        curve before the epoch and the score at it."""
        records = [r for r in self.trials.values() if r.last_epoch > 0]
        d = next(iter(self.trials.values())).encoded.shape[0] if self.trials else 0
        index = {r.trial_id: i for i, r in enumerate(records)}
        full = self.curves(records)
        rows_trial = np.array([index[t] for t, _ in self._row_log], dtype=int)
        rows_epoch = np.array([e - 1 for _, e in self._row_log], dtype=int)
        x = np.stack([r.encoded for r in records])[rows_trial] if records else np.zeros((0, d))
        y = full[rows_trial, rows_epoch]
        curves = full[rows_trial]
        # a row for epoch b sees only epochs 1..b-1
        later = np.arange(self.max_t)[None, :] >= rows_epoch[:, None]
        curves[later] = np.nan
        return TrainingData(x=x, budget=rows_epoch + 1, curves=curves, y=y, max_t=self.max_t, version=self.data_version)

    def metadata(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.trials.values():
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        return {"num_trials": len(self.trials), "num_observations": self.num_observations, "status_counts": counts}
