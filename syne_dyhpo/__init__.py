"""DyHPO and Deep Power Law freeze-thaw (pause-and-resume) schedulers for Syne Tune.

- :mod:`syne_dyhpo.core`: the freeze-thaw scheduler shared by both methods (trial life cycle,
  observations, candidates, policy, decision);
- :mod:`syne_dyhpo.methods`: DyHPO and Deep Power Law, each its surrogate, acquisition and fit
  schedule;
- :mod:`syne_dyhpo.surrogates`: the deep-kernel GP and the power-law ensemble;
- front ends: :mod:`syne_dyhpo.ray_tune` (Ray Tune, extra ``ray``),
  :mod:`syne_dyhpo.checkpointing` (a strict checkpoint helper for training scripts).
"""

from syne_dyhpo.core.policy import FitSchedule
from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.methods.deep_power_law import DeepPowerLaw
from syne_dyhpo.methods.dyhpo import DyHPO
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGPConfig
from syne_dyhpo.surrogates.power_law import PowerLawConfig

__all__ = ["DeepKernelGPConfig", "DeepPowerLaw", "DyHPO", "FitSchedule", "FreezeThawScheduler", "PowerLawConfig"]
