"""The private torch operators of the surrogates' fast paths are probed before use; where one
is missing, refuses its call or gives other numbers, the surrogates train by public
autograd and torch.optim.Adam, with a warning, to the same numbers."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from syne_dyhpo.core.observations import TrainingData
from syne_dyhpo.surrogates import private_ops
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGPConfig, FeatureExtractor, _GPModel, model_inputs
from syne_dyhpo.surrogates.marginal_likelihood import negative_mll_and_gradients
from syne_dyhpo.surrogates.optim import Adam
from syne_dyhpo.surrogates.power_law import PowerLawConfig, PowerLawEnsemble, PowerLawNets, loss_and_gradients

OPS = [private_ops.FUSED_ADAM, private_ops.BATCH_NORM, private_ops.LEAKY_RELU_BACKWARD]


@pytest.fixture
def fresh_verdicts(monkeypatch):
    """Probes run again in the test (and the process' verdicts are restored after it)."""
    monkeypatch.setattr(private_ops, "_verdicts", {})


def _public(monkeypatch, *ops: str) -> None:
    """The surrogates take the public path for ``ops``, as where they do not work."""
    verdicts = {op: True for op in OPS}
    verdicts.update({op: False for op in ops})
    monkeypatch.setattr(private_ops, "_verdicts", verdicts)


@pytest.mark.parametrize("op", OPS)
def test_every_private_op_works_in_the_torch_installed(fresh_verdicts, op):
    # the fast paths are the ones the other tests check; a torch that breaks one fails here
    assert private_ops.works(op)


def test_probes_draw_no_random_numbers(fresh_verdicts):
    state = torch.get_rng_state()
    for op in OPS:
        private_ops.works(op)
    assert torch.equal(torch.get_rng_state(), state)


def _no_op(*args, **kwargs):
    pass


@pytest.mark.parametrize(
    "target, name, fake, problem",
    [
        (torch, "_fused_adam_", None, "fails (AttributeError"),  # removed
        (torch, "_fused_adam_", lambda *a, lr, beta1, beta2, eps, maximize: None, "fails (TypeError"),  # new signature
        (torch, "_fused_adam_", _no_op, "gives other numbers than torch.optim.Adam"),  # other meaning
        (
            torch.ops.aten,
            "native_batch_norm",
            lambda *a: (_ for _ in ()).throw(RuntimeError("no such op")),
            "fails (RuntimeError: no such op",
        ),
        (
            torch.ops.aten,
            "native_batch_norm_backward",
            lambda *a: tuple(torch.zeros_like(t) for t in a[:3]),
            "gives other numbers than autograd (input)",
        ),
        (torch.ops.aten, "leaky_relu_backward", lambda grad, x, slope: grad, "fails (TypeError"),
        (
            torch.ops.aten,
            "leaky_relu_backward",
            lambda grad, x, slope, is_result: grad,
            "gives other numbers than autograd",
        ),
    ],
    ids=[
        "adam removed",
        "adam signature",
        "adam numbers",
        "batch norm missing",
        "batch norm backward numbers",
        "leaky relu signature",
        "leaky relu numbers",
    ],
)
def test_a_missing_or_changed_private_op_is_refused_with_a_warning_naming_it(
    fresh_verdicts, monkeypatch, target, name, fake, problem
):
    if fake is None:
        monkeypatch.delattr(target, name)
    else:
        monkeypatch.setattr(target, name, fake)
    op = {"_fused_adam_": private_ops.FUSED_ADAM, "leaky_relu_backward": private_ops.LEAKY_RELU_BACKWARD}.get(
        name, private_ops.BATCH_NORM
    )
    with pytest.warns(RuntimeWarning, match="public torch.optim.Adam and autograd") as record:
        assert not private_ops.works(op)
        assert not private_ops.works(op)  # probed once, warned once
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(f"{op} {problem}") and torch.__version__ in message
    others = [o for o in OPS if o != op]
    assert all(private_ops.works(o) for o in others)


# ----- the public path gives the fast path's numbers ---------------------------------------------


def test_adam_by_torch_adam_steps_as_the_fused_kernel(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    params = [
        torch.randn(3, 4, generator=gen),
        torch.randn(5, dtype=torch.float64, generator=gen),
        torch.randn(2, generator=gen).requires_grad_(),
    ]
    grads = [[torch.randn(p.shape, dtype=p.dtype, generator=gen) * (step + 1) for p in params] for step in range(12)]
    fast = Adam([p.detach().clone() for p in params], lr=0.05)
    for g in grads:
        fast.step(g)
    _public(monkeypatch, private_ops.FUSED_ADAM)
    public = Adam([p.detach().clone() for p in params], lr=0.05)
    for g in grads[:6]:
        public.step(g)
    public = copy.deepcopy(public)  # its state carries over (the moments, the step count)
    for g in grads[6:]:
        public.step(g)
    assert public.steps == fast.steps == 12
    for a, b in zip(public.params + public.exp_avg + public.exp_avg_sq, fast.params + fast.exp_avg + fast.exp_avg_sq):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert all(p.grad is None for p in public.params)  # no gradient left on the parameters
    moved = [(a - p).abs().max() for a, p in zip(public.params, params)]
    assert min(moved) > 0.1  # the steps moved every parameter


@pytest.mark.parametrize("batch_norm", [False, True])
@pytest.mark.parametrize("loss", ["mse", "l1"])
def test_power_law_gradients_by_autograd_equal_the_closed_form(monkeypatch, batch_norm, loss):
    torch.manual_seed(0)
    fast = PowerLawNets(4, PowerLawConfig(batch_norm=batch_norm))
    fast.rescale(0.4, -0.3)
    public = copy.deepcopy(fast)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(5, 16, 4, generator=gen)
    b = torch.rand(5, 16, generator=gen).clamp_min(0.02)
    target = torch.rand(5, 16, generator=gen)
    value, grads = loss_and_gradients(fast, x, b, target, loss)
    _public(monkeypatch, private_ops.LEAKY_RELU_BACKWARD, private_ops.BATCH_NORM)
    public_value, public_grads = loss_and_gradients(public, x, b, target, loss)
    assert not public_value.requires_grad and float(public_value) == pytest.approx(float(value), rel=1e-6)
    assert len(public_grads) == len(grads) == (10 if batch_norm else 6)
    for (name, _), got, want in zip(fast.named_parameters(), public_grads, grads):
        assert got.shape == want.shape, name
        # with BatchNorm, the biases before it have gradient 0 (it removes them): rounding noise
        np.testing.assert_allclose(
            got.numpy(), want.numpy(), rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-7, err_msg=name
        )
    for key, tensor in fast.state_dict().items():  # the running statistics, updated the same
        assert torch.allclose(public.state_dict()[key], tensor, rtol=1e-6, atol=1e-7), key


def _power_law_data(n: int = 60, dim: int = 3, max_t: int = 10) -> TrainingData:
    rng = np.random.RandomState(0)
    budget = rng.randint(1, max_t + 1, n)
    x = rng.rand(n, dim)
    y = -(0.2 + x[:, 0] * 0.5 + 0.5 * (budget / max_t) ** -0.5)
    return TrainingData(x=x, budget=budget, curves=np.full((n, max_t), np.nan), y=y, max_t=max_t)


def test_power_law_ensemble_trained_on_the_public_path_predicts_as_the_fast_one(monkeypatch):
    data = _power_law_data()
    cfg = PowerLawConfig(batch_norm=False, fit_epochs=4, refine_epochs=2)
    fast = PowerLawEnsemble(cfg)
    fast.fit(data, from_scratch=True, seed=3)
    _public(monkeypatch, *OPS)
    public = PowerLawEnsemble(cfg)
    public.fit(data, from_scratch=True, seed=3)
    for a, b in zip(public._nets.parameters(), fast._nets.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)
    with torch.random.fork_rng():
        torch.manual_seed(3)  # the fit's initial weights
        initial = PowerLawNets(data.x.shape[1], cfg)
    assert all(
        float((a - b).detach().abs().max()) > 1e-3 for a, b in zip(fast._nets.parameters(), initial.parameters())
    )


def _gp_model(seed: int = 3):
    rng = np.random.RandomState(seed)
    n, d, t = 40, 3, 6
    budget = rng.randint(1, t + 1, n)
    curves = np.full((n, t), np.nan)
    for i in range(n):
        curves[i, : budget[i] - 1] = rng.rand(budget[i] - 1)
    inputs = model_inputs(rng.rand(n, d), budget, curves, t)
    targets = torch.from_numpy(rng.randn(n))
    torch.manual_seed(0)
    import gpytorch

    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = _GPModel(inputs, targets, likelihood, FeatureExtractor(d, t, DeepKernelGPConfig()))
    for module in (model.mean_module, model.covar_module, likelihood):
        module.to(torch.float64)
    model.train()
    likelihood.train()
    return model, inputs, targets


def test_marginal_likelihood_gradients_by_autograd_equal_the_closed_form(monkeypatch):
    fast, inputs, targets = _gp_model()
    public = copy.deepcopy(fast)
    value, grads = negative_mll_and_gradients(fast, targets, fast.extractor.prepare(inputs))
    _public(monkeypatch, private_ops.BATCH_NORM)
    public_value, public_grads = negative_mll_and_gradients(public, targets, public.extractor.prepare(inputs))
    assert isinstance(public_value, float) and public_value == pytest.approx(value, rel=1e-12)
    assert set(public_grads) == set(grads) == {name for name, _ in fast.named_parameters()}
    for name, want in grads.items():
        got = public_grads[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(
            got.numpy(), want.numpy(), rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-12, err_msg=name
        )
    for key, tensor in fast.state_dict().items():  # BatchNorm's running statistics too
        assert torch.allclose(public.state_dict()[key], tensor, rtol=1e-6), key
