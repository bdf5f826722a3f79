"""Deep Power Law (Kadra, Janowski, Wistuba, Grabocka, NeurIPS 2023) as a Syne Tune
pause-and-resume scheduler: an ensemble of nets mapping a config to power-law coefficients and
expected improvement of the predicted score at the maximum budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from syne_dyhpo.acquisition import LogExpectedImprovement
from syne_dyhpo.checks import checked_choice
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.completion import IncumbentCompletion
from syne_dyhpo.core.depth_gate import DepthGate
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.options import FreezeThawOptions
from syne_dyhpo.core.policy import (
    DEFAULT_NORMALISATION_SCORES,
    NORMALISATION_SCORES,
    FitSchedule,
    FittedModel,
    SurrogatePolicy,
)
from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.methods.settings import checked_settings
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
    def from_observations(cls, model: FittedModel, observations: Observations) -> MaxBudgetLogEI:
        return cls(model, observations.best_score(), observations.max_t)

    def budgets(self, candidates: Candidates) -> np.ndarray:
        return np.full(len(candidates), self.max_t)

    def best_f(self, candidates: Candidates) -> np.ndarray:
        return np.array([self.best_score])


@dataclass(frozen=True)
class DeepPowerLawFitSchedule(FitSchedule):
    """Deep Power Law's schedule of the ensemble's training (see
    :class:`~syne_dyhpo.core.policy.FitSchedule` for every field): a warm-started refinement
    after every observation (the ensemble is not conditioned on data between fits, so refining
    less often would freeze each trial's prediction for several decisions); trained from
    scratch only at the first fit and when the outcome transform is outdated. Changing a field
    changes only that field. :meth:`paper` is the authors' (also from scratch at the first 10
    fits and after stalls); docs/deviations.md says why and what each costs.

    :param refine_every: refine after this many new observations. Defaults to 1 (paper: 1)
    """

    refine_every: int = 1

    @classmethod
    def paper(cls) -> DeepPowerLawFitSchedule:
        """The authors' code's schedule: the first 10 fits from scratch, then a warm-started
        refinement after every observation, and a fit from scratch after 1.2 x max_t
        observations in a row without a new best score."""
        return cls(refine_every=1, initial_full_fits=10, refit_on_stall=1.2)


@dataclass(frozen=True)
class DeepPowerLawCompletion(IncumbentCompletion):
    """Deep Power Law's incumbent completion: :class:`~syne_dyhpo.core.completion.IncumbentCompletion`'s
    fields and defaults (with several workers, the top half of the workers complete leaders,
    chosen once 9 configurations reported their first epoch). Changing a field changes only
    that field; the paper has no completion (``completion=None``)."""


#: Deep Power Law's default completion, ``DeepPowerLawCompletion()`` (exported as
#: ``syne_dyhpo.DEEP_POWER_LAW_COMPLETION``)
DEFAULT_COMPLETION = DeepPowerLawCompletion()


@dataclass(frozen=True)
class DeepPowerLawSurrogate:
    """Deep Power Law's surrogate settings: the power-law ensemble, when it is trained, and
    the scores its outcome normalisation is fitted on. Changing a field changes only that
    field; :meth:`paper` is the paper's.

    :param model: settings of the ensemble. Defaults to ``PowerLawConfig()``;
        ``PowerLawConfig.paper()`` is the paper's
    :param fit_schedule: when the ensemble is refitted from scratch or refined. Defaults to
        ``DeepPowerLawFitSchedule()``; ``DeepPowerLawFitSchedule.paper()`` is the authors'
    :param normalisation_scores: the scores the surrogate's outcome normalisation is fitted
        on (the paper does not normalise): one of
        :data:`~syne_dyhpo.core.policy.NORMALISATION_SCORES`, explained in
        :meth:`~syne_dyhpo.core.policy.SurrogatePolicy.transform_scores`. Defaults to
        ``"trials_if_alike"``
    """

    model: PowerLawConfig = PowerLawConfig()
    fit_schedule: DeepPowerLawFitSchedule = DeepPowerLawFitSchedule()
    normalisation_scores: str = DEFAULT_NORMALISATION_SCORES

    def __post_init__(self) -> None:
        name = type(self).__name__
        checked_settings("DeepPowerLaw", f"{name}.model", self.model, PowerLawConfig)
        checked_settings("DeepPowerLaw", f"{name}.fit_schedule", self.fit_schedule, DeepPowerLawFitSchedule)
        object.__setattr__(self, "normalisation_scores", checked_choice(
            f"{name}.normalisation_scores", self.normalisation_scores, NORMALISATION_SCORES))

    @classmethod
    def paper(cls) -> DeepPowerLawSurrogate:
        """The paper's ensemble and the authors' fit schedule (the paper does not normalise
        scores: ``normalisation_scores`` keeps its default, docs/deviations.md)."""
        return cls(model=PowerLawConfig.paper(), fit_schedule=DeepPowerLawFitSchedule.paper())


class DeepPowerLaw(FreezeThawScheduler):
    """Deep Power Law: ensemble of nets mapping a config to power-law coefficients + EI of
    the predicted value at ``max_t``; each decision advances the winner by one budget step.

    The arguments follow Syne Tune's schedulers (``config_space``, ``metric``, ``do_minimize``,
    ``time_attr``, ``max_t``, ``max_resource_attr``, ``random_seed``, ``points_to_evaluate``);
    the method's settings are settings objects. Each one's default is its class's instance
    with no arguments, so changing one field changes only that field
    (``DeepPowerLawSurrogate(model=PowerLawConfig(lr=0.05))``); the paper's settings are each
    class's ``paper()``, and ``None`` where the paper has no such mechanism (``completion``,
    ``depth_gate``).

    :param config_space: Syne Tune configuration space
    :param metric: name of the metric to optimise, a key of the reported results
    :param max_t: maximum budget (epochs) of a trial; trials are stopped there. Required
    :param do_minimize: True if the metric is minimised. Defaults to True
    :param time_attr: name of the budget (epoch) key of the reported results. Defaults to
        "epoch"
    :param max_resource_attr: optional config key the training script reads as "stop after
        this epoch", set to the end of each segment (see
        :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`). Defaults to None
    :param random_seed: seed of all randomness (candidate sampling, surrogate training).
        Defaults to None
    :param points_to_evaluate: configurations started first, in the given order. Defaults to
        None (none)
    :param surrogate: the ensemble, its fit schedule and normalisation
        (:class:`DeepPowerLawSurrogate`). Defaults to ``DeepPowerLawSurrogate()``;
        ``DeepPowerLawSurrogate.paper()`` is the paper's
    :param completion: the incumbent completion. Defaults to ``DeepPowerLawCompletion()``;
        None is the paper (no completion)
    :param depth_gate: the trials the acquisition may deepen are those in contention at their
        last epoch (:class:`~syne_dyhpo.core.depth_gate.DepthGate`). Defaults to
        ``DepthGate()``; None is the paper (no gate)
    :param options: the freeze-thaw core's further settings
        (:class:`~syne_dyhpo.core.options.FreezeThawOptions`: candidates, budget step,
        paused checkpoints, promotion, decision log). Defaults to ``FreezeThawOptions()``
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        *,
        max_t: int,
        do_minimize: bool = True,
        time_attr: str = "epoch",
        max_resource_attr: str | None = None,
        random_seed: int | None = None,
        points_to_evaluate: Sequence[dict[str, Any]] | None = None,
        surrogate: DeepPowerLawSurrogate = DeepPowerLawSurrogate(),
        completion: DeepPowerLawCompletion | None = DEFAULT_COMPLETION,
        depth_gate: DepthGate | None = DepthGate(),
        options: FreezeThawOptions = FreezeThawOptions(),
    ):
        checked_settings("DeepPowerLaw", "surrogate", surrogate, DeepPowerLawSurrogate)
        checked_settings("DeepPowerLaw", "completion", completion, DeepPowerLawCompletion, allow_none=True)
        policy = SurrogatePolicy(
            surrogate=PowerLawEnsemble(surrogate.model),
            acquisition=MaxBudgetLogEI.from_observations,
            schedule=surrogate.fit_schedule,
            normalisation_scores=surrogate.normalisation_scores,
        )
        super().__init__(
            config_space,
            metric,
            policy,
            max_t=max_t,
            completion=completion,
            do_minimize=do_minimize,
            time_attr=time_attr,
            max_resource_attr=max_resource_attr,
            random_seed=random_seed,
            points_to_evaluate=points_to_evaluate,
            depth_gate=depth_gate,
            options=options,
        )
