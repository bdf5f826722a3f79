"""Deep Power Law (Kadra, Janowski, Wistuba, Grabocka, NeurIPS 2023) as a Syne Tune
pause-and-resume scheduler: an ensemble of nets mapping a config to power-law coefficients and
expected improvement of the predicted score at the maximum budget."""

from __future__ import annotations

from typing import Any

import numpy as np

from syne_dyhpo.acquisition import LogExpectedImprovement
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.completion import IncumbentCompletion
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import FitSchedule, FittedModel, SurrogatePolicy
from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.surrogates.power_law import PowerLawConfig, PowerLawEnsemble


class MaxBudgetLogEI(LogExpectedImprovement):
    """Deep Power Law's acquisition (Kadra et al., 2023, Sec. 4), as log EI: EI of the score
    predicted at ``max_t`` against the best score observed at any budget. The winner is still
    advanced by one budget step only.

    :param model: the fitted power-law ensemble and its outcome transform
    :param best_score: best score observed at any budget
    :param max_t: the maximum budget
    """

    def __init__(self, model: FittedModel, best_score: float, max_t: int):
        super().__init__(model)
        self.best_score = best_score
        self.max_t = max_t

    @classmethod
    def from_observations(cls, model: FittedModel, observations: Observations) -> "MaxBudgetLogEI":
        return cls(model, observations.best_score(), observations.max_t)

    def budgets(self, candidates: Candidates) -> np.ndarray:
        return np.full(len(candidates), self.max_t)

    def best_f(self, candidates: Candidates) -> np.ndarray:
        return np.array([self.best_score])


def paper_fit_schedule() -> FitSchedule:
    """The authors' code's schedule: the first 10 fits from scratch, then a warm-started
    refinement after every observation, and a fit from scratch after 1.2 x max_t observations
    in a row without a new best score."""
    return FitSchedule(refine_every=1, initial_full_fits=10, refit_on_stall=1.2)


#: Default training schedule of DPL's ensemble: a warm-started refinement after every
#: observation (the ensemble is not conditioned on data between fits, so refining less often
#: would freeze each trial's prediction for several decisions); trained from scratch only at
#: the first fit and when the outcome transform is outdated, not at the 10 first fits and
#: after stalls as in the authors' code (:func:`paper_fit_schedule`).
DEFAULT_FIT_SCHEDULE = FitSchedule(refine_every=1)

#: Default settings of DPL's ensemble: the paper's network without its appendix's BatchNorm (as
#: the authors' code), and capped training. A refinement runs at most 16 minibatch steps (the
#: paper's 20 epochs are 320 steps at 1000 observations), fewer beyond 2000 observations
#: (``refine_steps_shrink_after``), and a fit from scratch at most 4000 (the paper's 250 epochs up
#: to 1024 observations): the steps are most of a decision's cost. ``PowerLawConfig()`` is the
#: paper's; docs/deviations.md says why each cap and what it costs.
DEFAULT_POWER_LAW_CONFIG = PowerLawConfig(
    max_refine_steps=16, max_fit_steps=4000, refine_steps_shrink_after=2000, batch_norm=False
)


#: DeepPowerLaw's incumbent completion: :class:`~syne_dyhpo.core.completion.IncumbentCompletion`'s
#: defaults (with several workers, the top half of the workers complete leaders).
DEFAULT_COMPLETION = IncumbentCompletion()


class DeepPowerLaw(FreezeThawScheduler):
    """Deep Power Law: ensemble of nets mapping a config to power-law coefficients + EI of
    the predicted value at ``max_t``; each decision advances the winner by one budget step.

    Arguments are those of :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`
    (``do_minimize``, ``time_attr``, ``max_t``, ``random_seed``, ...: pass them by keyword)
    plus:

    :param surrogate_config: settings of the ensemble. Defaults to
        :data:`DEFAULT_POWER_LAW_CONFIG`; ``PowerLawConfig()`` is the paper's
    :param fit_schedule: when the ensemble is refitted from scratch or refined. Defaults to
        :data:`DEFAULT_FIT_SCHEDULE`; :func:`paper_fit_schedule` is the authors'
    :param normalisation_scores: the scores the surrogate's outcome normalisation is fitted
        on (neither paper normalises): one of :data:`~syne_dyhpo.core.policy.NORMALISATION_SCORES`,
        explained in :meth:`~syne_dyhpo.core.policy.SurrogatePolicy.transform_scores`.
        Defaults to ``"trials_if_alike"``
    :param completion: the incumbent completion (see
        :class:`~syne_dyhpo.core.completion.IncumbentCompletion`). Defaults to
        :data:`DEFAULT_COMPLETION`; None is the paper (no completion)
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        surrogate_config: PowerLawConfig | None = None,
        fit_schedule: FitSchedule | None = None,
        normalisation_scores: str = "trials_if_alike",
        completion: IncumbentCompletion | None = DEFAULT_COMPLETION,
        **kwargs: Any,
    ):
        policy = SurrogatePolicy(
            surrogate=PowerLawEnsemble(surrogate_config or DEFAULT_POWER_LAW_CONFIG),
            acquisition=MaxBudgetLogEI.from_observations,
            schedule=fit_schedule or DEFAULT_FIT_SCHEDULE,
            normalisation_scores=normalisation_scores,
        )
        super().__init__(config_space, metric, policy, completion=completion, **kwargs)
