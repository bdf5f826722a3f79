"""Acquisition functions against hand-computed values."""

import numpy as np
import pytest

from syne_dyhpo.acquisition import expected_improvement, log_expected_improvement
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import FitSchedule, FittedModel, Surrogate, SurrogateCapabilities, SurrogatePolicy
from syne_dyhpo.methods.deep_power_law import MaxBudgetLogEI
from syne_dyhpo.methods.dyhpo import MultiFidelityLogEI, per_budget_incumbent
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


def test_expected_improvement_closed_form():
    # mu=1, sigma=1, y*=0.5: z=0.5, EI = 0.5*Phi(0.5) + phi(0.5) = 0.5*0.6914625 + 0.3520653
    ei = expected_improvement(np.array([1.0, 0.0, 2.0, 0.2]), np.array([1.0, 2.0, 0.0, 0.0]), 0.5)
    assert ei[0] == pytest.approx(0.5 * 0.6914625 + 0.3520653, abs=1e-6)
    # mu=0, sigma=2, y*=0.5: z=-0.25, EI = -0.5*Phi(-0.25) + 2*phi(-0.25) = -0.5*0.4012937 + 2*0.3866681
    assert ei[1] == pytest.approx(-0.5 * 0.4012937 + 2 * 0.3866681, abs=1e-6)
    assert ei[2] == pytest.approx(1.5)  # no uncertainty: plain improvement
    assert ei[3] == 0.0


def test_log_expected_improvement_matches_and_ranks_where_ei_underflows():
    mean = np.linspace(-3, 3, 61)
    std = np.full_like(mean, 0.7)
    np.testing.assert_allclose(log_expected_improvement(mean, std, 0.5), np.log(expected_improvement(mean, std, 0.5)),
                               rtol=1e-7)
    far = np.array([-50.0, -40.0, -30.0])  # z = -50, -40: EI underflows to 0
    assert np.all(expected_improvement(far, np.ones(3), 0.0)[:2] == 0.0)
    log_ei = log_expected_improvement(far, np.ones(3), 0.0)
    assert np.all(np.isfinite(log_ei)) and np.all(np.diff(log_ei) > 0)
    # asymptotics: log EI ~ -z^2/2 - log(sqrt(2 pi)) - 2 log|z| for z -> -inf
    assert log_ei[0] == pytest.approx(-1250 - 0.5 * np.log(2 * np.pi) - 2 * np.log(50), abs=1e-2)


def test_log_expected_improvement_is_quiet_and_right_for_extreme_z():
    import warnings

    z = np.concatenate([np.linspace(30.0, 40.0, 101), [1e9, -1e9]])  # 37.5 < z < 38 overflows z * ratio
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning from the discarded tail branch
        log_ei = log_expected_improvement(z, np.ones_like(z), 0.0)
    # far above the incumbent, EI = improvement
    np.testing.assert_allclose(log_ei[:-1], np.log(z[:-1]), rtol=1e-9)
    assert log_ei[-1] < -1e17


def test_per_budget_incumbent():
    best = np.array([0.2, -np.inf, 0.9, -np.inf])
    inc = per_budget_incumbent(best, np.array([1, 2, 3, 4]))
    assert inc.tolist() == [0.2, 0.9, 0.9, 0.9]  # budgets 2 and 4 unseen: best at any budget


class FixedSurrogate:
    """Posterior with known mean/std per candidate, recording the budget it is asked at."""

    def __init__(self, mean, std):
        self.mean, self.std, self.asked = np.asarray(mean), np.asarray(std), None

    def predict(self, candidates, budget):
        self.asked = np.asarray(budget)
        return self.mean, self.std


def observations_two_trials():
    # maximise accuracy: trial 0 reached 0.6 at epoch 1 and 0.8 at epoch 2; trial 1 0.7 at epoch 1
    obs = Observations(max_t=4, do_minimize=False)
    for tid in (0, 1):
        obs.add_trial(tid, {"x": tid}, np.array([float(tid)]))
    obs.add_result(0, 1, 0.6)
    obs.add_result(0, 2, 0.8)
    obs.add_result(1, 1, 0.7)
    return obs


def candidates(budgets):
    m = len(budgets)
    return Candidates(np.zeros((m, 1)), np.array(budgets), np.full((m, 4), np.nan), [None] * m, [{}] * m)


def fixed_model(mean, std):
    """A fitted model whose transform is the identity (z = score) and whose predictions are fixed."""
    return FittedModel(FixedSurrogate(mean, std), ScoreTransform())


def test_dyhpo_acquisition_uses_per_budget_incumbent():
    obs = observations_two_trials()
    model = fixed_model([0.75, 0.75, 0.75], [0.1, 0.1, 0.1])
    ei = MultiFidelityLogEI.from_observations(model, obs)(candidates([1, 2, 3]))
    assert model.surrogate.asked.tolist() == [1, 2, 3]
    # incumbents: budget 1 -> 0.7, budget 2 -> 0.8, budget 3 unseen -> 0.8 (best at any budget)
    expected = expected_improvement(np.full(3, 0.75), np.full(3, 0.1), np.array([0.7, 0.8, 0.8]))
    assert np.exp(ei) == pytest.approx(expected)  # the acquisition is log EI
    assert ei[0] > ei[1] == pytest.approx(ei[2])


def test_the_acquisition_returns_the_prediction_behind_its_values():
    obs = observations_two_trials()
    model = fixed_model([0.75, 0.65], [0.1, 0.2])
    policy = SurrogatePolicy(model.surrogate, MaxBudgetLogEI.from_observations, FitSchedule(refine_every=1))
    scored = policy.score(model, candidates([1, 2]), obs)
    # Deep Power Law's acquisition asks at max_t for every candidate (the decision log's
    # pred_mean_max_t), DyHPO's at each candidate's next budget
    assert scored.budgets.tolist() == [4, 4] and scored.mean.tolist() == [0.75, 0.65]
    assert scored.std.tolist() == [0.1, 0.2]
    assert scored.values.tolist() == MaxBudgetLogEI.from_observations(model, obs)(candidates([1, 2])).tolist()
    dyhpo = MultiFidelityLogEI.from_observations(model, obs).evaluate(candidates([1, 3]))
    assert dyhpo.budgets.tolist() == [1, 3]
    # the winner's prediction in the metric's units, through the outcome transform
    model.transform.loc, model.transform.scale = 2.0, 0.5
    prediction = dyhpo.prediction(1, sign=-1.0)
    assert (prediction.epoch, prediction.mean, prediction.std) == (3, -(2.0 + 0.5 * 0.65), 0.5 * 0.2)


def test_dyhpo_acquisition_minimising_flips_direction():
    obs = Observations(max_t=4, do_minimize=True)
    obs.add_trial(0, {}, np.zeros(1))
    obs.add_result(0, 1, 2.0)  # loss 2.0 -> score -2.0
    ei = MultiFidelityLogEI.from_observations(fixed_model([-1.0], [1e-9]), obs)(candidates([1]))
    assert np.exp(ei[0]) == pytest.approx(1.0)  # predicted loss 1.0 improves on 2.0 by 1.0


def test_dpl_acquisition_at_max_budget_against_best_any_budget():
    obs = observations_two_trials()
    model = fixed_model([0.9, 0.5], [0.0, 0.0])
    ei = MaxBudgetLogEI.from_observations(model, obs)(candidates([1, 2]))
    assert model.surrogate.asked.tolist() == [4, 4]  # predicted at max_t whatever the next budget
    assert np.exp(ei) == pytest.approx([0.1, 0.0])  # against 0.8, the best at any budget


def test_acquisition_compares_in_the_models_normalised_space():
    obs = observations_two_trials()
    transform = ScoreTransform()
    transform.loc, transform.scale = 0.5, 0.1  # the model predicts z = (score - 0.5) / 0.1
    model = FittedModel(FixedSurrogate([3.5], [1e-12]), transform)
    ei = MaxBudgetLogEI.from_observations(model, obs)(candidates([1]))
    # z 3.5 is score 0.85; the incumbent 0.8 is z 3.0: EI = 0.5 in z units
    assert np.exp(ei[0]) == pytest.approx(0.5)


def test_transform_is_robust_to_diverged_values():
    losses = np.concatenate([np.linspace(0.3, 0.7, 99), [1e6]])  # one exploded curve
    transform = ScoreTransform()
    transform.fit(-losses)  # scores
    z = transform(-losses)
    assert transform.scale == pytest.approx((np.percentile(-losses, 75) - np.percentile(-losses, 25)) / 1.349)
    assert z[:99].max() - z[:99].min() > 2.0  # good configs stay distinguishable
    assert z[99] == transform.floor and transform(np.array([np.nan]))[0] == transform.floor


def test_transform_keeps_good_scores_in_range_when_most_scores_are_alike():
    # 20 configs at epoch 1 of an error that starts at 0.9 for all, 3 further epochs of one
    rng = np.random.RandomState(0)
    errors = np.concatenate([0.9 + 1e-3 * rng.randn(20), [0.7, 0.6, 0.5]])
    transform = ScoreTransform()
    transform.fit(-errors)
    z = transform(-errors)
    assert z.max() == pytest.approx(3.0)  # the best score sits 3 scales above the median
    assert z[20:].tolist() == sorted(z[20:].tolist()) and z[22] - z[20] > 1.0


def test_transform_outdated_when_data_outgrows_it():
    scores = -np.array([0.90, 0.901, 0.899])
    transform = ScoreTransform()
    transform.fit(scores)
    assert not transform.outdated(scores)
    scores = np.append(scores, -0.902)  # alike: same normalisation
    assert not transform.outdated(scores)
    scores = np.append(scores, -0.5)  # far better: scale 100x too small
    assert transform.outdated(scores)
    version = transform.version
    transform.fit(scores)
    assert not transform.outdated(scores) and transform.version > version


class CountingSurrogate(Surrogate):
    def __init__(self):
        self.calls = []

    def fit(self, data, from_scratch, seed):
        self.calls.append("scratch" if from_scratch else "refine")

    def condition(self, data):
        self.calls.append("condition")


def test_policy_refits_from_scratch_when_normalisation_is_outdated():
    sur = CountingSurrogate()
    policy = SurrogatePolicy(sur, acquisition=None, schedule=FitSchedule(refine_every=100, refit_growth=100.0))
    obs = Observations(max_t=10, do_minimize=True)
    for i, v in enumerate([0.90, 0.901]):
        obs.add_trial(i, {}, np.zeros(1))
        obs.add_result(i, 1, v)
    policy.fit(obs, seed=0)
    policy.fit(obs, seed=0)  # nothing new: the model is left as it is
    obs.add_result(0, 2, 0.9005)
    policy.fit(obs, seed=0)
    obs.add_result(0, 3, 0.4)
    policy.fit(obs, seed=0)
    assert sur.calls == ["scratch", "condition", "scratch"]
    assert policy.num_full_fits == 2


class RescalingSurrogate(CountingSurrogate):
    capabilities = SurrogateCapabilities(rescale=True)

    def rescale(self, old, new):
        self.calls.append(("rescale", old.scale, new.scale))


@pytest.mark.parametrize("surrogate_cls", [CountingSurrogate, RescalingSurrogate])
def test_policy_rescales_instead_of_refitting_when_asked_and_the_surrogate_can(surrogate_cls):
    sur = surrogate_cls()
    schedule = FitSchedule(refine_every=100, refit_growth=100.0, rescale_when_outdated=True)
    policy = SurrogatePolicy(sur, acquisition=None, schedule=schedule)
    obs = Observations(max_t=10, do_minimize=True)
    for i, v in enumerate([0.90, 0.901]):
        obs.add_trial(i, {}, np.zeros(1))
        obs.add_result(i, 1, v)
    policy.fit(obs, seed=0)
    scale = policy.transform.scale
    obs.add_result(0, 2, 0.4)
    policy.fit(obs, seed=0)
    assert policy.transform.scale > 2 * scale  # re-estimated either way
    if surrogate_cls is RescalingSurrogate:  # carried over to the new scale, then refined
        assert sur.calls == ["scratch", ("rescale", scale, policy.transform.scale), "refine"]
        assert (policy.num_full_fits, policy.num_rescales) == (1, 1)
    else:  # nothing to carry over with: trained from scratch, as without the option
        assert sur.calls == ["scratch", "scratch"]
        assert (policy.num_full_fits, policy.num_rescales) == (2, 0)


def test_paper_schedules_refit_from_scratch_like_the_authors_code():
    from syne_dyhpo.methods import deep_power_law, dyhpo

    def calls(schedule, values):
        sur = CountingSurrogate()
        policy = SurrogatePolicy(sur, acquisition=None, schedule=schedule)
        policy.transform.outdated = lambda scores: False  # this test is about the schedule alone
        obs = Observations(max_t=5, do_minimize=True)
        obs.add_trial(0, {}, np.zeros(1))
        for epoch, v in enumerate(values, start=1):
            obs.add_trial(epoch, {}, np.zeros(1))
            obs.add_result(epoch, 1, v)
            policy.fit(obs, seed=0)
        return sur.calls

    # a new best at every step: DyHPO refines after the first fit, DPL fits 10 times from scratch
    improving = list(np.linspace(0.9, 0.1, 12))
    assert calls(dyhpo.DyHPOFitSchedule.paper(), improving) == ["scratch"] + ["refine"] * 11
    assert calls(deep_power_law.DeepPowerLawFitSchedule.paper(), improving) == ["scratch"] * 10 + ["refine"] * 2
    # no new best for 1.2 x max_t = 6 observations after the first: DyHPO restarts from scratch
    stalled = [0.1] + [0.5] * 7
    assert calls(dyhpo.DyHPOFitSchedule.paper(), stalled) == ["scratch"] + ["refine"] * 5 + ["scratch", "refine"]
