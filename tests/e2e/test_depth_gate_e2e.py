"""End-to-end: DepthGate through a real Syne Tune Tuner on the simulator.

With the gate (its defaults: three quarters in contention, the acquisition gated), every segment
the acquisition gives to a trial that already reported goes to a trial in contention at its last
epoch, judged from the Tuner's own results up to the decision; without it, some do not (so the
check can fail).
"""

import math

import numpy as np
import pandas as pd
import pytest
from conftest import shipped_task, simulate_tuner

import syne_dyhpo

pytestmark = pytest.mark.slow

TASKSET = ("taskset", "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128")
MAX_T = 50
SEGMENT_END = "segment_end"


def simulate(gate):
    blackbox, configs, meta = shipped_task(*TASKSET)
    metric = meta["default_metric"]
    scheduler = syne_dyhpo.DyHPO(
        blackbox.configuration_space, metric=metric, do_minimize=True, time_attr=meta["time_attr"], max_t=MAX_T,
        random_seed=0, max_resource_attr=SEGMENT_END,
        options=syne_dyhpo.FreezeThawOptions(candidates=syne_dyhpo.CandidateOptions(configs=configs)),
        depth_gate=gate,
    )
    _, results = simulate_tuner(scheduler, blackbox, 1, 250, max_resource_attr=SEGMENT_END,
                                elapsed_time_attr=meta["metric_elapsed_time"], tuner_sleep_time=0.2)
    return scheduler.decision_log(), results, metric, meta["time_attr"]


def out_of_contention(log: pd.DataFrame, results: pd.DataFrame, metric: str, time_attr: str,
                      top_fraction: float = 0.75, min_kept: int = 2) -> tuple[int, int]:
    """(segments the acquisition gave to a trial out of contention, segments checked), from the
    Tuner's results up to each decision (one worker: a decision follows the result it answers)."""
    given = log[(log["reason"] == "acquisition") & log["next"].isin(["resume", "continue"])]
    bad = checked = 0
    for _, row in given.iterrows():
        seen = results[results["st_tuner_time"] <= row["time"] + 1e-9]
        trial = seen[seen["trial_id"] == row["next_trial_id"]]
        if trial.empty:
            continue
        epoch = int(trial[time_attr].max())
        value = float(trial.loc[trial[time_attr] == epoch, metric].iloc[-1])
        rung = np.sort(seen.loc[seen[time_attr] == epoch, metric].astype(float).to_numpy())  # losses: best first
        num_kept = max(min_kept, math.ceil(top_fraction * len(rung)))
        checked += 1
        bad += num_kept < len(rung) and not value <= rung[num_kept - 1]
    return bad, checked


def test_with_the_gate_every_segment_goes_to_a_trial_in_contention():
    log, results, metric, time_attr = simulate(syne_dyhpo.DepthGate())
    bad, checked = out_of_contention(log, results, metric, time_attr)
    assert checked >= 20 and bad == 0, (bad, checked)
    # without the gate the same check finds segments given to trials out of contention
    log, results, metric, time_attr = simulate(None)
    bad, checked = out_of_contention(log, results, metric, time_attr)
    assert checked >= 20 and bad >= 1, (bad, checked)
