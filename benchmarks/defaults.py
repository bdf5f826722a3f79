"""Our methods' default settings (dataclasses), and those defaults with some fields changed:
``benchmarks/latency.py --scheduler-arg ARGUMENT.FIELD=VALUE``. Imports the defaults only
when asked, so that importing this module costs nothing."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

#: where each of our methods keeps the default of a scheduler argument with fields to change:
#: ``(module, name)``, the name of a constant or of a dataclass whose instance with no
#: arguments is the default (``promotion``, off by default, starts from that instance)
DEFAULT_ARGUMENTS = {
    ("DyHPO", "surrogate_config"): ("syne_dyhpo.methods.dyhpo", "DEFAULT_GP_CONFIG"),
    ("DyHPO", "fit_schedule"): ("syne_dyhpo.methods.dyhpo", "DEFAULT_FIT_SCHEDULE"),
    ("DyHPO", "completion"): ("syne_dyhpo.methods.dyhpo", "DEFAULT_COMPLETION"),
    ("DyHPO", "candidates"): ("syne_dyhpo.core.candidates", "CandidateOptions"),
    ("DyHPO", "promotion"): ("syne_dyhpo.core.promotion", "SuccessiveHalvingPromotion"),
    ("DeepPowerLaw", "surrogate_config"): ("syne_dyhpo.methods.deep_power_law", "DEFAULT_POWER_LAW_CONFIG"),
    ("DeepPowerLaw", "fit_schedule"): ("syne_dyhpo.methods.deep_power_law", "DEFAULT_FIT_SCHEDULE"),
    ("DeepPowerLaw", "completion"): ("syne_dyhpo.methods.deep_power_law", "DEFAULT_COMPLETION"),
    ("DeepPowerLaw", "candidates"): ("syne_dyhpo.core.candidates", "CandidateOptions"),
    ("DeepPowerLaw", "promotion"): ("syne_dyhpo.core.promotion", "SuccessiveHalvingPromotion"),
}

#: the scheduler arguments whose fields can be changed
FIELD_ARGUMENTS = tuple(dict.fromkeys(argument for _, argument in DEFAULT_ARGUMENTS))


def default_changed(class_name: str, argument: str, **changes: Any) -> Any:
    """The default ``argument`` (one of :data:`FIELD_ARGUMENTS`, a dataclass) of our method
    ``class_name``, with the fields ``changes`` changed.

    :raises TypeError: a field the dataclass does not have (named in the message)
    """
    module_name, name = DEFAULT_ARGUMENTS[class_name, argument]
    default = getattr(importlib.import_module(module_name), name)
    return replace(default() if isinstance(default, type) else default, **changes)
