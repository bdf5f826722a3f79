"""End-to-end: DyHPO and DeepPowerLaw driven by a real Syne Tune Tuner on the simulator.

Each run simulates a few hundred epochs of an LCBench or a TaskSet task (the repo's copy of
the development data, read with Syne Tune's ``deserialize``) with 1 or 4 workers, the table's
rows as ``candidates.configs`` and exact segments (``max_resource_attr``); assertions read the
Tuner's results.
"""

import json

import pandas as pd
import pytest
from conftest import shipped_task, simulate_tuner

import syne_dyhpo

pytestmark = pytest.mark.slow

LCBENCH = ("lcbench", "Australian")
TASKSET = ("taskset", "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128")
MAX_T = 50
BUDGET = 400
SEGMENT_END = "segment_end"


def simulate(method, bench, task, n_workers, seed=0, budget=BUDGET):
    blackbox, configs, meta = shipped_task(bench, task)
    metric = meta["default_metric"]
    scheduler = getattr(syne_dyhpo, method)(
        blackbox.configuration_space, metric=metric, do_minimize=metric.endswith("loss"),
        time_attr=meta["time_attr"], max_t=MAX_T, random_seed=seed,
        options=syne_dyhpo.FreezeThawOptions(candidates=syne_dyhpo.CandidateOptions(configs=configs)),
        max_resource_attr=SEGMENT_END,
    )
    _, df = simulate_tuner(scheduler, blackbox, n_workers, budget, max_resource_attr=SEGMENT_END,
                           elapsed_time_attr=meta["metric_elapsed_time"], tuner_sleep_time=0.2)
    return scheduler, df, meta


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


# each method on each task and with each worker count once
@pytest.mark.parametrize("method, task, n_workers", [
    ("DyHPO", LCBENCH, 4), ("DyHPO", TASKSET, 1), ("DeepPowerLaw", LCBENCH, 1), ("DeepPowerLaw", TASKSET, 4),
])
def test_tuner_run(method, task, n_workers):
    scheduler, df, meta = simulate(method, *task, n_workers)
    assert len(df) >= BUDGET - 4 * n_workers
    resumed, finished = check_freeze_thaw_trajectory(df, meta["time_attr"])
    assert resumed >= 1, "no trial was ever resumed"
    assert finished >= 1, "no trial reached max_t"
    meta = scheduler.metadata()
    json.dumps(meta)  # the Tuner stores it as JSON
    assert meta["num_fallbacks"] == 0, "surrogate failed during the run"
    assert meta["policy"]["num_full_fits"] >= 1
    assert meta["metric_mode"] == ("max" if task == LCBENCH else "min")
    # the scheduler saw every epoch the tuner recorded for it
    assert meta["num_observations"] >= len(df) - 4 * n_workers


@pytest.mark.parametrize("method, task, budget", [("DeepPowerLaw", LCBENCH, 80), ("DyHPO", TASKSET, 80)])
def test_same_seed_same_decisions(method, task, budget):
    def decisions(seed):
        _, df, meta = simulate(method, *task, n_workers=1, seed=seed, budget=budget)
        return df[["trial_id", meta["time_attr"], "st_decision", meta["default_metric"]]].reset_index(drop=True)

    first = decisions(3)
    pd.testing.assert_frame_equal(decisions(3), first)
    assert not decisions(4).equals(first)
