"""The check that a method is given its own settings classes, whose defaults are its own."""

from __future__ import annotations

from typing import Any


def checked_settings(method: str, name: str, value: Any, cls: type, allow_none: bool = False) -> Any:
    """``value`` if it is a ``cls`` (or None where allowed), else a ValueError naming the
    argument, the value and the class to use.

    A method takes only its own settings classes: another class with the same fields (the
    core's, or the other method's) has other defaults, so that a field left out would silently
    differ from the method's default.

    :param method: the method's name, for the message
    :param name: the argument's name
    :param value: the value passed
    :param cls: the settings class the method takes
    :param allow_none: None is a valid value (the setting is off)
    """
    if isinstance(value, cls) or (allow_none and value is None):
        return value
    expected = f"a {cls.__name__}" + (" or None" if allow_none else "")
    hint = (
        f" ({cls.__name__}()'s defaults are {method}'s; to change one field, pass "
        f"{cls.__name__}(field=value))"
        if value is not None
        else ""
    )
    raise ValueError(f"{name} must be {expected}, got {value!r}{hint}")
