"""Freeze-thaw (pause-and-resume) scheduler for Syne Tune 0.16, shared by DyHPO and DPL.

Every trial advances one budget step at a time. At the end of each step the scheduler asks
its policy which candidate deserves the next step: a paused trial at its next budget, a new
configuration at the first budget, or the reporting trial itself. It answers CONTINUE if the
reporting trial wins, PAUSE otherwise (``suggest()`` then resumes or starts the winner), and
STOP once a trial reaches ``max_t``, diverges (NaN/inf) or fails.

Behaviour of Syne Tune 0.16 this relies on (see docs/syne-tune-0.16-notes.md): a resume gets
no ``on_trial_add`` callback, so a resumed trial is marked running inside ``suggest()``;
``suggest()`` returning None ends scheduling for good; PAUSE and STOP are followed by
``on_trial_remove``; results are keyed on the reported epoch, never on arrival order.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Sequence

import numpy as np
from syne_tune.backend.trial_status import Trial
from syne_tune.config_space import config_space_to_json_dict
from syne_tune.optimizer.scheduler import (
    SchedulerDecision,
    TrialScheduler,
    TrialSuggestion,
)
from syne_tune.optimizer.schedulers.remove_checkpoints import (
    RemoveCheckpointsSchedulerMixin,
)
from syne_tune.tuner_callback import TunerCallback

from syne_dyhpo.observations import Candidates, Observations, TrialRecord, TrialStatus
from syne_dyhpo.policy import SurrogatePolicy
from syne_dyhpo.search_space import CandidateSampler, ConfigEncoder

logger = logging.getLogger(__name__)


class FreezeThawScheduler(TrialScheduler, RemoveCheckpointsSchedulerMixin):
    """Pause-and-resume scheduler that gives one budget step at a time to the candidate its
    policy scores best.

    :param config_space: Syne Tune configuration space
    :param metric: name of the metric to optimise, a key of the reported results
    :param policy: surrogate + acquisition scoring the candidates
    :param do_minimize: True if the metric is minimised. Defaults to True
    :param time_attr: name of the budget (epoch) key of the reported results. Defaults to
        "epoch"
    :param max_t: maximum budget (epochs) of a trial; trials are stopped there
    :param budget_step: epochs a trial runs per decision. Defaults to 1 (the papers)
    :param num_candidates: number of new configurations sampled (or drawn from
        ``candidate_configs``) and scored per decision, besides all paused trials.
        Defaults to 256
    :param num_initial_random: number of trials started with random configurations before
        the surrogate is used. Defaults to 1 (the papers); the surrogate also waits for at
        least ``policy.min_observations`` results
    :param candidate_configs: optional finite set of configurations (e.g. a tabular
        benchmark's rows); new configurations are then drawn only from it, each at most once
    :param max_resource_attr: optional config key the training script reads as "stop after
        this epoch"; set to the end of the current segment on every start and resume, so a
        real job stops exactly where the scheduler wants (every decision then pauses the
        trial; if it wins again it is resumed at once)
    :param max_paused_checkpoints: optional cap on the number of paused trials whose
        checkpoints are kept. After each decision, paused trials beyond the cap with the lowest
        acquisition values are *retired*: never resumed again, and their checkpoints deleted
        (with a backend created with ``delete_checkpoints=True``, which also deletes checkpoints
        of stopped trials). None (default) keeps every paused trial resumable
    :param restart_on_lost_checkpoint: what to do when a resumed trial reports epoch 1 again
        (its checkpoint was missing or unreadable and the script started over): False
        (default) marks it failed and stops it; True keeps its earlier curve as an archived,
        never-resumed record and lets the trial continue from scratch
    :param sh_probability: probability of trying a successive-halving promotion before
        consulting the surrogate (not in the papers; Syne Tune's former DyHPO used 0.25): the
        paused trial at the highest epoch whose value there ranks in the top
        ``1 / sh_reduction_factor`` of all values seen at that epoch is resumed; if none
        qualifies, the surrogate decides as usual. Counters acquisitions that keep favouring
        new configurations, so that some trials reach ``max_t``. Defaults to 0 (the papers)
    :param sh_reduction_factor: see ``sh_probability``. Defaults to 3 (Syne Tune's
        successive halving)
    :param random_seed: seed of all randomness (candidate sampling, surrogate training)
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        policy: SurrogatePolicy,
        do_minimize: bool = True,
        time_attr: str = "epoch",
        max_t: int | None = None,
        budget_step: int = 1,
        num_candidates: int = 256,
        num_initial_random: int = 1,
        candidate_configs: Sequence[dict[str, Any]] | None = None,
        max_resource_attr: str | None = None,
        max_paused_checkpoints: int | None = None,
        restart_on_lost_checkpoint: bool = False,
        sh_probability: float = 0.0,
        sh_reduction_factor: float = 3.0,
        random_seed: int | None = None,
    ):
        super().__init__(random_seed=random_seed)
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a non-empty string, got {metric!r}")
        if max_t is None or int(max_t) != max_t or max_t < 1:
            raise ValueError(f"max_t must be an integer >= 1, got {max_t!r}")
        if int(budget_step) != budget_step or budget_step < 1:
            raise ValueError(f"budget_step must be an integer >= 1, got {budget_step!r}")
        if num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
        if max_paused_checkpoints is not None and max_paused_checkpoints < 1:
            raise ValueError(f"max_paused_checkpoints must be >= 1 or None, got {max_paused_checkpoints}")
        if not 0.0 <= sh_probability <= 1.0:
            raise ValueError(f"sh_probability must be in [0, 1], got {sh_probability}")
        if not sh_reduction_factor > 1.0:
            raise ValueError(f"sh_reduction_factor must be > 1, got {sh_reduction_factor}")
        if num_initial_random < 0:
            raise ValueError(f"num_initial_random must be >= 0, got {num_initial_random}")
        self.config_space = config_space
        self.metric = metric
        self.do_minimize = bool(do_minimize)
        self.time_attr = time_attr
        self.max_t = int(max_t)
        self.budget_step = int(budget_step)
        self.num_candidates = int(num_candidates)
        self.num_initial_random = int(num_initial_random)
        self.max_resource_attr = max_resource_attr
        self.max_paused_checkpoints = max_paused_checkpoints
        self.restart_on_lost_checkpoint = restart_on_lost_checkpoint
        self.sh_probability = float(sh_probability)
        self.sh_reduction_factor = float(sh_reduction_factor)
        self.policy = policy
        self._encoder = ConfigEncoder(config_space)
        if max_resource_attr is not None and max_resource_attr in self._encoder.hp_names:
            raise ValueError(f"max_resource_attr '{max_resource_attr}' must not be a hyperparameter of config_space")
        self._sampler = CandidateSampler(self._encoder, candidate_configs)
        self._obs = Observations(max_t=self.max_t, do_minimize=self.do_minimize)
        self._rng = np.random.RandomState(self.random_seed)
        self._pending: list[tuple[str, Any]] = []  # decisions waiting for a free worker
        self._observations_at_update = -1
        self._checkpoints_to_delete: list[int] = []
        #: front ends (trial limits, e.g. Ray) set this to False to only resume paused trials
        self.allow_new_trials = True
        self._resumed: set[int] = set()  # resumed, no new report yet (restart detection)
        self.num_decisions = 0
        self.num_fallbacks = 0
        self.num_sh_promotions = 0

    # ----- Syne Tune callbacks ---------------------------------------------------------------

    def suggest(self) -> TrialSuggestion | None:
        while self._pending:
            kind, item = self._pending.pop(0)
            if kind == "resume" and self._obs.trials[item].status is TrialStatus.PAUSED:
                return self._resume(self._obs.trials[item])
            if kind == "new" and self.allow_new_trials and self._sampler.is_free(item):
                return self._start(item)
        choice = self._decide(reporting=None)
        if choice is None:
            logger.info("No paused trial and no new configuration left: nothing to suggest")
            return None
        kind, item = choice
        return self._resume(item) if kind == "resume" else self._start(item)

    def on_trial_add(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is None:
            config = dict(trial.config)
            record = self._obs.add_trial(trial.trial_id, config, self._encoder.encode(config))
            self._sampler.mark_used(config)
        record.status = TrialStatus.RUNNING
        record.segment_end = min(record.last_epoch + self.budget_step, self.max_t)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        record = self._obs.trials.get(trial.trial_id)
        if record is None:  # started by someone else (e.g. a restored tuner): adopt it
            self.on_trial_add(trial)
            record = self._obs.trials[trial.trial_id]
        epoch, value = self._parse_result(trial.trial_id, result)
        if record.status is not TrialStatus.RUNNING:
            # late report of a trial already paused/stopped by us: keep the data if new
            self._obs.add_result(trial.trial_id, epoch, value)
            return SchedulerDecision.PAUSE if record.status.resumable else SchedulerDecision.STOP
        if epoch > self.max_t:
            logger.warning(f"trial_id {trial.trial_id}: {self.time_attr}={epoch} > max_t={self.max_t}; stopping it")
            record.status = TrialStatus.FINISHED
            return SchedulerDecision.STOP
        if epoch == 1 and record.last_epoch >= 1 and trial.trial_id in self._resumed:
            return self._on_restart(record, value)
        self._resumed.discard(trial.trial_id)
        if not self._obs.add_result(trial.trial_id, epoch, value):
            return SchedulerDecision.CONTINUE  # repeated or stale epoch: nothing new
        if not math.isfinite(value):
            logger.warning(
                f"trial_id {trial.trial_id}: {self.metric}={value} at {self.time_attr}={epoch}; "
                "treated as diverged (worst value), stopped and never resumed"
            )
            record.status = TrialStatus.DIVERGED
            return SchedulerDecision.STOP
        if epoch >= self.max_t:
            record.status = TrialStatus.FINISHED
            return SchedulerDecision.STOP
        if epoch < record.segment_end:
            return SchedulerDecision.CONTINUE
        choice = self._decide(reporting=record)
        if choice is not None and choice[1] is record:
            record.segment_end = min(epoch + self.budget_step, self.max_t)
            if self.max_resource_attr is None:
                return SchedulerDecision.CONTINUE
            # the job stops itself at its segment end: pause it and resume it right away
            self._pending.insert(0, ("resume", record.trial_id))
        elif choice is not None:
            self._pending.append(("resume", choice[1].trial_id) if choice[0] == "resume" else choice)
        if record.status is TrialStatus.RETIRED:  # ranked hopeless: will never be resumed
            return SchedulerDecision.STOP
        record.status = TrialStatus.PAUSED
        return SchedulerDecision.PAUSE

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None and record.status in (TrialStatus.RUNNING, TrialStatus.PAUSED):
            record.status = TrialStatus.FINISHED if record.last_epoch >= self.max_t else TrialStatus.COMPLETED

    def on_trial_remove(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None and record.status is TrialStatus.RUNNING:
            record.status = TrialStatus.PAUSED if record.last_epoch < self.max_t else TrialStatus.FINISHED

    def on_trial_error(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            logger.warning(
                f"trial_id {trial.trial_id} failed after {record.last_epoch} epochs; it is never "
                "resumed, its results are kept"
            )
            record.status = TrialStatus.FAILED

    def callback_for_checkpoint_removal(self, stop_criterion) -> TunerCallback | None:
        """Syne Tune hook: the callback deleting checkpoints of retired trials (used by the
        Tuner when the backend has ``delete_checkpoints=True``)."""
        return None if self.max_paused_checkpoints is None else _RetiredCheckpointRemoval(self)

    def pop_checkpoints_to_delete(self) -> list[int]:
        """Trial ids retired since the last call: their checkpoints can be deleted."""
        ids, self._checkpoints_to_delete = self._checkpoints_to_delete, []
        return ids

    def metric_names(self) -> list[str]:
        return [self.metric]

    def metric_mode(self) -> str:
        return "min" if self.do_minimize else "max"

    def metadata(self) -> dict[str, Any]:
        best = self._obs.best_value()
        return {
            "scheduler_name": type(self).__name__,
            "config_space": config_space_to_json_dict(self.config_space),
            "metric_names": self.metric_names(),
            "metric_mode": self.metric_mode(),
            "time_attr": self.time_attr,
            "max_t": self.max_t,
            "budget_step": self.budget_step,
            "num_candidates": self.num_candidates,
            "num_initial_random": self.num_initial_random,
            "max_resource_attr": self.max_resource_attr,
            "max_paused_checkpoints": self.max_paused_checkpoints,
            "random_seed": int(self.random_seed),
            "num_decisions": self.num_decisions,
            "num_fallbacks": self.num_fallbacks,
            "sh_probability": self.sh_probability,
            "sh_reduction_factor": self.sh_reduction_factor,
            "num_sh_promotions": self.num_sh_promotions,
            "best_value": best,
            "policy": self.policy.metadata(),
            **self._obs.metadata(),
        }

    # ----- read access for users and front ends ---------------------------------------------

    @property
    def observations(self) -> Observations:
        """All learning curves and trial states seen so far."""
        return self._obs

    def trial_status(self, trial_id: int) -> TrialStatus | None:
        record = self._obs.trials.get(trial_id)
        return None if record is None else record.status

    # ----- internals -------------------------------------------------------------------------

    def _parse_result(self, trial_id: int, result: dict[str, Any]) -> tuple[int, float]:
        for key in (self.metric, self.time_attr):
            if key not in result:
                raise ValueError(
                    f"Result of trial_id {trial_id} has no '{key}' (reported keys: {sorted(result)}); "
                    f"check metric='{self.metric}' and time_attr='{self.time_attr}'"
                )
        try:
            value = float(result[self.metric])
        except (TypeError, ValueError):
            raise ValueError(f"trial_id {trial_id}: metric '{self.metric}' is not a number: {result[self.metric]!r}")
        epoch_raw = result[self.time_attr]
        try:
            epoch = int(round(float(epoch_raw)))
        except (TypeError, ValueError):
            raise ValueError(f"trial_id {trial_id}: '{self.time_attr}' is not a number: {epoch_raw!r}")
        if epoch < 1:
            raise ValueError(f"trial_id {trial_id}: '{self.time_attr}' must be >= 1 (epochs count from 1), got {epoch_raw}")
        return epoch, value

    def _segment_end(self, record: TrialRecord | None) -> int:
        return min((0 if record is None else record.last_epoch) + self.budget_step, self.max_t)

    def _with_segment(self, config: dict[str, Any], end: int) -> dict[str, Any]:
        config = dict(config)
        if self.max_resource_attr is not None:
            config[self.max_resource_attr] = end
        return config

    def _start(self, config: dict[str, Any]) -> TrialSuggestion:
        self._sampler.mark_used(config)
        return TrialSuggestion.start_suggestion(self._with_segment(config, self._segment_end(None)))

    def _resume(self, record: TrialRecord) -> TrialSuggestion:
        # Syne Tune sends no callback for a resume: mark it running now (several free workers)
        record.status = TrialStatus.RUNNING
        record.segment_end = self._segment_end(record)
        self._resumed.add(record.trial_id)
        if self.max_resource_attr is None:
            return TrialSuggestion.resume_suggestion(record.trial_id)
        record.config = self._with_segment(record.config, record.segment_end)
        return TrialSuggestion.resume_suggestion(record.trial_id, config=dict(record.config))

    def _decide(self, reporting: TrialRecord | None) -> tuple[str, Any] | None:
        """Picks the candidate for the next budget step: ("resume", record) or ("new", config)."""
        records = [r for r in self._obs.trials.values() if r.status is TrialStatus.PAUSED]
        if reporting is not None:
            records.append(reporting)
        if self.allow_new_trials:
            new_configs, new_x = self._sampler.propose(self._rng, self.num_candidates)
        else:
            new_configs, new_x = [], np.zeros((0, self._encoder.dim))
        if not records and not new_configs:
            return None
        self.num_decisions += 1
        started = len(self._obs.trials) + sum(kind == "new" for kind, _ in self._pending)
        if new_configs and (started < self.num_initial_random or not self.policy.ready(self._obs)):
            return "new", new_configs[0]
        if self.sh_probability > 0 and self._rng.uniform() < self.sh_probability:
            promoted = self._sh_promotion(records)
            if promoted is not None:
                self.num_sh_promotions += 1
                return "resume", promoted
        # refit first: candidate curves are normalised with the normaliser the fit may change
        refitted = self._refit()
        candidates = self._candidates(records, new_configs, new_x)
        scores = self._score(candidates) if refitted else self._random_scores(len(candidates))
        best = np.flatnonzero(scores == scores.max())
        i = int(best[0] if len(best) == 1 else self._rng.choice(best))
        self._retire_hopeless(records, scores[: len(records)], keep=records[i] if i < len(records) else None)
        if i < len(records):
            return "resume", records[i]
        return "new", new_configs[i - len(records)]

    def _sh_promotion(self, records: list[TrialRecord]) -> TrialRecord | None:
        """Successive halving with a rung at every epoch: among ``records`` (paused, plus the
        reporting trial), the one at the highest epoch that ranks in the top
        ``1 / sh_reduction_factor`` of all trials that reached that epoch, or None."""
        by_epoch: dict[int, list[TrialRecord]] = {}
        for record in records:
            if record.last_epoch >= 1:
                by_epoch.setdefault(record.last_epoch, []).append(record)
        for epoch in sorted(by_epoch, reverse=True):
            rung = np.sort(self._obs.scores_at(epoch))[::-1]
            num_promotable = int(len(rung) / self.sh_reduction_factor)
            if num_promotable == 0:
                continue
            threshold = rung[num_promotable - 1]
            eligible = [r for r in by_epoch[epoch] if np.isfinite(r.scores[-1]) and r.scores[-1] >= threshold]
            if eligible:
                return max(eligible, key=lambda r: r.scores[-1])
        return None

    def _retire_hopeless(self, records: list[TrialRecord], scores: np.ndarray, keep: TrialRecord | None) -> None:
        """Retires paused trials beyond ``max_paused_checkpoints``, lowest acquisition first."""
        if self.max_paused_checkpoints is None:
            return
        # the reporting trial (still RUNNING) is paused too unless it wins: it counts
        losers = [(s, r) for s, r in zip(scores, records) if r is not keep]
        excess = len(losers) + (keep is not None) - self.max_paused_checkpoints
        for _, record in sorted(losers, key=lambda p: p[0])[: max(excess, 0)]:
            record.status = TrialStatus.RETIRED
            self._checkpoints_to_delete.append(record.trial_id)
            logger.info(f"trial_id {record.trial_id} retired (ranked hopeless); its checkpoint may be deleted")

    def _on_restart(self, record: TrialRecord, value: float) -> str:
        """A resumed trial reported epoch 1: its checkpoint was lost and it started over."""
        tid = record.trial_id
        if not self.restart_on_lost_checkpoint:
            logger.warning(
                f"trial_id {tid} was resumed after epoch {record.last_epoch} but reported "
                f"{self.time_attr}=1: its checkpoint is missing or unreadable. Marked failed "
                "(pass restart_on_lost_checkpoint=True to restart such trials from scratch)"
            )
            record.status = TrialStatus.FAILED
            return SchedulerDecision.STOP
        logger.warning(
            f"trial_id {tid} lost its checkpoint after epoch {record.last_epoch} and restarts from "
            "scratch; its earlier curve is kept as an archived record"
        )
        self._obs.archive(tid, archive_id=min([0] + list(self._obs.trials)) - 1)
        self._resumed.discard(tid)
        self._obs.add_result(tid, 1, value)
        if self.max_resource_attr is None:
            record.segment_end = self._segment_end(record)
        # else: the restarted job still runs to the segment end in its config (set by
        # _resume) and stops itself there; pausing it earlier would kill it past its report
        # and leave a checkpoint ahead of what was seen, so the next resume would find
        # nothing to do and the trial would end as "completed"
        return SchedulerDecision.CONTINUE

    def _candidates(self, records: list[TrialRecord], new_configs: list[dict], new_x: np.ndarray) -> Candidates:
        n_new = len(new_configs)
        x = np.concatenate([np.stack([r.encoded for r in records]) if records else np.zeros((0, self._encoder.dim)), new_x])
        budget = np.array([self._segment_end(r) for r in records] + [self._segment_end(None)] * n_new, dtype=int)
        curves = np.concatenate([self._obs.candidate_curves(records), np.full((n_new, self.max_t), np.nan)])
        return Candidates(
            x=x,
            budget=budget,
            curves=curves,
            trial_ids=[r.trial_id for r in records] + [None] * n_new,
            configs=[r.config for r in records] + new_configs,
        )

    def _refit(self) -> bool:
        """Updates the policy on all observations (if new ones arrived); False if it failed."""
        seed = (int(self.random_seed) * 1_000_003 + self.num_decisions) % (2**31 - 1)
        try:
            if self._obs.num_observations != self._observations_at_update:
                self.policy.update(self._obs, seed=seed)
                self._observations_at_update = self._obs.num_observations
            return True
        except Exception as err:  # noqa: BLE001 - a decision must be made whatever the model does
            self._on_surrogate_failure(err)
            return False

    def _score(self, candidates: Candidates) -> np.ndarray:
        try:
            scores = np.asarray(self.policy.score(candidates, self._obs), dtype=float)
            if scores.shape != (len(candidates),) or np.any(np.isnan(scores)):
                raise FloatingPointError("acquisition returned NaN scores")
            return scores
        except Exception as err:  # noqa: BLE001 - a decision must be made whatever the model does
            self._on_surrogate_failure(err)
            return self._random_scores(len(candidates))

    def _on_surrogate_failure(self, err: Exception) -> None:
        # the surrogate keeps its own rollback state; here we only make sure a decision is
        # made (uniformly at random) and the next update refits from scratch
        self.num_fallbacks += 1
        self._observations_at_update = -1
        self.policy.reset()
        logger.warning(f"Surrogate failed ({type(err).__name__}: {err}); random decision this step")

    def _random_scores(self, num: int) -> np.ndarray:
        return self._rng.uniform(size=num)


class _RetiredCheckpointRemoval(TunerCallback):
    """Deletes the checkpoints of trials the scheduler retired (see ``max_paused_checkpoints``)."""

    def __init__(self, scheduler: FreezeThawScheduler):
        self._scheduler = scheduler
        self._backend = None

    def on_tuning_start(self, tuner):
        self._backend = tuner.trial_backend

    def on_loop_end(self):
        for trial_id in self._scheduler.pop_checkpoints_to_delete():
            self._backend.delete_checkpoint(trial_id)
            logger.info(f"Deleted checkpoint of retired trial_id {trial_id}")
