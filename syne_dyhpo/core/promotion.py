"""Successive-halving promotion mixed into the model-based decisions (not in the papers)."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from syne_dyhpo.checks import checked_number
from syne_dyhpo.core.observations import Observations, TrialRecord


@dataclass(frozen=True)
class SuccessiveHalvingPromotion:
    """With probability ``probability`` a decision first tries a successive-halving promotion:
    the paused trial at the highest epoch whose value there ranks in the top
    ``1 / reduction_factor`` of all values seen at that epoch is resumed; if none qualifies,
    the surrogate decides as usual. Counters acquisitions that keep favouring new
    configurations. Syne Tune's former DyHPO used ``probability=0.25``; the papers use no
    promotion (``FreezeThawOptions.promotion=None``, the default).

    :param probability: probability of trying a promotion before consulting the surrogate,
        in [0, 1]. Defaults to 0.25
    :param reduction_factor: a promotion resumes a trial in the top ``1 / reduction_factor``
        of its rung (> 1). Defaults to 3 (Syne Tune's successive halving)
    """

    probability: float = 0.25
    reduction_factor: float = 3.0

    def __post_init__(self) -> None:
        name = type(self).__name__
        object.__setattr__(
            self, "probability",
            checked_number(f"{name}.probability", self.probability, 0.0, 1.0, "a number in [0, 1]"),
        )
        object.__setattr__(
            self, "reduction_factor",
            checked_number(f"{name}.reduction_factor", self.reduction_factor, math.nextafter(1.0, 2.0),
                           sys.float_info.max, "a finite number > 1"),
        )

    def promote(self, records: Sequence[TrialRecord], observations: Observations) -> TrialRecord | None:
        """Successive halving with a rung at every epoch: among ``records``, the one at the
        highest epoch that ranks in the top ``1 / reduction_factor`` of all trials that
        reached that epoch, or None."""
        by_epoch: dict[int, list[TrialRecord]] = {}
        for record in records:
            if record.last_epoch >= 1:
                by_epoch.setdefault(record.last_epoch, []).append(record)
        for epoch in sorted(by_epoch, reverse=True):
            rung = np.sort(observations.scores_at(epoch))[::-1]
            num_promotable = int(len(rung) / self.reduction_factor)
            if num_promotable == 0:
                continue
            threshold = rung[num_promotable - 1]
            eligible = [r for r in by_epoch[epoch] if np.isfinite(r.scores[-1]) and r.scores[-1] >= threshold]
            if eligible:
                return max(eligible, key=lambda r: r.scores[-1])
        return None
