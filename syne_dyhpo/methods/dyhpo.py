"""DyHPO (Wistuba, Kadra, Grabocka, NeurIPS 2022) as a Syne Tune pause-and-resume scheduler:
a deep-kernel GP over (config, budget, learning curve so far) and multi-fidelity expected
improvement at the candidate's next budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from syne_dyhpo.acquisition import LogExpectedImprovement
from syne_dyhpo.checks import checked_choice, checked_flag
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
    def from_observations(cls, model: FittedModel, observations: Observations) -> MultiFidelityLogEI:
        return cls(model, observations.best_score_per_budget())

    def budgets(self, candidates: Candidates) -> np.ndarray:
        return candidates.budget

    def best_f(self, candidates: Candidates) -> np.ndarray:
        return per_budget_incumbent(self.best_per_budget, candidates.budget)


@dataclass(frozen=True)
class DyHPOFitSchedule(FitSchedule):
    """DyHPO's schedule of the GP's training (see :class:`~syne_dyhpo.core.policy.FitSchedule`
    for every field): the kernel is refined (warm start) every 21 observations, beyond 2100
    observations every 1 % of the data (``refine_every_fraction``), and retrained from scratch
    when the data has grown 4-fold; every decision conditions the GP on all data. Changing a
    field changes only that field. :meth:`paper` is the authors'; docs/deviations.md says why
    and what each costs.

    :param refine_every: refine after this many new observations. Defaults to 21 (paper: 1)
    :param refit_growth: train from scratch once the data grew by this factor since the last
        fit from scratch. Defaults to 4.0 (paper: inf)
    :param refine_every_fraction: refine every ``max(refine_every, ceil(fraction * n))``
        observations. Defaults to 0.01 (paper: None)
    """

    refine_every: int = 21
    refit_growth: float = 4.0
    refine_every_fraction: float | None = 0.01

    @classmethod
    def paper(cls) -> DyHPOFitSchedule:
        """The authors' code's schedule: trained from scratch at the first fit, then refined
        (warm start) after every observation, and retrained from scratch after 1.2 x max_t
        observations in a row without a new best score."""
        return cls(refine_every=1, refit_growth=math.inf, refine_every_fraction=None, refit_on_stall=1.2)


#: A cheaper schedule for large studies: the kernel refined on evidence of misfit
#: (``refine_on_misfit=0.01``: the GP's one-step-ahead errors since its last training fail a
#: sign test at level 0.01), at the latest every 100 observations. Less CPU than
#: ``DyHPOFitSchedule()``, at some cost in regret (docs/deviations.md).
MISFIT_FIT_SCHEDULE = DyHPOFitSchedule(refine_every=100, refine_every_fraction=None, refine_on_misfit=0.01)


@dataclass(frozen=True)
class DyHPOCompletion(IncumbentCompletion):
    """DyHPO's incumbent completion (see :class:`~syne_dyhpo.core.completion.IncumbentCompletion`
    for every field): one leader (``share=0``), chosen once 27 configurations reported their
    first epoch (three rungs of successive halving with reduction factor 3) and committed to
    (``committed=1``: trained to ``max_t`` even when overtaken). Changing a field changes only
    that field; the paper has no completion (``completion=None``).

    :param after: configurations that reported their first epoch before the completion
        starts. Defaults to 27
    :param share: share of the workers that may complete leaders at once. Defaults to 0.0
        (only the incumbent)
    :param leaders_until_trained: ``share`` holds only until a configuration is trained to
        ``max_t``. Defaults to True
    :param committed: the first this many trials chosen are trained to ``max_t`` even when
        overtaken. Defaults to 1
    """

    after: int = 27
    share: float = 0.0
    leaders_until_trained: bool = True
    committed: int = 1


#: DyHPO's default completion, ``DyHPOCompletion()`` (exported as ``syne_dyhpo.DYHPO_COMPLETION``)
DEFAULT_COMPLETION = DyHPOCompletion()


@dataclass(frozen=True)
class DyHPOSurrogate:
    """DyHPO's surrogate settings: the deep-kernel GP, when it is trained, the scores its
    outcome normalisation is fitted on, and whether it is conditioned on running trials.
    Changing a field changes only that field; :meth:`paper` is the paper's.

    :param model: training settings of the deep-kernel GP. Defaults to ``DeepKernelGPConfig()``;
        ``DeepKernelGPConfig.paper()`` is the paper's
    :param fit_schedule: when the GP is refitted from scratch / refined / only conditioned on
        new data. Defaults to ``DyHPOFitSchedule()``; ``DyHPOFitSchedule.paper()`` is the
        authors', :data:`MISFIT_FIT_SCHEDULE` a cheaper one
    :param normalisation_scores: the scores the surrogate's outcome normalisation is fitted
        on (the paper does not normalise): one of
        :data:`~syne_dyhpo.core.policy.NORMALISATION_SCORES`, explained in
        :meth:`~syne_dyhpo.core.policy.SurrogatePolicy.transform_scores`. Defaults to
        ``"trials_if_alike"``
    :param condition_on_running: with several workers, condition the GP's predictions on the
        results the running trials will report at the end of their segments, as if each came
        out at its predicted mean (the kriging believer of asynchronous BO; not in the paper,
        whose experiments use one worker): means are unchanged, candidates correlated with a
        running trial become less uncertain, so free workers spread out instead of chasing
        what a running trial is already finding out. Defaults to False (the paper)
    """

    model: DeepKernelGPConfig = DeepKernelGPConfig()
    fit_schedule: DyHPOFitSchedule = DyHPOFitSchedule()
    normalisation_scores: str = DEFAULT_NORMALISATION_SCORES
    condition_on_running: bool = False

    def __post_init__(self) -> None:
        name = type(self).__name__
        checked_settings("DyHPO", f"{name}.model", self.model, DeepKernelGPConfig)
        checked_settings("DyHPO", f"{name}.fit_schedule", self.fit_schedule, DyHPOFitSchedule)
        # frozen: the checked values are stored in their canonical types
        object.__setattr__(self, "normalisation_scores", checked_choice(
            f"{name}.normalisation_scores", self.normalisation_scores, NORMALISATION_SCORES))
        object.__setattr__(
            self, "condition_on_running", checked_flag(f"{name}.condition_on_running", self.condition_on_running)
        )

    @classmethod
    def paper(cls) -> DyHPOSurrogate:
        """The paper's GP and the authors' fit schedule (the paper does not normalise scores:
        ``normalisation_scores`` keeps its default, docs/deviations.md)."""
        return cls(model=DeepKernelGPConfig.paper(), fit_schedule=DyHPOFitSchedule.paper())


class DyHPO(FreezeThawScheduler):
    """DyHPO: deep-kernel GP over (config, budget, learning curve) + multi-fidelity EI; each
    decision advances the winner by one budget step.

    The arguments follow Syne Tune's schedulers (``config_space``, ``metric``, ``do_minimize``,
    ``time_attr``, ``max_t``, ``max_resource_attr``, ``random_seed``, ``points_to_evaluate``);
    the method's settings are settings objects. Each one's default is its class's instance
    with no arguments, so changing one field changes only that field
    (``DyHPOSurrogate(model=DeepKernelGPConfig(lr=0.05))``); the paper's settings are each
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
    :param surrogate: the GP, its fit schedule, normalisation and conditioning on running
        trials (:class:`DyHPOSurrogate`). Defaults to ``DyHPOSurrogate()``;
        ``DyHPOSurrogate.paper()`` is the paper's
    :param completion: the incumbent completion. Defaults to ``DyHPOCompletion()``; None is
        the paper (no completion)
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
        surrogate: DyHPOSurrogate = DyHPOSurrogate(),
        completion: DyHPOCompletion | None = DEFAULT_COMPLETION,
        depth_gate: DepthGate | None = DepthGate(),
        options: FreezeThawOptions = FreezeThawOptions(),
    ):
        checked_settings("DyHPO", "surrogate", surrogate, DyHPOSurrogate)
        checked_settings("DyHPO", "completion", completion, DyHPOCompletion, allow_none=True)
        policy = SurrogatePolicy(
            surrogate=DeepKernelGP(surrogate.model),
            acquisition=MultiFidelityLogEI.from_observations,
            schedule=surrogate.fit_schedule,
            condition_on_pending=surrogate.condition_on_running,
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
