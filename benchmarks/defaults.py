"""The settings objects of our methods' arguments, for
``benchmarks/latency.py --scheduler-arg ARGUMENT.FIELD=VALUE`` (FIELD may be a path through
nested settings objects, ``surrogate.model.lr``). Each settings class's defaults are the
method's, so a method's default argument with some fields replaced is the method's default
with those fields changed. Read from the methods' signatures when asked, so that importing this
module costs nothing."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

#: the scheduler arguments whose fields can be changed
FIELD_ARGUMENTS = ("surrogate", "completion", "depth_gate", "options")


def _settings_class(hint: Any) -> type | None:
    """The one dataclass of a type hint (``X`` or ``X | None``), else None."""
    classes = [c for c in typing.get_args(hint) or (hint,) if dataclasses.is_dataclass(c)]
    return classes[0] if len(classes) == 1 else None


def settings_class(class_name: str, argument: str) -> type:
    """The settings class (a dataclass) of ``argument`` (one of :data:`FIELD_ARGUMENTS`) of our
    method ``class_name``, as its signature annotates it.

    :raises KeyError: an argument with no settings class
    """
    import syne_dyhpo

    hint = typing.get_type_hints(getattr(syne_dyhpo, class_name).__init__).get(argument)
    cls = None if hint is None else _settings_class(hint)
    if cls is None:
        raise KeyError(f"{class_name} has no argument {argument!r} with a settings class")
    return cls


def with_fields(value: Any, changes: dict[str, Any]) -> Any:
    """``value`` (a settings object) with the field at each dotted path of ``changes`` set to
    its value; a nested settings object that is None (``options.promotion``) starts from its
    class's defaults.

    :raises TypeError: a field the settings object does not have
    """
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, changed in changes.items():
        head, dot, rest = path.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = changed
        else:
            direct[head] = changed
    for head, inner in nested.items():
        current = getattr(value, head, None)
        if current is None:
            hint = typing.get_type_hints(type(value)).get(head)
            cls = None if hint is None else _settings_class(hint)
            if cls is None:
                raise TypeError(f"{type(value).__name__} has no settings object {head!r}")
            current = cls()
        direct[head] = with_fields(current, inner)
    return dataclasses.replace(value, **direct)


def changed_argument(class_name: str, argument: str, changes: dict[str, Any]) -> Any:
    """The default ``argument`` of our method ``class_name`` (its signature's; the settings
    class's defaults where that is None) with the fields at the dotted paths of ``changes``
    changed, e.g. ``changed_argument("DyHPO", "surrogate", {"model.lr": 0.05})``."""
    import syne_dyhpo

    default = inspect.signature(getattr(syne_dyhpo, class_name)).parameters[argument].default
    if default is None or default is inspect.Parameter.empty:
        default = settings_class(class_name, argument)()
    return with_fields(default, changes)
