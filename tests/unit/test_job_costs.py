"""Decisions that pay for job starts (:mod:`syne_dyhpo.core.job_costs`): the costs learned from
the results' timestamps, the acquisition per expected second, and a winning trial that keeps
running (CONTINUE) while a losing one is paused."""

import logging
import math
import re

import numpy as np
import pytest
from conftest import suggested_trial
from syne_tune.optimizer.scheduler import SchedulerDecision as D
from test_scheduler_core import TABLE, completion, make, start

from syne_dyhpo import CandidateOptions, JobCosts
from syne_dyhpo.core import job_costs
from syne_dyhpo.core.job_costs import NEW, RESUME, JobTimer
from syne_dyhpo.core.observations import TrialStatus


def _sim(epoch, t):
    return {"epoch": epoch, "loss": 1.0 / epoch, "st_tuner_time": t}


# ----- the costs learned from timestamps --------------------------------------------------------


def test_epoch_and_start_seconds_from_simulated_result_times():
    timer = JobTimer(JobCosts())
    assert timer.epoch_seconds is None and timer.start_seconds is None
    timer.job_started(0, last_epoch=0)  # at simulated time 0 (no result seen yet)
    timer.on_result(0, 1, _sim(1, 3.0))  # start 1 s + epoch 2 s
    assert timer.epoch_seconds is None and timer.start_seconds is None  # no epoch timed yet
    timer.on_result(0, 2, _sim(2, 5.0))
    timer.on_result(0, 3, _sim(3, 7.0))
    assert timer.epoch_seconds == 2.0 and timer.start_seconds == 1.0
    timer.on_result(0, 3, _sim(3, 9.0))  # a repeated epoch: not timed
    assert timer.epoch_seconds == 2.0
    timer.job_ended(0)
    timer.on_result(0, 4, _sim(4, 50.0))  # a late report of the paused job: not timed
    timer.job_started(1, last_epoch=0)  # at 50 s, the last time seen
    timer.on_result(1, 1, _sim(1, 55.0))  # start 3 s + epoch 2 s
    assert timer.start_seconds == 2.0  # (1 + 3) / 2
    timer.job_started(0, last_epoch=4)  # a resume at 55 s; its first result reports 2 epochs
    assert timer.start_seconds_of(RESUME) == 2.0  # no resume timed yet: all starts
    timer.on_result(0, 6, _sim(6, 63.0))  # start 4 s + 2 epochs of 2 s
    assert timer.epoch_seconds == 2.0 and timer.start_seconds == pytest.approx((1 + 3 + 4) / 3)
    assert timer.start_seconds_of(NEW) == 2.0 and timer.start_seconds_of(RESUME) == 4.0
    # a running trial's epoch, a resume's, a new trial's (3 epochs: 6 s + 2 s)
    np.testing.assert_allclose(
        timer.log_seconds(np.array([1, 1, 3]), np.array([False, True, True]), np.array([False, False, True])),
        np.log([2.0, 6.0, 8.0]),
    )
    meta = timer.metadata()
    assert meta["epochs_timed"] == 2 and meta["starts_timed"] == 3 and meta["start_seconds_given"] is None
    assert meta["new_start_seconds"] == 2.0 and meta["resume_seconds"] == 4.0


def _timed_trials(epoch_seconds_of_trial, encodings):
    """A timer that timed two epochs of each trial, one after the other (no start cost)."""
    timer, now = JobTimer(JobCosts(start_seconds=0.0)), 0.0
    for trial_id, (seconds, x) in enumerate(zip(epoch_seconds_of_trial, encodings)):
        timer.job_started(trial_id, last_epoch=0, encoded=x)
        for epoch in (1, 2, 3):
            now += seconds
            timer.on_result(trial_id, epoch, _sim(epoch, now))
        timer.job_ended(trial_id)
    return timer


def test_each_trial_pays_its_own_epochs_and_a_new_configuration_a_regression_on_its_encoding():
    # log epoch seconds linear in the first coordinate: 1 s at x0 = 0, e^2 s at x0 = 1
    rng = np.random.RandomState(0)
    encodings = rng.uniform(size=(40, 3))
    seconds = np.exp(2.0 * encodings[:, 0])
    timer = _timed_trials(seconds, encodings)
    assert timer.epoch_seconds == pytest.approx(seconds.mean())
    assert timer.metadata()["trials_timed"] == 40
    # timed trials: their own mean epoch, whatever the encoding passed
    own = timer.epoch_seconds_of(np.zeros((2, 3)), [3, 7])
    np.testing.assert_allclose(own, seconds[[3, 7]])
    # new configurations: the regression, shrunk (prior precision 1) but ordered and close
    new = timer.epoch_seconds_of(np.array([[0.1, 0.5, 0.5], [0.5, 0.5, 0.5], [0.9, 0.5, 0.5]]), [None] * 3)
    assert new[0] < new[1] < new[2]
    np.testing.assert_allclose(np.log(new), [0.2, 1.0, 1.8], atol=0.25)
    # a cheap new configuration beats an expensive one of the same acquisition value per second
    logs = timer.log_seconds(
        np.array([1, 1]), np.array([True, True]), np.array([True, True]),
        x=np.array([[0.1, 0.5, 0.5], [0.9, 0.5, 0.5]]), trial_ids=[None, None],
    )
    np.testing.assert_allclose(logs, np.log(new[[0, 2]]))
    # without encodings, every candidate pays the mean epoch
    np.testing.assert_allclose(timer.log_seconds(np.array([1]), np.array([True])), np.log([seconds.mean()]))


def test_the_epoch_model_falls_back_to_the_mean_epoch_and_is_flat_for_equal_epochs():
    encodings = np.array([[0.2, 0.3], [0.8, 0.1]])
    one = _timed_trials([2.0], encodings[:1])
    np.testing.assert_allclose(one.epoch_seconds_of(np.array([[0.9, 0.9]]), [None]), [2.0])  # one trial: the mean
    untracked = _timed_trials([1.0, 3.0], [None, None])  # no encodings: the mean
    np.testing.assert_allclose(untracked.epoch_seconds_of(np.array([[0.9, 0.9]]), [None]), [2.0])
    assert JobTimer(JobCosts()).epoch_seconds_of(np.zeros((1, 2)), [None]) is None  # nothing timed
    flat = _timed_trials([1.5] * 5, np.random.RandomState(1).uniform(size=(5, 2)))
    np.testing.assert_allclose(flat.epoch_seconds_of(np.array([[0.0, 1.0], [1.0, 0.0]]), [None, 99]), [1.5, 1.5])


def test_worker_timestamps_are_read_against_the_clock_at_the_start(monkeypatch):
    clock = {"now": 1000.0}
    monkeypatch.setattr(job_costs.time, "time", lambda: clock["now"])
    timer = JobTimer(JobCosts())
    timer.job_started(3, last_epoch=0)
    clock["now"] = 2000.0  # arrival times are not used when the worker stamped its results
    timer.on_result(3, 1, {"epoch": 1, "st_worker_timestamp": 1010.0})
    timer.on_result(3, 2, {"epoch": 2, "st_worker_timestamp": 1014.0})
    assert timer.epoch_seconds == 4.0 and timer.start_seconds == 6.0


def test_a_given_start_cost_is_used_and_bad_ones_are_refused():
    timer = JobTimer(JobCosts(start_seconds=30))
    assert timer.start_seconds == 30.0
    assert timer.log_seconds(np.array([1]), np.array([True])) is None  # no epoch timed: unknown
    timer.job_started(0, 0)
    timer.on_result(0, 1, _sim(1, 1.0))
    timer.on_result(0, 2, _sim(2, 6.0))
    assert timer.start_seconds == 30.0 and timer.epoch_seconds == 5.0
    np.testing.assert_allclose(
        timer.log_seconds(np.array([1, 1, 2]), np.array([False, True, True])), np.log([5.0, 35.0, 40.0])
    )
    for bad in (-1.0, math.inf, math.nan, "10", True):
        with pytest.raises(ValueError, match=re.escape("JobCosts.start_seconds")):
            JobCosts(start_seconds=bad)


# ----- the acquisition per expected second, CONTINUE and PAUSE ----------------------------------


def _running_trial_at_a_segment_end(job_costs, new_value):
    """Trial 0 runs (epoch 1 at 1 s, epoch 2 at 2 s: 1 s per epoch) and wins its first segment
    end; at its second its acquisition value is 1.0, a new configuration's ``new_value``."""
    values = {"new": 0.0}
    s = make(lambda tid, c: 1.0 if tid == 0 else values["new"], max_t=10, max_resource_attr="stop_at",
             job_costs=job_costs)
    t0 = start(s, 0)
    assert t0.config["stop_at"] == (10 if job_costs is not None else 1)
    answers = [s.on_trial_result(t0, _sim(1, 1.0))]
    if answers[0] == D.PAUSE:  # the papers' segments: the winner is paused and resumed at once
        s.on_trial_remove(t0)
        assert s.suggest().checkpoint_trial_id == 0
    values["new"] = new_value
    answers.append(s.on_trial_result(t0, _sim(2, 2.0)))
    return s, t0, answers


@pytest.mark.parametrize(
    "start_seconds, factor, new_wins", [(0.0, 0.0, True), (0.5, 0.0, True), (1.5, 0.0, False), (0.5, 3.0, False)]
)
def test_a_new_configuration_must_beat_the_running_trial_per_expected_second(start_seconds, factor, new_wins):
    # log EI: the new configuration 0.8 above the running trial; with one-epoch segments (factor
    # 0) a start of s seconds costs it log(1 + s) more than the running trial's epoch of 1 s; at
    # a factor of 3 a start of 0.5 s makes its segment ceil(3 sqrt(0.5)) = 3 epochs: log(3.5) > 0.8
    costs = JobCosts(start_seconds=start_seconds, segment_factor=factor)
    s, _t0, answers = _running_trial_at_a_segment_end(costs, 1.8)
    assert answers == [D.CONTINUE, D.PAUSE if new_wins else D.CONTINUE]
    assert s.trial_status(0) is (TrialStatus.PAUSED if new_wins else TrialStatus.RUNNING)


def test_a_paused_trial_pays_its_own_epochs_so_a_faster_one_wins_a_smaller_acquisition_value():
    # trial 0 trains at 3 s per epoch, trial 1 at 1 s; both paused, then trial 2 reports and
    # loses. Log EI: trial 0 0.5 above trial 1, less than log(3): per second trial 1 wins.
    # Every trial paying the mean epoch (2 s), trial 0 would win.
    values = {0: 5.0, None: 0.0}
    s = make(lambda tid, c: values.get(tid, values[None]), max_t=10, max_resource_attr="stop_at",
             job_costs=JobCosts(start_seconds=0.0, segment_factor=0.0))
    t0 = start(s, 0)
    assert s.on_trial_result(t0, _sim(1, 3.0)) == D.CONTINUE
    values.update({0: 0.0, None: 5.0})
    assert s.on_trial_result(t0, _sim(2, 6.0)) == D.PAUSE  # 3 s per epoch
    s.on_trial_remove(t0)
    t1 = start(s, 1)
    values.update({1: 6.0})
    assert s.on_trial_result(t1, _sim(1, 7.0)) == D.CONTINUE
    values.update({1: 0.0, None: 5.0})
    assert s.on_trial_result(t1, _sim(2, 8.0)) == D.PAUSE  # 1 s per epoch
    s.on_trial_remove(t1)
    t2 = start(s, 2)
    values.update({0: 1.5, 1: 1.0, 2: -10.0, None: -10.0})
    assert s.on_trial_result(t2, _sim(1, 9.0)) == D.PAUSE
    s.on_trial_remove(t2)
    assert s.suggest().checkpoint_trial_id == 1
    assert s.metadata()["job_costs"]["trials_timed"] == 2


def test_without_job_costs_a_winner_is_paused_at_each_segment_end_and_resumed_at_once():
    s, t0, answers = _running_trial_at_a_segment_end(None, 0.5)
    assert answers == [D.PAUSE, D.PAUSE]
    s.on_trial_remove(t0)
    sug = s.suggest()
    assert sug.checkpoint_trial_id == 0 and sug.config["stop_at"] == 3


def test_with_job_costs_a_winner_keeps_running_and_a_loser_is_paused_then_resumed_to_max_t():
    winner = {"id": 0}
    s = make(lambda tid, c: 2.0 if tid == winner["id"] else (1.0 if tid is None else 0.0), max_t=10,
             max_resource_attr="stop_at", job_costs=JobCosts(start_seconds=0))
    t0 = start(s, 0)
    assert [s.on_trial_result(t0, _sim(e, float(e))) for e in (1, 2, 3)] == [D.CONTINUE] * 3
    winner["id"] = None  # a new configuration wins: trial 0 loses its decision
    assert s.on_trial_result(t0, _sim(4, 4.0)) == D.PAUSE
    s.on_trial_remove(t0)
    t1 = start(s, 1)
    assert t1.config["stop_at"] == 10
    winner["id"] = 0
    assert s.on_trial_result(t1, _sim(1, 6.0)) == D.PAUSE
    s.on_trial_remove(t1)
    sug = s.suggest()
    assert sug.checkpoint_trial_id == 0 and sug.config["stop_at"] == 10
    assert s.metadata()["job_costs"]["epoch_seconds"] == 1.0


def _trained(costs, seed):
    """(trial, epoch) in the order one worker trains them, under random preferences."""
    rng = np.random.RandomState(seed)
    prefs: dict = {}

    def prefer(tid, config):
        return prefs.setdefault((tid, config["x"]), rng.uniform(-3, 3))

    s = make(prefer, max_t=6, max_resource_attr="stop_at", job_costs=costs)
    order, clock = [], {"t": 0.0}

    def value(trial, epoch):
        order.append((trial.trial_id, epoch))
        clock["t"] += 1.0
        return 1.0 / epoch + 0.01 * trial.trial_id

    trials = {}
    while len(order) < 60:  # one worker as the Tuner drives it, the simulator's clock in every result
        trial = suggested_trial(s, trials)
        if trial is None:
            break
        answer = D.CONTINUE
        while answer == D.CONTINUE and len(order) < 60:
            epoch = s.observations.trials[trial.trial_id].last_epoch + 1
            result = {"epoch": epoch, "loss": value(trial, epoch), "st_tuner_time": clock["t"]}
            answer = s.on_trial_result(trial, result)
        s.on_trial_remove(trial)
    return order


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_free_starts_the_same_trials_train_the_same_epochs(seed):
    assert _trained(JobCosts(start_seconds=0), seed) == _trained(None, seed)


# ----- expected losses on a real backend --------------------------------------------------------


def test_epochs_a_paused_job_trained_on_are_lost_without_an_error_and_kept_missing(caplog):
    winner = {"id": 0}
    s = make(
        lambda tid, c: 3.0 if tid == winner["id"] else 1.0,  # log EI 2 above: worth a resume's 3 epochs
        max_t=10,
        max_resource_attr="stop_at",
        job_costs=JobCosts(free_until_se=None),  # no timed resumes: trial 0 is decided on at epoch 2
        num_initial_random=1,
    )
    t0 = start(s, 0)
    assert s.on_trial_result(t0, _sim(1, 1.0)) == D.CONTINUE
    winner["id"] = None
    assert s.on_trial_result(t0, _sim(2, 2.0)) == D.PAUSE
    with caplog.at_level(logging.INFO, logger="syne_dyhpo"):
        # polled: the job trained epoch 3 before it was killed, and that report still came in
        assert s.on_trial_result(t0, _sim(3, 3.0)) == D.PAUSE
        s.on_trial_remove(t0)
        t1 = start(s, 1)
        winner["id"] = 0
        assert s.on_trial_result(t1, _sim(1, 4.0)) == D.PAUSE
        s.on_trial_remove(t1)
        assert s.suggest().checkpoint_trial_id == 0
        # its checkpoint was at epoch 4 when it was killed: the resumed job reports epoch 5 first
        assert s.on_trial_result(t0, _sim(5, 6.0)) == D.CONTINUE
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert len(lost) == 2 and all("JobCosts" in m for m in lost)
    curve = s.observations.trials[0].scores
    assert curve[:3] == [-1.0, -0.5, -1 / 3] and np.isnan(curve[3]) and curve[4] == -0.2


# ----- a segment grows with the square root of the start ----------------------------------------


def _timed(costs):
    """A timer that learned 1 s per epoch and a start of 1 s (new trials and resumes)."""
    timer = JobTimer(costs)
    timer.job_started(0, last_epoch=0)
    timer.on_result(0, 1, _sim(1, 2.0))
    timer.on_result(0, 2, _sim(2, 3.0))
    return timer


@pytest.mark.parametrize(
    "factor, start_seconds, epochs",
    [(0.0, 1.0, 1), (1.0, 1.0, 1), (3.0, 1.0, 3), (2.5, 1.0, 3), (3.0, 4.0, 6), (3.0, 2.0, 5), (1.0, 0.01, 1)],
)
def test_start_segment_epochs_grow_with_the_square_root_of_the_start(factor, start_seconds, epochs):
    timer = _timed(JobCosts(start_seconds=start_seconds, segment_factor=factor))
    assert timer.epoch_seconds == 1.0 and timer.start_seconds == start_seconds
    assert timer.start_segment_epochs(new=True) == timer.start_segment_epochs(new=False) == epochs
    # ceil(factor x sqrt(start / epoch)), at least one epoch
    assert epochs == max(1, math.ceil(factor * math.sqrt(start_seconds) - 1e-9))


def test_start_segment_epochs_time_an_epoch_first_are_one_when_free_and_differ_for_new_trials_and_resumes():
    # nothing timed yet: two epochs, so that the job's second result times one
    assert JobTimer(JobCosts()).start_segment_epochs(new=True) == 2
    assert JobTimer(JobCosts(start_seconds=5)).start_segment_epochs(new=True) == 2
    assert JobTimer(JobCosts(start_seconds=0)).start_segment_epochs(new=True) == 1
    assert JobTimer(JobCosts(segment_factor=0)).start_segment_epochs(new=True) == 1
    assert _timed(JobCosts(start_seconds=0)).start_segment_epochs(new=False) == 1
    # learned: a 1 s start, a 1 s epoch; counted as free while no resume shows that it costs
    assert _timed(JobCosts()).start_segment_epochs(new=True) == 1
    assert _timed(JobCosts(free_until_se=None)).start_segment_epochs(new=True) == 3
    timer = _timed(JobCosts(segment_factor=1, free_until_se=None))
    timer.job_started(0, last_epoch=2)  # a resume at 3 s whose first result comes at 7 s: 3 s start
    timer.on_result(0, 3, _sim(3, 7.0))
    assert timer.start_segment_epochs(new=True) == 1 and timer.start_segment_epochs(new=False) == 2


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "3", True, None])
def test_a_bad_segment_factor_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape("JobCosts.segment_factor")):
        JobCosts(segment_factor=bad)


def test_a_started_or_resumed_trial_trains_its_whole_segment_before_it_is_decided_on():
    decisions = []

    def prefer(tid, config):
        decisions.append(tid)
        return 2.0 if tid == 0 else (1.0 if tid is None else 0.0)

    # a start of 2 s against an epoch of 1 s, a factor of 2.5: ceil(2.5 sqrt(2)) = 4 epochs
    s = make(prefer, max_t=20, max_resource_attr="stop_at", job_costs=JobCosts(start_seconds=2, segment_factor=2.5))
    t0 = start(s, 0)  # nothing timed yet: its first segment is one epoch
    assert s.on_trial_result(t0, _sim(1, 3.0)) == D.CONTINUE
    assert s.on_trial_result(t0, _sim(2, 4.0)) == D.CONTINUE  # 1 s per epoch now: still running
    assert s.observations.trials[0].segment_end == 3  # running: one budget_step at a time
    s.on_trial_remove(t0)  # Syne Tune took its worker: paused at epoch 2
    sug = s.suggest()
    assert sug.checkpoint_trial_id == 0 and sug.config["stop_at"] == 20
    assert s.observations.trials[0].segment_end == 6  # a resume: 4 epochs
    made = len(decisions)
    assert [s.on_trial_result(t0, _sim(e, 5.0 + e)) for e in (3, 4, 5)] == [D.CONTINUE] * 3
    assert len(decisions) == made  # inside its segment: no decision
    s.on_trial_result(t0, _sim(6, 11.0))
    assert len(decisions) > made  # its segment end: decided on


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_free_starts_the_segments_train_the_same_epochs_as_the_papers(seed):
    assert _trained(JobCosts(start_seconds=0, segment_factor=10.0), seed) == _trained(None, seed)


# ----- the completion waits as long in time as with free starts --------------------------------


def test_start_epochs_spent_count_each_start_as_the_epochs_its_seconds_would_train():
    assert JobTimer(JobCosts(start_seconds=3)).start_epochs_spent() == (0.0, 0.0)  # no epoch timed
    timer = _timed(JobCosts(start_seconds=3))  # 1 s per epoch; one new trial started
    timer.job_started(1, last_epoch=0)
    timer.job_started(0, last_epoch=2)  # a resume
    assert timer.start_epochs_spent() == (6.0, 9.0)
    timer = _timed(JobCosts())  # the new trial's start learned: 1 s
    timer.job_started(0, last_epoch=2)
    timer.on_result(0, 3, _sim(3, 7.0))  # a resume at 3 s whose first result comes at 7 s: 3 s
    assert timer.start_epochs_spent() == (1.0, 4.0)
    assert _timed(JobCosts(start_seconds=0)).start_epochs_spent() == (0.0, 0.0)


def _run_one_job(s, trials, clock, start_seconds, loss=lambda trial_id, epoch: 1.0 / epoch):
    """Runs the suggested job on the one worker until the scheduler stops or pauses it: its start
    costs ``start_seconds``, each epoch 1 s of the results' simulated time; returns the clock."""
    trial = suggested_trial(s, trials)
    clock += start_seconds
    answer = D.CONTINUE
    while answer == D.CONTINUE:
        clock += 1.0
        epoch = s.observations.trials[trial.trial_id].last_epoch + 1
        answer = s.on_trial_result(
            trial, {"epoch": epoch, "loss": loss(trial.trial_id, epoch), "st_tuner_time": clock}
        )
    s.on_trial_remove(trial)
    return clock


def _configs_before_completion(costs, after):
    """Configurations started before the completion's first decision, one worker, 1 s per epoch
    in the results' simulated time, a job start costing ``costs.start_seconds``; the policy
    prefers a new configuration by far, so only the completion gives a trial more epochs."""
    s = make(
        lambda tid, c: 10.0 if tid is None else 0.0,
        max_t=20,
        max_resource_attr="stop_at",
        job_costs=costs,
        completion=completion(after=after),
    )
    clock, trials = 0.0, {}
    while "completion" not in set(s.decision_log().reason):
        # trial 0 leads
        clock = _run_one_job(s, trials, clock, costs.start_seconds, loss=lambda tid, epoch: 1.0 / epoch + tid)
    return len(s.observations.trials)


@pytest.mark.parametrize("start_seconds, configs", [(0.0, 9), (2.0, 3), (8.0, 1)])
def test_the_completion_counts_a_new_trials_start_as_epochs_in_its_wait_for_first_epochs(start_seconds, configs):
    # after = 9: nine first epochs with free starts; with a start of 2 s against an epoch of 1 s
    # each configuration counts 3 (its first epoch and its start), so three; with 8 s, one
    assert _configs_before_completion(JobCosts(start_seconds=start_seconds), after=9) == configs


def _random_starts(costs, by_start):
    """Decisions that started a random configuration, one worker, 1 s per epoch in the results'
    simulated time, a job start costing ``costs.start_seconds``, ten random starts asked for; the
    policy loves trial 0, so every start after the random ones is its resume."""
    candidates = CandidateOptions(num_initial_random=10, divide_initial_random_by_start=by_start, configs=TABLE)
    s = make(
        lambda tid, c: 10.0 if tid == 0 else (1.0 if tid is None else 0.0),
        max_t=20,
        max_resource_attr="stop_at",
        job_costs=costs,
        candidates=candidates,
    )
    clock, trials = 0.0, {}
    for _ in range(12):
        clock = _run_one_job(s, trials, clock, costs.start_seconds)
    return int((s.decision_log().reason == "initial_random").sum())


@pytest.mark.parametrize("start_seconds, by_start, random_starts", [
    (4.0, True, 3), (4.0, False, 10), (0.5, True, 10), (0.0, True, 10), (20.0, True, 1),
])
def test_random_starts_divided_by_the_start_in_epochs_through_the_scheduler(start_seconds, by_start, random_starts):
    # the first trial's segment times an epoch (1 s), so every later decision knows the start in
    # epochs: ceil(10 x 1 / 4) = 3 random starts, ten without the option or when a start is at
    # most an epoch, one when it costs twenty
    assert _random_starts(JobCosts(start_seconds=start_seconds), by_start) == random_starts


# ----- a start counts as free until resumes show that it costs ----------------------------------


def _resume(timer, trial_id, last_epoch, at, first_epoch, second_epoch, start):
    """Resumes the trial at simulated time ``at``; its job reports twice: after the start and
    an epoch of ``first_epoch`` s, then after an epoch of ``second_epoch`` s."""
    timer.on_result(99, 1, _sim(1, at))  # another trial's result: the clock is at ``at``
    timer.job_started(trial_id, last_epoch=last_epoch)
    timer.on_result(trial_id, last_epoch + 1, _sim(last_epoch + 1, at + start + first_epoch))
    timer.on_result(trial_id, last_epoch + 2, _sim(last_epoch + 2, at + start + first_epoch + second_epoch))
    timer.job_ended(trial_id)
    return at + start + first_epoch + second_epoch


def test_a_resume_is_priced_against_the_epochs_around_it_so_shrinking_epochs_cost_no_start():
    # epochs shrink by 0.5 s each: 3, 2.5 | resumed (start 0): 2, 1.5
    timer = JobTimer(JobCosts())
    timer.job_started(0, last_epoch=0)
    timer.on_result(0, 1, _sim(1, 3.0))
    timer.on_result(0, 2, _sim(2, 5.5))
    timer.job_ended(0)
    now = _resume(timer, 0, 2, 5.5, 2.0, 1.5, start=0.0)
    # the central difference: 2 - (2.5 + 1.5) / 2 = 0; the trial's mean epoch (2.0) gives 0
    # here too, but the job's epochs alone would price it at 2 - 1.5 = 0.5
    assert timer.resume_prices == [0.0]
    # the same with a start of 1 s: priced at 1 s; the last epoch before this pause is 1.5 s
    _resume(timer, 0, 4, now, 1.0, 0.5, start=1.0)
    assert timer.resume_prices == pytest.approx([0.0, 1.0 + 1.0 - (1.5 + 0.5) / 2])
    # JobCosts()' own price of a resume is unchanged: first-result seconds (2 s, 2 s) less the
    # mean epoch timed (2.5, 1.5 and 0.5 s)
    assert timer.start_seconds_of(RESUME) == pytest.approx(2.0 - 1.5)


def test_the_start_counts_as_free_until_the_prices_are_above_0_at_free_until_se_standard_errors():
    timer = _timed(JobCosts())  # a 1 s start and a 1 s epoch learned
    now = 3.0
    assert not timer.start_shown and timer.start_segment_epochs(new=False) == 1
    now = _resume(timer, 0, 2, now, 1.0, 1.0, start=1.0)  # priced at 1.0
    assert timer.resume_prices == [1.0] and not timer.start_shown  # one price has no standard error
    now = _resume(timer, 0, 4, now, 1.0, 1.0, start=0.2)  # 1.0, 0.2: mean 0.6, se 0.4
    assert not timer.start_shown and timer.start_segment_epochs(new=True) == 1
    now = _resume(timer, 0, 6, now, 1.0, 1.0, start=1.0)  # mean 0.733, se 0.267: 0.2 > 0
    assert timer.start_shown and timer.start_segment_epochs(new=True) == 3
    for epoch in (8, 10, 12):  # free resumes later: the gate stays open for the rest of the run
        now = _resume(timer, 0, epoch, now, 1.0, 1.0, start=0.0)
    assert timer.start_shown and timer.metadata()["start_shown"] and timer.metadata()["resume_prices"] == 6
    # a smaller margin opens at the second price; the learned start is used at once with None
    loose = _timed(JobCosts(free_until_se=0.5))
    now = _resume(loose, 0, 2, 3.0, 1.0, 1.0, start=1.0)
    _resume(loose, 0, 4, now, 1.0, 1.0, start=0.2)
    assert loose.start_shown
    assert _timed(JobCosts(free_until_se=None)).start_shown


def test_timed_resumes_are_wanted_of_the_first_trial_asking_and_not_with_a_given_start():
    timer = JobTimer(JobCosts(timed_resumes=2))
    assert timer.wants_timed_resume(3)
    timer.timed_resume_given(3)
    assert not timer.wants_timed_resume(0) and timer.wants_timed_resume(3)
    timer.timed_resume_given(3)
    assert not timer.wants_timed_resume(3) and timer.metadata()["timed_resumes"] == 2
    for costs in (JobCosts(start_seconds=1.0), JobCosts(free_until_se=None), JobCosts(timed_resumes=0)):
        assert not JobTimer(costs).wants_timed_resume(0)
    assert JobTimer(JobCosts(start_seconds=1.0)).start_shown


def test_the_scheduler_pauses_and_resumes_the_first_trial_twice_for_two_epochs_to_price_a_resume():
    s = make(lambda tid, c: 2.0 if tid == 0 else 1.0, max_t=20, max_resource_attr="stop_at", job_costs=JobCosts())
    t0 = start(s, 0)
    assert t0.config["stop_at"] == 20  # the job runs to max_t
    assert s.on_trial_result(t0, _sim(1, 3.0)) == D.CONTINUE  # nothing timed yet: two epochs
    now = 5.0
    for last in (2, 4):  # two timed resumes of two epochs each
        assert s.on_trial_result(t0, _sim(last, now)) == D.PAUSE
        s.on_trial_remove(t0)
        sug = s.suggest()
        assert sug.checkpoint_trial_id == 0 and s.observations.trials[0].segment_end == last + 2
        assert s.on_trial_result(t0, _sim(last + 1, now + 3.0)) == D.CONTINUE  # a start of 1 s
        now += 5.0
    # the resumes were priced at 1 s each: a start costs, and trial 0 wins at its segment end
    assert s.on_trial_result(t0, _sim(6, now)) == D.CONTINUE
    timer_meta = s.metadata()["job_costs"]
    assert timer_meta["timed_resumes"] == 2 and timer_meta["start_shown"]
    log = s.decision_log()
    timed = log[log["reason"] == "time_resume"]
    assert timed["next_trial_id"].tolist() == [0, 0] and timed["next_epoch"].tolist() == [4, 6]
    assert timed["action"].tolist() == ["PAUSE", "PAUSE"] and timed["next"].tolist() == ["resume", "resume"]


@pytest.mark.parametrize(
    "start, shows_at, shown, segment",
    [(10.0, 5.0, True, 10), (5.0, 5.0, True, 7), (4.0, 5.0, False, 1), (10.0, None, False, 1), (0.5, 0.0, True, 3)],
)
def test_a_new_trials_start_of_new_start_shows_at_epochs_opens_the_gate_without_timed_resumes(
    start, shows_at, shown, segment
):
    timer = JobTimer(JobCosts(new_start_shows_at=shows_at))
    timer.job_started(0, last_epoch=0)
    timer.on_result(0, 1, _sim(1, start + 1.0))  # a start of ``start`` s and an epoch of 1 s
    assert not timer.start_shown  # no epoch timed yet
    timer.on_result(0, 2, _sim(2, start + 2.0))
    assert timer.epoch_seconds == 1.0 and timer.start_seconds_of(NEW) == pytest.approx(start)
    assert timer.start_shown == shown and timer.wants_timed_resume(0) == (not shown)
    assert timer.shown_by == ("new_start" if shown else None) and timer.metadata()["shown_by"] == timer.shown_by
    # ceil(3 x sqrt(start / epoch)) once shown, one epoch before
    assert timer.start_segment_epochs(new=False) == segment


def test_resumes_that_show_a_cost_are_named_as_what_opened_the_gate():
    timer = _timed(JobCosts(new_start_shows_at=5.0))  # a 1 s start: below 5 epochs
    assert not timer.start_shown and timer.shown_by is None
    now = _resume(timer, 0, 2, 3.0, 1.0, 1.0, start=1.0)
    _resume(timer, 0, 4, now, 1.0, 1.0, start=1.0)
    assert timer.start_shown and timer.shown_by == "resumes"
    assert _timed(JobCosts(free_until_se=None)).shown_by is None  # the gate off: nothing to show


def test_the_scheduler_skips_the_timed_resumes_when_a_new_trials_start_is_many_epochs():
    s = make(lambda tid, c: 2.0 if tid == 0 else 1.0, max_t=20, max_resource_attr="stop_at",
             job_costs=JobCosts())  # the default: new_start_shows_at=5
    t0 = start(s, 0)
    assert s.on_trial_result(t0, _sim(1, 11.0)) == D.CONTINUE  # a start of 10 s, an epoch of 1 s
    # timed at the second result: the start shows, so trial 0 is not paused to time a resume
    # and, winning, keeps running
    assert s.on_trial_result(t0, _sim(2, 12.0)) == D.CONTINUE
    log = s.decision_log()
    assert "time_resume" not in set(log["reason"]) and s.metadata()["job_costs"]["shown_by"] == "new_start"


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "5", True])
def test_a_bad_new_start_shows_at_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape("JobCosts.new_start_shows_at")):
        JobCosts(new_start_shows_at=bad)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "2", True])
def test_a_bad_free_until_se_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape("JobCosts.free_until_se")):
        JobCosts(free_until_se=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_a_bad_timed_resumes_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape("JobCosts.timed_resumes")):
        JobCosts(timed_resumes=bad)
