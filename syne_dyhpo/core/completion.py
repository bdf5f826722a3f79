"""Incumbent completion: the next segment goes to the leading trial whenever it may get it, so
that the best configurations are trained to ``max_t`` (not in the papers).

:class:`IncumbentCompletion` holds the settings (frozen: one object can be shared by several
schedulers); :class:`CompletionRun` holds one scheduler's state (the leaders chosen,
committed and being completed) and picks the trial to complete.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from syne_dyhpo.checks import checked_choice, checked_flag, checked_integer, checked_number
from syne_dyhpo.core.observations import Observations, TrialRecord

#: the values of ``IncumbentCompletion.leader_score``
LEADER_SCORES = ("best", "latest")


@dataclass(frozen=True)
class IncumbentCompletion:
    """Give the next segment to the trial holding the best score seen so far (or one of the
    few best) whenever it is paused, or reporting, below ``max_t``, before the acquisition is
    consulted. An acquisition that compares candidates at their next budget, or at ``max_t``
    through an extrapolation, keeps trading the leader's next epoch for fresh configurations
    whose first epoch looks as promising, so few configurations are trained to ``max_t``.
    Pass ``completion=None`` to a scheduler for the papers' decisions (no completion).
    Why each default is what it is, with measurements: ``docs/deviations.md``.

    The methods' completions differ, so each method has its own subclass, whose defaults are
    the method's: :class:`~syne_dyhpo.methods.dyhpo.DyHPOCompletion` (one committed leader,
    chosen among 27 first epochs) and
    :class:`~syne_dyhpo.methods.deep_power_law.DeepPowerLawCompletion` (this class's
    defaults); a method takes only its own, so that changing one field never changes another.

    :param after: the completion starts once this many configurations reported their first
        epoch, so that the leader leads among several. Defaults to 9 (two rungs of successive
        halving with reduction factor 3). With ``JobCosts`` a new trial's job start counts too,
        as the epochs its seconds would train
    :param delay: the completion also waits until ``delay * max_t / workers**2`` epochs were
        observed (workers: the most trials seen running at once). With one worker completing
        a leader stops all exploration for up to ``max_t`` epochs, so the run explores first;
        with ``w`` workers a completion takes a ``w``-th of the exploration and a trained
        model is due ``w`` times sooner, hence the square. Defaults to 2.0; 0 starts the
        completion after ``after`` first epochs alone. With ``JobCosts`` every job start counts
        too, as the epochs its seconds would train
    :param share: share of the workers that may complete leaders at once: the trials whose
        best scores rank in the top ``max(1, floor(share * workers))`` are completed. Defaults
        to 0.5; 0 completes only the incumbent
    :param leaders_until_trained: ``share`` holds only until the first configuration is
        trained to ``max_t``; from then on only the incumbent is completed. Defaults to False
    :param committed: the first this many trials the completion chooses are trained to
        ``max_t`` even when another trial overtakes them; later choices are completed only
        while they lead. Defaults to 0
    :param commit_after: a trial the completion has resumed is trained to ``max_t`` even when
        overtaken once it has reached this fraction of ``max_t`` (acts with several workers
        only: with one, nothing overtakes the trial being completed). None: never. Defaults
        to 0.5
    :param limit: the completion chooses at most this many trials over the run (each counted
        the first time it is resumed by the completion); once reached, only those are
        completed (while they lead, unless committed). None (default): no limit
    :param leader_score: what ranks the trials for the lead: ``"best"``, the best score of a
        trial's curve (default), or ``"latest"``, its score at its last epoch, so that a trial
        whose curve has fallen since its best (an early peak: the value a user gets at
        ``max_t`` is lower) loses the lead
    """

    after: int = 9
    delay: float = 2.0
    share: float = 0.5
    leaders_until_trained: bool = False
    committed: int = 0
    commit_after: float | None = 0.5
    limit: int | None = None
    leader_score: str = "best"

    def __post_init__(self) -> None:
        name = type(self).__name__
        checked = {
            "after": checked_integer(f"{name}.after", self.after, 1),
            "delay": checked_number(f"{name}.delay", self.delay, 0.0, sys.float_info.max, "a finite number >= 0"),
            "share": checked_number(f"{name}.share", self.share, 0.0, 1.0, "a number in [0, 1]"),
            "leaders_until_trained": checked_flag(f"{name}.leaders_until_trained", self.leaders_until_trained),
            "committed": checked_integer(f"{name}.committed", self.committed, 0),
            "limit": checked_integer(f"{name}.limit", self.limit, 1, allow_none=True),
            "leader_score": checked_choice(f"{name}.leader_score", self.leader_score, LEADER_SCORES),
        }
        if self.commit_after is not None:
            # the smallest positive float as the lower bound: (0, 1]
            checked["commit_after"] = checked_number(
                f"{name}.commit_after", self.commit_after, math.ulp(0.0), 1.0, "None or a number in (0, 1]"
            )
        for key, value in checked.items():
            object.__setattr__(self, key, value)


class CompletionRun:
    """One scheduler's incumbent completion: its settings and what it has done so far.

    :param settings: the completion's settings
    :param observations: the curves of all trials of the run
    :param start_epochs: with :class:`~syne_dyhpo.core.job_costs.JobCosts`, the job starts so
        far counted in epochs (:meth:`~syne_dyhpo.core.job_costs.JobTimer.start_epochs_spent`:
        the new trials' starts, all starts). The waits (``after``, ``delay``) are waits in
        the epoch budget; with it they count a start as the epochs its seconds would train, so
        that the completion waits as long in time as with free starts: ``after`` is compared
        with the first epochs plus the new trials' starts, ``delay`` with the epochs observed
        plus all starts. None (default): epochs only, as if starts were free
    """

    def __init__(
        self,
        settings: IncumbentCompletion,
        observations: Observations,
        start_epochs: Callable[[], tuple[float, float]] | None = None,
    ):
        self.settings = settings
        self.observations = observations
        self.start_epochs = start_epochs
        #: trials chosen while commitments were left (``settings.committed``), in order
        self.committed: tuple[int, ...] = ()
        #: every trial the completion has resumed (kept with ``settings.limit``)
        self.chosen: frozenset[int] = frozenset()
        #: trials the completion has resumed (kept with ``settings.commit_after``)
        self.completing: frozenset[int] = frozenset()
        #: decisions the completion made
        self.num_completions = 0

    def num_leaders(self, num_workers: int) -> int:
        """Leaders completed at once with ``num_workers`` workers (at least one)."""
        if self.settings.leaders_until_trained and self.observations.any_trained():
            return 1
        return max(1, int(np.floor(self.settings.share * num_workers)))

    def choose(self, records: Sequence[TrialRecord], num_workers: int = 1) -> TrialRecord | None:
        """The trial to complete among ``records`` (the trials that may get the next segment),
        or None: a committed trial below ``max_t`` if there is one (one of the first
        ``committed`` choices, or a trial the completion resumed that has reached
        ``commit_after * max_t``), else the best-scoring leader that has not reached
        ``max_t``. Leaders are the trials whose best scores (or latest, ``leader_score``) rank in the top
        :meth:`num_leaders` of all trials (a leader running on another worker or already
        trained to ``max_t`` takes its place). Only once ``after`` configurations reported
        their first epoch and ``delay * max_t / num_workers**2`` epochs were observed (job
        starts counted in epochs, with ``start_epochs``). Once ``limit`` trials were chosen,
        only those.

        :param records: paused trials, and the reporting one if any
        :param num_workers: workers of the run (as far as seen)
        """
        settings, obs = self.settings, self.observations
        latest = settings.leader_score == "latest"
        score = obs.latest_of if latest else obs.best_of
        max_t = obs.max_t
        commit_epoch = math.inf if settings.commit_after is None else settings.commit_after * max_t
        committed = [
            r for r in records
            if r.last_epoch < max_t
            and (r.trial_id in self.committed or (r.trial_id in self.completing and r.last_epoch >= commit_epoch))
        ]
        if committed:
            return self._chosen(max(committed, key=score), new=False)
        new_starts, all_starts = (0.0, 0.0) if self.start_epochs is None else self.start_epochs()
        if obs.num_first_epochs + new_starts < settings.after:
            return None
        if obs.num_observations + all_starts < settings.delay * max_t / num_workers**2:
            return None
        threshold = obs.leader_threshold(self.num_leaders(num_workers), latest=latest)
        if not np.isfinite(threshold):
            return None
        limit_reached = settings.limit is not None and len(self.chosen) >= settings.limit
        champion, champion_best = None, -np.inf
        for record in records:
            best = score(record)
            if best >= threshold and best > champion_best and record.last_epoch < max_t:
                if limit_reached and record.trial_id not in self.chosen:
                    continue
                champion, champion_best = record, best
        return None if champion is None else self._chosen(champion, new=True)

    def _chosen(self, record: TrialRecord, new: bool) -> TrialRecord:
        self.num_completions += 1
        if new:
            if self.settings.limit is not None:
                self.chosen = self.chosen | {record.trial_id}
            if len(self.committed) < self.settings.committed:
                self.committed = (*self.committed, record.trial_id)
            if self.settings.commit_after is not None:
                self.completing = self.completing | {record.trial_id}
        return record
