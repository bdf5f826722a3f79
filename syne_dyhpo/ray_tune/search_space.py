"""Ray Tune search spaces as Syne Tune config spaces, for the freeze-thaw schedulers' own
sampling."""

from __future__ import annotations

from typing import Any

from ray.tune.search import sample as ray_sample
from syne_tune import config_space as st_cs


def config_space_from_ray(space: dict[str, Any]) -> dict[str, Any]:
    """Converts a (flat) Ray Tune search space to a Syne Tune config space: ``uniform``,
    ``loguniform``, ``randint`` (upper bound exclusive in Ray), ``lograndint``, ``choice``;
    ``tune.grid_search(values)`` becomes ``choice(values)``: the scheduler chooses which values
    to run, as for any other hyperparameter (a grid is not run value by value); non-domain
    values stay constants. Quantized and custom-sampled domains are refused.

    :param space: Ray Tune search space, e.g. ``{"lr": tune.loguniform(1e-4, 1e-1)}``
    :return: equivalent Syne Tune config space
    """
    out: dict[str, Any] = {}
    for name, dom in space.items():
        if _is_grid_search(dom):
            values = dom["grid_search"]
            if not isinstance(values, (list, tuple)) or len(values) == 0:
                raise ValueError(f"'{name}': grid_search needs a non-empty list of values, got {values!r}")
            out[name] = st_cs.choice(list(values))
            continue
        if not isinstance(dom, ray_sample.Domain):
            out[name] = dom
            continue
        sampler = dom.get_sampler()
        if isinstance(sampler, ray_sample.Quantized) or not isinstance(
            dom, (ray_sample.Float, ray_sample.Integer, ray_sample.Categorical)
        ):
            raise ValueError(f"'{name}': unsupported Ray domain {dom!r} (use uniform/loguniform/randint/choice)")
        log = isinstance(sampler, ray_sample.LogUniform)
        if isinstance(dom, ray_sample.Categorical):
            out[name] = st_cs.choice(list(dom.categories))
        elif isinstance(dom, ray_sample.Integer):
            upper = int(dom.upper) - 1  # Ray's integer upper bound is exclusive
            out[name] = st_cs.lograndint(int(dom.lower), upper) if log else st_cs.randint(int(dom.lower), upper)
        elif isinstance(sampler, (ray_sample.Uniform, ray_sample.LogUniform)):
            out[name] = (st_cs.loguniform if log else st_cs.uniform)(float(dom.lower), float(dom.upper))
        else:
            raise ValueError(f"'{name}': unsupported sampler {sampler!r} (normal/custom are not bounded)")
    return out


def _is_grid_search(value: Any) -> bool:
    """Whether ``value`` is what ``ray.tune.grid_search`` returns."""
    return isinstance(value, dict) and set(value) == {"grid_search"}
