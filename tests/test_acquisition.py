"""Acquisition functions against hand-computed values."""

import numpy as np
import pytest

from syne_dyhpo.acquisition import expected_improvement, log_expected_improvement, per_budget_incumbent
from syne_dyhpo.observations import Candidates, Observations
from syne_dyhpo.policy import ei_at_max_budget, ei_at_next_budget


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


def test_dyhpo_acquisition_uses_per_budget_incumbent():
    obs = observations_two_trials()  # normaliser left at identity: z = score
    sur = FixedSurrogate([0.75, 0.75, 0.75], [0.1, 0.1, 0.1])
    ei = ei_at_next_budget(sur, candidates([1, 2, 3]), obs)
    assert sur.asked.tolist() == [1, 2, 3]
    # incumbents: budget 1 -> 0.7, budget 2 -> 0.8, budget 3 unseen -> 0.8 (best at any budget)
    expected = expected_improvement(np.full(3, 0.75), np.full(3, 0.1), np.array([0.7, 0.8, 0.8]))
    assert np.exp(ei) == pytest.approx(expected)  # the acquisition is log EI
    assert ei[0] > ei[1] == pytest.approx(ei[2])


def test_dyhpo_acquisition_minimising_flips_direction():
    obs = Observations(max_t=4, do_minimize=True)
    obs.add_trial(0, {}, np.zeros(1))
    obs.add_result(0, 1, 2.0)  # loss 2.0 -> score -2.0
    ei = ei_at_next_budget(FixedSurrogate([-1.0], [1e-9]), candidates([1]), obs)
    assert np.exp(ei[0]) == pytest.approx(1.0)  # predicted loss 1.0 improves on 2.0 by 1.0


def test_dpl_acquisition_at_max_budget_against_best_any_budget():
    obs = observations_two_trials()
    sur = FixedSurrogate([0.9, 0.5], [0.0, 0.0])
    ei = ei_at_max_budget(sur, candidates([1, 2]), obs)
    assert sur.asked.tolist() == [4, 4]  # predicted at max_t whatever the next budget
    assert np.exp(ei) == pytest.approx([0.1, 0.0])  # against 0.8, the best at any budget


def test_normalizer_is_robust_to_diverged_values():
    from syne_dyhpo.observations import Normalizer

    losses = np.concatenate([np.linspace(0.3, 0.7, 99), [1e6]])  # one exploded curve
    norm = Normalizer()
    norm.fit(-losses)  # scores
    z = norm(-losses)
    assert norm.scale == pytest.approx((np.percentile(-losses, 75) - np.percentile(-losses, 25)) / 1.349)
    assert z[:99].max() - z[:99].min() > 2.0  # good configs stay distinguishable
    assert z[99] == norm.floor and norm(np.array([np.nan]))[0] == norm.floor


def test_normalizer_keeps_good_scores_in_range_when_most_scores_are_alike():
    from syne_dyhpo.observations import Normalizer

    # 20 configs at epoch 1 of an error that starts at 0.9 for all, 3 further epochs of one
    rng = np.random.RandomState(0)
    errors = np.concatenate([0.9 + 1e-3 * rng.randn(20), [0.7, 0.6, 0.5]])
    norm = Normalizer()
    norm.fit(-errors)
    z = norm(-errors)
    assert z.max() == pytest.approx(3.0)  # the best score sits 3 scales above the median
    assert z[20:].tolist() == sorted(z[20:].tolist()) and z[22] - z[20] > 1.0


def test_normalizer_outdated_when_data_outgrows_it():
    from syne_dyhpo.observations import Observations

    obs = Observations(max_t=10, do_minimize=True)
    for i, v in enumerate([0.90, 0.901, 0.899]):
        obs.add_trial(i, {}, np.zeros(1))
        obs.add_result(i, 1, v)
    obs.refit_normalizer()
    assert not obs.normalizer_outdated()
    obs.add_result(0, 2, 0.902)  # alike: same normalisation
    assert not obs.normalizer_outdated()
    obs.add_result(0, 3, 0.5)  # far better: scale 100x too small
    assert obs.normalizer_outdated()
    version = obs.data_version
    obs.refit_normalizer()
    assert not obs.normalizer_outdated() and obs.data_version > version


def test_policy_refits_from_scratch_when_normalisation_is_outdated():
    from syne_dyhpo.observations import Observations
    from syne_dyhpo.policy import FitSchedule, SurrogatePolicy

    class CountingSurrogate:
        def __init__(self):
            self.calls = []

        def fit(self, data, from_scratch, seed):
            self.calls.append("scratch" if from_scratch else "refine")

        def condition(self, data):
            self.calls.append("condition")

    sur = CountingSurrogate()
    policy = SurrogatePolicy(sur, acquisition=None, schedule=FitSchedule(refine_every=100, refit_growth=100.0))
    obs = Observations(max_t=10, do_minimize=True)
    for i, v in enumerate([0.90, 0.901]):
        obs.add_trial(i, {}, np.zeros(1))
        obs.add_result(i, 1, v)
    policy.update(obs, seed=0)
    obs.add_result(0, 2, 0.9005)
    policy.update(obs, seed=0)
    obs.add_result(0, 3, 0.4)
    policy.update(obs, seed=0)
    assert sur.calls == ["scratch", "condition", "scratch"]
    assert policy.num_full_fits == 2
