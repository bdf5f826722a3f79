"""Continuing a saved Syne Tune 0.16 tuner (``Tuner.load(path).run()``) with a freeze-thaw
scheduler: the backend side of :meth:`FreezeThawScheduler.restore
<syne_dyhpo.core.scheduler.FreezeThawScheduler.restore>`.

What Syne Tune does (``tuner.py``, ``backend/``):

* ``Tuner.save`` dill-pickles the whole tuner (scheduler, backend, callbacks) every
  ``results_update_interval`` seconds after new results, and once more in ``run()``'s ``finally``
  block *before* ``trial_backend.stop_all()``. ``Tuner.load`` unpickles it, and ``run()`` starts
  with an empty set of running trials: trials that were running at the save are never polled
  again, and nothing tells the scheduler.
* The backend still records those trials as in progress (the simulator's may not even have a
  status yet), and ``resume_trial`` asserts that a trial is paused.
* Simulator (``UserBlackboxBackend`` and the other ``SimulatorBackend`` s): the trials' pending
  results stay in the event queue at times of the old run's clock, and are dropped unseen once
  the clock (restarted at 0) passes them. Pausing such a trial removes them; its checkpoint is
  the epoch passed with the pause (``result``).
* ``LocalBackend`` (and ``PythonBackend``): the unpickled ``subprocess.Popen`` handles name
  processes that are no children of the new tuner process. ``poll()`` reports them ended with
  exit code 0 (``ECHILD``), and pausing or stopping such a trial SIGKILLs whatever process has
  that pid by now. After a crash, the jobs themselves may still run (orphans, if only the tuner
  process was killed), keep writing checkpoints and std.out, or be dead. A trial's std.out may
  hold results the saved tuner never saw (reported after the save), and its checkpoint may be
  ahead of the last result the scheduler saw. Trials started after the save are unknown to the
  saved tuner, but their folders exist: the next trials started get the same ids and would
  append to their std.out and load their checkpoints.

What :func:`restore_tuner` does, before the loaded tuner starts or resumes anything:

1. ``LocalBackend``: kills orphaned jobs of this tuner's trials (found by their
   ``--st_checkpoint_dir`` argument, never by the saved pids); reads the std.out of every
   interrupted or paused trial past what the saved tuner had seen and hands those results to the
   scheduler and the tuner's callbacks, as the Tuner would have; keeps the results of trials
   started after the save as archived curves in the scheduler and moves their folders aside;
   removes a stop marker written after the save from trials that are resumable again.
2. Pauses every interrupted trial in the backend (``pause_trial``, with the last result the Tuner
   saw, which is what the simulator resumes from), after replacing ``LocalBackend``'s stale
   process handle so that no unrelated process is signalled. So also a trial the scheduler
   paused but the backend did not (a save in ``run()``'s ``finally`` block after an error).
3. Makes interrupted trials resumable in the scheduler: at the epoch after their last one, which
   is also where their checkpoint is (the jobs checkpoint before they report), so that the job
   started by the resume trains exactly the next segment (``max_resource_attr``) and no epoch
   twice.

Limits: ``Tuner.save`` writes ``tuner.dill`` in place, so a kill during that write leaves it
truncated and ``Tuner.load`` fails (Syne Tune's; nothing to restore from). A job killed between
writing its checkpoint and reporting that epoch resumes one epoch later (a gap in its curve;
with ``max_resource_attr``, if that epoch was its segment end, the resumed job has nothing to do
and the trial ends as completed). Other backends (e.g. SageMaker) get step 2 only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from syne_tune.backend.trial_status import Status, Trial

from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.core.trials import TrialLifecycle

logger = logging.getLogger(__name__)


def restore_tuner(scheduler, lifecycle: TrialLifecycle, tuner) -> dict[str, list[int]]:
    """Brings ``tuner``'s backend and ``scheduler`` (loaded together by ``Tuner.load``) back in
    step; see the module docstring.

    :param scheduler: the freeze-thaw scheduler, just unpickled (its trials that were running at
        the save are INTERRUPTED)
    :param lifecycle: the scheduler's trial life cycle (status transitions)
    :param tuner: the loaded ``syne_tune.Tuner`` whose backend ran the trials
    :return: trial ids per action: ``"resumable"`` (interrupted, now paused in the backend), ``"caught_up"``
        (results read from std.out), ``"orphans_killed"``, ``"unsaved"`` (started after the
        save: results archived, folder moved aside)
    """
    backend = tuner.trial_backend
    known = set(backend.trial_ids)
    records = {tid: r for tid, r in scheduler.observations.trials.items() if tid in known}
    interrupted = [tid for tid, r in records.items() if r.status is TrialStatus.INTERRUPTED]
    paused = [tid for tid, r in records.items() if r.status is TrialStatus.PAUSED]
    # a save taken inside the Tuner's result processing (run()'s finally block after an error)
    # may hold a trial the scheduler paused but the backend did not yet: treat it as interrupted
    interrupted += [tid for tid in paused if getattr(backend._trial_dict[tid], "status", None) != Status.paused]
    paused = [tid for tid in paused if tid not in interrupted]
    done: dict[str, list[int]] = {"resumable": [], "caught_up": [], "orphans_killed": [], "unsaved": []}
    # paused from here on (results read below are kept as late results of a paused trial); the
    # final status once they are in (FINISHED if they reach max_t) is set at the end
    for tid in interrupted:
        lifecycle.restore(records[tid])
    if _runs_local_processes(backend):
        unsaved = _unsaved_trial_ids(backend)
        folders = {str(backend.checkpoint_trial_path(tid)) for tid in [*backend.trial_ids, *unsaved]}
        done["orphans_killed"] = kill_orphaned_jobs(folders)
        for tid in unsaved:
            _archive_unsaved_trial(scheduler, backend, tid)
            done["unsaved"].append(tid)
        for tid in [*interrupted, *paused]:
            if _catch_up(scheduler, tuner, tid):
                done["caught_up"].append(tid)
            # a stop marker written after the save (e.g. the trial reached max_t then) would make
            # LocalBackend report the resumed job as stopped; the scheduler decides from its curve
            stop_marker = backend.trial_path(tid) / "stop"
            if records[tid].last_epoch < scheduler.max_t and stop_marker.exists():
                stop_marker.unlink()
        for tid in interrupted:
            backend.trial_subprocess[tid] = _EndedJob()
    for tid in interrupted:
        backend.pause_trial(trial_id=tid, result=tuner.last_seen_result_per_trial.get(tid))
        tuner.tuning_status.update(trial_status_dict={tid: (_trial(records[tid]), Status.paused)}, new_results=[])
        done["resumable"].append(tid)
    for tid in [*interrupted, *paused]:
        lifecycle.restore(records[tid])
    if any(done.values()):
        logger.info(f"Restored the loaded tuner: {done}")
    return done


def kill_orphaned_jobs(checkpoint_dirs: set[str]) -> list[int]:
    """Kills (SIGKILL, with their children) the processes started with one of
    ``checkpoint_dirs`` as an argument (``LocalBackend`` passes ``--st_checkpoint_dir <dir>``):
    jobs of the old tuner process that outlived it. They would otherwise keep training and
    writing the checkpoint a resumed job reads. Processes are found by their command line, not
    by the pids saved with the tuner, which may belong to unrelated processes by now; this
    process and its children (jobs of the running tuner) are spared.

    :param checkpoint_dirs: checkpoint folders of the trials whose jobs must be gone
    :return: pids killed
    """
    import psutil

    ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}  # this run's jobs
    victims = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.pid not in ours and any(arg in checkpoint_dirs for arg in cmdline):
            with contextlib.suppress(psutil.Error):
                victims += [*proc.children(recursive=True), proc]
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(victims, timeout=10)
    if victims:
        logger.warning(f"Killed {len(victims)} orphaned job process(es) of the saved tuner: {[p.pid for p in victims]}")
    return [p.pid for p in victims]


class _EndedJob:
    """Stands in for the unpickled ``subprocess.Popen`` handle of a ``LocalBackend`` job that ended
    with the old tuner process (or was killed by :func:`kill_orphaned_jobs`): the saved pid is no
    child of this process and may belong to an unrelated process by now, which ``LocalBackend``
    would SIGKILL when it pauses the trial. Its pid exists nowhere (``psutil`` raises
    ``NoSuchProcess``, and ``LocalBackend`` then calls :meth:`kill`, a no-op)."""

    pid = 2**31 - 1
    returncode = 0

    def poll(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def kill(self) -> None:
        pass

    def terminate(self) -> None:
        pass

    def send_signal(self, sig: int) -> None:
        pass


def _runs_local_processes(backend) -> bool:
    """``LocalBackend`` and its subclasses that run jobs as processes writing std.out
    (``PythonBackend``), not the simulator (also a ``LocalBackend`` subclass)."""
    from syne_tune.backend import LocalBackend
    from syne_tune.backend.simulator_backend.simulator_backend import SimulatorBackend

    return isinstance(backend, LocalBackend) and not isinstance(backend, SimulatorBackend)


def _trial(record) -> Trial:
    return Trial(trial_id=record.trial_id, config=dict(record.config), creation_time=datetime.now())


def _catch_up(scheduler, tuner, trial_id: int) -> bool:
    """Hands the results in the trial's std.out that the saved tuner had not seen (reported after
    the save, or after the pause decision) to the scheduler and the tuner's callbacks, as the
    Tuner does with polled results, and marks them seen in the backend so that they are not
    delivered again when the trial is resumed."""
    from syne_tune.report import retrieve

    backend = tuner.trial_backend
    try:
        results = retrieve(log_lines=backend.stdout(trial_id=trial_id))
    except FileNotFoundError:
        return False
    seen = backend._last_metric_seen_index[trial_id]
    new = results[seen:]
    if not new:
        return False
    trial = _trial(scheduler.observations.trials[trial_id])
    for result in new:
        decision = scheduler.on_trial_result(trial, result)  # not running: kept as data
        tuner.last_seen_result_per_trial[trial_id] = result
        for callback in tuner.callbacks:
            callback.on_trial_result(trial=trial, status=Status.paused, result=result, decision=decision)
    backend._last_metric_seen_index[trial_id] += len(new)
    tuner.tuning_status.update(trial_status_dict={trial_id: (trial, Status.paused)},
                               new_results=[(trial_id, r) for r in new])
    logger.info(f"trial_id {trial_id}: {len(new)} result(s) reported after the tuner was saved were added")
    return True


def _unsaved_trial_ids(backend) -> list[int]:
    """Ids of trials started after the save: folders of the ids the backend will hand out next."""
    ids = []
    tid = len(backend.trial_ids)
    while backend.trial_path(tid).exists():
        ids.append(tid)
        tid += 1
    return ids


def _archive_unsaved_trial(scheduler, backend, trial_id: int) -> None:
    """A trial the saved tuner never knew: its results are kept by the scheduler as an archived
    curve (never resumed), and its folder is moved aside, so that the trial started next with
    the same id starts clean."""
    from syne_tune.report import retrieve

    folder = Path(backend.trial_path(trial_id))
    config: dict[str, Any] | None = None
    try:
        with open(folder / "config.json") as f:
            config = json.load(f)
        results = retrieve(log_lines=backend.stdout(trial_id=trial_id))
    except (OSError, ValueError):
        results = []
    if config is not None and results:
        scheduler.archive_unsaved_trial(config, results)
    target = folder.with_name(f"{folder.name}.unsaved-{time.strftime('%Y%m%d-%H%M%S')}")
    folder.rename(target)
    logger.warning(
        f"trial_id {trial_id} was started after the tuner was saved: {len(results)} result(s) kept as "
        f"an archived curve, its folder moved to {target}"
    )
