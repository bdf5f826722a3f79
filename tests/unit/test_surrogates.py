"""The two surrogates on synthetic learning curves with known structure."""

import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest

from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGP, DeepKernelGPConfig
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform
from syne_dyhpo.surrogates.power_law import PowerLawEnsemble


class Normalised:
    """Observations seen through an outcome transform fitted on them now (as the policy does
    at a fit from scratch): what the surrogates are trained on and predict for."""

    def __init__(self, obs):
        self.obs = obs
        self.transform = ScoreTransform()
        self.transform.fit(obs.all_scores())

    def data(self):
        raw = self.obs.training_data()
        return replace(raw, y=self.transform(raw.y), curves=self.transform.curves(raw.curves),
                       version=(raw.version, self.transform.version))

    def curves(self, records):
        return self.transform.curves(self.obs.curves(records))


def saturating_curves(rng, n, max_t):
    """Accuracy-like curves a(x) - b(x) * t^-c(x), smooth in the config x in [0, 1]^2."""
    x = rng.rand(n, 2)
    a = 0.6 + 0.3 * x[:, 0] - 0.2 * (x[:, 1] - 0.5) ** 2
    b = 0.3 + 0.2 * x[:, 1]
    c = 0.4 + 0.6 * x[:, 0]
    t = np.arange(1, max_t + 1)
    return x, a[:, None] - b[:, None] * t[None, :] ** (-c[:, None])


def test_deep_kernel_gp_beats_constant_on_known_curve_family():
    rng = np.random.RandomState(0)
    max_t = 20
    x, curves = saturating_curves(rng, 60, max_t)
    obs = Observations(max_t=max_t, do_minimize=False)
    lengths = rng.randint(2, 12, size=40)
    for tid in range(40):
        obs.add_trial(tid, {}, x[tid])
        for e in range(1, lengths[tid] + 1):
            obs.add_result(tid, e, curves[tid, e - 1])
    norm = Normalised(obs)
    data = norm.data()
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=300))
    gp.fit(data, from_scratch=True, seed=0)

    # (1) next epoch of each observed trial, given its curve so far
    records = list(obs.trials.values())
    nxt = lengths + 1
    cands = Candidates(x[:40], nxt, norm.curves(records), list(range(40)), [{}] * 40)
    mean, std = gp.predict(cands, nxt)
    truth = norm.transform(curves[np.arange(40), nxt - 1])
    rmse_gp = np.sqrt(np.mean((mean - truth) ** 2))
    rmse_const = np.sqrt(np.mean((data.y.mean() - truth) ** 2))
    assert rmse_gp < 0.3 * rmse_const, (rmse_gp, rmse_const)
    assert np.all(std > 0)

    # (2) unseen configurations at the first epoch (where DyHPO scores new configs), no curve
    new = np.arange(40, 60)
    cands = Candidates(x[new], np.ones(20, dtype=int), np.full((20, max_t), np.nan), [None] * 20, [{}] * 20)
    mean, _ = gp.predict(cands, np.ones(20, dtype=int))
    truth = norm.transform(curves[new, 0])
    rmse_gp = np.sqrt(np.mean((mean - truth) ** 2))
    rmse_const = np.sqrt(np.mean((data.y.mean() - truth) ** 2))
    assert rmse_gp < 0.6 * rmse_const, (rmse_gp, rmse_const)


def test_deep_kernel_gp_refine_and_condition_keep_predicting():
    rng = np.random.RandomState(1)
    x, curves = saturating_curves(rng, 10, 10)
    obs = Observations(max_t=10, do_minimize=False)
    for tid in range(10):
        obs.add_trial(tid, {}, x[tid])
        obs.add_result(tid, 1, curves[tid, 0])
    norm = Normalised(obs)
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=50, refine_iterations=5))
    gp.fit(norm.data(), from_scratch=True, seed=0)
    for tid in range(10):
        obs.add_result(tid, 2, curves[tid, 1])
    gp.condition(norm.data())  # new rows enter the posterior without training
    records = list(obs.trials.values())
    cands = Candidates(x, np.full(10, 3), norm.curves(records), list(range(10)), [{}] * 10)
    m1, _ = gp.predict(cands, cands.budget)
    gp.fit(norm.data(), from_scratch=False, seed=1)
    m2, s2 = gp.predict(cands, cands.budget)
    assert np.all(np.isfinite(m1)) and np.all(np.isfinite(m2)) and np.all(s2 > 0)


def test_deep_kernel_gp_training_keeps_the_weights_of_the_best_loss_seen(monkeypatch):
    import syne_dyhpo.surrogates.deep_kernel_gp.model as dkgp

    losses = []
    loss_and_gradients = dkgp.negative_mll_and_gradients

    def recorded(*args):
        value, grads = loss_and_gradients(*args)
        losses.append(value)
        return value, grads

    monkeypatch.setattr(dkgp, "negative_mll_and_gradients", recorded)
    rng = np.random.RandomState(3)
    x, curves = saturating_curves(rng, 12, 10)
    obs = Observations(max_t=10, do_minimize=False)
    for tid in range(12):
        obs.add_trial(tid, {}, x[tid])
        for epoch in range(1, 2 + tid % 4):
            obs.add_result(tid, epoch, curves[tid, epoch - 1])
    norm = Normalised(obs)
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=60, refine_iterations=30, patience=5))
    for from_scratch, seed in ((True, 0), (False, 1)):
        losses.clear()
        gp.fit(norm.data(), from_scratch=from_scratch, seed=seed)
        assert len(losses) >= 6
        model = gp._model
        model.train()
        inputs, targets = model.train_inputs[0], model.train_targets
        running = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
        value, _ = loss_and_gradients(model, targets, model.extractor.prepare(inputs))
        model.load_state_dict(running, strict=False)  # the evaluation moved BatchNorm's statistics
        # the loss of the weights kept is the smallest seen (Adam's step after it is not kept)
        assert value == min(losses)
        if from_scratch:
            assert value < losses[0]


def test_power_law_ensemble_extrapolates_from_first_epochs():
    rng = np.random.RandomState(0)
    max_t, n = 50, 40
    x = rng.rand(n, 3)
    alpha = 0.2 + 0.3 * x[:, 0]  # final loss level
    beta = 0.05 + 0.1 * x[:, 1]
    gamma = 0.3 + 0.5 * x[:, 2]
    b = np.arange(1, max_t + 1) / max_t
    loss = alpha[:, None] + beta[:, None] * b[None, :] ** (-gamma[:, None])
    obs = Observations(max_t=max_t, do_minimize=True)
    for tid in range(n):
        obs.add_trial(tid, {}, x[tid])
        for e in range(1, 11):
            obs.add_result(tid, e, loss[tid, e - 1])
    norm = Normalised(obs)
    ens = PowerLawEnsemble()
    ens.fit(norm.data(), from_scratch=True, seed=0)
    cands = Candidates(x, np.full(n, 11), norm.curves(list(obs.trials.values())), list(range(n)), [{}] * n)
    mean, std = ens.predict(cands, np.full(n, max_t))
    truth = norm.transform(-loss[:, -1])
    last_seen = norm.transform(-loss[:, 9])
    closer = np.abs(mean - truth) < np.abs(last_seen - truth)
    assert closer.mean() >= 0.7, closer.mean()
    assert np.all(std > 0)  # members disagree somewhat: a real ensemble posterior


def _fitted_gp_and_next_budget_candidates(seed: int, num_trials: int, max_epochs_seen: int):
    """A GP fitted on saturating curves of ``num_trials`` trials (trial i seen up to epoch
    ``1 + i % max_epochs_seen``) and every trial as a candidate at its next epoch."""
    rng = np.random.RandomState(seed)
    x, curves = saturating_curves(rng, num_trials, 10)
    obs = Observations(max_t=10, do_minimize=False)
    for tid in range(num_trials):
        obs.add_trial(tid, {}, x[tid])
        for e in range(1, 1 + tid % max_epochs_seen + 1):
            obs.add_result(tid, e, curves[tid, e - 1])
    norm = Normalised(obs)
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=40))
    gp.fit(norm.data(), from_scratch=True, seed=0)
    records = list(obs.trials.values())
    budget = np.array([r.last_epoch + 1 for r in records])
    cands = Candidates(x, budget, norm.curves(records), list(range(num_trials)), [{}] * num_trials)
    return gp, obs, norm, curves, records, budget, cands


def test_deep_kernel_gp_posterior_matches_gpytorch():
    from syne_dyhpo.surrogates.deep_kernel_gp import gpytorch_posterior, model_inputs

    gp, obs, norm, curves, _records, budget, cands = _fitted_gp_and_next_budget_candidates(2, 30, 6)
    x = cands.x
    mean, std = gp.predict(cands, budget)
    ref_mean, ref_std = gpytorch_posterior(gp, model_inputs(x, budget, cands.curves, 10))
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(std, ref_std, rtol=1e-4, atol=1e-6)
    # new rows appended without refitting: the extended Cholesky factor gives the exact posterior
    for tid in range(0, 30, 3):
        obs.add_result(tid, obs.trials[tid].last_epoch + 1, curves[tid, obs.trials[tid].last_epoch])
    gp.condition(norm.data())
    mean, std = gp.predict(cands, budget)
    ref_mean, ref_std = gpytorch_posterior(gp, model_inputs(x, budget, cands.curves, 10))
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(std, ref_std, rtol=1e-4, atol=1e-6)
    assert gp._posterior.size == len(norm.data())  # extended, not refactorised


def test_deep_kernel_gp_conditioned_on_pending_results_is_the_kriging_believer():
    """Conditioning on pending results (running trials) equals adding them as training rows
    whose targets are the predicted means: same means, the exact smaller variances."""
    import torch

    gp, _obs, norm, _curves, records, budget, cands = _fitted_gp_and_next_budget_candidates(4, 24, 5)
    x = cands.x
    pending = Candidates(x[:3], budget[:3], norm.curves(records[:3]), [0, 1, 2], [{}] * 3)
    mean, std = gp.predict(cands, budget)
    mean_kb, std_kb = gp.predict(cands, budget, pending=pending, pending_budget=budget[:3])
    np.testing.assert_allclose(mean_kb, mean, atol=1e-9)
    assert np.all(std_kb <= std + 1e-12) and np.all(std_kb[:3] < std[:3])
    # reference: gpytorch's posterior with the pending inputs appended to the conditioning rows,
    # their targets the predicted latent means
    from syne_dyhpo.surrogates.deep_kernel_gp import model_inputs
    from syne_dyhpo.surrogates.deep_kernel_gp.reference import _Settings

    model, likelihood = gp._model, gp._likelihood
    rows = gp.conditioning_rows()
    inputs = model_inputs(cands.x, budget, cands.curves, 10)
    model.set_train_data(gp._inputs[rows], gp._targets[rows], strict=False)
    model.eval()
    likelihood.eval()
    with torch.no_grad(), _Settings():
        latent_mean = model(inputs[:3]).mean
        model.set_train_data(
            torch.cat([gp._inputs[rows], inputs[:3]]), torch.cat([gp._targets[rows], latent_mean]), strict=False
        )
        reference = likelihood(model(inputs))
    np.testing.assert_allclose(mean_kb, reference.mean.numpy(), atol=1e-5)
    np.testing.assert_allclose(std_kb, reference.variance.sqrt().numpy(), rtol=1e-4, atol=1e-6)


def test_deep_kernel_gp_recovers_from_cholesky_failures(monkeypatch):
    from linear_operator.utils.errors import NotPSDError

    from syne_dyhpo.surrogates.deep_kernel_gp import model as deep_kernel_gp

    rng = np.random.RandomState(3)
    x, curves = saturating_curves(rng, 12, 8)
    obs = Observations(max_t=8, do_minimize=False)
    for tid in range(12):
        obs.add_trial(tid, {}, x[tid])
        obs.add_result(tid, 1, curves[tid, 0])
    norm = Normalised(obs)
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=30, refine_iterations=5))
    gp.fit(norm.data(), from_scratch=True, seed=0)
    cands = Candidates(x, np.full(12, 2), norm.curves(list(obs.trials.values())), list(range(12)), [{}] * 12)
    reference, _ = gp.predict(cands, cands.budget)

    # a refinement whose training hits a non-PD kernel: rolled back and refitted from scratch
    original_train, calls = deep_kernel_gp.DeepKernelGP._train, []

    def failing_once(self, iterations):
        calls.append(iterations)
        if len(calls) == 1:
            raise NotPSDError("injected")
        return original_train(self, iterations)

    monkeypatch.setattr(deep_kernel_gp.DeepKernelGP, "_train", failing_once)
    gp.fit(norm.data(), from_scratch=False, seed=1)
    assert gp.num_failures == 1 and calls == [5, 30]  # refine failed -> full refit
    monkeypatch.setattr(deep_kernel_gp.DeepKernelGP, "_train", original_train)

    # a prediction whose factorisation fails once: last good weights restored, decision made
    original_chol, failures = deep_kernel_gp._robust_cholesky, []

    def chol_failing_once(matrix, max_tries=4):
        if not failures:
            failures.append(1)
            raise NotPSDError("injected")
        return original_chol(matrix, max_tries)

    monkeypatch.setattr(deep_kernel_gp, "_robust_cholesky", chol_failing_once)
    gp._posterior = None
    mean, std = gp.predict(cands, cands.budget)
    assert gp.num_failures == 2 and np.all(np.isfinite(mean)) and np.all(std > 0)
    assert reference.shape == mean.shape


def test_power_law_ensemble_rescaled_to_a_new_transform_predicts_the_same_values():
    from syne_dyhpo.core.observations import TrainingData
    from syne_dyhpo.surrogates.power_law import PowerLawConfig

    rng = np.random.default_rng(0)
    n = 200
    x = rng.random((n, 3))
    epochs = rng.integers(1, 21, n).astype(float)
    raw = 10 * x[:, 0] - 2 + 3 * x[:, 1] * epochs**-0.5
    old = ScoreTransform()
    old.fit(raw[:20])  # fitted on the first rows only
    data = TrainingData(x=x, budget=epochs, curves=np.zeros((n, 1)), y=old(raw), max_t=20)
    ensemble = PowerLawEnsemble(PowerLawConfig(max_fit_steps=300))
    ensemble.fit(data, True, 0)
    candidates = Candidates(x=x[:50], budget=epochs[:50], curves=np.zeros((50, 1)),
                            trial_ids=[None] * 50, configs=[{}] * 50)
    new = copy.copy(old)
    new.fit(3.0 * raw + 5.0)  # another location and scale
    assert abs(np.log(new.scale / old.scale)) > 0.5 and abs(new.loc - old.loc) > 1.0
    rescaled = pickle.loads(pickle.dumps(ensemble))
    rescaled.rescale(old, new)
    for budget in (1.0, 7.0, 20.0):
        mean, std = ensemble.predict(candidates, np.full(50, budget))
        mean_new, std_new = rescaled.predict(candidates, np.full(50, budget))
        # the same predictions in the raw metric's units (float32 nets)
        np.testing.assert_allclose(mean_new * new.scale + new.loc, mean * old.scale + old.loc, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(std_new * new.scale, std * old.scale, rtol=1e-4, atol=1e-6)
    # and training goes on in the new units: refined on the same data through the new
    # transform, the predictions stay where they were
    rescaled.fit(replace(data, y=new(raw)), False, 0)
    mean_new, _ = rescaled.predict(candidates, np.full(50, 20.0))
    mean, _ = ensemble.predict(candidates, np.full(50, 20.0))
    assert np.abs(mean_new * new.scale + new.loc - (mean * old.scale + old.loc)).max() < 0.1 * np.ptp(raw)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_power_law_nets_round_trip_through_pickle_and_predict_as_before(batch_norm):
    import torch

    from syne_dyhpo.surrogates.power_law import PowerLawConfig, PowerLawNets

    torch.manual_seed(0)
    nets = PowerLawNets(3, PowerLawConfig(batch_norm=batch_norm)).eval()
    x, b = torch.rand(5, 7, 3), torch.rand(5, 7).clamp_min(0.05)
    nets.rescale(0.5, -0.2)
    old = pickle.loads(pickle.dumps(nets))
    with torch.no_grad():
        np.testing.assert_array_equal(old(x, b).numpy(), nets(x, b).numpy())
    old.rescale(2.0, 1.0)
    with torch.no_grad():
        np.testing.assert_allclose(old(x, b).numpy(), 2.0 * nets(x, b).numpy() + 1.0, rtol=1e-6, atol=1e-6)


def _chance_level_observations() -> Observations:
    """A loss task where 8 configurations sit at chance level (ln 2) and were resumed for 20
    epochs each, while 12 others (the good ones start worse than chance) have one epoch."""
    rng = np.random.RandomState(0)
    obs = Observations(max_t=50, do_minimize=True)
    for trial_id in range(8):
        obs.add_trial(trial_id, {}, np.zeros(1))
        for epoch in range(1, 21):
            obs.add_result(trial_id, epoch, np.log(2) + 1e-5 * rng.randn())
    for trial_id, loss in enumerate(np.linspace(0.71, 3.0, 12), start=8):
        obs.add_trial(trial_id, {}, np.zeros(1))
        obs.add_result(trial_id, 1, loss)
    return obs


def test_normalising_per_trial_keeps_configurations_worse_than_chance_off_the_floor():
    """Fitted on every score, the 160 chance-level epochs set the scale (to its resolution
    bound, 1e-3 of the median), and a configuration starting at a loss of 0.71 maps to the
    floor with the diverged ones; fitted on each trial's best score it stays in the modelled
    range. ``"trials_if_alike"`` sees that every score leaves only the resolution bound and
    fits on the trials' best scores too."""
    from syne_dyhpo.core.policy import SurrogatePolicy

    obs = _chance_level_observations()
    z_of_071 = {}
    for choice in ("epochs", "trials", "trials_if_alike"):
        policy = SurrogatePolicy(PowerLawEnsemble(), acquisition=None, schedule=None, normalisation_scores=choice)
        scores = policy.transform_scores(obs)
        assert len(scores) == (8 * 20 + 12 if choice == "epochs" else 20)
        transform = ScoreTransform()
        transform.fit(scores)
        assert transform.degenerate == (choice == "epochs")
        z_of_071[choice] = float(transform(np.array([-0.71]))[0])
    assert z_of_071["epochs"] == -4.0  # the floor
    assert -1.0 < z_of_071["trials"] == z_of_071["trials_if_alike"] < 0.5
    np.testing.assert_array_equal(
        np.sort(obs.best_scores_per_trial()),
        np.sort([max(obs.trials[t].scores) for t in range(20)]),
    )


def test_normalising_per_trial_if_alike_keeps_every_score_when_they_differ():
    """Improving curves of different configurations: every score spreads enough, so
    ``"trials_if_alike"`` fits on them as ``"epochs"`` does."""
    from syne_dyhpo.core.policy import SurrogatePolicy

    obs = Observations(max_t=20, do_minimize=False)
    for trial_id in range(10):
        obs.add_trial(trial_id, {}, np.zeros(1))
        for epoch in range(1, 2 + 2 * trial_id):
            obs.add_result(trial_id, epoch, 50 + 4 * trial_id * (1 - 0.8**epoch))
    chosen = [
        SurrogatePolicy(PowerLawEnsemble(), acquisition=None, schedule=None, normalisation_scores=c).transform_scores(
            obs
        )
        for c in ("epochs", "trials_if_alike")
    ]
    np.testing.assert_array_equal(chosen[0], chosen[1])
    assert len(chosen[1]) == obs.num_observations == 100
