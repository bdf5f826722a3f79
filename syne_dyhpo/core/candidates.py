"""What one decision chooses from: paused trials at their next budget and new configurations
at the first budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from syne_dyhpo.core.observations import Observations, TrialRecord


@dataclass
class Candidates:
    """Configurations the acquisition chooses from, each at the budget it would be run to.

    :param x: encoded configs, shape (m, d)
    :param budget: epoch the candidate would reach, shape (m,)
    :param curves: observed scores (raw, not normalised; NaN past the curve's end and in
        gaps), shape (m, max_t)
    :param trial_ids: trial id of paused trials, None for new configurations
    :param configs: configurations (for new ones, what would be started)
    """

    x: np.ndarray
    budget: np.ndarray
    curves: np.ndarray
    trial_ids: list[int | None]
    configs: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.trial_ids)

    @property
    def num_paused(self) -> int:
        """The first ``num_paused`` candidates are trials, the rest new configurations."""
        return sum(t is not None for t in self.trial_ids)


def make_candidates(
    records: list[TrialRecord],
    new_configs: list[dict[str, Any]],
    new_x: np.ndarray,
    observations: Observations,
    segment_end: Callable[[TrialRecord | None], int],
) -> Candidates:
    """
    :param records: trials that may get the next segment (paused ones, and the reporting one)
    :param new_configs: new configurations that may be started
    :param new_x: their encodings, shape (len(new_configs), d)
    :param observations: curves of all trials
    :param segment_end: epoch a trial (None: a new one) would reach in its next segment
    :return: trials first, then new configurations
    """
    n_new = len(new_configs)
    d = new_x.shape[1]
    x = np.concatenate([np.stack([r.encoded for r in records]) if records else np.zeros((0, d)), new_x])
    budget = np.array([segment_end(r) for r in records] + ([segment_end(None)] * n_new if n_new else []), dtype=int)
    curves = np.concatenate([observations.curves(records), np.full((n_new, observations.max_t), np.nan)])
    return Candidates(
        x=x,
        budget=budget,
        curves=curves,
        trial_ids=[r.trial_id for r in records] + [None] * n_new,
        configs=[r.config for r in records] + new_configs,
    )
