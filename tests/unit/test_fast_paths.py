"""The fast paths of a decision give the numbers of the straightforward computation they
replace: incremental data, closed-form training steps, cached and extended GP posteriors,
the bounded conditioning set when it covers all rows, pickling, vectorised sampling."""

from __future__ import annotations

import copy
import math
import pickle
from dataclasses import replace

import dill
import gpytorch
import numpy as np
import pytest
import torch
from syne_tune.config_space import choice, finrange, logfinrange, lograndint, loguniform, ordinal, randint, uniform

from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import (
    FitSchedule,
    Surrogate,
    SurrogateCapabilities,
    SurrogatePolicy,
    misfit_p_value,
    torch_threads,
)
from syne_dyhpo.methods.dyhpo import MultiFidelityLogEI
from syne_dyhpo.search_space import ConfigEncoder, to_native
from syne_dyhpo.surrogates.deep_kernel_gp import (
    DeepKernelGP,
    DeepKernelGPConfig,
    FeatureExtractor,
    _GPModel,
    gpytorch_posterior,
    model_inputs,
)
from syne_dyhpo.surrogates.deep_kernel_gp.posterior import _Posterior
from syne_dyhpo.surrogates.marginal_likelihood import negative_mll, negative_mll_and_gradients, rbf
from syne_dyhpo.surrogates.optim import Adam
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform
from syne_dyhpo.surrogates.power_law import PowerLawConfig, PowerLawEnsemble, PowerLawNets, train_step

# ----- observations: rows kept up to date == rows rebuilt from the curves ---------------------


def rebuilt_training_data(obs: Observations):
    """The rows as the package built them before they were kept up to date: from the curves
    and the arrival log, at once."""
    records = [r for r in obs.trials.values() if r.last_epoch > 0]
    index = {r.trial_id: i for i, r in enumerate(records)}
    full = obs.curves(records)
    rows_trial = np.array([index[t] for t, _ in obs._row_log], dtype=int)
    rows_epoch = np.array([e - 1 for _, e in obs._row_log], dtype=int)
    x = np.stack([r.encoded for r in records])[rows_trial]
    curves = full[rows_trial]
    curves[np.arange(obs.max_t)[None, :] >= rows_epoch[:, None]] = np.nan
    return x, rows_epoch + 1, curves, full[rows_trial, rows_epoch]


def random_observations(seed: int, max_t: int = 8, trials: int = 12, reports: int = 120) -> Observations:
    rng = np.random.RandomState(seed)
    obs = Observations(max_t=max_t, do_minimize=bool(seed % 2))
    for tid in range(trials):
        obs.add_trial(tid, {}, rng.rand(3))
    for step in range(reports):
        tid = rng.randint(trials)
        record = obs.trials[tid]
        epoch = record.last_epoch + rng.choice([1, 1, 1, 2, 0, -1])  # gaps, repeats, stale
        value = rng.randn() if rng.rand() > 0.03 else np.nan  # diverged now and then
        obs.add_result(tid, max(epoch, 1), value)
        if step == reports // 2:
            obs.archive(3)  # a restart: the curve moves to an archived record
    return obs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_observation_rows_equal_rows_rebuilt_from_curves(seed):
    obs = random_observations(seed)
    data = obs.training_data()
    x, budget, curves, y = rebuilt_training_data(obs)
    np.testing.assert_array_equal(data.x, x)
    np.testing.assert_array_equal(data.budget, budget)
    np.testing.assert_array_equal(data.curves, curves)
    np.testing.assert_array_equal(data.y, y)
    everything = np.concatenate([np.asarray(r.scores, dtype=float) for r in obs.trials.values()])
    np.testing.assert_array_equal(np.sort(obs.all_scores()), np.sort(everything[~np.isnan(everything)]))
    best = np.full(obs.max_t, -np.inf)
    for r in obs.trials.values():
        s = np.where(np.isfinite(r.scores), r.scores, -np.inf)
        best[: len(s)] = np.maximum(best[: len(s)], s)
    np.testing.assert_array_equal(obs.best_score_per_budget(), best)
    finite = everything[np.isfinite(everything)]
    assert obs.best_score() == finite.max()
    assert obs.num_first_epochs == len(obs.scores_at(1)) > 0
    with pytest.raises(ValueError):
        data.y[0] = 1.0  # read-only views
    # a pickle round trip (Tuner.save / Tuner.load) keeps the rows and the counts
    old = pickle.loads(pickle.dumps(obs))
    np.testing.assert_array_equal(old.training_data().curves, curves)
    np.testing.assert_array_equal(old.best_score_per_budget(), best)
    assert old.num_first_epochs == obs.num_first_epochs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_of_each_trial_and_leader_threshold_equal_a_scan_of_the_curves(seed):
    obs = random_observations(seed)
    best = {}
    for r in obs.trials.values():
        finite = [v for v in r.scores if np.isfinite(v)]
        best[r.trial_id] = max(finite) if finite else -np.inf
        assert obs.best_of(r) == best[r.trial_id]
    assert any(tid < 0 for tid in best)  # the archived curve keeps its best, the restarted trial its own
    ranked = sorted((v for v in best.values() if np.isfinite(v)), reverse=True)
    for k in (1, 2, 5, len(ranked)):
        assert obs.leader_threshold(k) == ranked[k - 1]
    assert obs.leader_threshold(len(ranked) + 1) == ranked[-1]  # fewer trials than leaders: all lead
    assert Observations(max_t=3, do_minimize=True).leader_threshold(1) == -np.inf
    # a pickle round trip keeps the best of each trial
    old = pickle.loads(pickle.dumps(obs))
    assert all(old.best_of(r) == best[r.trial_id] for r in old.trials.values())


def test_observation_curves_of_records_equal_row_by_row_fill():
    obs = random_observations(4)
    records = list(obs.trials.values())
    expected = np.full((len(records), obs.max_t), np.nan)
    for i, r in enumerate(records):
        expected[i, : r.last_epoch] = r.scores
    np.testing.assert_array_equal(obs.curves(records), expected)
    assert obs.curves([]).shape == (0, obs.max_t)


def test_policy_transforms_only_new_rows_and_equals_transforming_all():
    obs = random_observations(5, reports=60)
    policy = SurrogatePolicy(surrogate=None, acquisition=None, schedule=FitSchedule(refine_every=1))
    policy.transform.fit(obs.all_scores())
    first = policy._training_data(obs)
    for tid in range(4):
        obs.add_result(tid, obs.trials[tid].last_epoch + 1, 0.3 * tid)
    grown = policy._training_data(obs)
    raw = obs.training_data()
    np.testing.assert_array_equal(grown.y, policy.transform(raw.y))
    np.testing.assert_array_equal(grown.curves, policy.transform.curves(raw.curves))
    np.testing.assert_array_equal(grown.y[: len(first)], first.y)
    policy.transform.fit(obs.all_scores() * 2)  # a new transform: everything re-expressed
    again = policy._training_data(obs)
    np.testing.assert_array_equal(again.curves, policy.transform.curves(raw.curves))
    assert again.version != grown.version
    clone = pickle.loads(pickle.dumps(policy))  # the cache is dropped, not pickled
    assert clone._rows is None
    np.testing.assert_array_equal(clone._training_data(obs).y, again.y)


# ----- power-law ensemble: closed-form steps == autograd + torch.optim.Adam ------------------


@pytest.mark.parametrize("loss,rescaled", [("mse", False), ("l1", False), ("mse", True)])
def test_power_law_closed_form_step_equals_autograd_and_torch_adam(loss, rescaled):
    # without BatchNorm: with it, the biases before the norms have gradient 0 in exact
    # arithmetic, and Adam turns the rounding noise there into steps (the next test compares
    # one step's gradients with BatchNorm)
    torch.manual_seed(0)
    cfg = PowerLawConfig(batch_norm=False)
    reference, fast = PowerLawNets(4, cfg), PowerLawNets(4, cfg)
    fast.load_state_dict(reference.state_dict())
    if rescaled:  # through the output map of a rescaled ensemble
        for nets in (reference, fast):
            nets.rescale(0.4, -0.3)
    optimizer = torch.optim.Adam(reference.parameters(), lr=cfg.lr)
    adam = Adam(list(fast.parameters()), lr=cfg.lr)
    loss_fn = torch.nn.functional.mse_loss if loss == "mse" else torch.nn.functional.l1_loss
    gen = torch.Generator().manual_seed(1)
    for _ in range(30):
        x = torch.rand(5, 16, 4, generator=gen)
        b = torch.rand(5, 16, generator=gen).clamp_min(0.02)
        target = torch.rand(5, 16, generator=gen)
        optimizer.zero_grad()
        value = loss_fn(reference(x, b), target) * 5
        value.backward()
        optimizer.step()
        assert train_step(fast, adam, x, b, target, loss) == pytest.approx(float(value.detach()), rel=1e-5)
    for p, q in zip(reference.parameters(), fast.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-5)


def test_power_law_closed_form_gradients_with_batch_norm_equal_autograd():
    # the paper's BatchNorm (PowerLawConfig(batch_norm=True)): one step's loss, every gradient
    # and the running statistics against autograd through the module's training-mode forward
    from syne_dyhpo.surrogates.power_law import loss_and_gradients

    torch.manual_seed(0)
    cfg = PowerLawConfig(batch_norm=True)
    reference = PowerLawNets(4, cfg)
    reference.rescale(0.4, -0.3)
    fast = copy.deepcopy(reference)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(5, 16, 4, generator=gen)
    b = torch.rand(5, 16, generator=gen).clamp_min(0.02)
    target = torch.rand(5, 16, generator=gen)
    for loss, loss_fn in (("mse", torch.nn.functional.mse_loss), ("l1", torch.nn.functional.l1_loss)):
        params = list(reference.parameters())
        expected = loss_fn(reference(x, b), target) * 5
        expected_grads = torch.autograd.grad(expected, params)
        value, grads = loss_and_gradients(fast, x, b, target, loss)
        assert float(value) == pytest.approx(float(expected.detach()), rel=1e-6)
        assert len(grads) == len(params) == 10  # 3 linear layers and 2 norms, weight and bias each
        for (name, _), grad, want in zip(reference.named_parameters(), grads, expected_grads):
            assert grad.shape == want.shape, name
            # the biases before a BatchNorm have gradient 0 (it removes them): rounding noise
            atol = 1e-6 * float(want.abs().max()) + 1e-7
            np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-4, atol=atol, err_msg=name)
        for key, tensor in reference.state_dict().items():
            if "running" in key or "num_batches" in key:
                assert torch.allclose(fast.state_dict()[key], tensor, rtol=1e-6, atol=1e-7), key
        assert int(fast.state_dict()["norms.0.num_batches_tracked"]) in (1, 2)


def test_power_law_batch_norm_predicts_with_running_statistics_and_skips_single_rows():
    data = power_law_data(n=65)  # minibatches of 64 and 1 row: the single row has no statistics
    ensemble = PowerLawEnsemble(PowerLawConfig(batch_norm=True, fit_epochs=3))
    ensemble.fit(data, from_scratch=True, seed=0)
    nets = ensemble._nets
    assert int(nets.norms[0].num_batches_tracked) == 3  # one step per epoch: the 1-row batch skipped
    assert nets.training  # left in training mode for the next fit
    candidates = Candidates(data.x[:7], np.full(7, 10), np.full((7, 10), np.nan), [None] * 7, [{}] * 7)
    mean, std = ensemble.predict(candidates, candidates.budget)
    # a candidate's prediction does not depend on the others predicted with it (running
    # statistics, not those of the batch), and predicting changes no statistic
    alone, _ = ensemble.predict(
        Candidates(data.x[:1], np.full(1, 10), np.full((1, 10), np.nan), [None], [{}]), np.full(1, 10)
    )
    assert alone[0] == pytest.approx(mean[0], rel=1e-5)
    assert int(nets.norms[0].num_batches_tracked) == 3
    assert np.all(std > 0)
    with pytest.raises(ValueError, match="batch_norm"):
        PowerLawConfig(batch_norm="yes")
    with pytest.raises(ValueError, match="loss must be one of 'mse', 'l1', got 'huber'"):
        PowerLawConfig(loss="huber")


def test_adam_over_mixed_dtypes_equals_torch_adam():
    params = [
        torch.randn(3, 4, dtype=torch.float32),
        torch.randn(5, dtype=torch.float64),
        torch.randn(2, dtype=torch.float32),
    ]
    ref = [p.clone().requires_grad_() for p in params]
    optimizer = torch.optim.Adam(ref, lr=0.1)
    adam = Adam(params, lr=0.1)
    for step in range(10):
        grads = [torch.randn_like(p) * (step + 1) for p in params]
        for r, g in zip(ref, grads):
            r.grad = g.clone()
        optimizer.step()
        adam.step(grads)
    for r, p in zip(ref, params):
        np.testing.assert_allclose(r.detach().numpy(), p.numpy(), rtol=1e-6, atol=1e-6)


def test_adam_round_trips_through_pickle_and_steps_on_as_before():
    params = [
        torch.randn(3, 4, dtype=torch.float32),
        torch.randn(5, dtype=torch.float64),
        torch.randn(2, dtype=torch.float32),
    ]
    adam = Adam([p.clone() for p in params], lr=0.1)
    grads = [[torch.randn_like(p) for p in params] for _ in range(6)]
    for g in grads[:3]:
        adam.step(g)
    old = pickle.loads(pickle.dumps(adam))
    assert old.steps == 3 and all(torch.equal(a, b) for a, b in zip(old.exp_avg_sq, adam.exp_avg_sq))
    for g in grads[3:]:
        adam.step(g)
        old.step(g)
    for p, q in zip(adam.params, old.params):
        assert torch.equal(p, q)


def power_law_data(n: int = 60, seed: int = 0):
    from syne_dyhpo.core.observations import TrainingData

    rng = np.random.RandomState(seed)
    x = rng.rand(n, 3)
    budget = rng.randint(1, 11, size=n)
    y = -(0.2 + 0.3 * x[:, 0] + 0.1 * (budget / 10) ** -0.5) + 0.01 * rng.randn(n)
    return TrainingData(x=x, budget=budget, curves=np.full((n, 10), np.nan), y=y, max_t=10)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_power_law_dill_round_trip_predicts_and_trains_the_same(batch_norm):
    data = power_law_data()
    ens = PowerLawEnsemble(PowerLawConfig(fit_epochs=20, max_refine_steps=4, batch_norm=batch_norm))
    ens.fit(data, from_scratch=True, seed=0)
    clone = dill.loads(dill.dumps(ens))
    cands = Candidates(data.x[:7], np.full(7, 10), np.full((7, 10), np.nan), [None] * 7, [{}] * 7)
    for a, b in zip(ens.predict(cands, cands.budget), clone.predict(cands, cands.budget)):
        np.testing.assert_array_equal(a, b)
    ens.fit(data, from_scratch=False, seed=1)  # Adam moments survive the round trip
    clone.fit(data, from_scratch=False, seed=1)
    for a, b in zip(ens.predict(cands, cands.budget), clone.predict(cands, cands.budget)):
        np.testing.assert_array_equal(a, b)


def test_power_law_step_caps():
    data = power_law_data(n=200)
    counted = []
    import syne_dyhpo.surrogates.power_law as pl

    original = pl.train_step
    try:
        pl.train_step = lambda *a: counted.append(1) or original(*a)
        ens = PowerLawEnsemble(PowerLawConfig(fit_epochs=3, max_fit_steps=5, max_refine_steps=2))
        ens.fit(data, from_scratch=True, seed=0)
        assert len(counted) == 5  # 3 epochs of 4 batches, capped at 5 steps
        ens.fit(data, from_scratch=False, seed=0)
        assert len(counted) == 7
        ens = PowerLawEnsemble(replace(PowerLawConfig.paper(), fit_epochs=3))
        ens.fit(data, from_scratch=True, seed=0)
        assert len(counted) == 7 + 12  # paper: no cap
        # 200 observations, twice the size after which the refinement cap shrinks: half of it
        ens = PowerLawEnsemble(PowerLawConfig(fit_epochs=1, max_refine_steps=8, refine_steps_shrink_after=100))
        ens.fit(data, from_scratch=True, seed=0)
        ens.fit(data, from_scratch=False, seed=0)
        assert len(counted) == 19 + 4 + 4
    finally:
        pl.train_step = original
    with pytest.raises(ValueError, match="max_fit_steps"):
        PowerLawConfig(max_fit_steps=0)
    with pytest.raises(ValueError, match="refine_steps_shrink_after"):
        PowerLawConfig(refine_steps_shrink_after=0)


@pytest.mark.parametrize(
    "n, fit_steps, refine_steps", [(640, 2500, 16), (1000, 4000, 16), (1100, 4000, 16), (4000, 4000, 8)]
)
def test_deep_power_laws_default_caps_train_as_version_0_1_up_to_1024_observations(
    n, fit_steps, refine_steps, monkeypatch
):
    # version 0.1 had no cap on fits from scratch (250 epochs of ceil(n / 64) minibatches) and
    # 16 steps per refinement: the default's caps bind only beyond 1024 and 2000 observations
    import syne_dyhpo.surrogates.power_law as pl

    data = power_law_data(n=n)
    counted = []
    monkeypatch.setattr(pl, "train_step", lambda *a: counted.append(1))  # count, do not train
    ens = PowerLawEnsemble(PowerLawConfig())
    ens.fit(data, from_scratch=True, seed=0)
    assert len(counted) == fit_steps == min(250 * -(-n // 64), 4000)
    ens.fit(data, from_scratch=False, seed=0)
    assert len(counted) - fit_steps == refine_steps


def test_refinement_cap_shrinks_as_the_inverse_of_the_data_beyond_its_size():
    from syne_dyhpo.surrogates.power_law import refine_step_cap

    shrinking = PowerLawConfig(max_refine_steps=16, refine_steps_shrink_after=2000)
    assert [refine_step_cap(shrinking, n) for n in (1, 2000, 2001, 4000, 5000, 8000, 10000, 40000)] == [
        16,
        16,
        15,
        8,
        6,
        4,
        3,
        1,  # never below one step
    ]
    no_shrinking = PowerLawConfig(max_refine_steps=16, refine_steps_shrink_after=None)
    assert refine_step_cap(no_shrinking, 10**6) == 16
    no_cap_to_shrink = PowerLawConfig(max_refine_steps=None, refine_steps_shrink_after=10)
    assert refine_step_cap(no_cap_to_shrink, 10**6) is None


# ----- deep-kernel GP -------------------------------------------------------------------------


def saturating_observations(n_trials: int, max_t: int, seed: int, lengths=None) -> tuple[Observations, np.ndarray]:
    rng = np.random.RandomState(seed)
    x = rng.rand(n_trials, 2)
    a = 0.6 + 0.3 * x[:, 0]
    b = 0.3 + 0.2 * x[:, 1]
    c = 0.4 + 0.6 * x[:, 0]
    t = np.arange(1, max_t + 1)
    curves = a[:, None] - b[:, None] * t[None, :] ** (-c[:, None]) + 0.01 * rng.randn(n_trials, max_t)
    obs = Observations(max_t=max_t, do_minimize=False)
    lengths = rng.randint(1, max_t, size=n_trials) if lengths is None else lengths
    for tid in range(n_trials):
        obs.add_trial(tid, {}, x[tid])
        for e in range(1, lengths[tid] + 1):
            obs.add_result(tid, e, curves[tid, e - 1])
    return obs, curves


def normalised(obs: Observations, transform: ScoreTransform):
    raw = obs.training_data()
    return replace(
        raw, y=transform(raw.y), curves=transform.curves(raw.curves), version=(raw.version, transform.version)
    )


def candidates_of(obs: Observations, transform: ScoreTransform, new_x: np.ndarray) -> Candidates:
    records = [r for r in obs.trials.values() if r.last_epoch < obs.max_t]
    x = np.concatenate([np.stack([r.encoded for r in records]), new_x])
    budget = np.array([r.last_epoch + 1 for r in records] + [1] * len(new_x))
    curves = np.concatenate([transform.curves(obs.curves(records)), np.full((len(new_x), obs.max_t), np.nan)])
    return Candidates(x, budget, curves, [r.trial_id for r in records] + [None] * len(new_x), [{}] * len(budget))


@pytest.fixture
def fitted_gp():
    obs, curves = saturating_observations(25, 8, seed=0)
    transform = ScoreTransform()
    transform.fit(obs.all_scores())
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=30))
    gp.fit(normalised(obs, transform), from_scratch=True, seed=0)
    return gp, obs, curves, transform


def test_kernel_entries_below_exp_minus_700_are_zero_and_the_others_gpytorchs():
    # distances of 0.5 to 60 lengthscales: exp(-d^2 / 2) from 0.88 down to exp(-1800)
    z = torch.tensor([[0.0], [0.5], [20.0], [37.0], [38.0], [60.0]], dtype=torch.float64)
    lengthscale, outputscale = torch.tensor(1.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64)
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel()).double()
    kernel.base_kernel.lengthscale, kernel.outputscale = lengthscale, outputscale
    reference = kernel(z, z).to_dense().detach()
    half_sq = (z - z.T).square() / 2
    for values in (rbf(z, z, lengthscale, outputscale), _scaled_kernel(z, outputscale)):
        near = half_sq <= 700
        assert torch.all(values[~near] == 0) and (~near).any()
        np.testing.assert_allclose(values[near].numpy(), reference[near].numpy(), rtol=1e-9, atol=0)
        assert (values[near] > 0).all()


def _scaled_kernel(z: torch.Tensor, outputscale: torch.Tensor) -> torch.Tensor:
    """The prediction path's kernel (``_Posterior.kernel``) between features already scaled."""
    post = _Posterior(0, np.arange(len(z)), 1, len(z), torch.zeros(1, 1, dtype=torch.float64), 1.0, float(outputscale))
    sq = z.square().sum(dim=1)
    return post.kernel(z, sq, z, sq)


def test_negative_mll_and_gradients_equal_gpytorch(fitted_gp):
    gp = fitted_gp[0]
    model = gp._model
    model.train()
    gp._likelihood.train()
    inputs, targets = model.train_inputs[0], model.train_targets
    params = list(model.parameters())
    with gpytorch.settings.max_cholesky_size(100_000):
        reference = -gpytorch.mlls.ExactMarginalLogLikelihood(gp._likelihood, model)(model(inputs), targets)
    ref_grads = torch.autograd.grad(reference, params)
    value = negative_mll(model, inputs, targets)
    grads = torch.autograd.grad(value, params)
    assert float(value.detach()) == pytest.approx(float(reference.detach()), rel=1e-9)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-7)


def _closed_form_against_autograd(model, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """Loss, gradients and BatchNorm's running statistics of one training step, closed form
    against autograd through :func:`negative_mll`, from copies of the same model."""
    reference_model, model = copy.deepcopy(model), copy.deepcopy(model)
    named = list(reference_model.named_parameters())
    reference = negative_mll(reference_model, inputs, targets)
    reference_grads = torch.autograd.grad(reference, [p for _, p in named])
    value, grads = negative_mll_and_gradients(model, targets, model.extractor.prepare(inputs))
    assert value == pytest.approx(float(reference.detach()), rel=1e-12)
    assert set(grads) == {name for name, _ in named}
    for (name, _), expected in zip(named, reference_grads):
        assert grads[name].shape == expected.shape and grads[name].dtype == expected.dtype, name
        scale = float(expected.abs().max())
        np.testing.assert_allclose(
            grads[name].numpy(), expected.numpy(), rtol=1e-4, atol=1e-6 * scale + 1e-12, err_msg=name
        )
    expected_state, state = reference_model.state_dict(), model.state_dict()
    for key in (
        "extractor.config_layer.1.running_mean",
        "extractor.config_layer.1.running_var",
        "extractor.config_layer.1.num_batches_tracked",
    ):
        assert torch.allclose(state[key], expected_state[key], rtol=1e-6), key
    assert int(state["extractor.config_layer.1.num_batches_tracked"]) >= 1


def test_closed_form_gradients_equal_autograd_on_a_fitted_gp(fitted_gp):
    gp = fitted_gp[0]
    gp._model.train()
    gp._likelihood.train()
    _closed_form_against_autograd(gp._model, gp._model.train_inputs[0], gp._model.train_targets)


@pytest.mark.parametrize("lengthscale", [1e-3, 1.0])
def test_closed_form_gradients_equal_autograd_with_ties_and_cut_off_entries(lengthscale):
    # budget-1 rows (no curve: all convolution positions tie) and curves with repeated values
    # (identical windows tie), a lengthscale that puts most pairs beyond the kernel's cut-off
    # (1e-3) or none (1.0)
    rng = np.random.RandomState(3)
    n, d, t = 40, 3, 6
    budget = rng.randint(1, t + 1, n)
    budget[:10] = 1
    curves = np.full((n, t), np.nan)
    for i in range(n):
        curves[i, : budget[i] - 1] = rng.rand(budget[i] - 1)
    budget[10:20] = t
    curves[10:20, : t - 1] = 0.5  # a plateau
    inputs = model_inputs(rng.rand(n, d), budget, curves, t)
    targets = torch.from_numpy(rng.randn(n))
    torch.manual_seed(0)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = _GPModel(inputs, targets, likelihood, FeatureExtractor(d, t, DeepKernelGPConfig()))
    for module in (model.mean_module, model.covar_module, likelihood):
        module.to(torch.float64)
    model.covar_module.base_kernel.lengthscale = lengthscale
    model.train()
    likelihood.train()
    _closed_form_against_autograd(model, inputs, targets)


@pytest.mark.parametrize(
    "group, stale_rows, cache_floor",
    [
        (1, 64, None),  # every length its own group
        (32, 64, None),
        (32, 0, None),  # the factor's contiguous copy renewed whenever a 16th of the set is new
        (32, 10**6, None),  # never renewed: new inputs go through the appended rows' block
        (32, 64, 16),  # a cache of 16 entries: emptied (but for those in use) at most decisions
    ],
)
def test_cached_candidates_extended_as_rows_arrive_equal_recomputation_and_gpytorch(
    fitted_gp, monkeypatch, group, stale_rows, cache_floor
):
    import syne_dyhpo.surrogates.deep_kernel_gp.posterior as dkgp

    monkeypatch.setattr(dkgp, "_SAME_LENGTH_GROUP", group)
    monkeypatch.setattr(dkgp, "_PREFIX_STALE_ROWS", stale_rows)
    compactions = []
    if cache_floor is not None:
        monkeypatch.setattr(dkgp, "CANDIDATE_CACHE_BYTES", 0)
        monkeypatch.setattr(dkgp, "_MIN_CACHED_CANDIDATES", cache_floor)
        compact = dkgp._Posterior.compact
        monkeypatch.setattr(dkgp._Posterior, "compact", lambda *a: compactions.append(1) or compact(*a))
    gp, obs, curves, transform = fitted_gp
    rng = np.random.RandomState(1)
    pool = rng.rand(40, 2)
    for step in range(6):
        # each decision scores the paused trials and a different sample of the pool: cached
        # entries then lag by different numbers of rows
        cands = candidates_of(obs, transform, pool[rng.choice(40, size=12, replace=False)])
        mean, std = gp.predict(cands, cands.budget)
        fresh = DeepKernelGP(gp.config)
        fresh.__dict__.update({k: v for k, v in gp.__dict__.items() if k != "_posterior"})
        fresh._posterior = None
        ref_mean, ref_std = fresh.predict(cands, cands.budget)  # refactorised, nothing cached
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(std, ref_std, rtol=1e-6, atol=1e-8)
        gp_mean, gp_std = gpytorch_posterior(gp, model_inputs(cands.x, cands.budget, cands.curves, obs.max_t))
        np.testing.assert_allclose(mean, gp_mean, atol=1e-6)
        np.testing.assert_allclose(std, gp_std, rtol=1e-4, atol=1e-6)
        for tid in rng.choice(25, size=1 + step % 3, replace=False):
            e = obs.trials[tid].last_epoch + 1
            if e <= obs.max_t:
                obs.add_result(tid, e, curves[tid, e - 1])
        gp.condition(normalised(obs, transform))
    assert gp._posterior.size == len(obs.training_data())  # extended all along, never refactorised
    if cache_floor is None:
        assert len(gp._posterior.keys) > 12
    else:
        assert len(compactions) >= 5  # emptied at nearly every decision, and still exact
    if stale_rows > 1000:
        assert len(gp._posterior._contiguous) < gp._posterior.size  # the appended block was used


def test_candidate_cache_of_a_new_posterior_starts_at_the_size_the_last_one_grew_to(fitted_gp, monkeypatch):
    import syne_dyhpo.surrogates.deep_kernel_gp.posterior as dkgp

    monkeypatch.setattr(dkgp, "_MIN_CACHED_CANDIDATES", 4096)
    gp, obs, _curves, transform = fitted_gp
    rng = np.random.RandomState(2)
    for _ in range(3):  # 3 x 200 new inputs: the cache grows by doubling, past 256 slots
        cands = candidates_of(obs, transform, rng.rand(200, 2))
        gp.predict(cands, cands.budget)
    grown = len(gp._posterior.cand_len)
    assert grown > 512
    gp._load_state(gp._good_state)  # new weights version: the posterior is rebuilt
    cands = candidates_of(obs, transform, rng.rand(10, 2))
    mean, std = gp.predict(cands, cands.budget)
    assert len(gp._posterior.cand_len) == grown  # allocated at once, not regrown from 256
    gp_mean, gp_std = gpytorch_posterior(gp, model_inputs(cands.x, cands.budget, cands.curves, obs.max_t))
    np.testing.assert_allclose(mean, gp_mean, atol=1e-6)
    np.testing.assert_allclose(std, gp_std, rtol=1e-4, atol=1e-6)


def test_misfit_errors_are_standardised_one_step_ahead_errors(fitted_gp):
    gp, obs, curves, transform = fitted_gp
    gp.config = replace(gp.config, predict_noisy=True)
    cands = candidates_of(obs, transform, np.zeros((0, 2)))
    gp.predict(cands, cands.budget)
    expected = []
    for tid in (0, 5, 9):
        e = obs.trials[tid].last_epoch + 1
        record = obs.trials[tid]
        one = Candidates(record.encoded[None], np.array([e]), transform.curves(obs.curves([record])), [tid], [{}])
        mean, std = gp.predict(one, one.budget)  # noisy predictive of the next observation
        obs.add_result(tid, e, curves[tid, e - 1])
        expected.append((transform(np.array([curves[tid, e - 1]]))[0] - mean[0]) / std[0])
        gp.condition(normalised(obs, transform))
    np.testing.assert_allclose(gp.misfit(), expected, rtol=1e-5, atol=1e-8)
    gp.fit(normalised(obs, transform), from_scratch=False, seed=3)
    assert len(gp.misfit()) == 0  # training starts the count again


def _trained_gp_with_bound(gp: DeepKernelGP, max_condition_points: int) -> DeepKernelGP:
    """``gp``'s trained model and data, its posterior conditioned on at most this many rows."""
    bounded = DeepKernelGP(replace(gp.config, max_condition_points=max_condition_points))
    bounded.__dict__.update({k: v for k, v in gp.__dict__.items() if k not in ("_posterior", "config")})
    bounded._posterior = None
    return bounded


def _latest_row_of_each_config(obs) -> list[int]:
    latest = {}
    for i, x in enumerate(obs.training_data().x):
        latest[x.tobytes()] = i
    return sorted(latest.values())


def test_bounded_conditioning_set_covering_all_rows_is_the_full_posterior_and_otherwise_gpytorchs(fitted_gp):
    gp, obs, curves, transform = fitted_gp
    n = len(obs.training_data())
    cands = candidates_of(obs, transform, np.random.RandomState(2).rand(10, 2))
    full = gp.predict(cands, cands.budget)
    covering = _trained_gp_with_bound(gp, n)
    for a, b in zip(full, covering.predict(cands, cands.budget)):
        np.testing.assert_allclose(a, b, atol=1e-10)
    bounded = _trained_gp_with_bound(gp, 30)
    mean, std = bounded.predict(cands, cands.budget)
    rows = bounded.conditioning_rows()
    assert len(rows) == 30 and np.all(np.diff(rows) > 0)
    assert set(_latest_row_of_each_config(obs)) <= set(rows)  # every configuration's latest row is kept
    ref_mean, ref_std = gpytorch_posterior(bounded, model_inputs(cands.x, cands.budget, cands.curves, obs.max_t))
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(std, ref_std, rtol=1e-4, atol=1e-6)
    assert not np.allclose(mean, full[0], atol=1e-6)  # rows were left out
    # appended rows extend the bounded set until it outgrows the bound by a quarter
    for tid in range(25):
        e = obs.trials[tid].last_epoch + 1
        if e <= obs.max_t:
            obs.add_result(tid, e, curves[tid, e - 1])
            bounded.condition(normalised(obs, transform))
            assert bounded._posterior.size <= 30 + 30 // 4
    with pytest.raises(ValueError, match="max_condition_points"):
        DeepKernelGPConfig(max_condition_points=0)


def test_bound_below_the_number_of_configurations_keeps_the_latest_rows_of_the_most_recent_ones(fitted_gp):
    gp, obs, _curves, transform = fitted_gp
    latest = _latest_row_of_each_config(obs)
    assert len(latest) == 25
    bounded = _trained_gp_with_bound(gp, 20)
    cands = candidates_of(obs, transform, np.random.RandomState(3).rand(6, 2))
    mean, std = bounded.predict(cands, cands.budget)
    # one row per configuration: the latest rows of the 20 configurations observed last
    np.testing.assert_array_equal(bounded.conditioning_rows(), latest[-20:])
    ref_mean, ref_std = gpytorch_posterior(bounded, model_inputs(cands.x, cands.budget, cands.curves, obs.max_t))
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(std, ref_std, rtol=1e-4, atol=1e-6)


def test_deep_kernel_gp_dill_round_trip_predicts_the_same(fitted_gp):
    gp, obs, curves, transform = fitted_gp
    cands = candidates_of(obs, transform, np.random.RandomState(3).rand(5, 2))
    before = gp.predict(cands, cands.budget)
    blob = dill.dumps(gp)
    clone = dill.loads(blob)
    assert clone._posterior is None and gp._posterior is not None  # the cache is not pickled
    for a, b in zip(before, clone.predict(cands, cands.budget)):
        np.testing.assert_allclose(a, b, atol=1e-10)
    obs.add_result(0, obs.trials[0].last_epoch + 1, curves[0, obs.trials[0].last_epoch])
    for surrogate in (gp, clone):
        surrogate.condition(normalised(obs, transform))
    for a, b in zip(gp.predict(cands, cands.budget), clone.predict(cands, cands.budget)):
        np.testing.assert_allclose(a, b, atol=1e-10)


# ----- fit schedule on evidence of misfit -----------------------------------------------------


def test_misfit_sign_test():
    assert misfit_p_value(np.zeros(0)) == 1.0
    assert misfit_p_value(np.zeros(10)) == 1.0
    assert misfit_p_value(np.full(7, 3.0)) == pytest.approx(0.5**7)
    # a few huge errors among well-predicted rows are no evidence (a chi-square test would fire)
    errors = np.concatenate([np.full(3, 30.0), np.full(27, 0.1)])
    assert misfit_p_value(errors) > 0.5
    assert misfit_p_value(np.full(40, 1.5)) < 1e-9
    exceed = np.r_[np.full(20, 1.0), np.full(10, 0.1)]
    assert misfit_p_value(exceed) == pytest.approx(sum(math.comb(30, k) for k in range(20, 31)) / 2**30)


class RecordingSurrogate(Surrogate):
    capabilities = SurrogateCapabilities(misfit=True)

    def __init__(self):
        self.calls = []
        self.errors = np.zeros(0)

    def fit(self, data, from_scratch, seed):
        self.calls.append("scratch" if from_scratch else "refine")
        self.errors = np.zeros(0)

    def condition(self, data):
        self.calls.append("condition")

    def misfit(self):
        return self.errors

    def predict(self, candidates, budget):
        return np.zeros(len(candidates)), np.ones(len(candidates))


def test_policy_refines_on_evidence_of_misfit_and_at_the_latest_on_the_clock():
    surrogate = RecordingSurrogate()
    policy = SurrogatePolicy(
        surrogate, MultiFidelityLogEI.from_observations, FitSchedule(refine_every=5, refine_on_misfit=0.01)
    )
    obs = Observations(max_t=50, do_minimize=False)
    obs.add_trial(0, {}, np.zeros(1))
    epoch = 0

    def observe():
        nonlocal epoch
        epoch += 1
        obs.add_result(0, epoch, 1.0)  # constant: the transform never gets outdated
        policy.fit(obs, seed=0)
        return surrogate.calls[-1]

    assert observe() == "scratch"
    surrogate.calls.clear()
    assert [observe() for _ in range(5)] == ["condition"] * 4 + ["refine"]  # the clock
    surrogate.calls.clear()
    surrogate.errors = np.full(8, 3.0)  # the model keeps missing: refined at once
    assert observe() == "refine" and surrogate.calls == ["condition", "refine"]
    assert policy.num_misfit_refines == 1
    clock = SurrogatePolicy(RecordingSurrogate(), MultiFidelityLogEI.from_observations, FitSchedule(refine_every=5))
    assert clock.schedule.refine_on_misfit is None  # the default: the clock only
    with pytest.raises(ValueError, match="refine_on_misfit"):
        FitSchedule(refine_every=1, refine_on_misfit=1.5)


def test_policy_uses_only_the_capabilities_a_surrogate_declares():
    class NoMisfit(RecordingSurrogate):
        capabilities = SurrogateCapabilities()  # misfit() exists but is not declared

        def misfit(self):
            raise AssertionError("asked for an undeclared capability")

    surrogate = NoMisfit()
    policy = SurrogatePolicy(
        surrogate,
        MultiFidelityLogEI.from_observations,
        FitSchedule(refine_every=3, refine_on_misfit=0.01, rescale_when_outdated=True),
    )
    obs = Observations(max_t=50, do_minimize=False)
    obs.add_trial(0, {}, np.zeros(1))
    for epoch in range(1, 8):
        obs.add_result(0, epoch, 1.0)
        policy.fit(obs, seed=0)
    # the clock alone: scratch, then refined every 3 observations
    assert surrogate.calls == ["scratch", "condition", "condition", "refine", "condition", "condition", "refine"]
    assert policy._can_rescale() is False
    with pytest.raises(
        ValueError,
        match="condition_on_pending=True needs a surrogate with the pending capability; "
        "NoMisfit has SurrogateCapabilities",
    ):
        SurrogatePolicy(
            NoMisfit(), MultiFidelityLogEI.from_observations, FitSchedule(refine_every=1), condition_on_pending=True
        )
    assert DeepKernelGP.capabilities == SurrogateCapabilities(misfit=True, pending=True)
    assert PowerLawEnsemble.capabilities == SurrogateCapabilities(rescale=True)


def test_pending_results_reach_the_surrogate_through_the_policy_without_changing_the_fitted_model():
    class Pending(RecordingSurrogate):
        capabilities = SurrogateCapabilities(pending=True)

        def predict(self, candidates, budget, pending=None, pending_budget=None):
            self.calls.append(("predict", None if pending is None else len(pending)))
            return np.zeros(len(candidates)), np.ones(len(candidates))

    obs = Observations(max_t=5, do_minimize=False)
    for tid in (0, 1):
        obs.add_trial(tid, {}, np.full(1, 0.1 * tid))
        obs.add_result(tid, 1, 0.5 + 0.1 * tid)
    cands = Candidates(np.zeros((2, 1)), np.array([2, 2]), np.full((2, 5), np.nan), [0, 1], [{}, {}])
    pending = Candidates(np.ones((1, 1)), np.array([2]), np.full((1, 5), np.nan), [2], [{}])
    for condition, expected in ((True, 1), (False, None)):
        surrogate = Pending()
        policy = SurrogatePolicy(
            surrogate, MultiFidelityLogEI.from_observations, FitSchedule(refine_every=1), condition_on_pending=condition
        )
        model = policy.fit(obs, seed=0)
        policy.score(model, cands, obs, pending=pending)
        assert surrogate.calls[-1] == ("predict", expected) and model.pending is None


def test_refines_every_refine_every_observations_or_a_fraction_of_all_whichever_is_more():
    schedule = FitSchedule(refine_every=15, refine_every_fraction=0.01)
    assert [schedule.refine_interval(n) for n in (1, 1500, 1501, 5000, 10_000)] == [15, 15, 16, 50, 100]
    assert FitSchedule(refine_every=15).refine_interval(10_000) == 15  # the default: the clock only
    for value in (0.0, -0.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="refine_every_fraction must be a finite number > 0 or None"):
            FitSchedule(refine_every=15, refine_every_fraction=value)
    surrogate = RecordingSurrogate()
    policy = SurrogatePolicy(
        surrogate, MultiFidelityLogEI.from_observations, FitSchedule(refine_every=2, refine_every_fraction=0.25)
    )
    obs = Observations(max_t=50, do_minimize=False)
    obs.add_trial(0, {}, np.zeros(1))
    for epoch in range(1, 21):
        obs.add_result(0, epoch, 1.0)  # constant: the transform never gets outdated
        policy.fit(obs, seed=0)
    # scratch at 1; then refined once max(2, ceil(n / 4)) rows arrived since the last: 3, 5, 7, 10, 14, 19
    refined_at = [n + 1 for n, call in enumerate(surrogate.calls) if call == "refine"]
    assert surrogate.calls[0] == "scratch" and refined_at == [3, 5, 7, 10, 14, 19]


def test_torch_threads_restores_the_setting():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


# ----- vectorised sampling and encoding == config by config ----------------------------------

SPACE = {
    "a": uniform(0, 1),
    "b": loguniform(1e-4, 1),
    "c": randint(1, 100),
    "d": lograndint(1, 1000),
    "e": choice(["x", "y", "z"]),
    "f": ordinal([1, 2, 4, 8]),
    "g": finrange(0.1, 0.9, 5),
    "h": logfinrange(1, 64, 7),
    "k": 42,
    "m": choice([1.5, 2.5, 3.0]),
    "n": uniform(2.0, 2.0),
}


def reference_encode(encoder: ConfigEncoder, config: dict) -> np.ndarray:
    """One value at a time, as the encoder used to compute it (math.log, min/max)."""
    out, pos = np.zeros(encoder.dim), 0
    for name, kind, enc in encoder._encoders:
        value = config[name]
        if kind == "numerical":
            x = math.log(value) if enc.log else float(value)
            span = enc.upper - enc.lower
            out[pos] = 0.5 if span <= 0 else min(max((x - enc.lower) / span, 0.0), 1.0)
            pos += 1
        else:
            idx = next(i for i, c in enumerate(enc) if c == value or str(c) == str(value))
            if kind == "ordinal":
                out[pos] = idx / max(len(enc) - 1, 1)
                pos += 1
            else:
                out[pos + idx] = 1.0
                pos += len(enc)
    return out


def test_vectorised_sampling_and_encoding_equal_config_by_config():
    encoder = ConfigEncoder(SPACE)
    configs = encoder.sample(np.random.RandomState(0), 200)
    rng = np.random.RandomState(0)
    columns = {name: SPACE[name].sample(spec=None, size=200, random_state=rng) for name in encoder.hp_names}
    expected = [encoder.complete({name: to_native(columns[name][i]) for name in encoder.hp_names}) for i in range(200)]
    assert configs == expected
    assert [list(c) for c in configs] == [list(c) for c in expected]  # same key order
    assert [[type(v) for v in c.values()] for c in configs] == [[type(v) for v in c.values()] for c in expected]
    encoded = encoder.encode_many(configs)
    np.testing.assert_allclose(encoded, np.stack([reference_encode(encoder, c) for c in configs]), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(encoder.encode(configs[3]), encoded[3])
    one = encoder.sample(np.random.RandomState(5), 1)
    assert len(one) == 1 and set(one[0]) == set(SPACE)
    same, keys = encoder.sample_with_keys(np.random.RandomState(0), 200)
    assert same == configs and keys == [encoder.key(c) for c in configs]
    # values of another type than the categories' are still matched (by their string)
    np.testing.assert_array_equal(encoder.encode({**configs[0], "f": "4"}), encoder.encode({**configs[0], "f": 4}))
    with pytest.raises(Exception, match="lacks hyperparameter 'c'"):
        encoder.encode_many([configs[0], {k: v for k, v in configs[1].items() if k != "c"}])


def test_rows_never_scored_as_candidates_extend_the_factor_by_a_solve(fitted_gp):
    gp, obs, curves, transform = fitted_gp
    new = Candidates(
        np.random.RandomState(4).rand(6, 2),
        np.ones(6, dtype=int),
        np.full((6, obs.max_t), np.nan),
        [None] * 6,
        [{}] * 6,
    )
    gp.predict(new, new.budget)  # only new configurations: no paused trial's input is cached
    size = gp._posterior.size
    for tid in (1, 2, 3):
        e = obs.trials[tid].last_epoch + 1
        obs.add_result(tid, e, curves[tid, e - 1])
    gp.condition(normalised(obs, transform))
    assert gp._posterior.size == size + 3 and len(gp.misfit()) == 3
    cands = candidates_of(obs, transform, new.x)
    mean, std = gp.predict(cands, cands.budget)
    ref_mean, ref_std = gpytorch_posterior(gp, model_inputs(cands.x, cands.budget, cands.curves, obs.max_t))
    np.testing.assert_allclose(mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(std, ref_std, rtol=1e-4, atol=1e-6)
