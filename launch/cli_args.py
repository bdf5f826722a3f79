"""argparse ``type`` functions for the launchers' numeric arguments: a value out of range
stops the command line at once with argparse's usage error, naming the argument and the
value (``--n-workers 0`` would otherwise leave the Tuner waiting for a worker for ever)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """Type function: an integer in ``[minimum, maximum]`` (no upper bound if None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise argparse.ArgumentTypeError(f"must be an integer {bound}, got {text!r}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def number(minimum: float, inclusive: bool = True) -> Callable[[str], float]:
    """Type function: a finite number >= ``minimum`` (> if not ``inclusive``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'>=' if inclusive else '>'} {minimum:g}, got {text!r}"
            )
        return value

    parse.__name__ = "number"
    return parse


#: at least one
positive_int = integer(1)
#: zero or more
non_negative_int = integer(0)
#: a random seed numpy accepts
seed = integer(0, 2**32 - 1)
#: a finite number > 0 (seconds, CPUs)
positive_number = number(0.0, inclusive=False)
#: a finite number >= 0
non_negative_number = number(0.0)
