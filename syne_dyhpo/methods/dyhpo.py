"""DyHPO (Wistuba, Kadra, Grabocka, NeurIPS 2022) as a Syne Tune pause-and-resume scheduler:
a deep-kernel GP over (config, budget, learning curve so far) and multi-fidelity expected
improvement at the candidate's next budget."""

from __future__ import annotations

from typing import Any

import numpy as np

from syne_dyhpo.acquisition import LogExpectedImprovement
from syne_dyhpo.checks import checked_flag
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.completion import IncumbentCompletion
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import FitSchedule, FittedModel, SurrogatePolicy
from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGP, DeepKernelGPConfig


def per_budget_incumbent(best_per_budget: np.ndarray, budgets: np.ndarray) -> np.ndarray:
    """DyHPO's incumbent for EI_MF: the best score observed at the candidate's budget by any
    configuration if one was observed there, otherwise the best score observed at any budget.

    :param best_per_budget: best score at epochs 1..max_t, -inf where none was observed
    :param budgets: candidate budgets (epochs, 1-based), shape (m,)
    :return: incumbent per candidate, shape (m,)
    """
    best_any = np.max(best_per_budget) if len(best_per_budget) else -np.inf
    at_budget = best_per_budget[np.asarray(budgets, dtype=int) - 1]
    return np.where(np.isfinite(at_budget), at_budget, best_any)


class MultiFidelityLogEI(LogExpectedImprovement):
    """DyHPO's multi-fidelity expected improvement EI_MF (Wistuba et al., 2022, Sec. 4.2), as
    log EI: EI of the score at the candidate's next budget ``b`` against the best score
    observed at ``b`` by any configuration, or, if none was observed there, at any budget.

    :param model: the fitted deep-kernel GP and its outcome transform
    :param best_per_budget: best score observed at each epoch 1..max_t (-inf where none)
    """

    def __init__(self, model: FittedModel, best_per_budget: np.ndarray):
        super().__init__(model)
        self.best_per_budget = best_per_budget

    @classmethod
    def from_observations(cls, model: FittedModel, observations: Observations) -> "MultiFidelityLogEI":
        return cls(model, observations.best_score_per_budget())

    def budgets(self, candidates: Candidates) -> np.ndarray:
        return candidates.budget

    def best_f(self, candidates: Candidates) -> np.ndarray:
        return per_budget_incumbent(self.best_per_budget, candidates.budget)


#: Default training schedule of DyHPO's GP: the kernel is refined (warm start) every 21
#: observations, beyond 2100 observations every 1 % of the data (``refine_every_fraction``),
#: and retrained from scratch when the data has grown 4-fold; every decision conditions the GP
#: on all data. The paper's is :func:`paper_fit_schedule` (refined after every observation);
#: docs/deviations.md says why and what each costs.
DEFAULT_FIT_SCHEDULE = FitSchedule(refine_every=21, refit_growth=4.0, refine_every_fraction=0.01)

#: A cheaper schedule for large studies: the kernel refined on evidence of misfit
#: (``refine_on_misfit=0.01``: the GP's one-step-ahead errors since its last training fail a
#: sign test at level 0.01), at the latest every 100 observations. Less CPU than
#: :data:`DEFAULT_FIT_SCHEDULE`, at some cost in regret (docs/deviations.md).
MISFIT_FIT_SCHEDULE = FitSchedule(refine_every=100, refit_growth=4.0, refine_on_misfit=0.01)

#: Default training settings of DyHPO's GP: the paper's, except at most 300 epochs from
#: scratch (paper: 1000 with early stopping), training on at most 128 observations, and the
#: posterior conditioned on at most about 512 observations (``max_condition_points``: every
#: configuration's latest, then the most recent; the paper's exact GP on all: None), which
#: bounds a decision's cost. ``DeepKernelGPConfig()`` is the paper's.
DEFAULT_GP_CONFIG = DeepKernelGPConfig(max_iterations=300, max_fit_points=128, max_condition_points=512)


#: DyHPO's incumbent completion: one leader (``share=0``), chosen once 27 configurations
#: reported their first epoch (three rungs of successive halving with reduction factor 3) and
#: committed to (``committed=1``: trained to ``max_t`` even when overtaken); the other settings
#: are :class:`~syne_dyhpo.core.completion.IncumbentCompletion`'s defaults.
DEFAULT_COMPLETION = IncumbentCompletion(after=27, share=0.0, leaders_until_trained=True, committed=1)


def paper_fit_schedule() -> FitSchedule:
    """The authors' code's schedule: trained from scratch at the first fit, then refined
    (warm start) after every observation, and retrained from scratch after 1.2 x max_t
    observations in a row without a new best score."""
    return FitSchedule(refine_every=1, refit_on_stall=1.2)


class DyHPO(FreezeThawScheduler):
    """DyHPO: deep-kernel GP over (config, budget, learning curve) + multi-fidelity EI; each
    decision advances the winner by one budget step.

    Arguments are those of :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`
    (``do_minimize``, ``time_attr``, ``max_t``, ``random_seed``, ...: pass them by keyword)
    plus:

    :param surrogate_config: training settings of the deep-kernel GP. Defaults to
        :data:`DEFAULT_GP_CONFIG`; ``DeepKernelGPConfig()`` is the paper's
    :param fit_schedule: when the GP is refitted from scratch / refined / only conditioned on
        new data. Defaults to :data:`DEFAULT_FIT_SCHEDULE`; :func:`paper_fit_schedule` is the
        authors', :data:`MISFIT_FIT_SCHEDULE` a cheaper one
    :param condition_on_running: with several workers, condition the GP's predictions on the
        results the running trials will report at the end of their segments, as if each came
        out at its predicted mean (the kriging believer of asynchronous BO; not in the paper,
        whose experiments use one worker): means are unchanged, candidates correlated with a
        running trial become less uncertain, so free workers spread out instead of chasing
        what a running trial is already finding out. Defaults to False (the paper)
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
        surrogate_config: DeepKernelGPConfig | None = None,
        fit_schedule: FitSchedule | None = None,
        condition_on_running: bool = False,
        normalisation_scores: str = "trials_if_alike",
        completion: IncumbentCompletion | None = DEFAULT_COMPLETION,
        **kwargs: Any,
    ):
        condition_on_running = checked_flag("condition_on_running", condition_on_running)
        policy = SurrogatePolicy(
            surrogate=DeepKernelGP(surrogate_config or DEFAULT_GP_CONFIG),
            acquisition=MultiFidelityLogEI.from_observations,
            schedule=fit_schedule or DEFAULT_FIT_SCHEDULE,
            condition_on_pending=condition_on_running,
            normalisation_scores=normalisation_scores,
        )
        super().__init__(
            config_space,
            metric,
            policy,
            completion=completion,
            **kwargs,
        )
