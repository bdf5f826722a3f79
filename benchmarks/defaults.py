"""Our methods' default settings (dataclasses), and those defaults with some fields changed:
``benchmarks/latency.py --scheduler-arg ARGUMENT.FIELD=VALUE``. Imports the defaults only
when asked, so that importing this module costs nothing."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

#: where each of our methods keeps the default of a scheduler argument with fields to change
DEFAULT_ARGUMENTS = {
    ("DyHPO", "surrogate_config"): ("syne_dyhpo.methods.dyhpo", "DEFAULT_GP_CONFIG"),
    ("DyHPO", "fit_schedule"): ("syne_dyhpo.methods.dyhpo", "DEFAULT_FIT_SCHEDULE"),
    ("DeepPowerLaw", "surrogate_config"): ("syne_dyhpo.methods.deep_power_law", "DEFAULT_POWER_LAW_CONFIG"),
    ("DeepPowerLaw", "fit_schedule"): ("syne_dyhpo.methods.deep_power_law", "DEFAULT_FIT_SCHEDULE"),
}

#: the scheduler arguments whose fields can be changed
FIELD_ARGUMENTS = tuple(dict.fromkeys(argument for _, argument in DEFAULT_ARGUMENTS))


def default_changed(class_name: str, argument: str, **changes: Any) -> Any:
    """The default ``argument`` (one of :data:`FIELD_ARGUMENTS`, a dataclass) of our method
    ``class_name``, with the fields ``changes`` changed.

    :raises TypeError: a field the dataclass does not have (named in the message)
    """
    module_name, constant = DEFAULT_ARGUMENTS[class_name, argument]
    return replace(getattr(importlib.import_module(module_name), constant), **changes)


#: scheduler arguments of the benchmark variants' names -> (the scheduler argument, its field)
_GROUPED = {
    "complete_incumbent_after": ("completion", "after"),
    "complete_incumbent_delay": ("completion", "delay"),
    "complete_incumbent_share": ("completion", "share"),
    "complete_leaders_until_trained": ("completion", "leaders_until_trained"),
    "committed_completions": ("completion", "committed"),
    "commit_completion_after": ("completion", "commit_after"),
    "complete_incumbent_limit": ("completion", "limit"),
    "num_candidates": ("candidates", "num_candidates"),
    "num_kept_candidates": ("candidates", "num_kept"),
    "num_initial_random": ("candidates", "num_initial_random"),
    "candidate_configs": ("candidates", "configs"),
    "sh_probability": ("promotion", "probability"),
    "sh_reduction_factor": ("promotion", "reduction_factor"),
}


def grouped(class_name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the variants' one-value arguments (``complete_incumbent=False``,
    ``complete_incumbent_after=9``, ``num_kept_candidates=224``, ``sh_probability=0.25``, ...)
    replaced by the scheduler's settings objects (``completion``, ``candidates``,
    ``promotion``): each field changed from the method's default object. Other options pass
    through."""
    from syne_dyhpo import CandidateOptions, SuccessiveHalvingPromotion

    options = dict(options)
    fields: dict[str, dict[str, Any]] = {}
    for key in [k for k in options if k in _GROUPED]:
        argument, field = _GROUPED[key]
        fields.setdefault(argument, {})[field] = options.pop(key)
    completion_on = options.pop("complete_incumbent", True)
    if "completion" in fields or not completion_on:
        base = options.get("completion") or importlib.import_module(
            {"DyHPO": "syne_dyhpo.methods.dyhpo", "DeepPowerLaw": "syne_dyhpo.methods.deep_power_law"}[class_name]
        ).DEFAULT_COMPLETION
        options["completion"] = replace(base, **fields.get("completion", {})) if completion_on else None
    if "candidates" in fields:
        options["candidates"] = replace(options.get("candidates") or CandidateOptions(), **fields["candidates"])
    if "promotion" in fields:
        promotion = replace(options.get("promotion") or SuccessiveHalvingPromotion(), **fields["promotion"])
        options["promotion"] = promotion if promotion.probability > 0 else None
    return options
