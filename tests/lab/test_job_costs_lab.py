"""Decisions that pay for job starts (``JobCosts``, the lab's ``DyHPO-costs``) through a real
simulator Tuner on the wall-clock protocol: the costs the scheduler learns from the results'
timestamps are the simulator's, and a winning trial keeps its job instead of being paused and
resumed at once."""

import json

import pandas as pd
import pytest
from conftest import data_folder

from benchmarks.runner import RunSpec, run_dir, run_one
from benchmarks.wallclock import JOBS_FILE, STOP_SECONDS

GRU = "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128"


def _pause_then_resume_of_the_same_trial(jobs: pd.DataFrame) -> int:
    """Pauses of a trial whose very next job event is a resume of that trial."""
    kinds, ids = jobs["kind"].tolist(), jobs["trial_id"].tolist()
    return sum(k == "pause" and nk == "resume" and t == nt for k, nk, t, nt in zip(kinds, kinds[1:], ids, ids[1:]))


@pytest.mark.slow  # two DyHPO runs of 100 epochs (about 6 s)
def test_dyhpo_costs_learns_the_simulators_costs_and_keeps_winners_running(tmp_path):
    # TaskSet: 1 s per step; one worker, a start costs 1 x the median epoch (1 s)
    source = str(data_folder("taskset"))
    runs = {}
    for method in ("DyHPO", "DyHPO-costs"):
        spec = RunSpec(method, source, GRU, 0, 100, 1, "wallclock", 1)
        summary = run_one(spec, tmp_path)
        runs[method] = (summary, pd.read_csv(run_dir(spec, tmp_path) / JOBS_FILE))
    base, base_jobs = runs["DyHPO"]
    costs, jobs = runs["DyHPO-costs"]
    learned = costs["scheduler_metadata"]["job_costs"]
    assert learned["epoch_seconds"] == 1.0
    # every job begins 1 s after it was scheduled, and after a pause or stop also 2 ms later
    assert 1.0 <= learned["start_seconds"] <= 1.0 + STOP_SECONDS + 1e-9
    assert learned["starts_timed"] == costs["job_starts"]
    assert base["scheduler_metadata"]["job_costs"] is None
    # today's default pauses a winning trial at each segment end and resumes it at once
    assert _pause_then_resume_of_the_same_trial(base_jobs) > 0 and base["starts_per_epoch"] >= 1.0
    # only the two timed resumes of the first trial, which price a resume
    assert _pause_then_resume_of_the_same_trial(jobs) == 2
    assert costs["starts_per_epoch"] < base["starts_per_epoch"]
    assert costs["epochs_in_budget"] > base["epochs_in_budget"]
    json.dumps(costs["scheduler_metadata"])  # the Tuner writes it as JSON
    # the first job trains two epochs (its second result times one), and so do its two timed
    # resumes (a resume is priced at its second result); they show that a start costs (1 s, 1 s
    # epochs), so every later start trains at least ceil(3 x sqrt(1 s / 1 s)) = 3
    spec = RunSpec("DyHPO-costs", source, GRU, 0, 100, 1, "wallclock", 1)
    log = pd.read_csv(run_dir(spec, tmp_path) / "decision_log.csv")
    last_epoch: dict = {}  # each trial's last epoch reported, up to the row's
    segments = []  # epochs each started or resumed job is given
    for row in log.itertuples():
        if row.trial_id == row.trial_id:  # not NaN: a reporting trial
            last_epoch[row.trial_id] = row.epoch
        if row.next in ("start", "resume"):
            segments.append(row.next_epoch - last_epoch.get(row.next_trial_id, 0))
    assert segments[:3] == [2, 2, 2] and len(segments) > 5 and min(segments[3:]) >= 3
    assert costs["scheduler_metadata"]["job_costs"]["start_shown"]
    assert (log["reason"] == "time_resume").sum() == 2
