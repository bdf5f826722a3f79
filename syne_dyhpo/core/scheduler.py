"""Freeze-thaw (pause-and-resume) scheduler for Syne Tune 0.16, shared by DyHPO and DPL.

Every trial advances one budget step (segment) at a time. At the end of each segment the
scheduler asks its :class:`~syne_dyhpo.core.decision.DecisionMaker` which candidate deserves
the next segment: a paused trial at its next budget, a new configuration at the first budget,
or the reporting trial itself. It answers CONTINUE if the reporting trial wins, PAUSE
otherwise (``suggest()`` then resumes or starts the winner), and STOP once a trial reaches
``max_t``, diverges (NaN/inf) or fails.

This module only translates Syne Tune's callbacks: the trial life cycle (statuses, segment
ends, late and stale reports) is :mod:`syne_dyhpo.core.trials`, the decision
:mod:`syne_dyhpo.core.decision`. Behaviour of Syne Tune 0.16 this relies on: a resume gets no
``on_trial_add`` callback, so a resumed trial is marked running inside ``suggest()``;
``suggest()`` returning None ends scheduling for good; PAUSE and STOP are followed by
``on_trial_remove``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import asdict
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

from syne_dyhpo.checks import checked_flag, checked_integer, checked_result_keys
from syne_dyhpo.core import decision_log
from syne_dyhpo.core.completion import IncumbentCompletion
from syne_dyhpo.core.depth_gate import DepthGate
from syne_dyhpo.core.decision import Decision, DecisionKind, DecisionMaker
from syne_dyhpo.core.observations import Observations, TrialRecord, TrialStatus
from syne_dyhpo.core.options import FreezeThawOptions, checked_instance
from syne_dyhpo.core.policy import SurrogatePolicy
from syne_dyhpo.core.restore import restore_tuner
from syne_dyhpo.core.trials import ResultAction, TrialLifecycle, check_epoch_within_max_t
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
        ``checkpoints``, ``promotion``, ``log_decisions``). Defaults to ``FreezeThawOptions()``
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
        budget_step, candidates, checkpoints, promotion = (
            options.budget_step, options.candidates, options.checkpoints, options.promotion)
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
        #: configurations offered again at the next decision, their keys and encodings
        self._kept: tuple[list[dict[str, Any]], list[tuple], np.ndarray] | None = None
        self.max_resource_attr = max_resource_attr
        self.checkpoints = checkpoints
        self.policy = policy
        self._encoder = ConfigEncoder(config_space)
        if max_resource_attr is not None and max_resource_attr in self._encoder.hp_names:
            raise ValueError(f"max_resource_attr '{max_resource_attr}' must not be a hyperparameter of config_space")
        self._sampler = CandidateSampler(self._encoder, candidates.configs)
        self._points_to_evaluate = self._checked_points(points_to_evaluate)
        self._obs = Observations(max_t=self.max_t, do_minimize=self.do_minimize)
        self._lifecycle = TrialLifecycle(
            self._obs,
            budget_step=self.budget_step,
            restart_if_lost=checkpoints.restart_if_lost,
            max_resource_attr=max_resource_attr,
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
        )
        self._pending: list[Decision] = []  # decisions waiting for a free worker
        self._new_trials_allowed = True
        self._workers_seen = 1  # most trials running at once, plus the free worker asking
        self._checkpoints_to_delete: list[int] = []
        self._restore_pending = False  # True once unpickled, until restore() is done
        self._log = decision_log.DecisionLog(enabled=options.log_decisions)
        self._last_row, self._last_decision = None, None  # the log's row of the last decision

    # ----- Syne Tune callbacks ---------------------------------------------------------------

    def suggest(self) -> TrialSuggestion | None:
        """The next trial to run on a free worker: the oldest decision still waiting for one,
        else a fresh decision among paused trials and new configurations."""
        if self._restore_pending:  # first call after Tuner.load: bring the backend back in step
            self._restore_from_calling_tuner()
        if not self._log.bound:  # the decision log's folder and clock: the calling Tuner's
            self._bind_log(decision_log.find_tuner(sys._getframe(1)))
        self._workers_seen = max(self._workers_seen, self.num_running() + 1)
        while self._pending:
            decision = self._pending.pop(0)
            if decision.kind is DecisionKind.RESUME and self._obs.trials[decision.trial_id].status.resumable:
                self._log.carried_out(decision)
                return self._resume(self._obs.trials[decision.trial_id])
            if decision.kind is DecisionKind.START and self._new_trials_allowed and self._sampler.is_free(decision.config):
                self._log.carried_out(decision)
                return self._start(decision.config)
            self._log.dropped(decision)
        decision = self._decide(reporting=None)
        if decision is None:
            logger.info("No paused trial and no new configuration left: nothing to suggest")
            return None
        if decision.kind is DecisionKind.RESUME:
            return self._resume(self._obs.trials[decision.trial_id])
        return self._start(decision.config)

    def on_trial_add(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is None:
            config = dict(trial.config)
            record = self._obs.add_trial(trial.trial_id, config, self._encoder.encode(config))
            self._sampler.mark_used(config)
        self._lifecycle.start(record)
        self._log.started(trial.trial_id, trial.config, ignore=self.max_resource_attr)
        job_end = trial.config.get(self.max_resource_attr) if self.max_resource_attr is not None else None
        record.job_end = self.max_t if job_end is None else int(job_end)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        if not self._log.enabled:
            return self._on_trial_result(trial, result)
        started = time.perf_counter()
        record = self._obs.trials.get(trial.trial_id)
        was_running = record is None or record.status is TrialStatus.RUNNING
        num_rows = len(self._log.rows)
        self._log.now(result)  # the clock of the result (simulator), for the rows it leads to
        answer = self._on_trial_result(trial, result)
        try:
            decision_log.row_of_result(self, trial.trial_id, result, answer, was_running, num_rows, started)
        except Exception as err:  # noqa: BLE001 - the log must never stop the tuning
            logger.warning(f"Decision log: the row of a result failed ({type(err).__name__}: {err})")
        return answer

    def _on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        record = self._obs.trials.get(trial.trial_id)
        if record is None:  # started by someone else (e.g. a restored tuner): adopt it
            self.on_trial_add(trial)
            record = self._obs.trials[trial.trial_id]
        epoch, value = self._parse_result(trial.trial_id, result)
        check_epoch_within_max_t(record, epoch, self.max_t, self.time_attr)
        action = self._lifecycle.on_result(record, epoch, value)
        if action is not ResultAction.DECIDE:
            return _ACTIONS[action]
        decision = self._decide(reporting=record)
        if decision is not None and decision.kind is DecisionKind.RESUME and decision.trial_id == record.trial_id:
            self._lifecycle.extend(record)
            if record.job_end > record.last_epoch:
                return SchedulerDecision.CONTINUE
            # the job stops itself at its segment end: pause it and resume it right away
            self._pending.insert(0, decision)
        elif decision is not None:
            self._pending.append(decision)
        if record.status is TrialStatus.RETIRED:  # ranked hopeless: will never be resumed
            return SchedulerDecision.STOP
        record.status = TrialStatus.PAUSED
        return SchedulerDecision.PAUSE

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_job_completed(record)

    def on_trial_remove(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_removed(record)

    def on_trial_error(self, trial: Trial):
        record = self._obs.trials.get(trial.trial_id)
        if record is not None:
            self._lifecycle.on_error(record)
            self._log.add(self._log.now(), trial.trial_id, record.last_epoch, reason="failed")

    def callback_for_checkpoint_removal(self, stop_criterion) -> TunerCallback | None:
        """Syne Tune hook: the callback deleting checkpoints of retired trials (used by the
        Tuner when the backend has ``delete_checkpoints=True``)."""
        return None if self.checkpoints.max_kept is None else _RetiredCheckpointRemoval(self)

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
            epoch_float = float(epoch_raw)
        except (TypeError, ValueError):
            raise ValueError(f"trial_id {trial_id}: '{self.time_attr}' is not a number: {epoch_raw!r}")
        if not math.isfinite(epoch_float) or epoch_float != int(epoch_float) or epoch_float < 1:
            raise ValueError(
                f"trial_id {trial_id}: '{self.time_attr}' must be a whole number of epochs >= 1 "
                f"(counted from 1), got {epoch_raw!r}"
            )
        return int(epoch_float), value

    def _decide(self, reporting: TrialRecord | None) -> Decision | None:
        """:meth:`_decide_unlogged`, and the decision's row in the decision log."""
        if not self._log.enabled:
            decision = self._decide_unlogged(reporting)
            self._decider.last_scored = None
            return decision
        started = time.perf_counter()
        before = decision_log.probe(self._decider, self.policy)
        self._last_row, self._last_decision = None, None
        decision = self._decide_unlogged(reporting)
        try:
            self._last_row, self._last_decision = decision_log.row_of_decision(
                self, reporting, decision, before, started
            )
        except Exception as err:  # noqa: BLE001 - the log must never stop the tuning
            logger.warning(f"Decision log: the row of a decision failed ({type(err).__name__}: {err})")
        finally:
            self._decider.last_scored = None  # the model and candidates are not kept
        return decision

    def _decide_unlogged(self, reporting: TrialRecord | None) -> Decision | None:
        """Asks the decision maker; retires the trials it ranked hopeless."""
        records = self._obs.with_status(TrialStatus.PAUSED)
        if reporting is not None:
            records.append(reporting)
        if self._new_trials_allowed:
            new_configs, new_keys, new_x = self._offered_configs()
        else:
            new_configs, new_keys, new_x = [], [], np.zeros((0, self._encoder.dim))
        point = self._next_point_to_evaluate()
        if point is not None:
            return Decision.start(point)
        num_started = len(self._obs.trials) + sum(d.kind is DecisionKind.START for d in self._pending)
        running = [r for r in self._obs.with_status(TrialStatus.RUNNING) if r is not reporting]
        decision = self._decider.decide(
            records, new_configs, new_x, num_started, running=running, num_workers=self._workers_seen
        )
        self._keep_best_new_configs(new_configs, new_keys, new_x, decision)
        for trial_id in () if decision is None else decision.retire:
            self._lifecycle.retire(self._obs.trials[trial_id])
            self._checkpoints_to_delete.append(trial_id)
        return decision

    def _offered_configs(self) -> tuple[list[dict[str, Any]], list[tuple], np.ndarray]:
        """New configurations for a decision, their keys and encodings: those kept from the
        last one (still free), then fresh draws up to ``num_candidates``."""
        if self._kept is None:
            return self._sampler.propose_with_keys(self._decider.rng, self.candidates.num_candidates)
        configs, keys, x = self._kept
        free = [i for i, key in enumerate(keys) if self._sampler.is_free_key(key)]
        on_offer = [keys[i] for i in free]
        fresh, fresh_keys, fresh_x = self._sampler.propose_with_keys(
            self._decider.rng, self.candidates.num_candidates - len(free), exclude=frozenset(on_offer)
        )
        return [configs[i] for i in free] + fresh, on_offer + fresh_keys, np.concatenate([x[free], fresh_x])

    def _keep_best_new_configs(
        self, new_configs: list[dict[str, Any]], new_keys: list[tuple], new_x: np.ndarray, decision: Decision | None
    ) -> None:
        """Keeps the ``candidates.num_kept`` new configurations the acquisition scored highest
        (the one to be started excepted); a decision made without the acquisition (completion,
        promotion, random start) keeps those kept before."""
        values = self._decider.new_config_values
        if self.candidates.num_kept == 0 or values is None or len(values) != len(new_configs):
            return
        started = decision.config if decision is not None and decision.kind is DecisionKind.START else None
        order = [i for i in np.argsort(-values, kind="stable") if new_configs[i] is not started][: self.candidates.num_kept]
        self._kept = ([new_configs[i] for i in order], [new_keys[i] for i in order], new_x[order])

    def _checked_points(self, points: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
        if points is None:
            return []
        if isinstance(points, dict) or not all(isinstance(p, dict) for p in points):
            raise ValueError(f"points_to_evaluate must be a list of configurations (dicts), got {points!r}")
        checked = []
        for i, point in enumerate(points):
            self._encoder.validate(point, where=f"points_to_evaluate[{i}]")
            config = self._encoder.complete(dict(point))
            if self._sampler.finite and self._encoder.key(config) not in self._sampler.keys():
                raise ValueError(f"points_to_evaluate[{i}] = {point} is not one of the candidate configurations")
            checked.append(config)
        return checked

    def _next_point_to_evaluate(self) -> dict[str, Any] | None:
        """The first of ``points_to_evaluate`` not started yet (and not already decided on)."""
        if not self._new_trials_allowed:
            return None
        decided = {self._encoder.key(d.config) for d in self._pending if d.kind is DecisionKind.START}
        for point in self._points_to_evaluate:
            key = self._encoder.key(point)
            if self._sampler.is_free(point) and key not in decided:
                return point
        return None

    def _job_end(self, segment_end: int) -> int:
        """Epoch at which a job (re)started now is told to stop (``max_resource_attr``): its
        segment end while configurations are plentiful, else ``max_t`` (see the class
        docstring: with few or no new configurations left, a free worker may find nothing to
        run, and Syne Tune stops asking)."""
        if self.max_resource_attr is None:
            return self.max_t
        free = self._sampler.num_free()
        if free is not None and free <= max(8, 4 * self._workers_seen):
            return self.max_t
        return segment_end

    def _start(self, config: dict[str, Any]) -> TrialSuggestion:
        self._sampler.mark_used(config)
        config = dict(config)
        if self.max_resource_attr is not None:
            config[self.max_resource_attr] = self._job_end(self._lifecycle.segment_end(None))
        return TrialSuggestion.start_suggestion(config)

    def _resume(self, record: TrialRecord) -> TrialSuggestion:
        # Syne Tune sends no callback for a resume: mark it running now (several free workers)
        self._lifecycle.resume(record)
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

    def attach_decision_log(self, folder: str | None, start_timestamp: float | None = None, backend=None,
                            n_workers: int | None = None) -> None:
        """Writes the decision log into ``folder`` from now on (appending to its
        :data:`~syne_dyhpo.core.decision_log.LOG_FILENAME`), timed from ``start_timestamp``
        (``time.time()`` when the run started). Done automatically inside a Syne Tune ``Tuner``
        (its experiment folder); front ends that drive the scheduler themselves call it.

        :param backend: the backend running the trials (where their checkpoints are)
        :param n_workers: the number of trials run at once
        """
        self._log.bind(folder, start_timestamp,
                       run_info=decision_log.run_info(self, backend, start_timestamp, n_workers))

    def _bind_log(self, tuner) -> None:
        if tuner is None:
            self._log.bind(None)
            return
        from syne_tune.constants import ST_TUNER_START_TIMESTAMP

        self.attach_decision_log(
            str(tuner.tuner_path), tuner.metadata.get(ST_TUNER_START_TIMESTAMP), backend=tuner.trial_backend,
            n_workers=tuner.n_workers,
        )

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
            epoch, value = self._parse_result(archive_id, result)
            self._obs.add_result(archive_id, epoch, value)
        record.status = TrialStatus.FINISHED if record.last_epoch >= self.max_t else TrialStatus.COMPLETED
        self._sampler.mark_used(config)
        return record

    def _restore_from_calling_tuner(self) -> None:
        """Runs :meth:`restore` for the Syne Tune ``Tuner`` whose loop called :meth:`suggest`.
        Syne Tune 0.16 hands a scheduler no reference to its tuner or backend, and after
        ``Tuner.load`` the first call the scheduler gets is ``suggest()`` from
        ``Tuner._schedule_new_task`` (directly, or through a wrapping scheduler): the tuner is
        found among the callers' frames. Without one, interrupted trials stay INTERRUPTED (kept,
        never resumed: the backend would refuse)."""
        from syne_tune import Tuner

        frame = sys._getframe(1)
        for _ in range(8):
            frame = frame.f_back
            if frame is None:
                break
            caller = frame.f_locals.get("self")
            if isinstance(caller, Tuner):
                self.restore(caller)
                return
        self._restore_pending = False
        interrupted = [r.trial_id for r in self._obs.with_status(TrialStatus.INTERRUPTED)]
        if interrupted:
            logger.warning(
                f"Trials {interrupted} were running when this scheduler was saved; no Syne Tune Tuner "
                "called suggest(), so they stay interrupted. Call scheduler.restore(tuner) after "
                "loading to resume them"
            )


class _RetiredCheckpointRemoval(TunerCallback):
    """Deletes the checkpoints of trials the scheduler retired (see ``PausedCheckpoints.max_kept``)."""

    def __init__(self, scheduler: FreezeThawScheduler):
        self._scheduler = scheduler
        self._backend = None

    def on_tuning_start(self, tuner):
        self._backend = tuner.trial_backend

    def on_loop_end(self):
        for trial_id in self._scheduler.pop_checkpoints_to_delete():
            self._backend.delete_checkpoint(trial_id)
            logger.info(f"Deleted checkpoint of retired trial_id {trial_id}")
