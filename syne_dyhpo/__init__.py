"""DyHPO and Deep Power Law freeze-thaw (pause-and-resume) schedulers for Syne Tune.

- :mod:`syne_dyhpo.core`: the freeze-thaw scheduler shared by both methods (trial life cycle,
  observations, candidates, policy, decision);
- :mod:`syne_dyhpo.methods`: DyHPO and Deep Power Law, each its surrogate, acquisition and fit
  schedule;
- :mod:`syne_dyhpo.surrogates`: the deep-kernel GP and the power-law ensemble;
- front ends: :mod:`syne_dyhpo.ray_tune` (Ray Tune, extra ``ray``),
  :mod:`syne_dyhpo.backends.sagemaker` (SageMaker training jobs, extra ``sagemaker``),
  :mod:`syne_dyhpo.checkpointing` (a strict checkpoint helper for training scripts).

Each method's settings classes have the method's defaults, and each has one ``paper()``
where the paper's settings differ: DyHPO's :class:`DyHPOSurrogate` (holding
:class:`DeepKernelGPConfig` and :class:`DyHPOFitSchedule`) and :class:`DyHPOCompletion`; Deep
Power Law's :class:`DeepPowerLawSurrogate` (holding :class:`PowerLawConfig` and
:class:`DeepPowerLawFitSchedule`) and :class:`DeepPowerLawCompletion`. The core's further
settings, shared by both, are :class:`FreezeThawOptions`.
:data:`DYHPO_COMPLETION` and :data:`DEEP_POWER_LAW_COMPLETION` are ``DyHPOCompletion()`` and
``DeepPowerLawCompletion()``.
The public names are imported on first use, so that a training script importing only
:mod:`syne_dyhpo.checkpointing` does not pay for gpytorch and the schedulers.
"""

from importlib import import_module
from typing import Any

__version__ = "1.1.0"

_PUBLIC: dict[str, str | tuple[str, str]] = {
    "CandidateOptions": "syne_dyhpo.core.candidates",
    "DepthGate": "syne_dyhpo.core.depth_gate",
    "IncumbentCompletion": "syne_dyhpo.core.completion",
    "JobCosts": "syne_dyhpo.core.job_costs",
    "PausedCheckpoints": "syne_dyhpo.core.checkpoints",
    "SuccessiveHalvingPromotion": "syne_dyhpo.core.promotion",
    "DeepKernelGPConfig": "syne_dyhpo.surrogates.deep_kernel_gp",
    "DeepPowerLaw": "syne_dyhpo.methods.deep_power_law",
    "DeepPowerLawCompletion": "syne_dyhpo.methods.deep_power_law",
    "DeepPowerLawFitSchedule": "syne_dyhpo.methods.deep_power_law",
    "DeepPowerLawSurrogate": "syne_dyhpo.methods.deep_power_law",
    "DEEP_POWER_LAW_COMPLETION": ("syne_dyhpo.methods.deep_power_law", "DEFAULT_COMPLETION"),
    "DyHPO": "syne_dyhpo.methods.dyhpo",
    "DyHPOCompletion": "syne_dyhpo.methods.dyhpo",
    "DyHPOFitSchedule": "syne_dyhpo.methods.dyhpo",
    "DyHPOSurrogate": "syne_dyhpo.methods.dyhpo",
    "DYHPO_COMPLETION": ("syne_dyhpo.methods.dyhpo", "DEFAULT_COMPLETION"),
    "FitSchedule": "syne_dyhpo.core.policy",
    "FreezeThawOptions": "syne_dyhpo.core.options",
    "FreezeThawScheduler": "syne_dyhpo.core.scheduler",
    "PowerLawConfig": "syne_dyhpo.surrogates.power_law",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'syne_dyhpo' has no attribute {name!r}")
    target = _PUBLIC[name]
    module, attribute = target if isinstance(target, tuple) else (target, name)
    value = getattr(import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
