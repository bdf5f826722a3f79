"""The decision log and ``syne-dyhpo report`` on real LocalBackend runs (real processes).

DyHPO tunes ``tests/e2e/report_train.py`` (a checkpointed stand-in for a training script: one job
per segment, a crashing and a diverging region) with 2 workers; the report read from the
experiment folder must agree with Syne Tune's own results, and a run continued with
``Tuner.load`` must keep one decision log.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from syne_tune import Tuner
from syne_tune.backend import LocalBackend
from syne_tune.backend.trial_status import Status
from syne_tune.config_space import uniform
from syne_tune.results_callback import StoreResultsCallback

from syne_dyhpo import DyHPO, FreezeThawOptions
from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo.core.decision_log import LOG_FILENAME
from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.report import make_report

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ENTRY_POINT = REPO / "tests" / "e2e" / "report_train.py"
MAX_T = 3


def quick_completion(after: int, dyhpo: bool = True):
    """The method's incumbent completion, starting after ``after`` first epochs, without delay
    (runs of a few epochs)."""
    from dataclasses import replace

    from syne_dyhpo.methods import deep_power_law
    from syne_dyhpo.methods import dyhpo as dyhpo_module

    base = dyhpo_module.DEFAULT_COMPLETION if dyhpo else deep_power_law.DEFAULT_COMPLETION
    return replace(base, after=after, delay=0.0)
GOOD, CRASHING, DIVERGING = 0.3, 0.01, 0.99  # report_train.py: x < 0.02 crashes, x > 0.98 diverges


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Syne Tune writes std.out of num_gpu checks into the working directory
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "syne-tune"))
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    return tmp_path


class UntilTrained:
    """Stop criterion: a trial was trained to max_t and ``epochs`` epochs were seen (or
    ``limit`` epochs: the test then reports the missing precondition)."""

    def __init__(self, scheduler, epochs: int, limit: int = 60):
        self.scheduler, self.epochs, self.limit = scheduler, epochs, limit

    def __call__(self, status) -> bool:
        obs = self.scheduler.observations
        trained = any(r.status is TrialStatus.FINISHED for r in obs.trials.values())
        return (trained and obs.num_observations >= self.epochs) or obs.num_observations >= self.limit


def make_scheduler(
    points: list[float], low: float = 0.0, high: float = 1.0, after: int = 4, **constants: Any
) -> DyHPO:
    # the completion starts after `after` first epochs: the good point leads and is trained to max_t
    return DyHPO(
        {"x": uniform(low, high), "epochs": MAX_T, **constants},
        metric="loss",
        do_minimize=True,
        time_attr="epoch",
        max_t=MAX_T,
        max_resource_attr="epochs",
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
        random_seed=1,
        points_to_evaluate=[{"x": x} for x in points],
        completion=quick_completion(after),
    )


def make_tuner(scheduler, name: str, stop, save_tuner: bool = False) -> Tuner:
    return Tuner(
        trial_backend=LocalBackend(entry_point=str(ENTRY_POINT)),
        scheduler=scheduler,
        stop_criterion=stop,
        n_workers=2,
        sleep_time=0.05,
        max_failures=100,
        save_tuner=save_tuner,
        results_update_interval=0.0,
        callbacks=[StoreResultsCallback()],
        tuner_name=name,
        print_update_interval=1e9,
    )


def counts_from_results(results: pd.DataFrame) -> dict[str, int]:
    """What Syne Tune's results say, derived independently of the report."""
    per_trial = {int(t): g for t, g in results.groupby("trial_id", sort=True)}
    resumes = 0
    for g in per_trial.values():
        decisions = g["st_decision"].tolist()
        resumes += sum(d == "PAUSE" for d in decisions[:-1])  # a result after a PAUSE: a resume
    return {
        "started": len(per_trial),
        "resumes": resumes,
        "trained": sum(bool(((g["epoch"] == MAX_T) & np.isfinite(g["loss"])).any()) for g in per_trial.values()),
        "diverged": sum(bool((~np.isfinite(g["loss"].astype(float))).any()) for g in per_trial.values()),
        "epochs": len(results),
        "first_epochs": int((results["epoch"] == 1).sum()),
    }


def png_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        image.load()  # the whole file decodes
        return image.size


def test_report_of_a_local_backend_run(in_tmp):
    scheduler = make_scheduler([GOOD, CRASHING, DIVERGING])
    tuner = make_tuner(scheduler, "report-e2e", UntilTrained(scheduler, epochs=14))
    tuner.run()
    results = tuner.callbacks[0].dataframe()
    configs = {t: float(tuner.trial_backend._trial_dict[t].config["x"]) for t in tuner.trial_backend.trial_ids}
    # the crashing region's trials whose failure Syne Tune saw: one sampled there late may still
    # be starting when the run stops (it is stopped, not failed)
    seen = tuner.tuning_status.last_trial_status_seen
    crashed = [t for t, x in configs.items() if x < 0.02 and seen.get(t) == Status.failed]
    diverged = [t for t, x in configs.items() if x > 0.98]
    assert 1 in crashed and diverged, f"precondition: the planted trials reported ({configs}, {seen})"

    report = make_report(tuner.tuner_path)

    # the summary's counts are Syne Tune's
    expected = counts_from_results(results)
    expected["started"] = len(tuner.trial_backend.trial_ids)  # the crashed trial never reported
    s = report.summary
    got = {
        "started": s.started,
        "resumes": s.resumes,
        "trained": s.trained,
        "diverged": s.diverged,
        "epochs": s.epochs,
        "first_epochs": s.first_epochs,
    }
    assert got == expected
    assert s.failed == tuner.tuning_status.num_trials_failed >= 1
    assert s.trained >= 1 and s.diverged >= 1
    assert s.scheduler_seconds > 0 and s.decisions >= s.started

    # the decision log: in memory and on disk, the planted points first
    log = scheduler.decision_log()
    choices = log[log["next"].isin(["start", "resume", "continue"])]  # not the rows of ends (failed, max_t)
    assert list(choices["reason"][:3]) == ["points_to_evaluate"] * 3
    assert list(choices["next"][:3]) == ["start"] * 3
    assert list(choices["next_trial_id"][:3]) == [0, 1, 2]
    assert log["reason"].iloc[0] == "points_to_evaluate"
    # a start's row is written once its trial has an id: the file is in that order
    on_disk = pd.read_csv(tuner.tuner_path / LOG_FILENAME).sort_values(["session", "decision"])
    assert on_disk["decision"].tolist() == log["decision"].tolist() == list(range(len(log)))
    assert on_disk["reason"].tolist() == log["reason"].tolist()
    assert on_disk["next_trial_id"].fillna(-1).tolist() == log["next_trial_id"].fillna(-1).tolist()
    assert set(on_disk["reason"]) >= {"points_to_evaluate", "acquisition", "completion", "max_t", "diverged", "failed"}
    acquired = log[log["reason"] == "acquisition"]
    assert acquired["acquisition"].notna().all() and acquired["pred_mean"].notna().all()
    assert (acquired["acquisition"] >= acquired["runner_up"]).all()
    assert set(acquired["fit"]) <= {"scratch", "refine", "condition", "cached", "rescale"}

    # crashed and diverged trials are marked
    for tid in crashed:
        assert report.histories[tid].failed and report.histories[tid].failed_at is not None
        assert not report.histories[tid].epochs
    for tid in diverged:
        assert report.histories[tid].diverged
    assert {int(t) for t in log.loc[log["reason"] == "failed", "trial_id"]} == set(crashed)

    # job starts: every start and resume the scheduler carried out, each start or resume seen
    granted = log[log["next"].isin(["start", "resume"])]
    assert s.jobs.count == len(granted) >= expected["started"] + expected["resumes"]
    assert s.jobs.n_workers == 2 and s.jobs.first_starts == s.started

    # the model to take home was trained to max_t, and its checkpoint is there
    home = report.take_home
    assert home.trial_id is not None and report.histories[home.trial_id].trained
    finals = results[(results["epoch"] == MAX_T) & np.isfinite(results["loss"])]
    assert home.value == pytest.approx(finals["loss"].min())
    assert Path(home.checkpoint) == tuner.tuner_path / str(home.trial_id) / "checkpoints"
    assert json.loads((Path(home.checkpoint) / "checkpoint.json").read_text())["epoch"] == MAX_T
    assert home.config == {"x": pytest.approx(configs[home.trial_id])}
    assert home.config == {"x": pytest.approx(GOOD)}  # the best configuration, planted first
    assert f"Model to take home: trial {home.trial_id}" in "\n".join(report.lines)

    # both pictures open and have the size they are drawn at (one row per trial: few trials)
    assert png_size(report.timeline) == (990, 180 + 20 * s.started)
    assert png_size(report.curves) == (720, 450)

    # the command line, by tuner name under $SYNETUNE_FOLDER
    out = subprocess.run(
        [sys.executable, "-m", "syne_dyhpo.report", "report-e2e", "--out", str(in_tmp / "r")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"Model to take home: trial {home.trial_id}" in out.stdout
    assert (in_tmp / "r" / "timeline.png").exists() and (in_tmp / "r" / "report.txt").exists()


def test_decision_log_continues_after_tuner_load(in_tmp):
    scheduler = make_scheduler([GOOD], low=0.1, high=0.9)  # no trial crashes or diverges
    tuner = make_tuner(scheduler, "report-continue", UntilTrained(scheduler, epochs=6, limit=6), save_tuner=True)
    tuner.run()  # its finally block saves the tuner with the trials in flight, then stops them
    rows_before = len(scheduler.decision_log())
    in_flight = sorted(t for t, r in scheduler.observations.trials.items() if r.status is TrialStatus.RUNNING)
    assert in_flight, "precondition: a trial in flight at the save"

    loaded = Tuner.load(str(tuner.tuner_path))
    loaded.stop_criterion = UntilTrained(loaded.scheduler, epochs=14)
    loaded.run()

    log = loaded.scheduler.decision_log()
    assert set(log["session"]) == {0, 1}
    first, second = log[log["session"] == 0], log[log["session"] == 1]
    assert len(first) == rows_before and len(second) > 0
    restored = second[second["reason"] == "restored"]
    assert sorted(restored["trial_id"].astype(int)) == in_flight
    # the restored rows come first in the second part, before any decision of it
    assert second["reason"].iloc[: len(in_flight)].tolist() == ["restored"] * len(in_flight)
    # and they were restored indeed: none is left interrupted
    statuses = {t: loaded.scheduler.observations.trials[t].status for t in in_flight}
    assert TrialStatus.INTERRUPTED not in statuses.values(), statuses
    # the second part made decisions of its own
    assert second["reason"].isin(["acquisition", "completion"]).any()

    on_disk = pd.read_csv(loaded.tuner_path / LOG_FILENAME)
    assert on_disk.groupby("session").size().to_dict() == log.groupby("session").size().to_dict()
    report = make_report(loaded.tuner_path)
    # every trial the backend started, also those stopped at the end before their first report
    assert report.summary.started == len(loaded.trial_backend.trial_ids)
    assert report.summary.epochs == len(loaded.callbacks[0].dataframe())
    # one time axis: the second part's results come after the first part's
    t = report.run.results["t"].to_numpy()
    assert np.all(np.diff(t) >= -1e-9)
    assert math.isfinite(report.summary.scheduler_seconds)


def tiny_blackbox():
    """Every configuration of a 12-point space with crossing curves, 5 epochs."""
    from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
    from syne_tune.config_space import choice, randint

    rng = np.random.RandomState(0)
    rows = [dict(lr=lr, width=w) for lr in (1e-3, 3e-3, 1e-2, 3e-2) for w in (16, 64, 256)]
    t = np.arange(1, 6, dtype=float)
    y = np.zeros((len(rows), 1, 5, 2))
    for i, r in enumerate(rows):
        a = 0.05 + 0.06 * abs(np.log10(r["lr"]) + 2) + 0.03 * (64 / r["width"]) ** 0.5
        y[i, 0, :, 0] = a + (0.9 - a) * t ** (-(0.2 + rng.rand()))
        y[i, 0, :, 1] = (0.5 + r["width"] / 64) * t
    return BlackboxTabular(
        hyperparameters=pd.DataFrame(rows),
        configuration_space={"lr": choice([1e-3, 3e-3, 1e-2, 3e-2]), "width": choice([16, 64, 256])},
        fidelity_space={"epoch": randint(1, 5)},
        objectives_evaluations=y,
        fidelity_values=np.arange(1, 6),
        objectives_names=["valid_error", "elapsed_time"],
    )


def test_report_of_a_simulated_run(in_tmp):
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository import UserBlackboxBackend

    bb = tiny_blackbox()
    scheduler = DyHPO(
        bb.configuration_space,
        metric="valid_error",
        do_minimize=True,
        time_attr="epoch",
        max_t=5,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
        random_seed=3,
        max_resource_attr="max_epoch",
        completion=quick_completion(4),
    )
    backend = UserBlackboxBackend(
        blackbox=bb, elapsed_time_attr="elapsed_time", tuner_sleep_time=0.01, seed=0, max_resource_attr="max_epoch"
    )
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=UntilTrained(scheduler, 20),
        n_workers=2,
        sleep_time=0,
        callbacks=[SimulatorCallback()],
        tuner_name="report-sim",
        print_update_interval=1e9,
    )
    tuner.run()
    report = make_report("report-sim")  # by name
    results = tuner.callbacks[0].dataframe()
    counts = counts_from_results(
        results.rename(columns={"valid_error": "loss"}).assign(epoch=lambda d: d["epoch"].where(d["epoch"] < 5, MAX_T))
    )  # max_t of this blackbox is 5
    s = report.summary
    assert (s.resumes, s.epochs, s.first_epochs) == (counts["resumes"], counts["epochs"], counts["first_epochs"])
    assert s.started == len(backend.trial_ids) >= counts["started"]  # some may not have reported yet
    assert s.trained == results.loc[results["epoch"] == 5, "trial_id"].nunique() >= 1
    home = report.take_home
    assert home.checkpoint is None and "checkpoint: none" in "\n".join(report.lines)
    assert set(home.config) == {"lr", "width"}  # hyperparameters only, not max_epoch
    # the simulator's clock: the log's times are the results' st_tuner_time
    log = scheduler.decision_log()
    at_results = log[log["action"].isin(["CONTINUE", "PAUSE", "STOP"])]
    assert set(at_results["time"]).issubset(set(results["st_tuner_time"]))
    assert png_size(report.timeline)[0] == 990


def python_backend_train(x: float, epochs: int, st_checkpoint_dir: str):
    """The training function of the PythonBackend run (imports inside: PythonBackend ships it
    without its module)."""
    import json
    import os
    import time

    from syne_tune import Reporter

    path = os.path.join(st_checkpoint_dir, "checkpoint.json")
    start = 1
    if os.path.exists(path):
        with open(path) as f:
            start = json.load(f)["epoch"] + 1
    report = Reporter()
    for epoch in range(start, epochs + 1):
        time.sleep(0.05)
        os.makedirs(st_checkpoint_dir, exist_ok=True)
        with open(path, "w") as f:
            json.dump({"epoch": epoch}, f)
        report(epoch=epoch, loss=(x - 0.3) ** 2 + 1.0 / epoch)


def test_report_of_a_python_backend_run(in_tmp):
    from syne_tune.backend import PythonBackend

    scheduler = make_scheduler([GOOD], low=0.1, high=0.9, after=3, st_checkpoint_dir="set by the backend")
    config_space = scheduler.config_space
    backend = PythonBackend(tune_function=python_backend_train, config_space=config_space)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=UntilTrained(scheduler, 8),
        n_workers=2,
        sleep_time=0.05,
        save_tuner=False,
        callbacks=[StoreResultsCallback()],
        tuner_name="report-python",
        print_update_interval=1e9,
    )
    tuner.run()
    report = make_report(tuner.tuner_path)
    results = tuner.callbacks[0].dataframe()
    expected = counts_from_results(results)
    expected["started"] = len(backend.trial_ids)
    s = report.summary
    assert {k: getattr(s, k) for k in expected} == expected
    home = report.take_home
    assert home.trial_id is not None and report.histories[home.trial_id].trained
    assert home.config == {"x": pytest.approx(GOOD)}
    assert json.loads((Path(home.checkpoint) / "checkpoint.json").read_text())["epoch"] == MAX_T
