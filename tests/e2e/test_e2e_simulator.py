"""End-to-end: DyHPO and DeepPowerLaw driven by a real Syne Tune Tuner on the simulator.

Each run simulates a few hundred epochs of an LCBench and a TaskSet task (the repo's copy of
the development data) with 1 and 4 workers; assertions read the Tuner's results.
"""

import json
import time

import numpy as np
import pandas as pd
import pytest

from conftest import data_folder
from benchmarks.runner import METHODS, RunSpec, TimedScheduler, run_dir, run_one

pytestmark = pytest.mark.slow

TASKS = [
    ("lcbench", "Australian", "epoch"),
    ("taskset", "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128", "step"),
]
MAX_T = 50
BUDGET = 400


def simulate(tmp_path, method, bench, task, n_workers, seed=0, budget=BUDGET):
    spec = RunSpec(method, str(data_folder(bench)), task, seed, budget, n_workers)
    summary = run_one(spec, tmp_path)
    df = pd.read_csv(run_dir(spec, tmp_path) / "results.csv.gz")
    return summary, df


def check_freeze_thaw_trajectory(df: pd.DataFrame, time_attr: str):
    resumed = finished = 0
    for tid, g in df.sort_values("st_tuner_time", kind="stable").groupby("trial_id"):
        epochs = g[time_attr].astype(int).tolist()
        # consecutive from 1, no duplicates: a resumed trial continues after its pause epoch
        assert epochs == list(range(1, len(epochs) + 1)), f"trial {tid}: {epochs}"
        assert max(epochs) <= MAX_T
        decisions = g["st_decision"].tolist()
        resumed += "PAUSE" in decisions[:-1]
        finished += max(epochs) == MAX_T
    return resumed, finished


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
@pytest.mark.parametrize("bench, task, time_attr", TASKS)
@pytest.mark.parametrize("n_workers", [1, 4])
def test_tuner_run(tmp_path, method, bench, task, time_attr, n_workers):
    summary, df = simulate(tmp_path, method, bench, task, n_workers)
    assert summary["n_epochs_simulated"] >= BUDGET
    resumed, finished = check_freeze_thaw_trajectory(df, time_attr)
    assert resumed >= 1, "no trial was ever resumed"
    assert finished >= 1, "no trial reached max_t"
    meta = summary["scheduler_metadata"]
    assert meta["num_fallbacks"] == 0, "surrogate failed during the run"
    assert meta["policy"]["num_full_fits"] >= 1
    # the scheduler saw every epoch the tuner recorded for it
    assert meta["num_observations"] >= len(df) - 4 * n_workers


def test_same_seed_same_decisions(tmp_path):
    runs = []
    for i in range(2):
        _, df = simulate(tmp_path / str(i), "DeepPowerLaw", "lcbench", "Australian", n_workers=1, seed=3, budget=120)
        runs.append(df[["trial_id", "epoch", "st_decision", "val_accuracy"]].reset_index(drop=True))
    pd.testing.assert_frame_equal(runs[0], runs[1])
    _, other = simulate(tmp_path / "other", "DeepPowerLaw", "lcbench", "Australian", n_workers=1, seed=4, budget=120)
    assert not other[["trial_id", "epoch"]].equals(runs[0][["trial_id", "epoch"]]) or not other[
        "val_accuracy"
    ].equals(runs[0]["val_accuracy"])


def test_same_seed_same_decisions_dyhpo(tmp_path):
    runs = []
    for i in range(2):
        _, df = simulate(tmp_path / str(i), "DyHPO", "taskset", TASKS[1][1], n_workers=1, seed=5, budget=80)
        runs.append(df[["trial_id", "step", "st_decision"]].reset_index(drop=True))
    pd.testing.assert_frame_equal(runs[0], runs[1])


def test_metadata_is_json(tmp_path):
    summary, _ = simulate(tmp_path, "DyHPO", "lcbench", "Australian", n_workers=1, budget=30)
    json.dumps(summary["scheduler_metadata"])
    assert summary["scheduler_metadata"]["metric_mode"] == "max"


class _SleepingScheduler(TimedScheduler):
    """A scheduler made slow: real time passes in every result callback."""

    def on_trial_result(self, trial, result):
        time.sleep(0.3)
        return super().on_trial_result(trial, result)


def test_scheduler_compute_does_not_change_simulation(tmp_path, monkeypatch):
    """Benchmarks simulate training time only: a slow scheduler (or a loaded machine) sees the
    same trajectory. Syne Tune's default (charge_scheduler_time=True) does not."""
    dpl = METHODS["DeepPowerLaw"]
    # registered for this test only (monkeypatch restores the registry)
    monkeypatch.setitem(
        METHODS, "DeepPowerLaw-sleeping", lambda d, cs, configs, seed: _SleepingScheduler(dpl(d, cs, configs, seed))
    )

    def frame(method, charge):
        spec = RunSpec(method, str(data_folder("lcbench")), "Australian", 1, 40, 1)
        run_one(spec, tmp_path / f"{method}-{charge}", charge_scheduler_time=charge)
        df = pd.read_csv(run_dir(spec, tmp_path / f"{method}-{charge}") / "results.csv.gz")
        return df[["trial_id", "epoch", "st_decision", "st_tuner_time"]]

    fast = frame("DeepPowerLaw", False)
    pd.testing.assert_frame_equal(frame("DeepPowerLaw-sleeping", False), fast)
    charged = frame("DeepPowerLaw-sleeping", True)
    # charged: simulated clocks drift apart and results pile up while the scheduler sleeps
    assert not np.allclose(charged["st_tuner_time"].iloc[:5], fast["st_tuner_time"].iloc[:5])
