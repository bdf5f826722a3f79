"""Real processes on Syne Tune's ``LocalBackend``: a checkpointing script whose jobs are not
told where their segment ends (no ``max_resource_attr``) trains on after the scheduler pauses
it; the results it reports after the pause are dropped by Syne Tune. The run must say so at
once (one ERROR naming ``max_resource_attr``) and record the lost epochs as missing, never as
data at another epoch. With ``max_resource_attr`` every printed epoch is recorded.

The script is ``tests/e2e/fake_train.py`` (no torch: epochs of about 0.1 s, loss
``(x - 0.3)^2 + 1 / epoch``). Without ``max_resource_attr`` the space has 4 configurations, so
that the run soon only resumes; with it, the space is continuous (with a nearly used-up pool the
scheduler lets jobs run to ``max_t``, see ``FreezeThawScheduler``'s ``max_resource_attr``).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest
from syne_tune import StoppingCriterion, Tuner
from syne_tune.backend import LocalBackend
from syne_tune.config_space import choice, uniform
from syne_tune.report import retrieve

from syne_dyhpo import CandidateOptions, DyHPO, FreezeThawOptions
from syne_dyhpo.core.observations import TrialStatus

pytestmark = pytest.mark.slow

FAKE_TRAIN = Path(__file__).resolve().parent / "fake_train.py"
MAX_T = 6
X_VALUES = [0.0, 0.02, 0.04, 0.06]  # epochs of 0.10-0.13 s


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    # Syne Tune's num_gpu.py writes std.out into the working directory
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    return tmp_path


def _loss(x: float, epoch: int) -> float:
    return (x - 0.3) ** 2 + 1.0 / epoch


def _run(space: dict, max_resource_attr: str | None, done) -> tuple[DyHPO, LocalBackend]:
    """Tunes ``fake_train.py`` with 2 workers until ``done(scheduler)`` (at most 40 s)."""
    scheduler = DyHPO(
        space,
        metric="loss",
        time_attr="epoch",
        max_t=MAX_T,
        max_resource_attr=max_resource_attr,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8, num_initial_random=2)),
        random_seed=0,
    )
    backend = LocalBackend(entry_point=str(FAKE_TRAIN))
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        n_workers=2,
        sleep_time=0.5,
        save_tuner=False,
        stop_criterion=_Either(lambda status: done(scheduler), 40),
        tuner_name=f"lost-epochs-{max_resource_attr}",
    )
    tuner.run()
    return scheduler, backend


def _all_ended(scheduler: DyHPO) -> bool:
    """Every configuration started and none can be resumed."""
    trials = scheduler.observations.trials
    return len(trials) == len(X_VALUES) and all(
        r.status not in (TrialStatus.RUNNING, TrialStatus.PAUSED) for r in trials.values()
    )


class _Either:
    """Stop criterion: ``done(status)`` or ``seconds`` of wall-clock time."""

    def __init__(self, done, seconds: float):
        self.done, self.wallclock = done, StoppingCriterion(max_wallclock_time=seconds)

    def __call__(self, status) -> bool:
        return self.done(status) or self.wallclock(status)


def _printed(backend: LocalBackend, trial_id: int) -> list[int]:
    """Epochs the trial's processes printed, over all its jobs."""
    return [int(r["epoch"]) for r in retrieve(backend.stdout(trial_id))]


def _check_curves(scheduler: DyHPO) -> tuple[int, int]:
    """Every recorded value is the script's value at that very epoch; returns (recorded epochs,
    NaN gaps)."""
    recorded = gaps = 0
    for record in scheduler.observations.trials.values():
        for epoch, score in enumerate(record.scores, start=1):
            if math.isnan(score):
                gaps += 1
                continue
            assert -score == pytest.approx(_loss(record.config["x"], epoch)), (record.trial_id, epoch)
            recorded += 1
    return recorded, gaps


def test_lost_epochs_without_max_resource_attr_are_reported_once_and_kept_missing(in_tmp, caplog):
    with caplog.at_level(logging.INFO, logger="syne_dyhpo"):
        scheduler, backend = _run({"x": choice(X_VALUES), "epochs": MAX_T}, None, _all_ended)
    printed = sum(len(_printed(backend, tid)) for tid in scheduler.observations.trials)
    recorded, gaps = _check_curves(scheduler)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("syne_dyhpo")]
    lost = [r for r in caplog.records if "of its curve (" in r.getMessage()]
    print(
        f"\nwithout max_resource_attr: {printed} epochs printed, {recorded} recorded, {gaps} NaN gaps, "
        f"{len(lost)} losses reported, {len(errors)} ERROR"
    )
    assert recorded < printed  # the scenario: Syne Tune dropped results after pauses
    assert len(errors) == 1, errors
    assert "max_resource_attr" in errors[0] and errors[0].endswith("(logged once per run; later losses at INFO)")
    assert lost[0].levelno == logging.ERROR and all(r.levelno == logging.INFO for r in lost[1:])


def test_with_max_resource_attr_every_printed_epoch_is_recorded(in_tmp, caplog):
    with caplog.at_level(logging.INFO, logger="syne_dyhpo"):
        scheduler, backend = _run(
            {"x": uniform(0.0, 0.06), "epochs": MAX_T},
            "epochs",
            lambda scheduler: scheduler.observations.num_observations >= 20,
        )
    printed = {tid: _printed(backend, tid) for tid in scheduler.observations.trials}
    recorded, gaps = _check_curves(scheduler)
    print(
        f"\nwith max_resource_attr: {sum(map(len, printed.values()))} epochs printed, {recorded} recorded, "
        f"{gaps} NaN gaps"
    )
    assert gaps == 0 and not [r for r in caplog.records if r.levelno >= logging.ERROR]
    for tid, epochs in printed.items():  # each job trained its own segment: every epoch printed once, seen
        assert epochs == list(range(1, len(epochs) + 1)), (tid, epochs)
        assert scheduler.observations.trials[tid].last_epoch == len(epochs)
    assert recorded == sum(map(len, printed.values())) >= 20
    assert any(len(epochs) > 1 for epochs in printed.values())  # some trial was resumed
