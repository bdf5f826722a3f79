"""Depth only with evidence: a trial gets a further segment only while it is in contention at
its own epoch (not in the papers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from syne_dyhpo.checks import checked_integer, checked_number
from syne_dyhpo.core.observations import Observations, TrialRecord


@dataclass(frozen=True)
class DepthGate:
    """When the incumbent completion has not claimed the next segment, the trials the
    acquisition may give it (paused ones and the reporting one) are narrowed to those in
    contention at their last epoch ``e``: whose value at ``e`` ranks among the best
    ``max(min_kept, ceil(top_fraction * n_e))`` of the ``n_e`` values all trials reported at
    ``e`` (equal budgets, as successive halving compares them). So the acquisition does not
    train further a trial the observed curves at equal budget no longer support. A trial out of
    contention stays paused: it is back in contention if later trials reaching ``e`` rank below
    it. If no trial is in contention and no new configuration is on offer, the gate is not
    applied (a decision must be made). The completion is not gated: its leader is trained to
    ``max_t`` even when out of contention. Both schedulers use ``DepthGate()`` by default; the
    papers have no gate (a scheduler's ``depth_gate=None``). Why, with measurements:
    ``docs/deviations.md``.

    :param top_fraction: share of the values reported at an epoch whose trials are in
        contention, in (0, 1]. Defaults to 0.75
    :param min_kept: at least this many of the best values at an epoch are in contention
        (an epoch few trials reached is weak evidence). Defaults to 2
    """

    top_fraction: float = 0.75
    min_kept: int = 2

    def __post_init__(self) -> None:
        name = type(self).__name__
        object.__setattr__(
            self, "top_fraction",
            checked_number(f"{name}.top_fraction", self.top_fraction, math.ulp(0.0), 1.0, "a number in (0, 1]"),
        )
        object.__setattr__(self, "min_kept", checked_integer(f"{name}.min_kept", self.min_kept, 1))

    def in_contention(self, records: Sequence[TrialRecord], observations: Observations) -> list[TrialRecord]:
        """The records in contention at their last epochs (in their order); a record without a
        result yet is in contention, a diverged one is not.

        :param records: trials that may get the next segment
        :param observations: the curves of all trials of the run
        """
        thresholds: dict[int, float] = {}
        kept = []
        for record in records:
            epoch = record.last_epoch
            if epoch < 1:
                kept.append(record)
                continue
            if epoch not in thresholds:
                rung = np.sort(observations.scores_at(epoch))[::-1]
                num_kept = max(self.min_kept, math.ceil(self.top_fraction * len(rung)))
                thresholds[epoch] = -np.inf if num_kept >= len(rung) else float(rung[num_kept - 1])
            score = record.scores[-1]
            if np.isfinite(score) and score >= thresholds[epoch]:
                kept.append(record)
        return kept
