"""benchmarks.worker_time: the shares of the worker time from a hand-built run whose times are known."""

import numpy as np
import pandas as pd
import pytest
from conftest import data_folder

from benchmarks import worker_time
from benchmarks.runner import RunSpec, run_one

GRU = "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128"


def _run():
    # budget 20 s, 1 worker. Trial 0: epoch 1 takes 3 s, epoch 2 takes 1 s (job 1, 0-4 s); paused,
    # resumed at 4 s: epochs 3 and 4, 1 s each (elapsed from the resume: 1, 2). Trial 1 from 6 s:
    # epoch 1 takes 4 s (10 s), epoch 2 2 s (12 s); its epoch 3 at 22 s is after the budget.
    results = pd.DataFrame(
        dict(
            trial_id=[0, 0, 0, 0, 1, 1, 1],
            epoch=[1, 2, 3, 4, 1, 2, 3],
            time=[3.0, 4.0, 1.0, 2.0, 4.0, 6.0, 16.0],
            st_tuner_time=[3.0, 4.0, 5.0, 6.0, 10.0, 12.0, 22.0],
        )
    )
    jobs = pd.DataFrame(
        dict(time=[0.0, 4.0, 4.0, 6.0, 6.0], trial_id=[0, 0, 0, 0, 1],
             kind=["start", "pause", "resume", "pause", "start"])
    )
    summary = dict(budget_seconds=20.0, n_workers=1, epoch_time_mean=2.0,
                   definition=dict(time_attr="epoch", elapsed_time_attr="time", max_t=4))
    return results, jobs, summary


def test_the_shares_of_the_worker_time_add_up_to_the_budget():
    use = worker_time.run_worker_time(*_run())
    assert use["trials"] == 2 and use["epochs"] == 6
    # trained: 4 + 2 (trial 0's two jobs) + 6 (trial 1) = 12 of 20 s; first epochs 3 + 4 = 7 s
    assert use["first epochs"] == pytest.approx(7 / 20)
    assert use["later epochs"] == pytest.approx(5 / 20)
    assert use["rest"] == pytest.approx(8 / 20)
    assert use["seconds per later epoch"] == pytest.approx(5 / 4)


def test_the_first_configuration_trained_to_max_t_and_its_seconds_per_epoch():
    use = worker_time.run_worker_time(*_run())
    # trial 0 reaches max_t = 4 at 6 s of the 20 s budget, after 4 + 2 s of training (1.5 s per
    # epoch, 0.75 of the task's mean 2 s)
    assert use["first trained"] == pytest.approx(6 / 20)
    assert use["trained by 25 %"] == 0.0
    assert use["its epoch / mean"] == pytest.approx(0.75)
    results, jobs, summary = _run()
    summary["budget_seconds"] = 30.0
    assert worker_time.run_worker_time(results, jobs, summary)["trained by 25 %"] == 1.0
    summary["definition"]["max_t"] = 5
    none = worker_time.run_worker_time(results, jobs, summary)
    assert np.isnan(none["first trained"]) and np.isnan(none["its epoch / mean"])
    assert none["trained by 25 %"] == 0.0


def _log(*decisions):
    return pd.DataFrame([dict(time=t, reason=reason, next_trial_id=trial) for t, reason, trial in decisions])


def test_the_first_completion_and_what_its_leader_was_known_to_cost_then():
    results, jobs, summary = _run()
    # at 12 s trial 0's later epochs took 1 s each (epoch 2 of its first job, epoch 4 of its
    # resumed one), trial 1's 2 s: the median is 1.5 s, so trial 1 is 2 / 1.5 times it
    log = _log((0.0, "initial_random", 0), (6.0, "acquisition", 1), (12.0, "completion", 1), (14.0, "completion", 0))
    use = worker_time.run_worker_time(results, jobs, summary, log)
    assert use["completion from"] == pytest.approx(12 / 20)
    assert use["its leader's epoch / median"] == pytest.approx(2 / 1.5)
    # at 5 s only trial 0 has a later epoch (epoch 3 is its resumed job's first): trial 1 has
    # none, trial 0 is the median itself
    early = worker_time.run_worker_time(results, jobs, summary, _log((5.0, "completion", 1)))
    assert early["completion from"] == pytest.approx(5 / 20) and np.isnan(early["its leader's epoch / median"])
    assert worker_time.run_worker_time(results, jobs, summary, _log((5.0, "completion", 0)))[
        "its leader's epoch / median"] == pytest.approx(1.0)
    for no_completion in (None, _log((0.0, "initial_random", 0))):
        none = worker_time.run_worker_time(results, jobs, summary, no_completion)
        assert np.isnan(none["completion from"]) and np.isnan(none["its leader's epoch / median"])


def test_a_resumed_job_whose_elapsed_time_grows_past_the_last_job_is_still_a_new_job():
    results, jobs, summary = _run()
    # trial 0's resumed epochs take 5 s each: elapsed 5 and 10 after the resume, both above
    # the first job's 4 s, so only the job log tells the jobs apart
    results.loc[[2, 3], "time"] = [5.0, 10.0]
    results.loc[[2, 3], "st_tuner_time"] = [9.0, 14.0]
    use = worker_time.run_worker_time(results, jobs, summary)
    assert use["later epochs"] == pytest.approx((1 + 10 + 2) / 20)


def test_a_real_run_with_costly_starts_spends_the_rest_on_them(tmp_path):
    """RandomSearch on TaskSet, a start costing 10 s: trials 0 and 1 train 50 steps of 1 s each in
    one job (first epochs 2 s, later 98 s), and their two starts take the other 20 s of the 130 s
    budget but 10 s (the start of trial 2, cut off by the budget's end)."""
    spec = RunSpec("RandomSearch", str(data_folder("taskset")), GRU, 0, 130, 1, "wallclock", 10)
    run_one(spec, tmp_path)
    [row] = worker_time.worker_time_table([tmp_path], start_delay=10).to_dict("records")
    assert (row["where"], row["workers"], row["method"], row["runs"]) == ("TaskSet", 1, "RandomSearch", 1)
    assert (row["trials"], row["epochs"]) == (2, 100)
    assert row["first epochs"] == pytest.approx(2 / 130, abs=1e-3)
    assert row["later epochs"] == pytest.approx(98 / 130, abs=1e-3)
    assert row["rest"] == pytest.approx(30 / 130, abs=1e-3)
    # trial 0 is trained to max_t = 50 at 10 + 50 s, at 1 s per step (TaskSet's mean)
    assert row["first trained"] == pytest.approx(60 / 130, abs=1e-3)
    assert row["its epoch / mean"] == pytest.approx(1.0)
    assert np.isnan(row["completion from"])  # RandomSearch writes no decision log
    [split] = worker_time.worker_time_table([tmp_path], by_trained=True).to_dict("records")
    assert split["trained by 25 %"] == 0.0 and split["runs"] == 1 and split["first trained"] == row["first trained"]
    assert worker_time.worker_time_table([tmp_path], start_delay=0).empty


@pytest.mark.slow  # DeepPowerLaw fits its model at every decision (about 5 s)
def test_a_real_run_with_resumes_counts_every_job_of_a_trial(tmp_path):
    """DeepPowerLaw pauses and resumes trials every step; TaskSet's steps cost 1 s each, so the
    time trained is the epochs' count and the rest is the starts (2.5 s each) and pauses."""
    spec = RunSpec("DeepPowerLaw", str(data_folder("taskset")), GRU, 0, 60, 1, "wallclock", 2.5)
    summary = run_one(spec, tmp_path)
    use = worker_time.worker_time_table([tmp_path], tasks=[GRU]).iloc[0]
    assert use["where"] == GRU and use["epochs"] == summary["epochs_in_budget"]
    assert use["first epochs"] + use["later epochs"] == pytest.approx(summary["epochs_in_budget"] / 60, abs=1e-3)
    assert use["rest"] == pytest.approx(1 - summary["epochs_in_budget"] / 60, abs=1e-3)
    assert use["first epochs"] == pytest.approx(use["trials"] / 60, abs=1e-3)
