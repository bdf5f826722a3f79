"""DepthGate: a trial gets a further segment only while in contention at its own epoch."""

import re

import numpy as np
import pytest
from syne_tune.config_space import choice
from syne_tune.optimizer.scheduler import SchedulerDecision as D
from test_scheduler_core import PreferencePolicy, make, report, start

from syne_dyhpo import CandidateOptions, DepthGate, FreezeThawOptions, IncumbentCompletion
from syne_dyhpo.core.decision import DecisionMaker
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.scheduler import FreezeThawScheduler


def observations(curves: dict[int, list[float]], max_t: int = 5) -> Observations:
    """Losses (minimised) per trial id, epochs 1..len."""
    obs = Observations(max_t=max_t, do_minimize=True)
    for tid, losses in curves.items():
        obs.add_trial(tid, {"x": tid}, np.zeros(1))
        for epoch, loss in enumerate(losses, start=1):
            obs.add_result(tid, epoch, loss)
    return obs


def kept_ids(gate: DepthGate, obs: Observations, ids=None) -> list[int]:
    records = [obs.trials[t] for t in (obs.trials if ids is None else ids)]
    return [r.trial_id for r in gate.in_contention(records, obs)]


def test_top_fraction_of_the_values_at_each_trials_own_epoch():
    # epoch 1: ten values; the best ceil(0.5 * 10) = 5 are losses 0.1..0.5 (trials 0-4)
    obs = observations({t: [0.1 * (t + 1)] for t in range(10)})
    assert kept_ids(DepthGate(0.5), obs) == [0, 1, 2, 3, 4]
    # top third: ceil(10 / 3) = 4
    assert kept_ids(DepthGate(1 / 3), obs) == [0, 1, 2, 3]
    assert kept_ids(DepthGate(1.0), obs) == list(range(10))


def test_ranked_at_equal_budget_counting_the_values_of_deeper_trials():
    # trial 0 is at epoch 2 with loss 0.5; trials 1-3 reported epoch 2 too (on their way
    # deeper) with 0.2, 0.3, 0.4: at epoch 2 four values, 0.5 ranks 4th of 4
    obs = observations({0: [0.1, 0.5], 1: [0.6, 0.2, 0.1], 2: [0.6, 0.3, 0.2], 3: [0.7, 0.4]})
    assert kept_ids(DepthGate(0.5), obs, [0]) == []  # top 2 of 4: 0.2, 0.3
    assert kept_ids(DepthGate(0.75), obs, [0]) == []  # top 3: 0.4 the threshold
    assert kept_ids(DepthGate(1.0), obs, [0]) == [0]
    # its best score (0.1 at epoch 1) would make it the leader: the gate looks at its last epoch
    assert obs.best_of(obs.trials[0]) == max(obs.best_of(r) for r in obs.trials.values())


def test_min_kept_and_an_epoch_few_trials_reached():
    obs = observations({0: [0.3, 0.3, 0.9], 1: [0.2, 0.2, 0.1], 2: [0.4, 0.4, 0.2]})
    # epoch 3: three values (0.1, 0.2, 0.9); ceil(0.5 * 3) = 2 kept: trial 0 is out
    assert kept_ids(DepthGate(0.5), obs) == [1, 2]
    # min_kept = 3: every trial that reached epoch 3 is in contention
    assert kept_ids(DepthGate(0.5, min_kept=3), obs) == [0, 1, 2]
    # two trials at an epoch: min_kept 2 keeps both
    obs2 = observations({0: [0.3, 0.9], 1: [0.2, 0.1]})
    assert kept_ids(DepthGate(0.1), obs2) == [0, 1]
    assert kept_ids(DepthGate(0.1, min_kept=1), obs2) == [1]


def test_diverged_out_no_result_yet_in():
    obs = observations({0: [0.3], 1: [float("nan")], 2: [0.5]})
    obs.add_trial(3, {"x": 3}, np.zeros(1))  # started, nothing reported
    assert kept_ids(DepthGate(1.0, min_kept=1), obs) == [0, 2, 3]


def test_settings_are_checked_naming_the_field_and_value():
    for field, values, expected in [
        ("top_fraction", (0, -0.5, 1.5, True, "half", float("nan")), r"a number in \(0, 1\]"),
        ("min_kept", (0, -1, 1.5, True, "2"), "an integer >= 1"),
    ]:
        for value in values:
            with pytest.raises(
                ValueError, match=f"DepthGate.{field} must be {expected}, got {re.escape(repr(value))}$"
            ):
                DepthGate(**{field: value})
    with pytest.raises(ValueError, match=re.escape("depth_gate must be a DepthGate or None, got 0.5")):
        FreezeThawScheduler(
            {"x": choice([1, 2])}, "loss", PreferencePolicy(lambda t, c: 0.0), max_t=3, depth_gate=0.5, completion=None
        )


def decider(prefer, obs: Observations, gate: DepthGate | None, completion: IncumbentCompletion | None) -> DecisionMaker:
    return DecisionMaker(
        PreferencePolicy(prefer),
        obs,
        segment_end=lambda r: 1 if r is None else r.last_epoch + 1,
        rng=np.random.RandomState(0),
        random_seed=0,
        candidates=CandidateOptions(num_initial_random=0),
        completion=completion,
        promotion=None,
        max_kept_paused=None,
        depth_gate=gate,
    )


# trial 0 has the best loss seen (0.05 at epoch 1), then 0.9 at epoch 2, where trials 1-3
# reported 0.3-0.5: it leads by its best score, but is last of four at epoch 2
FALLEN_LEADER = {0: [0.05, 0.9], 1: [0.4, 0.3], 2: [0.45, 0.4], 3: [0.5, 0.5]}


@pytest.mark.parametrize("gate", [None, DepthGate(0.5)])
def test_the_acquisition_chooses_only_among_trials_in_contention(gate):
    obs = observations(FALLEN_LEADER)
    records = [obs.trials[t] for t in range(4)]
    # the policy prefers paused trials, lowest trial id first, over new configurations
    d = decider(lambda tid, c: -0.1 if tid is None else 1.0 - 0.1 * tid, obs, gate, None)
    new = [{"x": 9}]
    # at epoch 2: 0.9, 0.3, 0.4, 0.5: the top max(2, ceil(0.5 * 4)) = 2 are trials 1 and 2
    assert d.decide(records, new, np.zeros((1, 1)), num_started=4).trial_id == (0 if gate is None else 1)
    # trial 1 is running: with the gate trial 2 is the only one in contention
    assert d.decide([records[i] for i in (0, 2, 3)], new, np.zeros((1, 1)), num_started=4).trial_id == (
        0 if gate is None else 2
    )
    # none in contention (trials 0 and 3) but a new configuration on offer: it is started
    decision = d.decide([records[0], records[3]], new, np.zeros((1, 1)), num_started=4)
    assert (decision.trial_id, decision.config) == ((0, None) if gate is None else (None, {"x": 9}))
    # none in contention and nothing new: the gate is not applied
    assert d.decide([records[3]], [], np.zeros((0, 1)), num_started=4).trial_id == 3


def test_the_gate_is_in_the_schedulers_metadata():
    assert make(lambda t, c: 0.0, depth_gate=DepthGate(0.25, 3)).metadata()["depth_gate"] == {
        "top_fraction": 0.25,
        "min_kept": 3,
    }
    # the scheduler's default is DepthGate()'s defaults: three quarters in contention
    assert make(lambda t, c: 0.0).metadata()["depth_gate"] == {"top_fraction": 0.75, "min_kept": 2}
    assert make(lambda t, c: 0.0, depth_gate=DepthGate()).metadata()["depth_gate"] == {
        "top_fraction": 0.75,
        "min_kept": 2,
    }
    assert make(lambda t, c: 0.0, depth_gate=None).metadata()["depth_gate"] is None


def test_a_gate_with_nothing_in_contention_and_no_new_configuration_left_still_decides():
    table = [{"x": 0.0}, {"x": 1.0}]
    s = FreezeThawScheduler(
        {"x": choice([0.0, 1.0])},
        "loss",
        PreferencePolicy(lambda t, c: 0.0),
        max_t=4,
        random_seed=0,
        completion=None,
        depth_gate=DepthGate(0.5, min_kept=1),
        options=FreezeThawOptions(candidates=CandidateOptions(num_initial_random=1, configs=table)),
    )
    t0, t1 = start(s, 0), start(s, 1)
    report(s, t0, 1, float("nan"))  # diverged: stopped, never resumed
    s.on_trial_remove(t0)
    # t1 alone at epoch 1 after this report, it is in contention: it goes on
    assert report(s, t1, 1, 0.5) == D.CONTINUE


def test_the_completion_is_not_gated_it_keeps_its_leader():
    obs = observations(FALLEN_LEADER)
    records = [obs.trials[t] for t in (0, 2, 3)]  # trial 1 runs
    # the policy prefers paused trials over new ones, the highest trial id first
    d = decider(
        lambda tid, c: -1.0 if tid is None else 0.1 * tid,
        obs,
        DepthGate(0.5),
        IncumbentCompletion(after=1, delay=0.0, commit_after=None),
    )
    # trial 0 leads by its best score but is out of contention at epoch 2: the completion
    # resumes it all the same
    assert d.decide(records, [{"x": 9}], np.zeros((1, 1)), num_started=4).trial_id == 0
    assert d.completion.num_completions == 1
    # the acquisition is gated: without the completion, trial 3 (out) is not chosen, but
    # the policy's favourite in contention, trial 2
    d.completion = None
    assert d.decide(records, [{"x": 9}], np.zeros((1, 1)), num_started=4).trial_id == 2
