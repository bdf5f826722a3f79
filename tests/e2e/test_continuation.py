"""Continuing a saved tuning run with Syne Tune's ``Tuner.load`` (issue 10, items 2 and 8).

Item 2: a real ``Tuner`` on Syne Tune's simulator saves itself (``save_tuner=True``) with trials
in flight; ``Tuner.load`` + ``run()`` must resume those trials where their curves stopped
instead of leaving them RUNNING for ever.

Item 8: a real tuning process (DyHPO, ``LocalBackend``, ``tests/e2e/continuation_job.py``) is
SIGKILLed mid-run; ``Tuner.load`` + ``run()`` in this process must keep every result observed
before the kill and resume the paused and interrupted trials from their checkpoints, without
training any epoch twice. With ``launch/train_mlp.py`` the whole process group is killed (what a
user should do); with the fast ``tests/e2e/fake_train.py`` only the tuner process, so its jobs live
on as orphans that the restore must kill, and trials started after the last save must neither
lose what they reported nor collide with the trials that get their ids.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from syne_tune import Tuner
from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
from syne_tune.blackbox_repository import UserBlackboxBackend
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
from syne_tune.config_space import choice, randint
from syne_tune.tuner_callback import TunerCallback

from syne_dyhpo import CandidateOptions, DeepPowerLaw, DyHPO, FreezeThawOptions
from syne_dyhpo.core.observations import TrialStatus

pytestmark = pytest.mark.slow

SIM_MAX_T = 5
LRS = [1e-3, 3e-3, 1e-2, 3e-2]
WIDTHS = [16, 64, 256]
NUM_CONFIGS = len(LRS) * len(WIDTHS)  # a small finite space: the run ends when all are done


def tiny_blackbox(seed: int = 0) -> BlackboxTabular:
    """Every configuration of a 12-point space with crossing power-law curves (valid_error) and
    per-epoch times."""
    rng = np.random.RandomState(seed)
    rows = [dict(lr=lr, width=w) for lr in LRS for w in WIDTHS]
    t = np.arange(1, SIM_MAX_T + 1, dtype=float)
    y = np.zeros((len(rows), 1, SIM_MAX_T, 2))
    for i, r in enumerate(rows):
        d = abs(np.log10(r["lr"]) - np.log10(1e-2))
        a = 0.05 + 0.06 * d + 0.03 * (64 / r["width"]) ** 0.5
        c = 0.2 + rng.rand()
        y[i, 0, :, 0] = a + (0.9 - a) * t ** (-c) + 0.002 * rng.randn(SIM_MAX_T)
        y[i, 0, :, 1] = (0.5 + r["width"] / 64) * t
    return BlackboxTabular(
        hyperparameters=pd.DataFrame(rows),
        configuration_space={"lr": choice(LRS), "width": choice(WIDTHS)},
        fidelity_space={"epoch": randint(1, SIM_MAX_T)},
        objectives_evaluations=y,
        fidelity_values=np.arange(1, SIM_MAX_T + 1),
        objectives_names=["valid_error", "elapsed_time"],
    )


class StopAfterEpochs:
    """Stop criterion: the scheduler has seen ``epochs`` epochs and (if ``with_curve_in_flight``)
    a trial with at least one epoch is running, so that the saved tuner holds an in-flight trial
    whose curve must continue. Gives up waiting for that 40 epochs later (the test then reports
    the missing precondition)."""

    def __init__(self, scheduler, epochs: int, with_curve_in_flight: bool = False):
        self.scheduler = scheduler
        self.epochs = epochs
        self.with_curve_in_flight = with_curve_in_flight

    def __call__(self, status) -> bool:
        obs = self.scheduler.observations
        if obs.num_observations < self.epochs:
            return False
        if not self.with_curve_in_flight or obs.num_observations >= self.epochs + 40:
            return True
        return any(r.status is TrialStatus.RUNNING and r.last_epoch >= 1 for r in obs.trials.values())


def epochs_per_trial(df: pd.DataFrame) -> dict[int, list[int]]:
    return {int(tid): g["epoch"].astype(int).tolist() for tid, g in df.groupby("trial_id", sort=True)}


@pytest.mark.parametrize(
    "method, n_workers, max_resource_attr",
    [("DyHPO", 3, None), ("DeepPowerLaw", 2, "max_epoch")],
    ids=["DyHPO-3-workers", "DPL-2-workers-max_resource_attr"],
)
def test_simulator_tuner_load_resumes_trials_in_flight_at_save(
    tmp_path, monkeypatch, method, n_workers, max_resource_attr
):
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    bb = tiny_blackbox()
    kwargs = {} if max_resource_attr is None else {"max_resource_attr": max_resource_attr}
    cls = {"DyHPO": DyHPO, "DeepPowerLaw": DeepPowerLaw}[method]
    scheduler = cls(
        bb.configuration_space,
        metric="valid_error",
        do_minimize=True,
        time_attr="epoch",
        max_t=SIM_MAX_T,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
        random_seed=3,
        **kwargs,
    )
    backend = UserBlackboxBackend(
        blackbox=bb, elapsed_time_attr="elapsed_time", tuner_sleep_time=0.01, seed=0, **kwargs
    )
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=StopAfterEpochs(scheduler, 15, True),
        n_workers=n_workers,
        sleep_time=0,
        callbacks=[SimulatorCallback()],
        save_tuner=True,
        tuner_name=f"continue-{method.lower()}",
        print_update_interval=1e9,
    )
    tuner.run()  # its finally block saves the tuner (with the trials in flight), then stops them

    # what the saved tuner holds: the scheduler is not told about Tuner.run's final stop_all
    in_flight = {
        tid: r.last_epoch for tid, r in scheduler.observations.trials.items() if r.status is TrialStatus.RUNNING
    }
    assert any(e >= 1 for e in in_flight.values()), f"precondition: no curve in flight at save: {in_flight}"
    num_rows_run1 = len(tuner.callbacks[0].dataframe())

    loaded = Tuner.load(str(tuner.tuner_path))
    restored = loaded.scheduler
    assert restored.observations.num_observations == scheduler.observations.num_observations
    # their jobs did not survive the save: not running any more (interrupted, resumable once the
    # loaded tuner runs)
    assert restored.num_running() == 0
    # every trial can reach max_t: the run ends when the finite space is used up
    loaded.stop_criterion = StopAfterEpochs(restored, NUM_CONFIGS * SIM_MAX_T + 1)
    loaded.run()

    obs = restored.observations
    statuses = {tid: r.status for tid, r in obs.trials.items()}
    # nothing stuck: every trial, including those in flight at save, was resumed until max_t
    stuck = {t: s.value for t, s in statuses.items() if s is not TrialStatus.FINISHED}
    assert not stuck, f"trials not finished (in flight at save: {in_flight}): {stuck}"
    assert len(obs.trials) == NUM_CONFIGS
    df = loaded.callbacks[0].dataframe()  # results of both runs (the callback was saved too)
    per_trial = epochs_per_trial(df)
    for tid, epochs in per_trial.items():
        # no epoch reported twice, none skipped: a resumed trial continues after its last epoch
        assert epochs == list(range(1, SIM_MAX_T + 1)), f"trial {tid}: {epochs}"
    run2 = epochs_per_trial(df.iloc[num_rows_run1:])
    for tid, last in in_flight.items():
        if last < SIM_MAX_T:
            assert run2[tid][0] == last + 1, f"trial {tid} in flight at save after epoch {last}: run 2 gave {run2[tid]}"
    # every epoch simulated was seen exactly once, by the scheduler and in the results
    assert len(df) == obs.num_observations == NUM_CONFIGS * SIM_MAX_T
    for tid, record in obs.trials.items():
        assert record.last_epoch == SIM_MAX_T and not np.isnan(record.scores).any(), tid
    print(
        f"[{method}] in flight at save (trial: last epoch): {in_flight}; run 2 resumed them at "
        f"{ {t: run2[t][0] for t in in_flight} }",
        file=sys.__stdout__,
    )


def test_unpickled_without_a_tuner_keeps_interrupted_trials_and_their_data(caplog):
    """Unpickled and driven by something else than a Syne Tune Tuner (no backend to restore):
    the trial running at pickling is interrupted, its data kept, and never resumed (its backend
    would refuse), with a warning naming it."""
    import pickle

    from conftest import make_trial
    from syne_tune.config_space import uniform

    scheduler = DyHPO(
        {"x": uniform(0, 1)},
        metric="loss",
        max_t=4,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=4), budget_step=2),
        random_seed=0,
    )
    suggestion = scheduler.suggest()
    trial = make_trial(0, suggestion.config)
    scheduler.on_trial_add(trial)
    assert scheduler.on_trial_result(trial, {"epoch": 1, "loss": 0.5}) == "CONTINUE"  # inside its segment
    clone = pickle.loads(pickle.dumps(scheduler))
    assert clone.trial_status(0) is TrialStatus.INTERRUPTED and clone.observations.trials[0].scores == [-0.5]
    assert scheduler.trial_status(0) is TrialStatus.RUNNING  # the original is untouched
    suggestion = clone.suggest()
    assert suggestion.spawn_new_trial_id  # a new configuration, not a resume of trial 0
    assert clone.trial_status(0) is TrialStatus.INTERRUPTED
    assert "Trials [0] were running when this scheduler was saved" in caplog.text


# ----- item 8: a real tuning process killed with SIGKILL ----------------------------------------

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parent


def printed_epochs(trial_folder: Path) -> list[int]:
    """Epochs the trial's jobs reported (printed to its std.out), over all its processes."""
    from syne_tune.report import retrieve

    out = trial_folder / "std.out"
    return [int(r["epoch"]) for r in retrieve(out.read_text().splitlines())] if out.exists() else []


def checkpoint_epoch(trial_folder: Path) -> int:
    """Epoch of the trial's checkpoint (0: none): ``train_mlp.py``'s or ``fake_train.py``'s."""
    from syne_dyhpo.checkpointing import load_checkpoint

    fake = trial_folder / "checkpoints" / "checkpoint.json"
    if fake.exists():
        return json.loads(fake.read_text())["epoch"]
    ckpt = load_checkpoint(trial_folder / "checkpoints")
    return 0 if ckpt is None else ckpt.epoch


def processes_using(path: Path) -> list:
    """Live (non-zombie) processes with ``path`` in their command line: the tuning job's trials."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if str(path) in cmdline and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def wait_for(predicate, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class RunningJobs(TunerCallback):
    """Trials whose job runs (started or resumed, not paused or stopped since), and the trials
    started."""

    def __init__(self):
        self.trial_ids: set[int] = set()
        self.started: list[int] = []

    def on_start_trial(self, trial):
        self.trial_ids.add(trial.trial_id)
        self.started.append(trial.trial_id)

    def on_resume_trial(self, trial):
        self.trial_ids.add(trial.trial_id)

    def on_trial_result(self, trial, status, result, decision):
        if decision != "CONTINUE":
            self.trial_ids.discard(trial.trial_id)


class KilledRun:
    """A tuning job of ``tests/e2e/continuation_job.py`` run until its kill point, and what it left
    behind once killed (read before anything is continued)."""

    def __init__(self, tmp_path: Path, scenario: str):
        import continuation_job as job

        self.job = job
        self.scenario = job.Scenario(scenario)
        self.folder = tmp_path / "syne-tune"
        self.folder.mkdir()
        self.tuner_path = self.folder / job.TUNER_NAME
        env = {
            **os.environ,
            "SYNETUNE_FOLDER": str(self.folder),
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        self.log = tmp_path / "job.log"
        with open(self.log, "w") as log:
            # its own session, hence process group: the LocalBackend's training jobs join it
            self.proc = subprocess.Popen(
                [sys.executable, "-c", f"import continuation_job; continuation_job.main({scenario!r})"],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.t0 = time.monotonic()

    def wait_for_kill_point(self, timeout: float) -> None:
        wait_for(
            lambda: (self.folder / "ready.json").exists() or self.proc.poll() is not None, timeout, "the kill point"
        )
        assert self.proc.poll() is None, self.log.read_text()[-3000:]

    def kill(self, whole_group: bool) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL) if whole_group else os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.seconds = time.monotonic() - self.t0
        self.ready = json.loads((self.folder / "ready.json").read_text())
        self.saved = {int(t): v for t, v in json.loads((self.folder / "saved.json").read_text())["trials"].items()}
        self.observed = [json.loads(line) for line in (self.folder / "observed.jsonl").read_text().splitlines()]
        self.in_flight_at_save = {t for t, (status, _) in self.saved.items() if status == "running"}
        self.paused_at_save = {t for t, (status, _) in self.saved.items() if status == "paused"}
        folders = {int(p.name): p for p in self.tuner_path.iterdir() if p.is_dir() and p.name.isdigit()}
        self.printed = {t: printed_epochs(p) for t, p in folders.items()}
        self.checkpoint = {t: checkpoint_epoch(p) for t, p in folders.items()}
        self.unsaved = sorted(t for t in folders if t not in self.saved)
        self.unsaved_configs = {t: json.loads((folders[t] / "config.json").read_text()) for t in self.unsaved}

    def cleanup(self) -> None:
        """Kills whatever is left of the job's process group (nothing, if the test passed)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()

    def load(self, monkeypatch) -> Tuner:
        """``Tuner.load`` in this process, with the kill point and snapshots turned off."""
        monkeypatch.chdir(self.folder.parent)  # Syne Tune's num_gpu.py writes std.out there
        monkeypatch.setenv("SYNETUNE_FOLDER", str(self.folder))
        loaded = Tuner.load(str(self.tuner_path))
        for callback in loaded.callbacks:
            if isinstance(callback, self.job.KillPoint):
                callback.armed = False
        loaded.trial_backend.snapshot_file = None
        return loaded

    def check_continued(self, loaded: Tuner, running_at_end: RunningJobs) -> dict[int, int]:
        """Asserts what holds after any continuation; returns the epoch each trial known to the
        save was resumed at."""
        obs = loaded.scheduler.observations
        sign = -1.0 if self.scenario.do_minimize else 1.0
        archived = [r for t, r in obs.trials.items() if t < 0]
        # nothing observed before the kill is lost (the last of it after the last save): known
        # trials under their ids, trials started after the save as archived curves
        for line in self.observed:
            tid, epoch, value = line["trial_id"], line["epoch"], line[self.scenario.metric]
            record = obs.trials[tid] if tid in self.saved else next(r for r in archived if r.config == line["config"])
            assert record.last_epoch >= epoch and record.scores[epoch - 1] == pytest.approx(sign * value), (tid, epoch)
        assert any(o["trial_id"] not in self.saved or self.saved[o["trial_id"]][1] < o["epoch"] for o in self.observed)
        statuses = {t: r.status for t, r in obs.trials.items()}
        # nothing left interrupted; running only the jobs the continued run stopped at its end
        # (Syne Tune does not tell the scheduler about those)
        assert TrialStatus.INTERRUPTED not in statuses.values()
        assert {t for t, s in statuses.items() if s is TrialStatus.RUNNING} <= running_at_end.trial_ids, statuses
        resumed = {}
        for tid in self.saved:
            printed_before, ckpt_at_kill = self.printed[tid], self.checkpoint[tid]
            printed = printed_epochs(self.tuner_path / str(tid))
            # no epoch of any trial trained twice, over the killed run and the continued one
            assert printed == list(range(1, len(printed) + 1)), f"trial {tid} printed {printed}"
            assert printed[: len(printed_before)] == printed_before
            # the scheduler has every epoch the trial's jobs reported, without a gap (a job still
            # running when the continued run stopped may have reported once more before it was
            # killed)
            unseen = len(printed) - obs.trials[tid].last_epoch
            assert unseen == 0 or (unseen == 1 and tid in running_at_end.trial_ids), (
                tid,
                obs.trials[tid].scores,
                printed,
            )
            assert not np.isnan(obs.trials[tid].scores).any(), (tid, obs.trials[tid].scores)
            # jobs checkpoint before they report: the checkpoint is at the last reported epoch
            assert ckpt_at_kill == len(printed_before), (tid, ckpt_at_kill, printed_before)
            after = printed[len(printed_before) :]
            if after:  # resumed from its checkpoint, at the epoch after its last report
                resumed[tid] = after[0]
                assert after[0] == ckpt_at_kill + 1, (tid, ckpt_at_kill, after)
        # the results the tuner recorded (both runs): each epoch of a trial once
        df = next(c for c in loaded.callbacks if type(c).__name__ == "StoreResultsCallback").dataframe()
        assert not df.duplicated(["trial_id", "epoch"]).any()
        return resumed

    def reported_never_observed(self) -> list[int]:
        """Trials known to the save whose jobs reported epochs no one saw before the kill."""
        return [t for t in self.saved if len(self.printed[t]) > sum(o["trial_id"] == t for o in self.observed)]


def unfinished_at_kill(run: KilledRun) -> dict[int, int]:
    """Trials paused or in flight at the save, not at max_t when killed: epochs they reported."""
    return {
        t: len(run.printed[t])
        for t, (status, _) in run.saved.items()
        if status in ("running", "paused") and len(run.printed[t]) < run.scenario.max_t
    }


@pytest.mark.timeout(300)
def test_localbackend_sigkilled_run_continues_with_tuner_load(tmp_path, monkeypatch):
    """``launch/train_mlp.py``, the whole process group SIGKILLed (as a user should)."""
    run = KilledRun(tmp_path, "mlp")
    try:
        run.wait_for_kill_point(200)
        # the tuner blocks at the kill point; its training jobs run on: let them end their
        # segments, so that the killed run leaves checkpoints and reports ahead of everything the
        # scheduler saw
        wait_for(lambda: not processes_using(run.tuner_path), 90, "the jobs of the blocked tuner to end")
        run.kill(whole_group=True)
    finally:
        run.cleanup()
    assert any(run.saved[t][1] >= 1 for t in run.in_flight_at_save) and run.paused_at_save, run.saved
    assert run.ready["trial_id"] in run.saved and not run.unsaved, (run.ready, run.unsaved)  # 2 trials, both saved
    # a job ended its segment after the kill point: its report was never seen by anyone
    assert run.reported_never_observed(), (run.printed, run.observed)

    # continue in this process, with Syne Tune's documented route: only the trials of the killed
    # run, until each one that was unfinished at the kill trained again
    loaded = run.load(monkeypatch)
    restored = loaded.scheduler
    restored.allow_new_trials(False)
    targets = unfinished_at_kill(run)
    loaded.stop_criterion = lambda status: all(
        restored.observations.trials[t].last_epoch > e for t, e in targets.items()
    )
    running_at_end = RunningJobs()
    loaded.callbacks.append(running_at_end)
    t1 = time.monotonic()
    loaded.run()
    t_continue = time.monotonic() - t1
    # Syne Tune stops the jobs still running at the end with SIGKILL and does not wait for them
    wait_for(lambda: not processes_using(run.tuner_path), 15, "the continued run's jobs to end")

    resumed = run.check_continued(loaded, running_at_end)
    # every trial paused or in flight at the kill (and unfinished) was resumed from its checkpoint
    assert set(targets) <= set(resumed), (targets, resumed)
    assert run.in_flight_at_save & set(resumed) and run.paused_at_save & set(resumed), (run.saved, resumed)
    print(
        f"[sigkill mlp] killed after {run.seconds:.0f} s, continued for {t_continue:.0f} s; saved: {run.saved}; "
        f"reported after the save, never observed: {run.reported_never_observed()}; resumed at: {resumed}; "
        f"observed before the kill: {len(run.observed)}",
        file=sys.__stdout__,
    )


class StopNewTrialsAfter(TunerCallback):
    """Lets the continued run start ``num`` new trials, then only resume."""

    def __init__(self, scheduler, num: int):
        self.scheduler = scheduler
        self.num = num
        self.started: list[int] = []

    def on_start_trial(self, trial):
        self.started.append(trial.trial_id)
        if len(self.started) >= self.num:
            self.scheduler.allow_new_trials(False)


@pytest.mark.timeout(200)
def test_tuner_process_sigkilled_alone_orphans_and_unsaved_trials(tmp_path, monkeypatch, caplog):
    """Fast jobs (``tests/e2e/fake_train.py``) that linger after their segment; only the tuner process
    is SIGKILLed, so its jobs live on as orphans; trials were started after the last save."""
    caplog.set_level(logging.INFO, logger="syne_dyhpo")
    run = KilledRun(tmp_path, "fast")
    innocent = subprocess.Popen(["sleep", "120"])  # stands for an unrelated process that got a saved pid
    try:
        run.wait_for_kill_point(120)
        time.sleep(1.5)  # the jobs run on: let them report their segments
        run.kill(whole_group=False)
        orphans = processes_using(run.tuner_path)
        assert orphans, "no job outlived the tuner"
        assert any(run.saved[t][1] >= 1 for t in run.in_flight_at_save) and run.paused_at_save, run.saved
        assert run.unsaved, run.saved

        loaded = run.load(monkeypatch)
        restored = loaded.scheduler
        # the pid saved with an interrupted trial's job now belongs to an unrelated process
        interrupted = sorted(run.in_flight_at_save)
        loaded.trial_backend.trial_subprocess[interrupted[0]].pid = innocent.pid
        new_trials = StopNewTrialsAfter(restored, num=len(run.unsaved) + 1)
        running_at_end = RunningJobs()
        loaded.callbacks += [new_trials, running_at_end]
        targets = unfinished_at_kill(run)
        loaded.stop_criterion = lambda status: (
            len(new_trials.started) >= new_trials.num
            and all(restored.observations.trials[t].last_epoch > e for t, e in targets.items())
        )
        loaded.run()

        # the orphans were killed before anything was resumed; the unrelated process lives
        assert not [p for p in orphans if p.is_running() and p.status() != "zombie"]
        assert "orphaned job process" in caplog.text
        assert innocent.poll() is None, "an unrelated process with a saved pid was killed"
        # Syne Tune stops the jobs still running at the end with SIGKILL and does not wait for them
        wait_for(lambda: not processes_using(run.tuner_path), 15, "the continued run's jobs to end")
    finally:
        run.cleanup()
        innocent.kill()
        innocent.wait()

    resumed = run.check_continued(loaded, running_at_end)
    assert set(targets) <= set(resumed), (targets, resumed)
    obs = restored.observations
    archived = {r.trial_id: r for t, r in obs.trials.items() if t < 0}
    assert any(run.printed[t] for t in run.unsaved), "no trial started after the save reported"
    for tid in run.unsaved:
        # what a trial started after the save reported is kept, as an archived curve
        if run.printed[tid]:
            record = next(r for r in archived.values() if r.config == run.unsaved_configs[tid])
            assert record.last_epoch == len(run.printed[tid]) and not record.status.resumable
        # its folder was moved aside; the new trial that got its id started clean
        assert len(list(run.tuner_path.glob(f"{tid}.unsaved-*"))) == 1
        assert tid in new_trials.started
        printed = printed_epochs(run.tuner_path / str(tid))
        assert (
            printed == list(range(1, len(printed) + 1)) and obs.trials[tid].config["x"] != run.unsaved_configs[tid]["x"]
        )
        unseen = len(printed) - obs.trials[tid].last_epoch
        assert unseen == 0 or (unseen == 1 and tid in running_at_end.trial_ids), (tid, printed)
    print(
        f"[sigkill fast] killed after {run.seconds:.0f} s; saved: {run.saved}; unsaved: {run.unsaved}; "
        f"orphans: {len(orphans)}; reported after the save, never observed: {run.reported_never_observed()}; "
        f"resumed at: {resumed}; archived: {[(t, r.last_epoch) for t, r in archived.items()]}",
        file=sys.__stdout__,
    )


def test_simulator_tuner_load_with_a_new_scheduler_continues_the_decision_log(tmp_path, monkeypatch):
    """``Tuner.load``, then ``tuner.scheduler = DyHPO(...)`` (a new scheduler, not the saved one)
    and ``run()`` again: the new scheduler's rows are a new session of the same
    ``decision_log.csv``, numbered after the highest session in it; every row of the first run
    stays as it was, and no (session, decision) key is written twice."""
    from syne_dyhpo.core.decision_log import LOG_FILENAME

    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    bb = tiny_blackbox()

    def new_dyhpo(seed: int) -> DyHPO:
        return DyHPO(bb.configuration_space, metric="valid_error", do_minimize=True, time_attr="epoch",
                     max_t=SIM_MAX_T, options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
                     random_seed=seed)

    first = new_dyhpo(3)
    backend = UserBlackboxBackend(blackbox=bb, elapsed_time_attr="elapsed_time", tuner_sleep_time=0.01, seed=0)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=first,
        stop_criterion=StopAfterEpochs(first, 12),
        n_workers=2,
        sleep_time=0,
        callbacks=[SimulatorCallback()],
        save_tuner=True,
        tuner_name="continue-new-scheduler",
        print_update_interval=1e9,
    )
    tuner.run()
    log_file = tuner.tuner_path / LOG_FILENAME
    run1 = pd.read_csv(log_file)
    assert len(run1) >= 12 and set(run1["session"]) == {0}, run1
    assert not run1.duplicated(["session", "decision"]).any()

    loaded = Tuner.load(str(tuner.tuner_path))
    second = new_dyhpo(4)
    loaded.scheduler = second
    loaded.stop_criterion = StopAfterEpochs(second, 12)
    loaded.run()

    on_disk = pd.read_csv(log_file)
    assert not on_disk.duplicated(["session", "decision"]).any(), on_disk[
        on_disk.duplicated(["session", "decision"], keep=False)
    ]
    # nothing of the first run lost or changed: its rows come first, as they were
    pd.testing.assert_frame_equal(on_disk.iloc[: len(run1)].reset_index(drop=True), run1)
    # the new scheduler's rows: session 1, decisions numbered from 0, as its decision_log() has them
    run2 = on_disk.iloc[len(run1) :].reset_index(drop=True)
    assert len(run2) >= 12 and set(run2["session"]) == {1}
    assert run2["decision"].tolist() == list(range(len(run2)))
    in_memory = second.decision_log()
    assert set(in_memory["session"]) == {1}
    assert run2["decision"].tolist() == in_memory["decision"].tolist()[: len(run2)]
    assert run2["reason"].tolist() == in_memory["reason"].tolist()[: len(run2)]
