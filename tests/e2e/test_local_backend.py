"""Real processes: tune launch/train_mlp.py with DyHPO / DeepPowerLaw on Syne Tune's LocalBackend.

Every trial is a real PyTorch job that the Tuner pauses (kills) and resumes (new process
loading its checkpoint), with results polled from its stdout. Each test runs for a few tens
of seconds (about 5 s per process start on 2 cores): each run checks several behaviours.
A run ends once the events its test checks have happened (:class:`StopOnceChecked`), not
after a number of epochs or seconds, which a loaded machine may end too early; its epochs are
bounded generously, so that a run where they never happen ends and fails. No wall-clock
limit: on a loaded machine every process start takes tens of seconds; pytest-timeout
guards against a hang.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest
from syne_tune.optimizer.scheduler import SchedulerDecision as D
from syne_tune.report import retrieve
from syne_tune.tuner_callback import TunerCallback

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "launch"))

import tune_local  # noqa: E402

from syne_dyhpo.checkpointing import CHECKPOINT_FILENAME  # noqa: E402
from syne_dyhpo.core.observations import TrialStatus  # noqa: E402

pytestmark = pytest.mark.slow

MAX_T = 4
#: generous bound of a run that waits for the events its test checks (it fails at it)
LIMIT_EPOCHS = 48


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    # Syne Tune's num_gpu.py writes std.out into the working directory
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    return tmp_path


def tune(*extra: str, callbacks=None, method="dyhpo", budget=LIMIT_EPOCHS):
    argv = ["--method", method, "--n-workers", "2", "--max-epochs", str(MAX_T), "--budget-epochs", str(budget),
            "--num-initial-random", "1", "--num-candidates", "32", "--sleep-time", "0.3",
            "--seed", "1", *extra]
    return tune_local.run(tune_local.build_parser().parse_args(argv), callbacks=callbacks)


class StopOnceChecked(TunerCallback):
    """Ends the run as soon as ``checked(tuner, log)`` holds (the events the test checks have
    happened; ``log``: the run's :class:`tune_local.SegmentLog`), or at the run's own stop
    criterion (the generous bound of :func:`tune`), whichever comes first."""

    def __init__(self, checked):
        self.checked = checked
        self.held: bool | None = None  # whether ``checked`` held when the run ended

    def on_tuning_start(self, tuner):
        bound = tuner.stop_criterion
        log = next(c for c in tuner.callbacks if isinstance(c, tune_local.SegmentLog))

        def stop(status) -> bool:
            self.held = bool(self.checked(tuner, log))
            return self.held or bound(status)

        tuner.stop_criterion = stop


def results_per_trial(tr) -> dict[int, list[int]]:
    """Epochs of each trial in the order the scheduler saw them."""
    out: dict[int, list[int]] = {}
    for e in tr.log.events:
        if e.kind == "result":
            out.setdefault(e.trial_id, []).append(e.epoch)
    return out


def printed_epochs(tr, trial_id: int) -> list[int]:
    """Epochs the trial's processes printed to its std.out, in print order (all segments)."""
    return [int(r["epoch"]) for r in retrieve(tr.backend.stdout(trial_id))]


def resumes_with_previous_epoch(log) -> list[tuple[int, int, int | None]]:
    """(trial_id, last epoch seen before the resume, first epoch seen after it) per resume of
    the run's :class:`tune_local.SegmentLog`."""
    out = []
    for tid, events in log.per_trial().items():
        last = 0
        for i, e in enumerate(events):
            if e.kind == "result":
                last = e.epoch
            elif e.kind == "resume":
                nxt = next((f.epoch for f in events[i + 1 :] if f.kind == "result"), None)
                out.append((tid, last, nxt))
    return out


def assert_exact_curves(tr, trial_ids):
    per_trial = results_per_trial(tr)
    for tid in trial_ids:
        seen = per_trial.get(tid, [])
        assert seen == list(range(1, len(seen) + 1)), f"trial {tid} results out of order: {seen}"
        printed = printed_epochs(tr, tid)
        # the processes of this trial never repeated an epoch: every resume loaded the checkpoint
        assert printed == list(range(1, len(printed) + 1)), f"trial {tid} printed {printed}"
        assert len(seen) <= MAX_T and len(printed) <= MAX_T
        assert seen == printed[: len(seen)]  # the scheduler saw exactly what was trained, no gap


def check_pause_and_resume(tr, trial_ids, restarted=()):
    """Every trial continued from its checkpoint after each pause (``restarted``: trials that
    lost it once and trained from scratch then), every pause at the end of a segment."""
    assert tr.best is not None and 0.0 < tr.best["val_accuracy"] <= 1.0
    assert len(trial_ids) >= 2
    assert_exact_curves(tr, [t for t in trial_ids if t not in restarted])
    resumes = resumes_with_previous_epoch(tr.log)
    assert len(resumes) >= 1, "no trial was resumed"
    for tid, paused_at, next_epoch in resumes:
        assert paused_at >= 1
        # the first result after a resume is the epoch after the pause (None: stopped at the
        # end, or failed; 1: a restarted trial's resume without its checkpoint)
        allowed = (paused_at + 1, None, 1) if tid in restarted else (paused_at + 1, None)
        assert next_epoch in allowed, (tid, paused_at, next_epoch)
    assert any(n == p + 1 for _, p, n in resumes)
    # every pause was decided at the end of a segment (the job stopped itself there)
    for e in tr.log.events:
        if e.kind == "result" and e.decision == D.PAUSE:
            assert e.epoch < MAX_T
    assert all(all(v) for v in tr.log.checkpoint_present.values())
    assert tr.scheduler.observations.num_observations == sum(map(len, results_per_trial(tr).values()))
    return resumes


class CorruptCheckpointOnce(TunerCallback):
    """Overwrites the checkpoint of the trial of the scheduler's ``nth`` resume, after
    ``suggest()`` chose it and before the Tuner starts its process (whichever trial that is:
    the test does not depend on which trial wins a decision, nor on when)."""

    def __init__(self, nth: int = 1):
        self.nth = nth
        self.resumes = 0
        self.corrupted: tuple[int, int] | None = None  # (trial_id, epoch it was paused at)
        self.time: float | None = None

    def on_tuning_start(self, tuner):
        scheduler, backend = tuner.scheduler, tuner.trial_backend
        suggest = scheduler.suggest

        def suggest_and_corrupt(*args, **kwargs):
            suggestion = suggest(*args, **kwargs)
            if suggestion is None or suggestion.spawn_new_trial_id:
                return suggestion
            self.resumes += 1
            if self.corrupted is None and self.resumes == self.nth:
                tid = suggestion.checkpoint_trial_id
                path = Path(backend.checkpoint_trial_path(tid)) / CHECKPOINT_FILENAME
                assert path.exists()
                path.write_bytes(b"this is not a torch checkpoint")
                self.corrupted = (tid, scheduler.observations.trials[tid].last_epoch)
                self.time = time.monotonic()
            return suggestion

        scheduler.suggest = suggest_and_corrupt


def resumed_where_paused(tuner, log) -> bool:
    """A trial was resumed and reported the epoch after the one it was paused at."""
    return any(n == p + 1 for _, p, n in resumes_with_previous_epoch(log))


def incident_over(corrupt: CorruptCheckpointOnce, restart: bool):
    """For :class:`StopOnceChecked`: the corrupted checkpoint's resume has happened and what
    :func:`check_corrupt_checkpoint` checks of it is there: the trial failed (``restart``
    False) or trained from scratch past the epoch it was paused at (True), and another trial
    reported after the resume."""

    def checked(tuner, log) -> bool:
        if corrupt.corrupted is None:
            return False
        tid, paused_at = corrupt.corrupted
        events = log.per_trial().get(tid, [])
        i_resume = next((i for i, e in enumerate(events) if e.kind == "resume" and e.time > corrupt.time), None)
        if i_resume is None:
            return False
        t_incident = events[i_resume].time
        if not any(e.kind == "result" and e.trial_id != tid and e.time > t_incident for e in log.events):
            return False
        if restart:
            return sum(e.kind == "result" for e in events[i_resume + 1 :]) >= paused_at + 1
        return tuner.scheduler.trial_status(tid) is TrialStatus.FAILED

    return checked


def check_corrupt_checkpoint(tr, corrupt: CorruptCheckpointOnce, restart: bool, caplog) -> None:
    """The trial whose checkpoint was corrupted failed (``restart`` False) or trained from
    scratch (True); the other trials were untouched and tuning went on."""
    assert corrupt.corrupted is not None, f"no resume number {corrupt.nth}"
    tid, paused_at = corrupt.corrupted
    stderr = "".join(tr.backend.stderr(tid))
    assert "CheckpointError" in stderr or "not a torch checkpoint" in stderr or "restart" in stderr
    events = tr.log.per_trial()[tid]
    # the resume right after the corruption (the trial may have been resumed before)
    i_resume = next(i for i, e in enumerate(events) if e.kind == "resume" and e.time > corrupt.time)
    before = [e.epoch for e in events[:i_resume] if e.kind == "result"]
    assert before == list(range(1, paused_at + 1))
    after = [e.epoch for e in events[i_resume + 1 :] if e.kind == "result"]
    others = [t for t in tr.backend._trial_dict if t != tid]
    assert_exact_curves(tr, others)  # the other trials are untouched
    if not restart:
        # the resumed process exits 1 -> Syne Tune marks it Failed -> scheduler.on_trial_error
        assert tr.scheduler.trial_status(tid) is TrialStatus.FAILED
        assert after == []
        assert tr.scheduler.observations.trials[tid].last_epoch == paused_at  # data kept
        assert tr.tuner.tuning_status.num_trials_failed == 1
        assert "Refusing to silently restart" in stderr
        assert f"trial_id {tid} failed after {paused_at} epochs" in caplog.text
        # no resume of the failed trial after its failure
        assert sum(e.kind == "resume" for e in events[i_resume:]) == 1
    else:
        # the script restarted from epoch 1 and ran to its segment end; scheduler archived the
        # old curve and kept the trial
        assert "training from scratch" in stderr
        assert after[: paused_at + 1] == list(range(1, paused_at + 2)), after
        assert tr.scheduler.trial_status(tid) is not TrialStatus.FAILED
        archived = [r for k, r in tr.scheduler.observations.trials.items() if k < 0]
        assert len(archived) == 1 and archived[0].last_epoch == paused_at
        assert f"trial_id {tid} lost its checkpoint after epoch {paused_at}" in caplog.text
        assert tr.tuner.tuning_status.num_trials_failed == 0
    # tuning went on after the incident: some other trial reported later
    t_incident = events[i_resume].time
    assert any(e.kind == "result" and e.trial_id != tid and e.time > t_incident for e in tr.log.events)


class WatchRetired(TunerCallback):
    """At every loop start: when a retired trial was first seen and when its checkpoint folder
    was first seen gone (during the run, i.e. before the final cleanup)."""

    def __init__(self):
        self.tuner = None
        self.retired_at: dict[int, float] = {}
        self.gone_during_run: set[int] = set()

    def on_tuning_start(self, tuner):
        self.tuner = tuner

    def on_loop_start(self):
        import time

        scheduler, backend = self.tuner.scheduler, self.tuner.trial_backend
        for tid, record in scheduler.observations.trials.items():
            if record.status is TrialStatus.RETIRED:
                self.retired_at.setdefault(tid, time.monotonic())
                if not Path(backend.checkpoint_trial_path(tid)).exists():
                    self.gone_during_run.add(tid)


def check_housekeeping(tr, watch: WatchRetired, caplog) -> list[int]:
    """Retired trials' checkpoints were deleted during the run and never resumed."""
    assert tr.backend.delete_checkpoints
    retired = sorted(watch.retired_at)
    assert retired, "no trial was retired"
    # retired checkpoints were deleted during the run (the Syne Tune callback), not only at the end
    assert watch.gone_during_run, (retired, watch.gone_during_run)
    for tid in retired:
        assert not Path(tr.backend.checkpoint_trial_path(tid)).exists()
        assert f"Deleted checkpoint of retired trial_id {tid}" in caplog.text
        # a retired trial is never resumed afterwards
        assert not any(e.kind == "resume" and e.trial_id == tid and e.time > watch.retired_at[tid]
                       for e in tr.log.events)
    return retired


# Two runs, each checking several behaviours: every process start costs seconds (tens of them
# on a loaded machine: a longer hang guard than pytest's default).
@pytest.mark.timeout(900)
def test_dyhpo_resumes_from_checkpoints_deletes_retired_ones_and_fails_a_trial_with_a_corrupt_one(in_tmp, caplog):
    caplog.set_level(logging.INFO)
    watch, corrupt = WatchRetired(), CorruptCheckpointOnce(nth=2)
    incident = incident_over(corrupt, restart=False)
    until = StopOnceChecked(lambda tuner, log: bool(watch.gone_during_run) and resumed_where_paused(tuner, log)
                            and incident(tuner, log))
    tr = tune("--max-paused-checkpoints", "1", callbacks=[watch, corrupt, until], method="dyhpo")
    trial_ids = sorted(tr.backend._trial_dict)
    resumes = check_pause_and_resume(tr, trial_ids)
    retired = check_housekeeping(tr, watch, caplog)
    check_corrupt_checkpoint(tr, corrupt, restart=False, caplog=caplog)
    assert until.held  # (the checks above name what was missing if the bound ended the run)
    print(f"[dyhpo] trials={len(trial_ids)} resumes={len(resumes)} retired={retired} "
          f"deleted during run={sorted(watch.gone_during_run)} failed={corrupt.corrupted} "
          f"epochs={tr.scheduler.observations.num_observations}", file=sys.__stdout__)


@pytest.mark.timeout(900)
def test_dpl_resumes_from_checkpoints_and_restarts_a_trial_that_lost_its_checkpoint(in_tmp, caplog):
    caplog.set_level(logging.INFO)
    corrupt = CorruptCheckpointOnce(nth=2)
    incident = incident_over(corrupt, restart=True)
    until = StopOnceChecked(lambda tuner, log: resumed_where_paused(tuner, log) and incident(tuner, log))
    tr = tune("--restart-on-lost-checkpoint", callbacks=[corrupt, until], method="dpl")
    trial_ids = sorted(tr.backend._trial_dict)
    assert corrupt.corrupted is not None, "no second resume"
    resumes = check_pause_and_resume(tr, trial_ids, restarted=[corrupt.corrupted[0]])
    check_corrupt_checkpoint(tr, corrupt, restart=True, caplog=caplog)
    assert until.held
    print(f"[dpl] trials={len(trial_ids)} resumes={len(resumes)} restarted={corrupt.corrupted} "
          f"epochs={tr.scheduler.observations.num_observations}", file=sys.__stdout__)
