"""The settings classes of our methods' arguments, for
``benchmarks/latency.py --scheduler-arg ARGUMENT.FIELD=VALUE``. Each class's defaults are the
method's, so the class called with some fields is the method's default with those fields
changed. Read from the methods' signatures when asked, so that importing this module costs
nothing."""

from __future__ import annotations

import dataclasses
import typing

#: the scheduler arguments whose fields can be changed
FIELD_ARGUMENTS = ("surrogate_config", "fit_schedule", "completion", "candidates", "promotion")


def settings_class(class_name: str, argument: str) -> type:
    """The settings class (a dataclass) of ``argument`` (one of :data:`FIELD_ARGUMENTS`) of our
    method ``class_name``, as its signature (or its core scheduler's) annotates it.

    :raises KeyError: an argument with no settings class
    """
    import syne_dyhpo

    for cls in getattr(syne_dyhpo, class_name).__mro__:
        if "__init__" not in vars(cls):
            continue
        hint = typing.get_type_hints(cls.__init__).get(argument)
        if hint is None:
            continue
        classes = [c for c in typing.get_args(hint) or (hint,) if dataclasses.is_dataclass(c)]
        if len(classes) == 1:
            return classes[0]
    raise KeyError(f"{class_name} has no argument {argument!r} with a settings class")
