"""DyHPO and Deep Power Law freeze-thaw (pause-and-resume) schedulers for Syne Tune."""

from syne_dyhpo.deep_power_law import DeepPowerLaw
from syne_dyhpo.dyhpo import DyHPO
from syne_dyhpo.scheduler import FreezeThawScheduler

__all__ = ["DeepPowerLaw", "DyHPO", "FreezeThawScheduler"]
