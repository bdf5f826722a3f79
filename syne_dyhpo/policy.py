"""The seam between the freeze-thaw scheduler and a method: surrogate + acquisition.

A policy is refitted on all observations, then scores candidates (paused trials at their next
budget, new configurations at the first budget); the scheduler runs the best one for one more
budget step. DyHPO and Deep Power Law differ only in the surrogate and in
:class:`Acquisition` (see :mod:`syne_dyhpo.dyhpo`, :mod:`syne_dyhpo.deep_power_law`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from syne_dyhpo.acquisition import log_expected_improvement, per_budget_incumbent
from syne_dyhpo.observations import Candidates, Observations, TrainingData

logger = logging.getLogger(__name__)


class Surrogate(Protocol):
    """A probabilistic model of the normalised score at (config, budget, curve so far)."""

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        """Trains on ``data``: from scratch, or a warm-started refinement of the last fit."""

    def condition(self, data: TrainingData) -> None:
        """Makes predictions use ``data`` without training (cheap; optional no-op)."""

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the normalised score at ``budget``."""


@dataclass
class FitSchedule:
    """When the surrogate is trained from scratch, refined (warm start), or only conditioned.

    The papers' codes refine after every observation; that costs most of a run's wall time
    (see docs), so by default refinements happen every ``refine_every`` new observations and
    full refits when the data has grown by ``refit_growth`` since the last full fit. In between
    the surrogate is conditioned on all data (for the GP: exact posterior on all points), so no
    observation is ignored by a decision. ``refine_every=1, refit_growth=inf`` is the papers'
    schedule. With either, a fit from scratch also happens whenever the observations have
    outgrown the score normalisation (see :meth:`Observations.normalizer_outdated`), which is
    only re-estimated at such fits.

    :param refine_every: refine after this many new observations
    :param refit_growth: full refit once the data grew by this factor since the last full fit
    """

    refine_every: int = 1
    refit_growth: float = float("inf")

    @classmethod
    def paper(cls) -> "FitSchedule":
        """The authors' schedule: refine after every observation, never refit from scratch."""
        return cls(refine_every=1, refit_growth=float("inf"))

    def __post_init__(self):
        if self.refine_every < 1:
            raise ValueError(f"refine_every must be >= 1, got {self.refine_every}")
        if self.refit_growth <= 1:
            raise ValueError(f"refit_growth must be > 1, got {self.refit_growth}")


class Acquisition(Protocol):
    def __call__(self, surrogate: Surrogate, candidates: Candidates, observations: Observations) -> np.ndarray:
        """Acquisition value per candidate (higher is better). Both methods return log EI:
        the argmax of EI, kept informative where EI underflows."""


def ei_at_next_budget(surrogate: Surrogate, candidates: Candidates, observations: Observations) -> np.ndarray:
    """DyHPO's multi-fidelity EI: EI at the candidate's next budget against the best score
    observed at that budget (or, if none was observed there, at any budget)."""
    mean, std = surrogate.predict(candidates, candidates.budget)
    # incumbent chosen on raw scores (the normaliser floors the -inf of unseen budgets)
    incumbent = observations.normalizer(per_budget_incumbent(observations.best_score_per_budget(), candidates.budget))
    return log_expected_improvement(mean, std, incumbent)


def ei_at_max_budget(surrogate: Surrogate, candidates: Candidates, observations: Observations) -> np.ndarray:
    """Deep Power Law's acquisition: EI of the predicted score at max_t against the best score
    observed at any budget."""
    mean, std = surrogate.predict(candidates, np.full(len(candidates), observations.max_t))
    incumbent = observations.normalizer(np.array([observations.best_score()]))[0]
    return log_expected_improvement(mean, std, incumbent)


class SurrogatePolicy:
    """Fits a surrogate on a :class:`FitSchedule` and scores candidates with an acquisition.

    :param surrogate: the model
    :param acquisition: function of (surrogate, candidates, observations) -> scores
    :param schedule: when to train from scratch / refine / condition only
    :param min_observations: fewest observations before the surrogate is used
    """

    def __init__(
        self,
        surrogate: Surrogate,
        acquisition: Acquisition,
        schedule: FitSchedule,
        min_observations: int = 2,
    ):
        self.surrogate = surrogate
        self.acquisition = acquisition
        self.schedule = schedule
        self.min_observations = min_observations
        self._size_at_full_fit = 0
        self._size_at_refine = 0
        self.num_full_fits = 0
        self.num_refines = 0

    def ready(self, observations: Observations) -> bool:
        return observations.num_observations >= self.min_observations

    def update(self, observations: Observations, seed: int) -> None:
        """Trains or conditions the surrogate on all observations, as the schedule says."""
        n = observations.num_observations
        full = (
            self._size_at_full_fit == 0
            or n >= self.schedule.refit_growth * self._size_at_full_fit
            # targets and curve inputs are normalised once per fit from scratch: when the data
            # has outgrown that normalisation, the model must be retrained on the new one
            or observations.normalizer_outdated()
        )
        if full:
            observations.refit_normalizer()  # normalisation only moves with a fit from scratch
        data = observations.training_data()
        if full:
            self.surrogate.fit(data, from_scratch=True, seed=seed)
            self._size_at_full_fit = self._size_at_refine = n
            self.num_full_fits += 1
        elif n - self._size_at_refine >= self.schedule.refine_every:
            self.surrogate.fit(data, from_scratch=False, seed=seed)
            self._size_at_refine = n
            self.num_refines += 1
        else:
            self.surrogate.condition(data)

    def reset(self) -> None:
        """Forces a fit from scratch at the next update (after a numerical failure)."""
        self._size_at_full_fit = 0

    def score(self, candidates: Candidates, observations: Observations) -> np.ndarray:
        return self.acquisition(self.surrogate, candidates, observations)

    def metadata(self) -> dict[str, Any]:
        return {
            "surrogate": type(self.surrogate).__name__,
            "acquisition": getattr(self.acquisition, "__name__", str(self.acquisition)),
            "refine_every": self.schedule.refine_every,
            "refit_growth": self.schedule.refit_growth,
            "num_full_fits": self.num_full_fits,
            "num_refines": self.num_refines,
        }
