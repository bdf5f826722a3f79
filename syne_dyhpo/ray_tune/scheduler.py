"""The Ray Tune ``TrialScheduler`` of the freeze-thaw schedulers: translates Ray's trial events
into the core's Syne Tune calls, asks the core for decisions while a slot is free, and saves and
restores the whole scheduler with Ray's experiment checkpoints (see :mod:`syne_dyhpo.ray_tune`)."""

from __future__ import annotations

import logging
import os
import pickle
import time
from datetime import datetime
from typing import Any

import numpy as np
from ray.tune import TuneConfig
from ray.tune.experiment import Trial as RayTrial
from ray.tune.schedulers import TrialScheduler as RayTrialScheduler
from ray.tune.search import Searcher as RaySearcher
from syne_tune.backend.trial_status import Trial as SyneTrial
from syne_tune.optimizer.scheduler import SchedulerDecision

from syne_dyhpo.checks import checked_integer
from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.core.scheduler import FreezeThawScheduler
from syne_dyhpo.ray_tune.searcher import FreezeThawRaySearcher, _check_metric_mode

logger = logging.getLogger(__name__)

_DECISIONS = {
    SchedulerDecision.CONTINUE: RayTrialScheduler.CONTINUE,
    SchedulerDecision.PAUSE: RayTrialScheduler.PAUSE,
    SchedulerDecision.STOP: RayTrialScheduler.STOP,
}


class FreezeThawRayScheduler(RayTrialScheduler):
    """Ray Tune ``TrialScheduler`` running a freeze-thaw method (DyHPO, Deep Power Law) whose
    decisions are made by a Syne Tune :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`.

    Use it together with its paired searcher (:attr:`searcher`), most simply through
    :meth:`tune_config`. Limit the trials running at once with ``max_concurrent`` here. Ray's
    ``TuneConfig(max_concurrent_trials=...)`` is accepted only if it equals ``max_concurrent``
    (the searcher then does the limiting: Ray's ``ConcurrencyLimiter`` would count paused
    trials as running and block the run).

    :param scheduler: the core, e.g. :class:`~syne_dyhpo.DyHPO` (without ``max_resource_attr``).
        All policy decisions are its own; this class only translates events
    :param max_concurrent: most trials running at once; set it to the number of trials that
        fit on the cluster at once. Defaults to 2
    :param max_num_trials: most configurations started (each can be paused and resumed many
        times). None: no limit (then set ``max_total_epochs``, or the run only ends when every
        trial reached ``max_t``, which never happens on a continuous space)
    :param max_total_epochs: budget of the whole run in epochs (budget units) summed over all
        trials; once reached, running trials are stopped and paused ones are not resumed. Up
        to ``max_concurrent - 1`` epochs more may be reported by trials running at that time.
        None: no limit
    """

    def __init__(
        self,
        scheduler: FreezeThawScheduler,
        max_concurrent: int = 2,
        max_num_trials: int | None = None,
        max_total_epochs: int | None = None,
    ):
        super().__init__()
        if not isinstance(scheduler, FreezeThawScheduler):
            raise TypeError(f"scheduler must be a FreezeThawScheduler, got {type(scheduler).__name__}")
        if scheduler.max_resource_attr is not None:
            raise ValueError(
                "max_resource_attr is not supported under Ray Tune: Ray pauses a trainable right "
                "after the report answered with PAUSE, so segments are exact without it"
            )
        concurrent = checked_integer("max_concurrent", max_concurrent, 1)
        assert concurrent is not None  # None is refused
        max_num_trials = checked_integer("max_num_trials", max_num_trials, 1, allow_none=True)
        max_total_epochs = checked_integer("max_total_epochs", max_total_epochs, 1, allow_none=True)
        if max_num_trials is None and max_total_epochs is None:
            logger.warning(
                "Neither max_num_trials nor max_total_epochs is set: the run ends only when "
                "Ray stops it (e.g. time_budget_s or a stopper)"
            )
        self.core = scheduler
        self.max_concurrent = concurrent
        self.max_num_trials = max_num_trials
        self.max_total_epochs = max_total_epochs
        self._metric = scheduler.metric
        self._int_id: dict[str, int] = {}  # Ray trial id -> core trial id
        self._ray_id: dict[int, str] = {}
        self._stubs: dict[int, SyneTrial] = {}
        self._new_configs: list[dict[str, Any]] = []  # decided by the core, not yet handed to Ray
        self._handed_out: dict[str, dict[str, Any]] = {}  # Ray trial id -> config we suggested
        self._to_resume: list[int] = []  # resume decisions not yet carried out by Ray
        self._pausing: set[int] = set()  # answered PAUSE, Ray may still be saving
        self._paused_at: dict[int, int] = {}  # last epoch reported before the latest pause
        self._pool_exhausted = False
        self._budget_stop_done = False
        self._searcher = FreezeThawRaySearcher(self)
        self.num_pauses = 0
        self.num_resumes = 0
        self._log_attached = False
        self._started_at: float | None = None  # time.time() of the first decision
        self._restored = False  # unpickled by restore(): the core's restore hook is due
        self._requeued: set[str] | None = None  # trials Ray handed back after restore()
        #: restored trials whose last checkpoint Ray knows is behind their last result: the
        #: epochs they train again up to that result (int id -> last epoch the core has)
        self._replaying: dict[int, int] = {}
        self._nothing_at: tuple | None = None  # the state in which the core last had nothing to do
        #: (trial id, epoch it was paused after, first epoch reported after the resume)
        self.resume_log: list[tuple[int, int, int]] = []

    # ----- pairing with Ray Tune -------------------------------------------------------------

    @property
    def searcher(self) -> FreezeThawRaySearcher:
        """The paired Ray ``Searcher``: pass it as ``search_alg`` together with this scheduler."""
        return self._searcher

    @property
    def mode(self) -> str:
        return self.core.metric_mode()

    def tune_config(self, **kwargs: Any) -> TuneConfig:
        """A Ray ``TuneConfig`` with this scheduler, its searcher, the metric and mode, and no
        trial limit of Ray's own (``num_samples=-1``; ``max_num_trials`` limits them).

        Also sets the environment variable ``TUNE_MAX_PENDING_TRIALS_PG`` (trials Ray starts
        at once) to ``max_concurrent`` unless it is set already: Ray's default for a custom
        searcher is 1, which serialises trial starts and resumes.

        :param kwargs: further ``TuneConfig`` arguments (e.g. ``time_budget_s``,
            ``reuse_actors``); ``max_concurrent_trials`` only if it equals ``max_concurrent``
        """
        self._check_max_concurrent_trials(kwargs.get("max_concurrent_trials"))
        kwargs.setdefault("num_samples", -1)
        self._set_max_pending_trials()
        return TuneConfig(
            metric=self.core.metric, mode=self.mode, search_alg=self._searcher, scheduler=self, **kwargs
        )

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        _check_metric_mode(self.core, metric, mode)
        self._set_max_pending_trials()  # Ray calls this before it reads the variable
        return True

    def _set_max_pending_trials(self) -> None:
        """Ray starts at most ``TUNE_MAX_PENDING_TRIALS_PG`` trials (actors) at a time, 1 for a
        custom searcher: with one-epoch segments, starts and resumes would be serialised. Set to
        ``max_concurrent`` unless the environment sets it already."""
        os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", str(self.max_concurrent))

    def _check_max_concurrent_trials(self, max_concurrent_trials: int | None) -> None:
        if max_concurrent_trials is not None and max_concurrent_trials != self.max_concurrent:
            raise ValueError(
                f"TuneConfig(max_concurrent_trials={max_concurrent_trials}) differs from the freeze-thaw "
                f"scheduler's max_concurrent={self.max_concurrent}: set the number of trials running at "
                "once with max_concurrent of the scheduler (e.g. ray_scheduler(..., max_concurrent="
                f"{max_concurrent_trials})) and leave max_concurrent_trials unset"
            )

    # ----- Ray Tune's experiment checkpoints (Tuner.restore) -----------------------------------

    def save(self, checkpoint_path: str) -> None:
        """Writes this scheduler's whole state (core, trials, decision log) to
        ``checkpoint_path``. Ray calls it through the paired searcher with every experiment
        checkpoint (``Searcher.save``), into the experiment folder.

        :param checkpoint_path: file to write
        """
        state = {k: v for k, v in self.__dict__.items() if k != "_searcher"}
        with open(checkpoint_path, "wb") as f:
            pickle.dump(state, f)

    def restore(self, checkpoint_path: str) -> None:
        """Takes the state written by :meth:`save`; Ray calls it through the paired searcher in
        ``Tuner.restore``, before it hands back the experiment's trials (``on_trial_add``). The
        trials running when the state was saved are resumable again at the epoch after their last
        result (Ray restarts every unfinished trial from its last checkpoint, when this scheduler
        chooses it), and the decision log continues with a new session.

        :param checkpoint_path: file written by :meth:`save`
        """
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.__dict__.update(state)
        # Ray restarted: nothing is being paused or resumed, every unfinished trial is PENDING
        self._to_resume.clear()
        self._pausing.clear()
        self._log_attached = False  # the restored experiment's folder, told by its first trial
        self._started_at = time.time()  # the log's clock restarts with each session
        self._nothing_at = None
        self._restored = True
        self._requeued = set()

    # ----- Ray TrialScheduler callbacks --------------------------------------------------------

    def _attach_decision_log(self, trial: RayTrial) -> None:
        """The core's decision log goes into Ray's experiment folder (the trial's storage says
        where; with remote storage, the driver's staging folder, which Ray copies there). A
        restored run starts its new session first, so that the log, once bound, continues after
        the sessions its file holds."""
        self._log_attached = True
        self._continue_restored_run()
        storage = getattr(trial, "storage", None)
        if storage is None:
            return
        local = getattr(storage.storage_filesystem, "type_name", "local") == "local"
        folder = storage.experiment_fs_path if local else storage.experiment_driver_staging_path
        self.core.attach_decision_log(folder, start_timestamp=self._started_at, n_workers=self.max_concurrent)

    def _continue_restored_run(self) -> None:
        """After :meth:`restore`: the core's restore hook (new log session; the trials running at
        the save become paused, resumed from the epoch after their last result)."""
        if not self._restored:
            return
        self._restored = False
        for int_id in self.core.restore_interrupted():
            self._paused_at[int_id] = self.core.observations.trials[int_id].last_epoch

    def on_trial_add(self, tune_controller: Any, trial: RayTrial) -> None:
        if not self._log_attached:
            self._attach_decision_log(trial)
        if trial.trial_id in self._int_id:
            if self._requeued is not None:  # handed back by Ray's restore, PENDING
                self._requeued.add(trial.trial_id)
                _drop_stale_decisions(tune_controller, trial)
                self._replay_from_checkpoint(self._int_id[trial.trial_id], trial)
            return
        config = self._handed_out.pop(trial.trial_id, None)
        if config is None:  # not suggested by us (e.g. a restored experiment): adopt it
            config = {k: v for k, v in trial.config.items() if k in self.core.config_space}
        int_id = len(self._int_id)
        self._int_id[trial.trial_id] = int_id
        self._ray_id[int_id] = trial.trial_id
        self._stubs[int_id] = SyneTrial(trial_id=int_id, config=dict(config), creation_time=datetime.now())
        self.core.on_trial_add(self._stubs[int_id])

    def _replay_from_checkpoint(self, int_id: int, trial: RayTrial) -> None:
        """Ray registers a reported checkpoint only after the scheduler answered its result, so
        an experiment saved in between (an interrupt) holds a trial whose last checkpoint is an
        epoch behind its last result (none at all after its first epoch). Restored, the trial
        trains those epochs again: they are answered CONTINUE without reaching the core, which
        has them already."""
        record = self.core.observations.trials.get(int_id)
        checkpoint = getattr(trial, "latest_checkpoint_result", None)
        if checkpoint is None:
            epoch = 0  # Ray restarts it from scratch
        elif self.core.time_attr in (checkpoint.metrics or {}):
            epoch = int(checkpoint.metrics[self.core.time_attr])
        else:
            return  # the checkpoint's epoch is unknown (metrics not stored)
        if record is not None and epoch < record.last_epoch:
            self._replaying[int_id] = record.last_epoch

    def on_trial_result(self, tune_controller: Any, trial: RayTrial, result: dict[str, Any]) -> str:
        if trial.trial_id not in self._int_id:
            self.on_trial_add(tune_controller, trial)
        int_id = self._int_id[trial.trial_id]
        if int_id in self._replaying and self.core.time_attr in result:
            if int(result[self.core.time_attr]) <= self._replaying[int_id]:
                return RayTrialScheduler.CONTINUE  # trained again from an older checkpoint
            del self._replaying[int_id]
        if int_id in self._paused_at and self.core.time_attr in result:
            self.resume_log.append((int_id, self._paused_at.pop(int_id), int(result[self.core.time_attr])))
            self.num_resumes += 1
        decision = _DECISIONS[self.core.on_trial_result(self._stubs[int_id], result)]
        if self._budget_spent() and decision != RayTrialScheduler.STOP:
            decision = RayTrialScheduler.STOP
        if decision == RayTrialScheduler.PAUSE:
            self.num_pauses += 1
            self._pausing.add(int_id)
            self._paused_at[int_id] = self.core.observations.trials[int_id].last_epoch
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: RayTrial, result: dict[str, Any]) -> None:
        int_id = self._int_id.get(trial.trial_id)
        if int_id is not None:
            self.core.on_trial_complete(self._stubs[int_id], result)
            self._forget_resume(int_id)

    def on_trial_error(self, tune_controller: Any, trial: RayTrial) -> None:
        int_id = self._int_id.get(trial.trial_id)
        if int_id is not None:
            self.core.on_trial_error(self._stubs[int_id])
            self._forget_resume(int_id)

    def on_trial_remove(self, tune_controller: Any, trial: RayTrial) -> None:
        # a PAUSED or PENDING trial was stopped (by us at the end of the budget, or by Ray)
        int_id = self._int_id.get(trial.trial_id)
        if int_id is not None:
            self.core.end_trial(int_id)  # Ray will never run it again
            self._forget_resume(int_id)

    def choose_trial_to_run(self, tune_controller: Any) -> RayTrial | None:
        if self._budget_spent():
            self._stop_paused_trials(tune_controller)
            return None
        self.make_decisions()
        if self._requeued is not None:
            self._hold_requeued_trials(tune_controller)
        for int_id in list(self._to_resume):
            trial = tune_controller.get_trial(self._ray_id[int_id])
            status = None if trial is None else trial.status
            if status == RayTrial.PAUSED:
                self._pausing.discard(int_id)
                return trial
            if status == RayTrial.PENDING and int_id not in self._pausing:
                return trial  # staged by Ray, waiting for resources (choose must be idempotent)
            if status == RayTrial.RUNNING and int_id in self._pausing:
                continue  # still saving the checkpoint of its pause; resume it afterwards
            self._to_resume.remove(int_id)
            if status != RayTrial.RUNNING:  # ended meanwhile: never resumable again
                self.core.end_trial(int_id)
        return None

    def _hold_requeued_trials(self, tune_controller: Any) -> None:
        """After :meth:`restore`, Ray hands back every unfinished trial as PENDING, and it starts
        PENDING trials by itself: those the core did not decide to resume are set to PAUSED
        (resumed when it decides so), those it ended are stopped."""
        requeued, self._requeued = self._requeued, None
        if requeued is None:
            return
        for ray_id in requeued:
            trial = tune_controller.get_trial(ray_id)
            int_id = self._int_id[ray_id]
            if trial is None or trial.status != RayTrial.PENDING or int_id in self._to_resume:
                continue
            status = self.core.trial_status(int_id)
            if status in (TrialStatus.PAUSED, TrialStatus.RETIRED):
                tune_controller._set_trial_status(trial, RayTrial.PAUSED)
            else:
                tune_controller.stop_trial(trial)

    def debug_string(self) -> str:
        counts = self.core.observations.metadata()["status_counts"]
        return (
            f"{type(self.core).__name__} (freeze-thaw): {len(self._int_id)} trials {counts}, "
            f"{self.num_pauses} pauses, {self.num_resumes} resumes, "
            f"{self.core.observations.num_observations} epochs, best {self.core.metric}="
            f"{self.core.observations.best_value()}"
        )

    # ----- decisions ---------------------------------------------------------------------------

    def make_decisions(self) -> None:
        """Asks the core for decisions while a slot is free: each is either a new
        configuration (queued for the searcher) or a paused trial to resume (carried out by
        :meth:`choose_trial_to_run`). Called by Ray through the searcher and the scheduler."""
        if self._budget_spent():
            return
        if self._started_at is None:
            self._started_at = time.time()
        self._continue_restored_run()  # restored without trials: no on_trial_add came
        while self._free_slots() > 0:
            may_start_new = self._may_start_new()
            # Ray asks at every step of its loop: once the core had nothing to do, it is asked
            # again only when that may have changed (its log would fill with "nothing" rows)
            obs = self.core.observations
            num_paused = len(obs.with_status(TrialStatus.PAUSED))
            state = (obs.num_observations, self.core.num_running(), num_paused, may_start_new)
            if state == self._nothing_at:
                return
            self.core.allow_new_trials(may_start_new)
            suggestion = self.core.suggest()
            if suggestion is None:
                self._nothing_at = state
                if may_start_new:
                    self._pool_exhausted = True  # finite candidate set used up
                return
            if suggestion.spawn_new_trial_id:
                self._new_configs.append(dict(suggestion.config))
            else:
                self._to_resume.append(int(suggestion.checkpoint_trial_id))

    def next_new_config(self, ray_trial_id: str) -> dict[str, Any] | str | None:
        """The searcher's answer: a new configuration, ``Searcher.FINISHED`` if no new
        configuration will ever be started again, or None (not now)."""
        self.make_decisions()
        if self._new_configs:
            config = self._new_configs.pop(0)
            self._handed_out[ray_trial_id] = config
            return dict(config)
        if self._budget_spent() or not self._may_start_new() or self._pool_exhausted:
            return RaySearcher.FINISHED
        return None

    def _free_slots(self) -> int:
        busy = self.core.num_running() + len(self._new_configs)
        free = self.max_concurrent - busy
        if self.max_total_epochs is not None:  # every running trial will use >= 1 more epoch
            free = min(free, self.max_total_epochs - self.core.observations.num_observations - busy)
        return free

    def _may_start_new(self) -> bool:
        if self._pool_exhausted:
            return False
        return self.max_num_trials is None or len(self._int_id) + len(self._new_configs) < self.max_num_trials

    def _budget_spent(self) -> bool:
        return self.max_total_epochs is not None and self.core.observations.num_observations >= self.max_total_epochs

    def _forget_resume(self, int_id: int) -> None:
        self._replaying.pop(int_id, None)
        if int_id in self._to_resume:
            self._to_resume.remove(int_id)
        self._pausing.discard(int_id)
        self._paused_at.pop(int_id, None)

    def _stop_paused_trials(self, tune_controller: Any) -> None:
        """Once the epoch budget is spent: stops every paused or pending trial (Ray ends a run
        only when no trial is left to run), at each call those answered PAUSE before and still
        saving their checkpoint then."""
        if self._budget_stop_done:
            candidates = list(self._pausing)
        else:
            self._budget_stop_done = True
            for config in self._new_configs:  # decided, never to be started: their log rows end
                self.core.start_given_up(config)
            self._new_configs.clear()
            self.core.drop_pending()  # decided on a result, never to be carried out
            candidates = list(self._ray_id)
        for int_id in candidates:
            trial = tune_controller.get_trial(self._ray_id[int_id])
            if trial is not None and trial.status in (RayTrial.PAUSED, RayTrial.PENDING):
                logger.info(f"Epoch budget spent: stopping paused trial {trial.trial_id}")
                self._pausing.discard(int_id)
                tune_controller.stop_trial(trial)

    # ----- results -----------------------------------------------------------------------------

    def best_trial(self) -> tuple[str, dict[str, Any], float] | None:
        """(Ray trial id, config, best metric value over its epochs) of the best trial seen,
        or None before the first finite result."""
        best = None
        obs = self.core.observations
        for int_id, record in obs.trials.items():
            scores = np.asarray(record.scores, dtype=float)
            scores = scores[np.isfinite(scores)]
            if len(scores) and (best is None or scores.max() > best[0]):
                best = (float(scores.max()), int_id)
        if best is None:
            return None
        value = best[0] if not self.core.do_minimize else -best[0]
        int_id = best[1]
        return self._ray_id[int_id], dict(obs.trials[int_id].config), value

    def ray_trial_id(self, core_trial_id: int) -> str:
        """The Ray trial id of a core (integer) trial id."""
        return self._ray_id[core_trial_id]


def _drop_stale_decisions(tune_controller: Any, trial: RayTrial) -> None:
    """Ray's restored controller keeps the decisions it had deferred for trials that were saving
    a checkpoint when the experiment was saved (e.g. our PAUSE), and would carry them out on the
    trial restarted from its checkpoint, at its first report: they are dropped."""
    for name in ("_cached_trial_decisions", "_queued_trial_decisions"):
        decisions = getattr(tune_controller, name, None)
        if isinstance(decisions, dict):
            decisions.pop(trial.trial_id, None)
