"""benchmarks/runner.py simulates training time only: a run is reproducible from its seed
whatever the scheduler's compute or the machine's load."""

import time

import numpy as np
import pandas as pd
import pytest
from conftest import data_folder

from benchmarks.runner import METHODS, RunSpec, TimedScheduler, run_dir, run_one

pytestmark = pytest.mark.slow


class _SleepingScheduler(TimedScheduler):
    """A scheduler made slow: real time passes in every result callback."""

    def on_trial_result(self, trial, result):
        time.sleep(0.05)
        return super().on_trial_result(trial, result)


def test_scheduler_compute_does_not_change_simulation(tmp_path, monkeypatch):
    """A slow scheduler (or a loaded machine) sees the same trajectory. Syne Tune's default
    (charge_scheduler_time=True) does not."""
    asha = METHODS["ASHA"]
    # registered for this test only (monkeypatch restores the registry)
    monkeypatch.setitem(
        METHODS, "ASHA-sleeping", lambda d, cs, configs, seed: _SleepingScheduler(asha(d, cs, configs, seed))
    )

    def frame(method, charge):
        spec = RunSpec(method, str(data_folder("lcbench")), "Australian", 1, 40, 1)
        run_one(spec, tmp_path / f"{method}-{charge}", charge_scheduler_time=charge)
        df = pd.read_csv(run_dir(spec, tmp_path / f"{method}-{charge}") / "results.csv.gz")
        return df[["trial_id", "epoch", "st_decision", "st_tuner_time"]]

    fast = frame("ASHA", False)
    pd.testing.assert_frame_equal(frame("ASHA-sleeping", False), fast)
    charged = frame("ASHA-sleeping", True)
    # charged: simulated clocks drift apart and results pile up while the scheduler sleeps
    assert not np.allclose(charged["st_tuner_time"].iloc[:5], fast["st_tuner_time"].iloc[:5])
