"""The seam between the freeze-thaw core and a method: surrogate, outcome transform, fit
schedule and acquisition.

One decision flows one way through a policy: :meth:`SurrogatePolicy.fit` trains (or refines,
or only conditions) the surrogate on all observations and returns the :class:`FittedModel`;
the method's acquisition, built from that model and the observations' incumbent, scores the
candidates. The policy owns the outcome transform, so candidates, training rows and incumbents
are always expressed in the normalisation the model was trained with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

import numpy as np

from syne_dyhpo.acquisition import LogExpectedImprovement
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import Observations, TrainingData
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


class Surrogate(Protocol):
    """A probabilistic model of the normalised score at (config, budget, curve so far)."""

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        """Trains on ``data``: from scratch, or a warm-started refinement of the last fit."""

    def condition(self, data: TrainingData) -> None:
        """Makes predictions use ``data`` without training (cheap; may do nothing)."""

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the normalised score at ``budget``."""


@dataclass(frozen=True)
class FitSchedule:
    """When the surrogate is trained from scratch, refined (warm start), or only conditioned.

    Between trainings the surrogate is conditioned on all data (for the GP: the exact
    posterior on all points), so no observation is ignored by a decision. Whatever the
    schedule, a fit from scratch also happens whenever the observations have outgrown the
    outcome transform (see :meth:`ScoreTransform.outdated`), which is only re-estimated then.

    :param refine_every: refine after this many new observations (1: after every one)
    :param refit_growth: train from scratch once the data grew by this factor since the last
        fit from scratch (inf: never for that reason)
    :param initial_full_fits: the first this many fits are all from scratch
    :param refit_on_stall: train from scratch after ``refit_on_stall * max_t`` observations in
        a row without improving the best score (None: never for that reason)
    """

    refine_every: int
    refit_growth: float = math.inf
    initial_full_fits: int = 1
    refit_on_stall: float | None = None

    def __post_init__(self):
        if int(self.refine_every) != self.refine_every or self.refine_every < 1:
            raise ValueError(f"refine_every must be an integer >= 1, got {self.refine_every!r}")
        if not self.refit_growth > 1:
            raise ValueError(f"refit_growth must be > 1, got {self.refit_growth!r}")
        if int(self.initial_full_fits) != self.initial_full_fits or self.initial_full_fits < 1:
            raise ValueError(f"initial_full_fits must be an integer >= 1, got {self.initial_full_fits!r}")
        if self.refit_on_stall is not None and not self.refit_on_stall > 0:
            raise ValueError(f"refit_on_stall must be > 0 or None, got {self.refit_on_stall!r}")


class FittedModel:
    """A trained surrogate bound to the outcome transform its training data went through.

    :param surrogate: the trained surrogate
    :param transform: the outcome transform of its training data
    """

    def __init__(self, surrogate: Surrogate, transform: ScoreTransform):
        self.surrogate = surrogate
        self.transform = transform

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the normalised score of each candidate at
        ``budget``; the candidates' raw curves are normalised like the training rows were."""
        normalised = replace(candidates, curves=self.transform.curves(candidates.curves))
        return self.surrogate.predict(normalised, budget)


AcquisitionFactory = Callable[[FittedModel, Observations], LogExpectedImprovement]
"""``(model, observations) -> acquisition``: a method's acquisition given its incumbents."""


class SurrogatePolicy:
    """Fits a surrogate on a :class:`FitSchedule` and scores candidates with an acquisition.

    :param surrogate: the model
    :param acquisition: builds the method's acquisition from the fitted model and the
        observations (which give the incumbents)
    :param schedule: when to train from scratch / refine / condition only
    :param min_observations: fewest observations before the surrogate is used
    """

    def __init__(
        self,
        surrogate: Surrogate,
        acquisition: AcquisitionFactory,
        schedule: FitSchedule,
        min_observations: int = 2,
    ):
        self.surrogate = surrogate
        self.acquisition = acquisition
        self.schedule = schedule
        self.min_observations = min_observations
        self.transform = ScoreTransform()
        self._size_at_full_fit = 0
        self._size_at_refine = 0
        self._size_at_fit = -1
        self._best_score = -math.inf
        self._size_at_improvement = 0
        self.num_full_fits = 0
        self.num_refines = 0

    def ready(self, observations: Observations) -> bool:
        return observations.num_observations >= self.min_observations

    def fit(self, observations: Observations, seed: int) -> FittedModel:
        """Trains, refines or conditions the surrogate on all observations, as the schedule
        says, and returns it bound to its outcome transform."""
        n = observations.num_observations
        if n == self._size_at_fit and self._size_at_full_fit > 0:
            return FittedModel(self.surrogate, self.transform)  # nothing new since the last fit
        self._size_at_fit = n
        if self._from_scratch_due(observations):
            self.transform.fit(observations.all_scores())  # moves only with a fit from scratch
            self.surrogate.fit(self._training_data(observations), from_scratch=True, seed=seed)
            self._size_at_full_fit = self._size_at_refine = n
            self.num_full_fits += 1
        elif n - self._size_at_refine >= self.schedule.refine_every:
            self.surrogate.fit(self._training_data(observations), from_scratch=False, seed=seed)
            self._size_at_refine = n
            self.num_refines += 1
        else:
            self.surrogate.condition(self._training_data(observations))
        return FittedModel(self.surrogate, self.transform)

    def score(self, model: FittedModel, candidates: Candidates, observations: Observations) -> np.ndarray:
        """The acquisition value of each candidate (higher is better)."""
        return self.acquisition(model, observations)(candidates)

    def reset(self) -> None:
        """Forces a fit from scratch at the next :meth:`fit` (after a numerical failure)."""
        self._size_at_full_fit = 0

    def _from_scratch_due(self, observations: Observations) -> bool:
        n = observations.num_observations
        schedule = self.schedule
        stalled = False
        if schedule.refit_on_stall is not None:
            best = observations.best_score()
            if best > self._best_score:
                self._best_score, self._size_at_improvement = best, n
            stalled = n - self._size_at_improvement >= schedule.refit_on_stall * observations.max_t
            if stalled:
                self._size_at_improvement = n  # patience starts again after the restart
        return (
            self._size_at_full_fit == 0
            or self.num_full_fits < schedule.initial_full_fits
            or n >= schedule.refit_growth * self._size_at_full_fit
            or stalled
            # targets and curve inputs are transformed once per fit from scratch: when the data
            # has outgrown that transform, the model must be retrained on a new one
            or self.transform.outdated(observations.all_scores())
        )

    def _training_data(self, observations: Observations) -> TrainingData:
        raw = observations.training_data()
        return replace(
            raw,
            y=self.transform(raw.y),
            curves=self.transform.curves(raw.curves),
            version=(raw.version, self.transform.version),
        )

    def metadata(self) -> dict[str, Any]:
        return {
            "surrogate": type(self.surrogate).__name__,
            "schedule": {k: (None if v is None or v == math.inf else v) for k, v in vars(self.schedule).items()},
            "num_full_fits": self.num_full_fits,
            "num_refines": self.num_refines,
        }
