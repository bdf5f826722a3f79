"""One decision: which candidate trains for the next budget step.

:class:`DecisionMaker` takes the trials that may get the next segment (paused ones and the
reporting one) and the new configurations on offer, and returns a typed :class:`Decision`
without touching any trial: the scheduler carries it out. The flow is one way: observations
-> (re)fit -> candidates -> acquisition -> argmax. A decision says why it was made (the rule,
the fit, the acquisition values and the prediction behind the winner's), which is all the
decision log needs of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from syne_dyhpo.core.acquisition_protocol import AcquisitionValues, Prediction
from syne_dyhpo.core.candidates import CandidateOptions, make_candidates
from syne_dyhpo.core.completion import CompletionRun, IncumbentCompletion
from syne_dyhpo.core.depth_gate import DepthGate
from syne_dyhpo.core.job_costs import NEW, JobTimer
from syne_dyhpo.core.observations import Observations, TrialRecord, TrialStatus
from syne_dyhpo.core.policy import FittedModel, SurrogatePolicy
from syne_dyhpo.core.promotion import SuccessiveHalvingPromotion

logger = logging.getLogger(__name__)


class DecisionKind(str, Enum):
    RESUME = "resume"  # give the next segment to a trial (paused, or the reporting one)
    START = "start"  # start a new configuration


@dataclass(frozen=True)
class Decision:
    """What the next free worker does, and why.

    :param kind: resume a trial or start a new configuration
    :param trial_id: the trial to resume (RESUME)
    :param config: the configuration to start (START)
    :param retire: paused trials ranked hopeless by this decision (see
        ``PausedCheckpoints.max_kept``): never to be resumed
    :param epoch: the epoch the winner trains to next (the end of its next segment)
    :param reason: the rule that made the decision, one of
        :data:`~syne_dyhpo.core.reasons.DECISION_REASONS`
    :param fit: what the decision's fit did to the model, one of
        :data:`~syne_dyhpo.core.policy.FIT_KINDS`; None: no model fitted (or its fit failed)
    :param acquisition: the winner's acquisition value (decisions by the acquisition)
    :param runner_up: the best acquisition value of the other candidates (if any)
    :param prediction: the model's prediction behind the winner's acquisition value, at the
        epoch the acquisition asked about (None: the acquisition gave none)
    """

    kind: DecisionKind
    trial_id: int | None = None
    config: dict[str, Any] | None = None
    retire: tuple[int, ...] = field(default=())
    epoch: int | None = None
    reason: str = ""
    fit: str | None = None
    acquisition: float | None = None
    runner_up: float | None = None
    prediction: Prediction | None = None

    @staticmethod
    def resume(trial_id: int, retire: tuple[int, ...] = (), **why: Any) -> Decision:
        """:param why: the fields saying why (``epoch``, ``reason``, ...)"""
        return Decision(DecisionKind.RESUME, trial_id=trial_id, retire=retire, **why)

    @staticmethod
    def start(config: dict[str, Any], retire: tuple[int, ...] = (), **why: Any) -> Decision:
        """:param why: the fields saying why (``epoch``, ``reason``, ...)"""
        return Decision(DecisionKind.START, config=config, retire=retire, **why)


class DecisionMaker:
    """Chooses the candidate for the next budget step: a random start while
    ``candidates.num_random_starts(num_workers)`` trials are not started, else the incumbent
    completion (if any), a successive-halving promotion (if any, with its probability), else the
    argmax of the policy's acquisition.

    :param policy: surrogate + acquisition scoring the candidates
    :param observations: curves of all trials
    :param segment_end: epoch a trial (None: a new one) reaches in its next segment
    :param rng: random state of the decisions (ties, promotions, fallbacks)
    :param random_seed: base seed of the surrogate's training
    :param candidates: how new configurations are offered (this uses its
        :meth:`~syne_dyhpo.core.candidates.CandidateOptions.num_random_starts`)
    :param completion: the incumbent completion's settings (None: none, the papers); its state
        is this decision maker's own (:attr:`completion`)
    :param promotion: successive-halving promotion (None: none, the papers)
    :param depth_gate: narrows the trials the acquisition (and the promotion) may give the next
        segment to those in contention at their epochs; the completion is not gated (None: none,
        the papers)
    :param max_kept_paused: most paused trials kept resumable (None: all;
        ``PausedCheckpoints.max_kept``)
    :param job_timer: with :class:`~syne_dyhpo.core.job_costs.JobCosts`, what an epoch and a
        job start cost: each acquisition value becomes a value per expected second (its log
        seconds subtracted; the running reporting trial pays no start). None: the acquisition
        as it is (the papers)
    """

    def __init__(
        self,
        policy: SurrogatePolicy,
        observations: Observations,
        segment_end: Callable[[TrialRecord | None], int],
        rng: np.random.RandomState,
        random_seed: int,
        *,
        candidates: CandidateOptions,
        completion: IncumbentCompletion | None,
        promotion: SuccessiveHalvingPromotion | None,
        max_kept_paused: int | None,
        depth_gate: DepthGate | None = None,
        job_timer: JobTimer | None = None,
    ):
        self.policy = policy
        self.job_timer = job_timer
        self.observations = observations
        self.segment_end = segment_end
        self.rng = rng
        self.random_seed = random_seed
        self.candidates = candidates
        self.promotion = promotion
        self.max_kept_paused = max_kept_paused
        self.depth_gate = depth_gate
        #: the completion of this run (settings and state), None without one
        self.completion: CompletionRun | None = (
            None
            if completion is None
            else CompletionRun(
                completion, observations, start_epochs=None if job_timer is None else job_timer.start_epochs_spent
            )
        )
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
        running: Sequence[TrialRecord] = (),
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
        if not records and not new_configs:
            return None
        self.num_decisions += 1
        first_epoch = self.segment_end(None)
        initial = num_started < self._num_random_starts(num_workers)
        if new_configs and (initial or not self.policy.ready(self.observations)):
            return Decision.start(new_configs[0], epoch=first_epoch, reason="initial_random")
        if not self.policy.ready(self.observations):
            # too few observations to fit a model (a tiny space, used up before two results
            # came in): any trial is as good as another
            chosen = records[self.rng.randint(len(records))]
            return Decision.resume(chosen.trial_id, epoch=self.segment_end(chosen), reason="random")
        champion = None if self.completion is None else self.completion.choose(records, num_workers)
        if champion is not None:
            return Decision.resume(champion.trial_id, epoch=self.segment_end(champion), reason="completion")
        if self.depth_gate is not None:
            in_contention = self.depth_gate.in_contention(records, self.observations)
            if in_contention or new_configs:
                records = in_contention
        promotion = self.promotion
        if promotion is not None and promotion.probability > 0 and self.rng.uniform() < promotion.probability:
            promoted = promotion.promote(records, self.observations)
            if promoted is not None:
                self.num_sh_promotions += 1
                return Decision.resume(promoted.trial_id, epoch=self.segment_end(promoted), reason="sh_promotion")
        values, why, scored = self._acquisition_values(records, new_configs, new_x, running)
        self.new_config_values = values[len(records) :]
        best = np.flatnonzero(values == values.max())
        i = int(best[0] if len(best) == 1 else self.rng.choice(best))
        winner = records[i] if i < len(records) else None
        retire = self._hopeless(records, values[: len(records)], keep=winner)
        epoch = first_epoch if winner is None else self.segment_end(winner)
        if why["reason"] == "acquisition":
            why["acquisition"] = float(values[i])
            if len(values) > 1:
                why["runner_up"] = float(np.max(np.delete(values, i)))
            if scored is not None:
                why["prediction"] = scored.prediction(i, self.observations.sign)
        if winner is not None:
            return Decision.resume(winner.trial_id, retire=retire, epoch=epoch, **why)
        return Decision.start(new_configs[i - len(records)], retire=retire, epoch=epoch, **why)

    def _num_random_starts(self, num_workers: int) -> int:
        """Random starts before the surrogate is used (:meth:`CandidateOptions.num_random_starts`),
        with a new trial's start and an epoch as the job timer has learned them."""
        if self.job_timer is None or not self.candidates.divide_initial_random_by_start:
            return self.candidates.num_random_starts(num_workers)
        return self.candidates.num_random_starts(
            num_workers, start_seconds=self.job_timer.start_seconds_of(NEW), epoch_seconds=self.job_timer.epoch_seconds
        )

    def _acquisition_values(
        self,
        records: list[TrialRecord],
        new_configs: list[dict[str, Any]],
        new_x: np.ndarray,
        running: Sequence[TrialRecord] = (),
    ) -> tuple[np.ndarray, dict[str, Any], AcquisitionValues | None]:
        """Fits the policy, then scores the candidates with it; on any failure of the model a
        uniformly random score (a decision must be made), and the next fit is from scratch.

        :return: the values; the decision's ``reason`` (``acquisition`` or ``model_failed``)
            and ``fit``; and the acquisition's answer with its predictions (None if the model
            failed, or the policy gave bare values)
        """
        seed = (int(self.random_seed) * 1_000_003 + self.num_decisions) % (2**31 - 1)
        num = len(records) + len(new_configs)
        try:
            # fit first: candidates are expressed in the outcome transform the fit may change
            model = self.policy.fit(self.observations, seed=seed)
        except Exception as err:  # noqa: BLE001 - a decision must be made whatever the model does
            return self._fallback(err, num), {"reason": "model_failed"}, None
        # a policy's fit may return another model (tests' doubles): it does not say its fit
        fit = model.fit_kind if isinstance(model, FittedModel) else None
        candidates = make_candidates(records, new_configs, new_x, self.observations, self.segment_end)
        pending = None
        if running and self.policy.condition_on_pending:
            # their next results are on their way (each at the epoch its current segment ends)
            pending = make_candidates(
                list(running), [], np.zeros((0, new_x.shape[1])), self.observations, _current_segment_end
            )
        try:
            answer = self.policy.score(model, candidates, self.observations, pending=pending)
            scored = answer if isinstance(answer, AcquisitionValues) else None
            values = np.asarray(answer if scored is None else scored.values, dtype=float)
            if values.shape != (num,) or np.any(np.isnan(values)):
                raise FloatingPointError("acquisition returned NaN values")
            values = self._per_second(values, records, candidates)
            return values, {"reason": "acquisition", "fit": fit}, scored
        except Exception as err:  # noqa: BLE001
            return self._fallback(err, num), {"reason": "model_failed", "fit": fit}, None

    def _per_second(self, values: np.ndarray, records: list[TrialRecord], candidates) -> np.ndarray:
        """With a job timer, the acquisition values (log EI) less the log of each candidate's
        expected seconds: the epochs of its next segment, and a job start unless its job is
        running (the reporting trial): a resume for a paused trial, a new start for a new one."""
        if self.job_timer is None:
            return values
        num_new = len(candidates) - len(records)
        last = np.array([r.last_epoch for r in records] + [0] * num_new)
        pays_start = np.array([r.status is not TrialStatus.RUNNING for r in records] + [True] * num_new, dtype=bool)
        new = np.arange(len(candidates)) >= len(records)
        log_seconds = self.job_timer.log_seconds(
            candidates.budget - last, pays_start, new, x=candidates.x, trial_ids=candidates.trial_ids
        )
        return values if log_seconds is None else values - log_seconds

    def _fallback(self, err: Exception, num: int) -> np.ndarray:
        # the surrogate keeps its own rollback state; here we only make sure a decision is
        # made (uniformly at random) and that the next fit is from scratch
        self.num_fallbacks += 1
        self.policy.reset()
        logger.warning(f"Surrogate failed ({type(err).__name__}: {err}); random decision this step")
        return self.rng.uniform(size=num)

    def _hopeless(self, records: list[TrialRecord], values: np.ndarray, keep: TrialRecord | None) -> tuple[int, ...]:
        """Paused trials beyond ``PausedCheckpoints.max_kept``, lowest acquisition value first."""
        if self.max_kept_paused is None:
            return ()
        # the reporting trial (still running) is paused too unless it wins: it counts
        losers = [(v, r) for v, r in zip(values, records) if r is not keep]
        excess = len(losers) + (keep is not None) - self.max_kept_paused
        return tuple(r.trial_id for _, r in sorted(losers, key=lambda p: p[0])[: max(excess, 0)])

    def metadata(self) -> dict[str, Any]:
        return {
            "num_decisions": self.num_decisions,
            "num_fallbacks": self.num_fallbacks,
            "num_sh_promotions": self.num_sh_promotions,
            "num_completions": 0 if self.completion is None else self.completion.num_completions,
        }


def _current_segment_end(record: TrialRecord | None) -> int:
    """The epoch a running trial's current segment ends at (no new configurations here)."""
    assert record is not None
    return record.segment_end
