"""Argument checks shared by the schedulers and the surrogates' settings: each returns the
value in its canonical type or raises a ValueError that names the argument and the value."""

from __future__ import annotations

import math
from typing import Any, Literal, overload

import numpy as np


def checked_flag(name: str, value: Any) -> bool:
    """``value`` if it is True or False (numpy's too), else a ValueError naming the argument."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def checked_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming the argument."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


@overload
def checked_integer(
    name: str,
    value: Any,
    minimum: int,
    maximum: int | None = None,
    allow_none: Literal[False] = False,
    integral_floats: bool = False,
) -> int: ...


@overload
def checked_integer(
    name: str,
    value: Any,
    minimum: int,
    maximum: int | None = None,
    allow_none: bool = False,
    integral_floats: bool = False,
) -> int | None: ...


def checked_integer(
    name: str,
    value: Any,
    minimum: int,
    maximum: int | None = None,
    allow_none: bool = False,
    integral_floats: bool = False,
) -> int | None:
    """``value`` as an int if it is an integer (not a bool) in ``[minimum, maximum]``, else a
    ValueError naming the argument and the value.

    :param maximum: Largest value accepted; None: no bound
    :param allow_none: None is accepted (and returned) too
    :param integral_floats: A float with an integer value counts as that integer. For
        arguments that are often read from data rather than typed, such as ``max_t`` taken
        from a blackbox's fidelities (``52.0``)
    """
    if value is None and allow_none:
        return None
    is_integer = isinstance(value, (int, np.integer)) or (
        integral_floats and isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value)
    )
    in_range = is_integer and value >= minimum and (maximum is None or value <= maximum)
    if isinstance(value, (bool, np.bool_)) or not in_range:
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        expected = f"an integer {bound}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return int(value)


def checked_number(name: str, value: Any, low: float, high: float, expected: str) -> float:
    """``value`` as a float if it is a real number (not a bool) in ``[low, high]``, else a
    ValueError saying it must be ``expected``."""
    if isinstance(value, (bool, np.bool_)) or not (
        isinstance(value, (int, float, np.integer, np.floating)) and low <= value <= high
    ):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return float(value)


def checked_positive(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite real number > 0, else a ValueError."""
    return checked_number(name, value, math.ulp(0.0), np.finfo(float).max, "a finite number > 0")


def checked_result_keys(metric: str, time_attr: str, max_resource_attr: str | None) -> None:
    """Raises a ValueError if the metric and budget keys of the reported results coincide
    (the budget would be optimised, or the metric read as the epoch), or if
    ``max_resource_attr`` (a config key the script reads as where to stop) is the reported
    budget key ``time_attr``."""
    if metric == time_attr:
        raise ValueError(
            f"metric and time_attr must be different result keys, both are {metric!r}: time_attr "
            "names the budget (epoch) each result reports, metric the value to optimise"
        )
    if max_resource_attr is not None and max_resource_attr == time_attr:
        raise ValueError(
            f"max_resource_attr must differ from time_attr ({time_attr!r}): max_resource_attr is the "
            "config key telling a job at which epoch to stop (e.g. 'epochs'), time_attr the epoch each "
            "result reports (e.g. 'epoch')"
        )
