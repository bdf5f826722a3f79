"""Deep Power Law (Kadra et al., NeurIPS 2023) as a Syne Tune pause-and-resume scheduler."""

from __future__ import annotations

from typing import Any

from syne_dyhpo.policy import FitSchedule, SurrogatePolicy, ei_at_max_budget
from syne_dyhpo.scheduler import FreezeThawScheduler
from syne_dyhpo.surrogates.power_law import PowerLawConfig, PowerLawEnsemble

#: Default training schedule of DPL's ensemble: as the paper, a warm-started refinement after
#: every observation (the ensemble is not conditioned on data between fits, so refining less
#: often would freeze each trial's prediction for several decisions); trained from scratch
#: once, like the authors' code.
DPL_SCHEDULE = FitSchedule(refine_every=1, refit_growth=float("inf"))

#: Default settings of DPL's ensemble: the paper's, except that a refinement runs at most 16
#: minibatch steps (the paper's 20 epochs are 320 steps at 1000 observations, 20x the cost).
DPL_CONFIG = PowerLawConfig(max_refine_steps=16)


class DeepPowerLaw(FreezeThawScheduler):
    """Deep Power Law: ensemble of nets mapping a config to power-law coefficients + EI of
    the predicted value at ``max_t``; each decision advances the winner by one budget step.

    Arguments are those of :class:`~syne_dyhpo.scheduler.FreezeThawScheduler` (``do_minimize``,
    ``time_attr``, ``max_t``, ``random_seed``, ...: pass them by keyword) plus:

    :param surrogate_config: settings of the ensemble. Defaults to :data:`DPL_CONFIG`;
        ``PowerLawConfig()`` is the paper's
    :param fit_schedule: when the ensemble is refitted from scratch or refined. Defaults to
        :data:`DPL_SCHEDULE`; ``FitSchedule.paper()`` is the paper's
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        surrogate_config: PowerLawConfig | None = None,
        fit_schedule: FitSchedule | None = None,
        **kwargs: Any,
    ):
        policy = SurrogatePolicy(
            surrogate=PowerLawEnsemble(surrogate_config or DPL_CONFIG),
            acquisition=ei_at_max_budget,
            schedule=fit_schedule or DPL_SCHEDULE,
        )
        super().__init__(config_space, metric, policy, **kwargs)
