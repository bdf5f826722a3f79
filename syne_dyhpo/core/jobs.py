"""A trial's job as a freeze-thaw scheduler sees it: what it reports, and the epoch it is told
to stop at (``max_resource_attr``)."""

from __future__ import annotations

import math
from typing import Any


def parse_result(trial_id: int, result: dict[str, Any], metric: str, time_attr: str) -> tuple[int, float]:
    """The epoch and metric value of a reported result.

    :param trial_id: the reporting trial (named in errors)
    :param result: the reported result
    :param metric: the key of the metric
    :param time_attr: the key of the epoch (a whole number >= 1)
    :return: ``(epoch, value)``
    :raises ValueError: a key is missing, or its value is no number (or no whole epoch >= 1)
    """
    for key in (metric, time_attr):
        if key not in result:
            raise ValueError(
                f"Result of trial_id {trial_id} has no '{key}' (reported keys: {sorted(result)}); "
                f"check metric='{metric}' and time_attr='{time_attr}'"
            )
    try:
        value = float(result[metric])
    except (TypeError, ValueError) as err:
        raise ValueError(f"trial_id {trial_id}: metric '{metric}' is not a number: {result[metric]!r}") from err
    epoch_raw = result[time_attr]
    try:
        epoch_float = float(epoch_raw)
    except (TypeError, ValueError) as err:
        raise ValueError(f"trial_id {trial_id}: '{time_attr}' is not a number: {epoch_raw!r}") from err
    if not math.isfinite(epoch_float) or epoch_float != int(epoch_float) or epoch_float < 1:
        raise ValueError(
            f"trial_id {trial_id}: '{time_attr}' must be a whole number of epochs >= 1 "
            f"(counted from 1), got {epoch_raw!r}"
        )
    return int(epoch_float), value


def job_end(segment_end: int, max_t: int, num_free: int | None, num_workers: int) -> int:
    """Epoch at which a job (re)started now is told to stop: its segment end while new
    configurations are plentiful, else ``max_t``. With few or no new configurations left, a
    free worker may find nothing to run, and Syne Tune's Tuner never asks again after a
    ``suggest()`` that found nothing: trials whose jobs stop at every segment end could be left
    paused for good.

    :param segment_end: the end of the job's segment
    :param max_t: the maximum budget
    :param num_free: new configurations left (None: unlimited)
    :param num_workers: workers of the run (as far as seen)
    """
    if num_free is not None and num_free <= max(8, 4 * num_workers):
        return max_t
    return segment_end
