"""Building a method's core and its Ray Tune front end in one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.tune.search import sample as ray_sample

from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.ray_tune.scheduler import FreezeThawRayScheduler
from syne_dyhpo.ray_tune.search_space import _is_grid_search, config_space_from_ray


def _core_class(method: str) -> Callable[..., FreezeThawScheduler]:
    key = method.lower().replace("-", "_")
    if key == "dyhpo":
        from syne_dyhpo.methods.dyhpo import DyHPO

        return DyHPO
    if key in ("dpl", "deep_power_law", "deeppowerlaw"):
        from syne_dyhpo.methods.deep_power_law import DeepPowerLaw

        return DeepPowerLaw
    raise ValueError(f"Unknown method '{method}': use 'dyhpo' or 'dpl'")


def ray_scheduler(
    method: str,
    config_space: dict[str, Any],
    metric: str,
    mode: str = "min",
    max_t: int | None = None,
    max_concurrent: int = 2,
    max_num_trials: int | None = None,
    max_total_epochs: int | None = None,
    **kwargs: Any,
) -> FreezeThawRayScheduler:
    """Builds the core of a method and its Ray front end.

    :param method: "dyhpo" (:class:`~syne_dyhpo.DyHPO`) or "dpl" (``DeepPowerLaw``)
    :param config_space: Syne Tune config space, or a Ray Tune search space (converted with
        :func:`config_space_from_ray`)
    :param metric: metric the trainable reports, to optimise
    :param mode: "min" or "max". Defaults to "min"
    :param max_t: maximum epochs of a trial (the trainable's own maximum)
    :param max_concurrent: see :class:`FreezeThawRayScheduler`
    :param max_num_trials: see :class:`FreezeThawRayScheduler`
    :param max_total_epochs: see :class:`FreezeThawRayScheduler`
    :param kwargs: further arguments of the method's constructor (``time_attr``,
        ``random_seed``, ``surrogate``, ``completion``, ``depth_gate``, ``options``, ...)
    """
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    if any(isinstance(v, ray_sample.Domain) or _is_grid_search(v) for v in config_space.values()):
        config_space = config_space_from_ray(config_space)
    core = _core_class(method)(config_space, metric, do_minimize=(mode == "min"), max_t=max_t, **kwargs)
    return FreezeThawRayScheduler(
        core, max_concurrent=max_concurrent, max_num_trials=max_num_trials, max_total_epochs=max_total_epochs
    )


def ray_dyhpo(config_space: dict[str, Any], metric: str, **kwargs: Any) -> FreezeThawRayScheduler:
    """DyHPO under Ray Tune; arguments as in :func:`ray_scheduler`."""
    return ray_scheduler("dyhpo", config_space, metric, **kwargs)


def ray_deep_power_law(config_space: dict[str, Any], metric: str, **kwargs: Any) -> FreezeThawRayScheduler:
    """Deep Power Law under Ray Tune; arguments as in :func:`ray_scheduler`."""
    return ray_scheduler("dpl", config_space, metric, **kwargs)
