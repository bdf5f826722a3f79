"""DyHPO (Wistuba, Kadra, Grabocka, NeurIPS 2022) as a Syne Tune pause-and-resume scheduler."""

from __future__ import annotations

from typing import Any

from syne_dyhpo.policy import FitSchedule, SurrogatePolicy, ei_at_next_budget
from syne_dyhpo.scheduler import FreezeThawScheduler
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGP, DeepKernelGPConfig

#: Default training schedule of DyHPO's GP. The paper's (``FitSchedule.paper()``: refine
#: after every observation) costs most of a run's time (about an hour per 1000 epochs with the
#: authors' code); here the kernel is refined every 15 observations and retrained from scratch
#: when the data has grown 4-fold, while every decision still conditions the GP on all data.
DYHPO_SCHEDULE = FitSchedule(refine_every=15, refit_growth=4.0)

#: Default training settings of DyHPO's GP: the paper's, except at most 300 epochs from
#: scratch (paper: 1000 with early stopping) and training on at most 128 observations.
DYHPO_GP_CONFIG = DeepKernelGPConfig(max_iterations=300, max_fit_points=128)


class DyHPO(FreezeThawScheduler):
    """DyHPO: deep-kernel GP over (config, budget, learning curve) + multi-fidelity EI; each
    decision advances the winner by one budget step.

    Arguments are those of :class:`~syne_dyhpo.scheduler.FreezeThawScheduler` (``do_minimize``,
    ``time_attr``, ``max_t``, ``random_seed``, ...: pass them by keyword) plus:

    :param surrogate_config: training settings of the deep-kernel GP. Defaults to
        :data:`DYHPO_GP_CONFIG`; ``DeepKernelGPConfig()`` is the paper's
    :param fit_schedule: when the GP is refitted from scratch / refined / only conditioned on
        new data. Defaults to :data:`DYHPO_SCHEDULE`; ``FitSchedule.paper()`` is the paper's
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        surrogate_config: DeepKernelGPConfig | None = None,
        fit_schedule: FitSchedule | None = None,
        **kwargs: Any,
    ):
        policy = SurrogatePolicy(
            surrogate=DeepKernelGP(surrogate_config or DYHPO_GP_CONFIG),
            acquisition=ei_at_next_budget,
            schedule=fit_schedule or DYHPO_SCHEDULE,
        )
        super().__init__(config_space, metric, policy, **kwargs)
