"""Learning curves of all trials and the training data they yield.

Metric direction and target normalisation live here, once: internally every value is a
*score to maximise* (``-value`` when the metric is minimised), and surrogates see scores
normalised by a location/scale that changes only when the surrogate is refitted from scratch
(fixed during warm-started refinements, so targets stay comparable between refinements).
Diverged values (NaN, inf, or far worse than anything seen) are mapped to a floor value, so
a diverged configuration teaches the surrogate "bad here" without blowing up its scale.
"""

from __future__ import annotations

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

    @property
    def resumable(self) -> bool:
        return self is TrialStatus.PAUSED


@dataclass
class TrialRecord:
    """One trial's configuration and learning curve.

    ``scores[e - 1]`` is the score (value to maximise) reported at epoch ``e``; NaN marks an
    epoch that was never reported (a gap). ``segment_end`` is the epoch at which the next
    decision about this trial is due.
    """

    trial_id: int
    config: dict[str, Any]
    encoded: np.ndarray
    scores: list[float] = field(default_factory=list)
    status: TrialStatus = TrialStatus.RUNNING
    segment_end: int = 1

    @property
    def last_epoch(self) -> int:
        return len(self.scores)


@dataclass
class TrainingData:
    """Observed (config, budget, curve before budget, value) rows, normalised.

    :param x: encoded configs, shape (n, d)
    :param budget: epoch of each row, shape (n,)
    :param curves: normalised scores at epochs 1..budget-1 per row, NaN elsewhere, shape (n, max_t)
    :param y: normalised score at ``budget``, shape (n,)
    :param max_t: maximum budget
    :param version: rows are in arrival order; two datasets with the same version agree on
        their common prefix of rows (surrogates may reuse factorisations of that prefix)
    """

    x: np.ndarray
    budget: np.ndarray
    curves: np.ndarray
    y: np.ndarray
    max_t: int
    version: int = 0

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class Candidates:
    """Configurations the acquisition chooses from, each at the budget it would be run to.

    :param x: encoded configs, shape (m, d)
    :param budget: epoch the candidate would reach, shape (m,)
    :param curves: normalised observed curve (NaN past its end), shape (m, max_t)
    :param trial_ids: trial id of paused trials, None for new configurations
    :param configs: configurations (for new ones, what would be started)
    """

    x: np.ndarray
    budget: np.ndarray
    curves: np.ndarray
    trial_ids: list[int | None]
    configs: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.trial_ids)


class Normalizer:
    """Fixed affine normalisation of scores, ``z = (score - loc) / scale``, floored.

    :param floor: lowest normalised value; non-finite and extreme bad scores map to it
    """

    def __init__(self, floor: float = -4.0):
        self.floor = floor
        self.loc = 0.0
        self.scale = 1.0

    def fit(self, scores: np.ndarray) -> None:
        """Sets location (median) and scale from finite scores: the larger of a robust spread
        and a third of the distance from the median to the best score."""
        finite = scores[np.isfinite(scores)]
        if len(finite) == 0:
            return
        # the bad side only enters through quantiles: diverged curves (losses of 1e5 and more)
        # must not set the scale
        self.loc = float(np.median(finite))
        q25, q75 = np.percentile(finite, [25, 75])
        # the good tail bounds the scale from below: when most scores are alike (all configs
        # at epoch 1 of a loss that starts equal), the quantile spread alone is ~0 and the
        # good scores, the ones that matter, would map to hundreds of units
        spread = max((q75 - q25) / 1.349, (float(finite.max()) - self.loc) / 3.0)
        self.scale = max(spread, 1e-3 * max(abs(self.loc), 1e-6), 1e-12)

    def drifted(self, other: "Normalizer", tolerance: float = 2.0) -> bool:
        """Whether ``other`` differs from this one by more than a factor ``tolerance`` in scale
        or by more than one scale in location."""
        ratio = other.scale / self.scale
        return not (1.0 / tolerance <= ratio <= tolerance) or abs(other.loc - self.loc) > self.scale

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        z = (np.asarray(scores, dtype=float) - self.loc) / self.scale
        return np.where(np.isnan(z), self.floor, np.maximum(z, self.floor))


class Observations:
    """Learning curves of all trials (keyed by the reported epoch) and derived data.

    :param max_t: maximum budget (epochs)
    :param do_minimize: whether the metric is minimised
    """

    def __init__(self, max_t: int, do_minimize: bool):
        self.max_t = max_t
        self.sign = -1.0 if do_minimize else 1.0
        self.trials: dict[int, TrialRecord] = {}
        self.normalizer = Normalizer()
        self.num_observations = 0  # finite or diverged values recorded
        self._row_log: list[tuple[int, int]] = []  # (trial_id, epoch) in arrival order
        self.data_version = 0  # bumped when existing rows change (normalisation, archiving)

    def add_trial(self, trial_id: int, config: dict[str, Any], encoded: np.ndarray) -> TrialRecord:
        record = TrialRecord(trial_id=trial_id, config=config, encoded=encoded)
        self.trials[trial_id] = record
        return record

    def add_result(self, trial_id: int, epoch: int, value: float) -> bool:
        """Records ``value`` reported at ``epoch``.

        :return: False if the epoch is at or below the last one recorded (a repeated or stale
            report, ignored), True otherwise. Skipped epochs are left as NaN gaps.
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

    def archive(self, trial_id: int, archive_id: int) -> TrialRecord:
        """Moves a trial's curve to a new record ``archive_id`` (status FAILED, never resumed)
        and empties the trial's curve, e.g. when the trial restarts from scratch."""
        record = self.trials[trial_id]
        archived = self.add_trial(archive_id, record.config, record.encoded)
        archived.scores, archived.status = record.scores, TrialStatus.FAILED
        record.scores = []
        self._row_log = [(archive_id if t == trial_id else t, e) for t, e in self._row_log]
        self.data_version += 1
        return archived

    def all_scores(self) -> np.ndarray:
        if not self.trials:
            return np.zeros(0)
        return np.concatenate([np.asarray(r.scores, dtype=float) for r in self.trials.values()])

    def normalizer_outdated(self, tolerance: float = 2.0) -> bool:
        """Whether the scores seen since the normaliser was fitted call for a new one. Early on
        the normaliser sees few, similar values (epoch-1 results of a handful of configs), and a
        scale set from them would blow later values up to hundreds of units."""
        fresh = Normalizer(self.normalizer.floor)
        fresh.fit(self.all_scores())
        return self.normalizer.drifted(fresh, tolerance)

    def refit_normalizer(self) -> None:
        """Re-estimates the normalisation; call only when the surrogate is refitted from scratch."""
        self.normalizer.fit(self.all_scores())
        self.data_version += 1

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

    def _curve_matrix(self, records: list[TrialRecord]) -> np.ndarray:
        curves = np.full((len(records), self.max_t), np.nan)
        for i, r in enumerate(records):
            curves[i, : r.last_epoch] = r.scores
        return curves

    def training_data(self) -> TrainingData:
        """One row per reported (trial, epoch), in arrival order: the config, the epoch, the
        curve before the epoch and the value at it."""
        records = [r for r in self.trials.values() if r.last_epoch > 0]
        d = next(iter(self.trials.values())).encoded.shape[0] if self.trials else 0
        index = {r.trial_id: i for i, r in enumerate(records)}
        full = self._curve_matrix(records)  # raw scores, NaN = gap
        rows_trial = np.array([index[t] for t, _ in self._row_log], dtype=int)
        rows_epoch = np.array([e - 1 for _, e in self._row_log], dtype=int)
        x = np.stack([r.encoded for r in records])[rows_trial] if records else np.zeros((0, d))
        y = self.normalizer(full[rows_trial, rows_epoch])
        curves = self._normalise_curves(full)[rows_trial]
        # a row for epoch b sees only epochs 1..b-1
        later = np.arange(self.max_t)[None, :] >= rows_epoch[:, None]
        curves[later] = np.nan
        return TrainingData(
            x=x, budget=rows_epoch + 1, curves=curves, y=y, max_t=self.max_t, version=self.data_version
        )

    def _normalise_curves(self, raw: np.ndarray) -> np.ndarray:
        gaps = np.isnan(raw)
        z = self.normalizer(np.where(gaps, 0.0, raw))
        z[gaps] = np.nan
        return z

    def candidate_curves(self, records: list[TrialRecord]) -> np.ndarray:
        """Normalised observed curves of paused trials (NaN past their last epoch and in gaps)."""
        return self._normalise_curves(self._curve_matrix(records))

    def metadata(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.trials.values():
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        return {"num_trials": len(self.trials), "num_observations": self.num_observations, "status_counts": counts}
