"""Freeze-thaw (pause-and-resume) scheduler for Syne Tune 0.16, shared by DyHPO and DPL.

Every trial advances one budget step (segment) at a time. At the end of each segment the
scheduler asks its :class:`~syne_dyhpo.core.decision.DecisionMaker` which candidate deserves
the next segment: a paused trial at its next budget, a new configuration at the first budget,
or the reporting trial itself. It answers CONTINUE if the reporting trial wins, PAUSE
otherwise (``suggest()`` then resumes or starts the winner), and STOP once a trial reaches
``max_t``, diverges (NaN/inf) or fails.

This module only translates Syne Tune's callbacks: the trial life cycle (statuses, segment
ends, late and stale reports) is :mod:`syne_dyhpo.core.trials`, the decision
:mod:`syne_dyhpo.core.decision`, the new configurations on offer :mod:`syne_dyhpo.core.offers`,
what it learns of its Tuner :mod:`syne_dyhpo.core.tuner_link`, the continuation after
``Tuner.load`` :mod:`syne_dyhpo.core.restore`. Each callback takes one path, the decision log
(:mod:`syne_dyhpo.core.decision_log`) observing it: with ``log_decisions=False`` its calls do
nothing. Behaviour of Syne Tune 0.16 this relies on: a resume gets no
``on_trial_add`` callback, so a resumed trial is marked running inside ``suggest()``;
``suggest()`` returning None ends scheduling for good; PAUSE and STOP are followed by
``on_trial_remove``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

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

from syne_dyhpo.checks import checked_flag, checked_integer, checked_result_keys
from syne_dyhpo.core import decision_log
from syne_dyhpo.core.completion import IncumbentCompletion
from syne_dyhpo.core.decision import Decision, DecisionKind, DecisionMaker
from syne_dyhpo.core.depth_gate import DepthGate
from syne_dyhpo.core.job_costs import TIMED_RESUME_EPOCHS, JobTimer
from syne_dyhpo.core.jobs import job_end, parse_result
from syne_dyhpo.core.observations import Observations, TrialRecord, TrialStatus
from syne_dyhpo.core.offers import NewConfigOffers
from syne_dyhpo.core.options import FreezeThawOptions, checked_instance
from syne_dyhpo.core.policy import SurrogatePolicy
from syne_dyhpo.core.reasons import TIME_RESUME
from syne_dyhpo.core.restore import restore_tuner
from syne_dyhpo.core.run_info import run_info
from syne_dyhpo.core.trials import ResultAction, TrialLifecycle, check_epoch_within_max_t
from syne_dyhpo.core.tuner_link import RetiredCheckpointRemoval, calling_tuner, log_folder
from syne_dyhpo.search_space import CandidateSampler, ConfigEncoder

logger = logging.getLogger(__name__)

_ACTIONS = {
    ResultAction.CONTINUE: SchedulerDecision.CONTINUE,
    ResultAction.PAUSE: SchedulerDecision.PAUSE,
    ResultAction.STOP: SchedulerDecision.STOP,
}


class FreezeThawScheduler(TrialScheduler, RemoveCheckpointsSchedulerMixin):
    """Pause-and-resume scheduler that gives one budget step at a time to the candidate its
    policy scores best.

    :param config_space: Syne Tune configuration space
    :param metric: name of the metric to optimise, a key of the reported results
    :param policy: surrogate + acquisition scoring the candidates
    :param max_t: maximum budget (epochs) of a trial; trials are stopped there. Required
    :param do_minimize: True if the metric is minimised. Defaults to True
    :param time_attr: name of the budget (epoch) key of the reported results. Defaults to
        "epoch"
    :param max_resource_attr: optional config key the training script reads as "stop after
        this epoch"; set to the end of the current segment on every start and resume, so a
        real job stops exactly where the scheduler wants (every decision then pauses the
        trial; if it wins again it is resumed at once). Once a finite pool of configurations
        (``options.candidates.configs``, or a small finite space) is nearly used up, it is set
        to ``max_t`` instead and a winning trial just continues: Syne Tune's Tuner never asks
        again after a ``suggest()`` that found nothing to run, so trials whose jobs stop at
        every segment end could otherwise be left paused for good
    :param random_seed: seed of all randomness (candidate sampling, surrogate training)
    :param points_to_evaluate: configurations started first, in the given order, before any
        random or model-based choice (each must be complete and, with
        ``options.candidates.configs``, one of them). As in Syne Tune 0.16's searchers, None
        means none (0.16 no longer starts from the space's default configuration)
    :param completion: the incumbent completion
        (:class:`~syne_dyhpo.core.completion.IncumbentCompletion`): the next segment goes to
        the leading trial whenever it may get it, so that the best configurations are trained
        to ``max_t``. Its settings are read, never changed: one object may be passed to
        several schedulers. Required: the methods' completions differ (each method passes
        its own, ``DyHPOCompletion()`` or ``DeepPowerLawCompletion()``, by default); None
        is the papers (no completion)
    :param depth_gate: narrows the trials that may get a further segment from the acquisition
        to those whose value at their last epoch ranks in contention among all values reported
        at that epoch (the completion is not gated)
        (:class:`~syne_dyhpo.core.depth_gate.DepthGate`). Its settings are read, never changed.
        Defaults to ``DepthGate()`` (three quarters of the values at each epoch in
        contention); None is the papers (every paused trial is a candidate)
    :param options: the core's further settings
        (:class:`~syne_dyhpo.core.options.FreezeThawOptions`: ``candidates``, ``budget_step``,
        ``checkpoints``, ``promotion``, ``job_costs``, ``log_decisions``). Defaults to ``FreezeThawOptions()``
    """

    def __init__(
        self,
        config_space: dict[str, Any],
        metric: str,
        policy: SurrogatePolicy,
        *,
        max_t: int,
        completion: IncumbentCompletion | None,
        do_minimize: bool = True,
        time_attr: str = "epoch",
        max_resource_attr: str | None = None,
        random_seed: int | None = None,
        points_to_evaluate: Sequence[dict[str, Any]] | None = None,
        depth_gate: DepthGate | None = DepthGate(),
        options: FreezeThawOptions = FreezeThawOptions(),
    ):
        # numpy's RandomState takes seeds in [0, 2**32 - 1]
        random_seed = checked_integer(
            "random_seed", random_seed, 0, maximum=2**32 - 1, allow_none=True, integral_floats=True
        )
        super().__init__(random_seed=random_seed)
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a non-empty string, got {metric!r}")
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"time_attr must be a non-empty string, got {time_attr!r}")
        checked_result_keys(metric, time_attr, max_resource_attr)
        do_minimize = checked_flag("do_minimize", do_minimize)
        # integral floats pass: max_t is often read from a blackbox's fidelities (52.0)
        max_t = checked_integer("max_t", max_t, 1, integral_floats=True)
        checked_instance("completion", completion, IncumbentCompletion, allow_none=True)
        checked_instance("depth_gate", depth_gate, DepthGate, allow_none=True)
        checked_instance("options", options, FreezeThawOptions)
        budget_step, candidates, checkpoints, promotion, job_costs = (
            options.budget_step, options.candidates, options.checkpoints, options.promotion, options.job_costs)
        self.options = options
        self.config_space = config_space
        self.metric = metric
        self.do_minimize = bool(do_minimize)
        self.time_attr = time_attr
        self.max_t = max_t
        self.budget_step = budget_step
        self.candidates = candidates
        self.completion = completion
        self.promotion = promotion
        self.depth_gate = depth_gate
        self.max_resource_attr = max_resource_attr
        self.checkpoints = checkpoints
        self.job_costs = job_costs
        self._job_timer = None if job_costs is None else JobTimer(job_costs)
        self.policy = policy
        self._encoder = ConfigEncoder(config_space)
        if max_resource_attr is not None and max_resource_attr in self._encoder.hp_names:
            raise ValueError(f"max_resource_attr '{max_resource_attr}' must not be a hyperparameter of config_space")
        self._sampler = CandidateSampler(self._encoder, candidates.configs)
        self._offers = NewConfigOffers(self._encoder, self._sampler, candidates, points_to_evaluate)
        self._obs = Observations(max_t=self.max_t, do_minimize=self.do_minimize)
        self._lifecycle = TrialLifecycle(
            self._obs,
            budget_step=self.budget_step,
            restart_if_lost=checkpoints.restart_if_lost,
            max_resource_attr=max_resource_attr,
            jobs_run_on=job_costs is not None,
            start_epochs=None if self._job_timer is None else self._job_timer.start_segment_epochs,
        )
        self._decider = DecisionMaker(
            policy,
            self._obs,
            segment_end=self._lifecycle.segment_end,
            rng=np.random.RandomState(self.random_seed),
            random_seed=int(self.random_seed),
            candidates=candidates,
            completion=completion,
            promotion=promotion,
            max_kept_paused=checkpoints.max_kept,
            depth_gate=depth_gate,
            job_timer=self._job_timer,
        )
        self._pending: list[Decision] = []  # decisions waiting for a free worker
        self._new_trials_allowed = True
        self._workers_seen = 1  # most trials running at once, plus the free worker asking
        self._checkpoints_to_delete: list[int] = []
        self._restore_pending = False  # True once unpickled, until restore() is done
        self._log = decision_log.DecisionLog(enabled=options.log_decisions)

    # ----- Syne Tune callbacks ---------------------------------------------------------------

    def suggest(self) -> TrialSuggestion | None:
        """The next trial to run on a free worker: the oldest decision still waiting for one,
        else a fresh decision among paused trials and new configurations."""
        if self._restore_pending or not self._log.bound:  # first call of a session
            self._join(calling_tuner())
        self._workers_seen = max(self._workers_seen, self.num_running() + 1)
        while self._pending:
            waiting = self._pending.pop(0)
            if waiting.kind is DecisionKind.RESUME and self._obs.trials[_resumed(waiting)].status.resumable:
                self._log.carried_out(waiting)
                timed = waiting.reason == TIME_RESUME
                return self._resume(self._obs.trials[_resumed(waiting)], segment_end=waiting.epoch if timed else None)
            if (
                waiting.kind is DecisionKind.START
                and self._new_trials_allowed
                and self._sampler.is_free(_started(waiting))
            ):
                self._log.carried_out(waiting)
                return self._start(_started(waiting))
            self._log.dropped(waiting)
        decision = self._decide(reporting=None, started=time.perf_counter())
        if decision is None:
            logger.info("No paused trial and no new configuration left: nothing to suggest")
            return None
        if decision.kind is DecisionKind.RESUME:
            return self._resume(self._obs.trials[_resumed(decision)])
        return self._start(_started(decision))

    def on_trial_add(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is None:
            config = dict(trial.config)
            record = self._obs.add_trial(trial.trial_id, config, self._encoder.encode(config))
            self._sampler.mark_used(config)
        self._lifecycle.start(record)
        if self._job_timer is not None:
            self._job_timer.job_started(record.trial_id, record.last_epoch, record.encoded)
        self._log.started(trial.trial_id, trial.config, ignore=self.max_resource_attr)
        job_end = trial.config.get(self.max_resource_attr) if self.max_resource_attr is not None else None
        record.job_end = self.max_t if job_end is None else int(job_end)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        started = time.perf_counter()
        record = self._obs.trials.get(trial.trial_id)
        if record is None:  # started by someone else (e.g. a restored tuner): adopt it
            self.on_trial_add(trial)
            record = self._obs.trials[trial.trial_id]
        was_running = record.status is TrialStatus.RUNNING  # else a late or stale report
        self._log.result_arrived(result)
        epoch, value = parse_result(trial.trial_id, result, self.metric, self.time_attr)
        check_epoch_within_max_t(record, epoch, self.max_t, self.time_attr)
        if self._job_timer is not None and record.status is TrialStatus.RUNNING:
            self._job_timer.on_result(record.trial_id, epoch, result)
        action = self._lifecycle.on_result(record, epoch, value)
        if action is not ResultAction.DECIDE:
            if action is ResultAction.STOP and was_running:  # max_t, diverged, lost checkpoint
                self._log.trial_ended(record.trial_id, record.last_epoch, record.status.value, started)
            return _ACTIONS[action]
        if self._job_timer is not None and self._job_timer.wants_timed_resume(record.trial_id):
            answer = self._pause_to_time_a_resume(record, started)
        else:
            answer = self._answer(record, self._decide(reporting=record, started=started))
        self._log.answered(answer, started)
        return answer

    def _pause_to_time_a_resume(self, record: TrialRecord, started: float) -> str:
        """Pauses the reporting trial at its segment end and resumes it first, for
        ``TIMED_RESUME_EPOCHS`` epochs, so that the resume is priced
        (:meth:`~syne_dyhpo.core.job_costs.JobTimer.wants_timed_resume`)."""
        assert self._job_timer is not None
        self._job_timer.timed_resume_given(record.trial_id)
        decision = Decision.resume(
            record.trial_id, epoch=min(record.last_epoch + TIMED_RESUME_EPOCHS, self.max_t), reason=TIME_RESUME
        )
        self._log.decided(decision, record, self._obs.trials, self.max_t, started)
        return self._pause_and_queue_resume(record, decision)

    def _pause_and_queue_resume(self, record: TrialRecord, decision: Decision) -> str:
        """Pauses the reporting trial, whose resume (``decision``) goes first to a free worker."""
        self._pending.insert(0, decision)
        record.status = TrialStatus.PAUSED
        return SchedulerDecision.PAUSE

    def _answer(self, record: TrialRecord, decision: Decision | None) -> str:
        """Carries out a decision made at the reporting trial's segment end: its answer."""
        if decision is not None and decision.kind is DecisionKind.RESUME and decision.trial_id == record.trial_id:
            self._lifecycle.extend(record)
            if record.job_end > record.last_epoch:
                return SchedulerDecision.CONTINUE
            # the job stops itself at its segment end: pause it and resume it right away
            return self._pause_and_queue_resume(record, decision)
        if decision is not None:
            self._pending.append(decision)
        if record.status is TrialStatus.RETIRED:  # ranked hopeless: will never be resumed
            return SchedulerDecision.STOP
        record.status = TrialStatus.PAUSED
        return SchedulerDecision.PAUSE

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]):
        self._job_ended(trial.trial_id)
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_job_completed(record)

    def on_trial_remove(self, trial: Trial):
        self._job_ended(trial.trial_id)
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_removed(record)

    def on_trial_error(self, trial: Trial):
        self._job_ended(trial.trial_id)
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_error(record)
            self._log.add(self._log.now(), trial.trial_id, record.last_epoch, reason="failed")

    def callback_for_checkpoint_removal(self, stop_criterion) -> TunerCallback | None:
        """Syne Tune hook: the callback deleting checkpoints of retired trials (used by the
        Tuner when the backend has ``delete_checkpoints=True``)."""
        return None if self.checkpoints.max_kept is None else RetiredCheckpointRemoval(self)

    def pop_checkpoints_to_delete(self) -> list[int]:
        """Trial ids retired since the last call: their checkpoints can be deleted."""
        ids, self._checkpoints_to_delete = self._checkpoints_to_delete, []
        return ids

    def metric_names(self) -> list[str]:
        return [self.metric]

    def metric_mode(self) -> str:
        return "min" if self.do_minimize else "max"

    def metadata(self) -> dict[str, Any]:
        return {
            "scheduler_name": type(self).__name__,
            "config_space": config_space_to_json_dict(self.config_space),
            "metric_names": self.metric_names(),
            "metric_mode": self.metric_mode(),
            "time_attr": self.time_attr,
            "max_t": self.max_t,
            "budget_step": self.budget_step,
            "candidates": self.candidates.metadata(),
            "max_resource_attr": self.max_resource_attr,
            "checkpoints": self.checkpoints.metadata(),
            "random_seed": int(self.random_seed),
            "promotion": None if self.promotion is None else asdict(self.promotion),
            "completion": None if self.completion is None else asdict(self.completion),
            "depth_gate": None if self.depth_gate is None else asdict(self.depth_gate),
            "job_costs": None if self._job_timer is None else self._job_timer.metadata(),
            "best_value": self._obs.best_value(),
            "policy": self.policy.metadata(),
            **self._decider.metadata(),
            **self._obs.metadata(),
        }

    # ----- read access for users and front ends ---------------------------------------------

    @property
    def observations(self) -> Observations:
        """All learning curves and trial states seen so far (read them; change them only
        through the scheduler's callbacks)."""
        return self._obs

    def trial_status(self, trial_id: int) -> TrialStatus | None:
        record = self._obs.trials.get(trial_id)
        return None if record is None else record.status

    def num_running(self) -> int:
        """Trials holding a worker now."""
        return len(self._obs.with_status(TrialStatus.RUNNING))

    def start_given_up(self, config: dict[str, Any]) -> None:
        """A new configuration this scheduler suggested will never be started (a front end
        discarded it, e.g. at the end of its budget): its decision log row is finished as
        ``dropped``.

        :param config: the configuration of the suggestion
        """
        self._log.start_given_up(config, ignore=self.max_resource_attr)

    def allow_new_trials(self, allowed: bool) -> None:
        """Whether decisions may start new configurations (front ends with a trial limit, e.g.
        Ray, turn it off once the limit is reached; paused trials are still resumed)."""
        self._new_trials_allowed = bool(allowed)

    def drop_pending(self) -> None:
        """A front end asks for no more trials (its epoch budget is spent): the decisions
        waiting for a free worker are given up, their decision-log rows finished as
        ``dropped``."""
        for decision in self._pending:
            self._log.dropped(decision)
        self._pending.clear()

    def end_trial(self, trial_id: int) -> None:
        """The trial will never run again (a front end ended it): finished if it reached
        ``max_t``, else completed."""
        record = self._obs.trials.get(trial_id)
        if record is not None:
            self._lifecycle.on_completed(record)

    # ----- internals -------------------------------------------------------------------------

    def _job_ended(self, trial_id: int) -> None:
        if self._job_timer is not None:
            self._job_timer.job_ended(trial_id)

    def _decide(self, reporting: TrialRecord | None, started: float) -> Decision | None:
        """Asks the decision maker; retires the trials it ranked hopeless; logs the decision.

        :param reporting: the reporting trial at its segment end (None: a free worker asks)
        :param started: ``time.perf_counter()`` when the scheduler call began
        """
        records = self._obs.with_status(TrialStatus.PAUSED)
        if reporting is not None:
            records.append(reporting)
        if self._new_trials_allowed:
            new_configs, new_keys, new_x = self._offers.offered(self._decider.rng)
        else:
            new_configs, new_keys, new_x = [], [], np.zeros((0, self._encoder.dim))
        point = self._next_point_to_evaluate()
        decision: Decision | None
        if point is not None:
            decision = Decision.start(point, epoch=self._lifecycle.segment_end(None), reason="points_to_evaluate")
        else:
            num_started = len(self._obs.trials) + sum(d.kind is DecisionKind.START for d in self._pending)
            running = [r for r in self._obs.with_status(TrialStatus.RUNNING) if r is not reporting]
            decision = self._decider.decide(
                records, new_configs, new_x, num_started, running=running, num_workers=self._workers_seen
            )
            started_config = decision.config if decision is not None and decision.kind is DecisionKind.START else None
            self._offers.keep_best(new_configs, new_keys, new_x, self._decider.new_config_values, started_config)
            for trial_id in () if decision is None else decision.retire:
                self._lifecycle.retire(self._obs.trials[trial_id])
                self._checkpoints_to_delete.append(trial_id)
        self._log.decided(decision, reporting, self._obs.trials, self.max_t, started)
        return decision

    def _next_point_to_evaluate(self) -> dict[str, Any] | None:
        """The first of ``points_to_evaluate`` not started yet (and not already decided on)."""
        if not self._new_trials_allowed:
            return None
        decided = {self._encoder.key(_started(d)) for d in self._pending if d.kind is DecisionKind.START}
        return self._offers.next_point(decided)

    def _job_end(self, segment_end: int) -> int:
        """Epoch at which a job (re)started now is told to stop (:func:`~syne_dyhpo.core.jobs.job_end`);
        always ``max_t`` with ``job_costs`` (a winning trial keeps running)."""
        if self.max_resource_attr is None or self.job_costs is not None:
            return self.max_t
        return job_end(segment_end, self.max_t, self._sampler.num_free(), self._workers_seen)

    def _start(self, config: dict[str, Any]) -> TrialSuggestion:
        self._sampler.mark_used(config)
        config = dict(config)
        if self.max_resource_attr is not None:
            config[self.max_resource_attr] = self._job_end(self._lifecycle.segment_end(None))
        return TrialSuggestion.start_suggestion(config)

    def _resume(self, record: TrialRecord, segment_end: int | None = None) -> TrialSuggestion:
        """:param segment_end: the epoch at which the trial is decided on next (None: the
        lifecycle's segment for a job started now)"""
        # Syne Tune sends no callback for a resume: mark it running now (several free workers)
        self._lifecycle.resume(record)
        if segment_end is not None:
            record.segment_end = segment_end
        if self._job_timer is not None:
            self._job_timer.job_started(record.trial_id, record.last_epoch, record.encoded)
        record.job_end = self._job_end(record.segment_end)
        if self.max_resource_attr is None:
            return TrialSuggestion.resume_suggestion(record.trial_id)
        record.config = {**record.config, self.max_resource_attr: record.job_end}
        return TrialSuggestion.resume_suggestion(record.trial_id, config=dict(record.config))

    # ----- the decision log -------------------------------------------------------------------

    def decision_log(self):
        """The decision log: one row per decision (columns and reasons:
        :mod:`syne_dyhpo.core.decision_log`), rows of earlier sessions (before ``Tuner.load``)
        included.

        :return: a pandas DataFrame
        """
        return self._log.dataframe()

    def attach_decision_log(
        self, folder: str | None, start_timestamp: float | None = None, backend=None, n_workers: int | None = None
    ) -> None:
        """Writes the decision log into ``folder`` from now on (appending to its
        :data:`~syne_dyhpo.core.decision_log.LOG_FILENAME`), timed from ``start_timestamp``
        (``time.time()`` when the run started). Done automatically inside a Syne Tune ``Tuner``
        (its experiment folder); front ends that drive the scheduler themselves call it.

        :param backend: the backend running the trials (where their checkpoints are)
        :param n_workers: the number of trials run at once
        """
        self._log.bind(
            folder, start_timestamp, run_info=run_info(self, backend, start_timestamp, n_workers)
        )

    def _bind_log(self, tuner) -> None:
        if tuner is None:
            self._log.bind(None)
            return
        self.attach_decision_log(**log_folder(tuner))

    def _join(self, tuner) -> None:
        """The first call of a session (a fresh run, or the first after ``Tuner.load``) met the
        Tuner running it (None: no Tuner): the decision log is written into its experiment
        folder, and a loaded scheduler's trials are restored (:meth:`restore`)."""
        if self._restore_pending and tuner is not None:
            self.restore(tuner)  # binds the log too
            return
        if self._restore_pending:
            self._restore_pending = False
            interrupted = [r.trial_id for r in self._obs.with_status(TrialStatus.INTERRUPTED)]
            if interrupted:
                logger.warning(
                    f"Trials {interrupted} were running when this scheduler was saved; no Syne Tune Tuner "
                    "called suggest(), so they stay interrupted. Call scheduler.restore(tuner) after "
                    "loading to resume them"
                )
        self._bind_log(tuner)

    # ----- continuing a saved tuner (Tuner.load) ---------------------------------------------

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling, which is how Syne Tune's ``Tuner.load`` brings back a saved tuner (it
        dill-pickles the whole tuner, scheduler included, while it runs). The jobs of trials that
        were running when the tuner was saved did not survive it, and the loaded tuner never polls
        them again: they become INTERRUPTED (their data kept, not running, not yet resumable), and
        :meth:`restore` is due before the next decision."""
        self.__dict__.update(state)
        for record in self._obs.with_status(TrialStatus.RUNNING):
            self._lifecycle.interrupt(record)
        self._restore_pending = True

    def restore(self, tuner) -> dict[str, list[int]]:
        """Restore hook: continues the trials of a tuner loaded with ``Tuner.load``. Interrupted
        trials are paused in the backend (Syne Tune resumes only paused trials) and become
        resumable at the epoch after their last result, where their checkpoint is; with
        ``LocalBackend``, orphaned jobs of the old tuner process are killed, results reported
        after the save are added, and trials started after the save are kept as archived curves
        (:func:`syne_dyhpo.core.restore.restore_tuner` has the details).

        Called automatically by the first :meth:`suggest` after unpickling when a Syne Tune
        ``Tuner`` calls it (the usual ``Tuner.load(path).run()``); call it yourself right after
        loading if something else drives the scheduler.

        :param tuner: the loaded ``syne_tune.Tuner`` holding this scheduler
        :return: trial ids per action taken (see ``restore_tuner``)
        """
        self._restore_pending = False
        self._log.new_session()
        self._bind_log(tuner)
        done = restore_tuner(self, self._lifecycle, tuner)
        now = self._log.now()
        for trial_id in done.get("resumable", []):
            self._log.add(now, trial_id, self._obs.trials[trial_id].last_epoch, reason="restored")
        for trial_id in done.get("unsaved", []):
            self._log.add(now, trial_id, reason="archived")
        return done

    def restore_interrupted(self) -> list[int]:
        """Restore hook of front ends that restart interrupted trials from their checkpoints
        themselves (Ray Tune's ``Tuner.restore``), called after unpickling instead of
        :meth:`restore`: the decision log starts a new session, and the trials that were running
        when this scheduler was saved become resumable at the epoch after their last result,
        where their checkpoint is.

        :return: ids of the trials made resumable
        """
        self._restore_pending = False
        self._log.new_session()
        now = self._log.now()
        resumable = []
        for record in self._obs.with_status(TrialStatus.INTERRUPTED):
            self._lifecycle.restore(record)
            if record.status is TrialStatus.PAUSED:
                resumable.append(record.trial_id)
                self._log.add(now, record.trial_id, record.last_epoch, reason="restored")
        return resumable

    def archive_unsaved_trial(self, config: dict[str, Any], results: Sequence[dict[str, Any]]) -> TrialRecord:
        """Keeps the results of a trial that its saved tuner never knew (started after the save,
        see :meth:`restore`) as an archived curve: a record with a fresh negative id, never
        resumed (the trial's id goes to the next trial started). Its configuration counts as used.

        :param config: the trial's configuration
        :param results: its reported results, in order
        :return: the archived record
        """
        archive_id = self._obs.new_archive_id()
        record = self._obs.add_trial(archive_id, dict(config), self._encoder.encode(config))
        for result in results:
            epoch, value = parse_result(archive_id, result, self.metric, self.time_attr)
            self._obs.add_result(archive_id, epoch, value)
        record.status = TrialStatus.FINISHED if record.last_epoch >= self.max_t else TrialStatus.COMPLETED
        self._sampler.mark_used(config)
        return record


def _resumed(decision: Decision) -> int:
    """The trial a RESUME decision resumes (:meth:`Decision.resume` sets it)."""
    assert decision.trial_id is not None, decision
    return decision.trial_id


def _started(decision: Decision) -> dict[str, Any]:
    """The configuration a START decision starts (:meth:`Decision.start` sets it)."""
    assert decision.config is not None, decision
    return decision.config
