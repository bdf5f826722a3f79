"""One decision: which candidate trains for the next budget step.

:class:`DecisionMaker` takes the trials that may get the next segment (paused ones and the
reporting one) and the new configurations on offer, and returns a typed :class:`Decision`
without touching any trial: the scheduler carries it out. The flow is one way: observations
-> (re)fit -> candidates -> acquisition -> argmax.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

import numpy as np

from syne_dyhpo.core.candidates import make_candidates
from syne_dyhpo.core.observations import Observations, TrialRecord
from syne_dyhpo.core.policy import SurrogatePolicy

logger = logging.getLogger(__name__)


class DecisionKind(str, Enum):
    RESUME = "resume"  # give the next segment to a trial (paused, or the reporting one)
    START = "start"  # start a new configuration


@dataclass(frozen=True)
class Decision:
    """What the next free worker does.

    :param kind: resume a trial or start a new configuration
    :param trial_id: the trial to resume (RESUME)
    :param config: the configuration to start (START)
    :param retire: paused trials ranked hopeless by this decision (see
        ``max_paused_checkpoints``): never to be resumed
    """

    kind: DecisionKind
    trial_id: int | None = None
    config: dict[str, Any] | None = None
    retire: tuple[int, ...] = field(default=())

    @staticmethod
    def resume(trial_id: int, retire: tuple[int, ...] = ()) -> "Decision":
        return Decision(DecisionKind.RESUME, trial_id=trial_id, retire=retire)

    @staticmethod
    def start(config: dict[str, Any], retire: tuple[int, ...] = ()) -> "Decision":
        return Decision(DecisionKind.START, config=config, retire=retire)


class DecisionMaker:
    """Chooses the candidate for the next budget step.

    :param policy: surrogate + acquisition scoring the candidates
    :param observations: curves of all trials
    :param segment_end: epoch a trial (None: a new one) reaches in its next segment
    :param rng: random state of the decisions (ties, promotions, fallbacks)
    :param random_seed: base seed of the surrogate's training
    :param num_initial_random: new configurations started at random before the policy is used
    :param sh_probability: probability of trying a successive-halving promotion first
    :param sh_reduction_factor: a promotion resumes a trial in the top ``1 / factor`` of its rung
    :param max_paused_checkpoints: most paused trials kept resumable (None: all)
    :param complete_incumbent: resume the trial holding the best score first, whenever it may
        get the next segment (see :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`)
    :param complete_incumbent_after: configurations that must have reported their first epoch
        before the completion starts
    :param complete_incumbent_delay: the completion also waits for
        ``complete_incumbent_delay * max_t / workers**2`` observed epochs
    :param complete_incumbent_share: share of the workers that may complete leaders at once:
        the trials whose best scores rank in the top ``max(1, floor(share * workers))`` are
        completed
    :param complete_leaders_until_trained: the share holds until the first configuration is
        trained to ``max_t``; from then on only the incumbent is completed
    :param committed_completions: the first this many trials the completion chooses are
        completed to ``max_t`` even when overtaken later (a committed trial is resumed whenever
        it may get the next segment); later choices stop being completed when they drop out
        of the leaders
    :param commit_completion_after: a trial the completion has resumed and that has reached
        this fraction of ``max_t`` is completed to ``max_t`` even when overtaken (None: never)
    :param complete_incumbent_limit: most trials the completion chooses over the run (None: no
        limit); once reached, only the trials it chose before are completed (while they lead,
        unless committed)
    """

    # schedulers pickled before these options existed load with the behaviour they had
    complete_incumbent = False
    complete_incumbent_after = 9
    complete_incumbent_delay = 0.0
    complete_incumbent_share = 0.0
    complete_leaders_until_trained = False
    committed_completions = 0
    committed: tuple[int, ...] = ()
    commit_completion_after: float | None = None
    complete_incumbent_limit: int | None = None
    chosen: frozenset[int] = frozenset()
    completing: frozenset[int] = frozenset()
    num_completions = 0
    new_config_values: np.ndarray | None = None
    #: (fitted model, candidates, acquisition values) of the last decision that consulted the
    #: acquisition, for the decision log (the scheduler reads and clears it)
    last_scored: tuple | None = None

    def __init__(
        self,
        policy: SurrogatePolicy,
        observations: Observations,
        segment_end: Callable[[TrialRecord | None], int],
        rng: np.random.RandomState,
        random_seed: int,
        num_initial_random: int = 1,
        sh_probability: float = 0.0,
        sh_reduction_factor: float = 3.0,
        max_paused_checkpoints: int | None = None,
        complete_incumbent: bool = False,
        complete_incumbent_after: int = 9,
        complete_incumbent_share: float = 0.5,
        complete_leaders_until_trained: bool = False,
        complete_incumbent_delay: float = 0.0,
        committed_completions: int = 0,
        commit_completion_after: float | None = None,
        complete_incumbent_limit: int | None = None,
    ):
        self.policy = policy
        self.observations = observations
        self.segment_end = segment_end
        self.rng = rng
        self.random_seed = random_seed
        self.num_initial_random = num_initial_random
        self.sh_probability = sh_probability
        self.sh_reduction_factor = sh_reduction_factor
        self.max_paused_checkpoints = max_paused_checkpoints
        self.complete_incumbent = complete_incumbent
        self.complete_incumbent_after = complete_incumbent_after
        self.complete_incumbent_delay = complete_incumbent_delay
        self.complete_incumbent_share = complete_incumbent_share
        self.complete_leaders_until_trained = complete_leaders_until_trained
        self.committed_completions = committed_completions
        #: trials chosen by the completion while commitments were left, in order
        self.committed: tuple[int, ...] = ()
        self.commit_completion_after = commit_completion_after
        self.complete_incumbent_limit = complete_incumbent_limit
        #: every trial the completion has resumed (with ``complete_incumbent_limit``)
        self.chosen: frozenset[int] = frozenset()
        #: trials the completion has resumed (with ``commit_completion_after``)
        self.completing: frozenset[int] = frozenset()
        self.num_completions = 0
        #: acquisition values of the new configurations at the last decision (None if that
        #: decision did not consult the acquisition)
        self.new_config_values: np.ndarray | None = None
        self.num_decisions = 0
        self.num_fallbacks = 0
        self.num_sh_promotions = 0

    def decide(
        self,
        records: list[TrialRecord],
        new_configs: list[dict[str, Any]],
        new_x: np.ndarray,
        num_started: int,
        running: list[TrialRecord] = (),
        num_workers: int = 1,
    ) -> Decision | None:
        """
        :param records: trials that may get the next segment: paused ones, then the reporting
            one (if any)
        :param new_configs: new configurations on offer
        :param new_x: their encodings
        :param num_started: trials started so far, including starts already decided
        :param running: trials training on other workers now (their next results are pending)
        :param num_workers: workers of the run (as far as seen: most trials running at once)
        :return: the decision, or None if there is nothing to choose from
        """
        self.new_config_values = None
        self.last_scored = None
        if not records and not new_configs:
            return None
        self.num_decisions += 1
        if new_configs and (num_started < self.num_initial_random or not self.policy.ready(self.observations)):
            return Decision.start(new_configs[0])
        if not self.policy.ready(self.observations):
            # too few observations to fit a model (a tiny space, used up before two results
            # came in): any trial is as good as another
            return Decision.resume(records[self.rng.randint(len(records))].trial_id)
        champion = self._champion(records, num_workers) if self.complete_incumbent else None
        if champion is not None:
            self.num_completions += 1
            return Decision.resume(champion.trial_id)
        if self.sh_probability > 0 and self.rng.uniform() < self.sh_probability:
            promoted = self._sh_promotion(records)
            if promoted is not None:
                self.num_sh_promotions += 1
                return Decision.resume(promoted.trial_id)
        values = self._acquisition_values(records, new_configs, new_x, running)
        self.new_config_values = values[len(records) :]
        best = np.flatnonzero(values == values.max())
        i = int(best[0] if len(best) == 1 else self.rng.choice(best))
        winner = records[i] if i < len(records) else None
        retire = self._hopeless(records, values[: len(records)], keep=winner)
        if winner is not None:
            return Decision.resume(winner.trial_id, retire=retire)
        return Decision.start(new_configs[i - len(records)], retire=retire)

    def _acquisition_values(
        self,
        records: list[TrialRecord],
        new_configs: list[dict[str, Any]],
        new_x: np.ndarray,
        running: list[TrialRecord] = (),
    ) -> np.ndarray:
        """Fits the policy, then scores the candidates with it; on any failure of the model a
        uniformly random score (a decision must be made), and the next fit is from scratch."""
        seed = (int(self.random_seed) * 1_000_003 + self.num_decisions) % (2**31 - 1)
        num = len(records) + len(new_configs)
        try:
            # fit first: candidates are expressed in the outcome transform the fit may change
            model = self.policy.fit(self.observations, seed=seed)
        except Exception as err:  # noqa: BLE001 - a decision must be made whatever the model does
            return self._fallback(err, num)
        candidates = make_candidates(records, new_configs, new_x, self.observations, self.segment_end)
        if running and getattr(self.policy, "condition_on_pending", False):
            # their next results are on their way: the model conditions on them (each at the
            # epoch its current segment ends)
            model.pending = make_candidates(
                list(running), [], np.zeros((0, new_x.shape[1])), self.observations, lambda r: r.segment_end
            )
        try:
            values = np.asarray(self.policy.score(model, candidates, self.observations), dtype=float)
            if values.shape != (num,) or np.any(np.isnan(values)):
                raise FloatingPointError("acquisition returned NaN values")
            self.last_scored = (model, candidates, values)
            return values
        except Exception as err:  # noqa: BLE001
            return self._fallback(err, num)

    def _fallback(self, err: Exception, num: int) -> np.ndarray:
        # the surrogate keeps its own rollback state; here we only make sure a decision is
        # made (uniformly at random) and that the next fit is from scratch
        self.num_fallbacks += 1
        self.policy.reset()
        logger.warning(f"Surrogate failed ({type(err).__name__}: {err}); random decision this step")
        return self.rng.uniform(size=num)

    def num_leaders(self, num_workers: int) -> int:
        """Leaders completed at once with ``num_workers`` workers (at least one)."""
        if self.complete_leaders_until_trained and self.observations.any_trained():
            return 1
        return max(1, int(np.floor(self.complete_incumbent_share * num_workers)))

    def _champion(self, records: list[TrialRecord], num_workers: int = 1) -> TrialRecord | None:
        """The trial the completion resumes, or None: a committed trial below ``max_t`` among
        ``records`` if there is one (one of the first ``committed_completions`` choices, or a
        trial the completion resumed before that has reached ``commit_completion_after *
        max_t``), else the best-scoring leader among ``records`` that has not reached
        ``max_t``. Leaders are the trials whose best scores rank in the top
        :meth:`num_leaders` of all trials (running and finished ones included: a leader on
        another worker or already trained to ``max_t`` takes its place). Only once at least
        ``complete_incumbent_after`` configurations reported their first epoch (leaders among
        several, not the first configurations tried) and ``complete_incumbent_delay * max_t /
        num_workers**2`` epochs were observed (see
        :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`). With one leader, the trial
        holding the best score seen so far. Once ``complete_incumbent_limit`` trials were
        chosen, only those."""
        max_t = self.observations.max_t
        commit_epoch = math.inf if self.commit_completion_after is None else self.commit_completion_after * max_t
        committed = [
            r for r in records
            if r.last_epoch < max_t
            and (r.trial_id in self.committed or (r.trial_id in self.completing and r.last_epoch >= commit_epoch))
        ]
        if committed:
            return max(committed, key=self.observations.best_of)
        if self.observations.num_first_epochs < self.complete_incumbent_after:
            return None
        if self.observations.num_observations < self.complete_incumbent_delay * max_t / num_workers**2:
            return None
        threshold = self.observations.leader_threshold(self.num_leaders(num_workers))
        if not np.isfinite(threshold):
            return None
        limit_reached = self.complete_incumbent_limit is not None and len(self.chosen) >= self.complete_incumbent_limit
        champion, champion_best = None, -np.inf
        for record in records:
            best = self.observations.best_of(record)
            if best >= threshold and best > champion_best and record.last_epoch < max_t:
                if limit_reached and record.trial_id not in self.chosen:
                    continue
                champion, champion_best = record, best
        if champion is not None and self.complete_incumbent_limit is not None:
            self.chosen = self.chosen | {champion.trial_id}
        if champion is not None and len(self.committed) < self.committed_completions:
            self.committed = (*self.committed, champion.trial_id)
        if champion is not None and self.commit_completion_after is not None:
            self.completing = self.completing | {champion.trial_id}
        return champion

    def _sh_promotion(self, records: list[TrialRecord]) -> TrialRecord | None:
        """Successive halving with a rung at every epoch: among ``records``, the one at the
        highest epoch that ranks in the top ``1 / sh_reduction_factor`` of all trials that
        reached that epoch, or None."""
        by_epoch: dict[int, list[TrialRecord]] = {}
        for record in records:
            if record.last_epoch >= 1:
                by_epoch.setdefault(record.last_epoch, []).append(record)
        for epoch in sorted(by_epoch, reverse=True):
            rung = np.sort(self.observations.scores_at(epoch))[::-1]
            num_promotable = int(len(rung) / self.sh_reduction_factor)
            if num_promotable == 0:
                continue
            threshold = rung[num_promotable - 1]
            eligible = [r for r in by_epoch[epoch] if np.isfinite(r.scores[-1]) and r.scores[-1] >= threshold]
            if eligible:
                return max(eligible, key=lambda r: r.scores[-1])
        return None

    def _hopeless(self, records: list[TrialRecord], values: np.ndarray, keep: TrialRecord | None) -> tuple[int, ...]:
        """Paused trials beyond ``max_paused_checkpoints``, lowest acquisition value first."""
        if self.max_paused_checkpoints is None:
            return ()
        # the reporting trial (still running) is paused too unless it wins: it counts
        losers = [(v, r) for v, r in zip(values, records) if r is not keep]
        excess = len(losers) + (keep is not None) - self.max_paused_checkpoints
        return tuple(r.trial_id for _, r in sorted(losers, key=lambda p: p[0])[: max(excess, 0)])

    def metadata(self) -> dict[str, Any]:
        return {
            "num_decisions": self.num_decisions,
            "num_fallbacks": self.num_fallbacks,
            "num_sh_promotions": self.num_sh_promotions,
            "num_completions": self.num_completions,
        }
