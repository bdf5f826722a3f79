"""What one decision chooses from: paused trials at their next budget and new configurations
at the first budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from syne_dyhpo.checks import checked_flag, checked_integer
from syne_dyhpo.core.observations import Observations, TrialRecord


@dataclass(frozen=True)
class CandidateOptions:
    """How new configurations are offered to a decision.

    :param num_candidates: new configurations sampled (or drawn from ``configs``) and scored
        per decision, besides all paused trials. Defaults to 256
    :param num_kept: the new configurations scored highest at one decision, this many, are
        offered again at the next in place of as many fresh draws (the papers leave open how
        the acquisition is maximised). A configuration scored before costs the GP an update
        instead of a new solve, but the choice of new configurations becomes greedier.
        Defaults to 0 (every candidate drawn afresh)
    :param num_initial_random: trials started with random configurations before the
        surrogate is used (it also waits for the policy's ``min_observations`` results).
        Defaults to 1 (the papers)
    :param divide_initial_random: if True, ``num_initial_random`` counts for one worker and a
        run with ``w`` workers (as far as seen: most trials running at once) starts
        ``ceil(num_initial_random / w)`` random configurations, since its first ``w`` start
        before any result anyway. Defaults to False (``num_initial_random`` whatever the workers)
    :param divide_initial_random_by_start: if True, the random starts (divided by the workers
        or not) are also divided by a new trial's start in epochs, as
        :class:`~syne_dyhpo.core.job_costs.JobCosts` learns it, when a start costs more than an
        epoch (rounded up, at least one): their starts then take about as long as their count
        of epochs would. Without ``job_costs``, or before a start and an epoch are timed, the
        count is not divided. Defaults to False
    :param configs: optional finite set of configurations (e.g. a tabular benchmark's rows);
        new configurations are then drawn only from it, each at most once. Defaults to None
        (drawn from the configuration space)
    """

    num_candidates: int = 256
    num_kept: int = 0
    num_initial_random: int = 1
    divide_initial_random: bool = False
    divide_initial_random_by_start: bool = False
    configs: Sequence[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        name = type(self).__name__
        num_candidates = checked_integer(f"{name}.num_candidates", self.num_candidates, 1)
        num_kept = checked_integer(f"{name}.num_kept", self.num_kept, 0)
        if num_kept >= num_candidates:
            raise ValueError(
                f"{name}.num_kept must be smaller than num_candidates ({num_candidates}), got {num_kept}"
            )
        object.__setattr__(self, "num_candidates", num_candidates)
        object.__setattr__(self, "num_kept", num_kept)
        object.__setattr__(
            self, "num_initial_random", checked_integer(f"{name}.num_initial_random", self.num_initial_random, 0)
        )
        object.__setattr__(
            self, "divide_initial_random", checked_flag(f"{name}.divide_initial_random", self.divide_initial_random)
        )
        object.__setattr__(
            self,
            "divide_initial_random_by_start",
            checked_flag(f"{name}.divide_initial_random_by_start", self.divide_initial_random_by_start),
        )
        if self.configs is not None and (
            isinstance(self.configs, dict) or not all(isinstance(c, dict) for c in self.configs)
        ):
            raise ValueError(f"{name}.configs must be a list of configurations (dicts), got {self.configs!r}")

    def num_random_starts(
        self, num_workers: int, start_seconds: float | None = None, epoch_seconds: float | None = None
    ) -> int:
        """Trials started with random configurations before the surrogate is used.

        :param num_workers: workers of the run (as far as seen)
        :param start_seconds: a new trial's start in seconds (None: not known)
        :param epoch_seconds: an epoch in seconds (None: not known)
        """
        count = self.num_initial_random
        if self.divide_initial_random:
            count = math.ceil(count / max(1, num_workers))
        by_start = self.divide_initial_random_by_start and count > 0
        if by_start and start_seconds and epoch_seconds and start_seconds > epoch_seconds:
            count = max(1, math.ceil(count * epoch_seconds / start_seconds))
        return count

    def metadata(self) -> dict[str, Any]:
        return {
            "num_candidates": self.num_candidates,
            "num_kept": self.num_kept,
            "num_initial_random": self.num_initial_random,
            "divide_initial_random": self.divide_initial_random,
            "divide_initial_random_by_start": self.divide_initial_random_by_start,
            "num_configs": None if self.configs is None else len(self.configs),
        }


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
