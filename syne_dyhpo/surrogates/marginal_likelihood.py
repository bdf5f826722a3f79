"""The deep kernel GP's training objective: gpytorch's exact marginal likelihood computed from
the kernel matrix's Cholesky factor, and its gradient in closed form.

:func:`negative_mll` is the objective as a differentiable torch expression (the reference the
tests check against gpytorch's ``ExactMarginalLogLikelihood``). Training uses
:func:`negative_mll_and_gradients`, the same value with its gradient derived by hand: a
training step of DyHPO's GP on 128 rows is about 30 small tensor operations forward and as
many backward, and autograd's graph and backward pass cost more than their arithmetic.

- Through the GP (Rasmussen & Williams 2006, Eq. 5.9): with ``alpha = K^-1 (y - m)``, the
  gradient with respect to the kernel matrix is ``G = (K^-1 - alpha alpha^T) / (2 n)``; the
  noise's is ``tr G``, the outputscale's ``sum(G * E)`` (``E`` the unscaled RBF matrix), the
  constant mean's ``-sum(alpha) / n``, and the scaled features' (``d_ij = |z_i - z_j|^2``)
  ``4 (diag(S 1) - S) z`` with ``S = -G * K_f / 2`` (``K_f`` the RBF part of ``K``, 0 where the
  kernel is cut off, :data:`_MAX_HALF_SQ_DIST`).
- Through the feature extractor (float32, as its forward pass): LeakyReLU, the linear layers,
  the curve convolution's max over positions and BatchNorm (torch's own ``native_batch_norm``
  and its backward; the forward also updates the running statistics, as the module's forward
  does in training).
- The positive hyperparameters are gpytorch's softplus transforms of raw parameters, whose
  derivative is the sigmoid.

``tests/unit/test_fast_paths.py`` checks value, gradients and BatchNorm's statistics against
autograd through :func:`negative_mll`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from linear_operator.utils.errors import NanError, NotPSDError
from torch import nn

from syne_dyhpo.surrogates import private_ops

#: the deep kernel GP's model (``deep_kernel_gp._GPModel``, a gpytorch ``ExactGP``: gpytorch has
#: no type information, so its attributes are untyped)
GPModel = Any


def _training_cholesky(matrix: torch.Tensor, jitter: float = 1e-6, max_tries: int = 4) -> torch.Tensor:
    """Cholesky factor as gpytorch's ``psd_safe_cholesky`` takes it in training (with the
    settings of ``deep_kernel_gp.reference._cholesky_settings``): jitter 1e-6, 1e-5, ... added only on failure."""
    chol, info = torch.linalg.cholesky_ex(matrix)
    if not torch.any(info):
        return chol
    if torch.isnan(matrix).any():
        raise NanError("kernel matrix has NaN entries")
    eye = torch.eye(len(matrix), dtype=matrix.dtype)
    for i in range(max_tries):
        chol, info = torch.linalg.cholesky_ex(matrix + jitter * 10**i * eye)
        if not torch.any(info):
            return chol
    raise NotPSDError(
        f"kernel matrix not positive definite after adding jitter up to {jitter * 10 ** (max_tries - 1):.1e}"
    )


#: Kernel entries ``exp(-d^2 / 2)`` below ``exp(-700)`` (1e-304: points more than ~37
#: lengthscales apart) are set to 0, a change far below float64's resolution of any sum they
#: enter (exp underflows to exactly 0 below -745 anyway). It keeps ``exp`` out of its underflow
#: path, and the arithmetic after it out of subnormal numbers: on x86 an ``exp`` whose result is
#: below 2.2e-308 costs 30-250x a normal one (measured: 128 x 128 entries 9 us at -700, 0.3-2.7
#: ms below -708). Where a trained kernel puts most pairs of rows that far apart (random
#: targets), a training step costs 15 % less; on a simulated LCBench run (Australian, seed 0)
#: the scheduler's CPU was 2 % lower, with the same decisions.
_MAX_HALF_SQ_DIST = 700.0


def _rbf_terms(z1: torch.Tensor, z2: torch.Tensor, lengthscale: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Features divided by the lengthscale and centred on the mean of ``z1``, their squared
    distances (quadratic expansion, as gpytorch computes them) and ``exp(-d^2 / 2)``, 0 beyond
    :data:`_MAX_HALF_SQ_DIST`."""
    z1 = z1 / lengthscale
    z2 = z2 / lengthscale
    centre = z1.mean(-2, keepdim=True)
    z1, z2 = z1 - centre, z2 - centre
    sq = z1.pow(2).sum(-1, keepdim=True) - 2.0 * z1 @ z2.T + z2.pow(2).sum(-1, keepdim=True).T
    far = sq > 2 * _MAX_HALF_SQ_DIST
    return z1, z2, sq, sq.clamp(0, 2 * _MAX_HALF_SQ_DIST).div(-2.0).exp().masked_fill(far, 0.0)


def rbf(z1: torch.Tensor, z2: torch.Tensor, lengthscale: torch.Tensor, outputscale: torch.Tensor) -> torch.Tensor:
    """``ScaleKernel(RBFKernel())`` of gpytorch, by the same formula (squared distances by the
    quadratic expansion around the mean of ``z1``, clamped at 0), except that entries below
    ``exp(-700)`` are 0 (:data:`_MAX_HALF_SQ_DIST`)."""
    return outputscale * _rbf_terms(z1, z2, lengthscale)[3]


def negative_mll(
    model: GPModel,
    inputs: torch.Tensor | None,
    targets: torch.Tensor,
    prepared: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``-ExactMarginalLogLikelihood(likelihood, model)(model(inputs), targets)`` of gpytorch
    (the log density of the targets under the prior with the noise added, divided by the
    number of rows), computed from the Cholesky factor of the kernel matrix.

    :param inputs: the training inputs (unused if ``prepared`` is given)
    :param prepared: ``model.extractor.prepare(inputs)`` if already computed
    """
    extractor = model.extractor
    z = extractor.embed(*(prepared if prepared is not None else extractor.prepare(inputs))).double()
    k = rbf(z, z, model.covar_module.base_kernel.lengthscale, model.covar_module.outputscale)
    k = k + model.likelihood.noise * torch.eye(len(z), dtype=k.dtype)
    chol = _training_cholesky(k)
    diff = (targets - model.mean_module.constant).unsqueeze(-1)
    whitened = torch.linalg.solve_triangular(chol, diff, upper=False)
    n = len(targets)
    log_det = 2.0 * chol.diagonal().log().sum()
    return 0.5 * (whitened.square().sum() + log_det + n * math.log(2 * math.pi)) / n


_LEAKY_SLOPE = 0.01  # nn.LeakyReLU's default, as FeatureExtractor uses it


def _softplus_derivative(raw: torch.Tensor, constraint) -> torch.Tensor:
    """d constraint.transform(raw) / d raw for gpytorch's Positive() and GreaterThan(b),
    ``Softplus(beta=1)(raw) (+ b)``: the sigmoid (torch takes 1 above softplus's threshold of
    20, where the sigmoid is within 2e-9 of it)."""
    if not constraint.enforced:
        return torch.ones_like(raw)
    if not isinstance(constraint._transform, nn.Softplus) or constraint._transform.beta != 1:
        raise NotImplementedError(f"closed-form gradient needs a Softplus(beta=1) constraint, got {constraint}")
    return torch.sigmoid(raw)


def _leaky_backward(grad: torch.Tensor, pre_activation: torch.Tensor) -> torch.Tensor:
    return torch.where(pre_activation > 0, grad, grad * _LEAKY_SLOPE)


@dataclass
class _ExtractorPass:
    """The feature extractor's forward pass in training mode, with what its backward needs."""

    hidden: torch.Tensor  # config layer before BatchNorm
    normed: torch.Tensor  # after BatchNorm, before LeakyReLU
    save_mean: torch.Tensor  # BatchNorm's batch statistics
    save_invstd: torch.Tensor
    argmax: torch.Tensor  # maximising convolution position per row and channel
    joined: torch.Tensor  # input of the output layer
    out: torch.Tensor  # output layer before LeakyReLU
    z: torch.Tensor  # features, float64


def _extractor_layers(extractor: Any) -> tuple[nn.Linear, nn.BatchNorm1d, nn.Conv1d, nn.Linear]:
    """The layers of ``deep_kernel_gp.FeatureExtractor`` in the order of its forward pass: the
    configuration layer's linear map and BatchNorm, the curve convolution, the output layer."""
    return extractor.config_layer[0], extractor.config_layer[1], extractor.curve_conv, extractor.output_layer[0]


def _extractor_forward(extractor: nn.Module, config_budget: torch.Tensor, windows: torch.Tensor) -> _ExtractorPass:
    """``FeatureExtractor.embed`` in training mode (BatchNorm on batch statistics, its running
    statistics updated)."""
    linear1, batch_norm, conv, linear2 = _extractor_layers(extractor)
    # built with their defaults: BatchNorm counts its batches, the convolution has a bias
    assert batch_norm.num_batches_tracked is not None and conv.bias is not None
    hidden = torch.addmm(linear1.bias, config_budget, linear1.weight.T)
    batch_norm.num_batches_tracked.add_(1)
    normed, save_mean, save_invstd = private_ops.native_batch_norm(hidden, batch_norm)
    per_position = windows @ conv.weight.reshape(conv.out_channels, -1).T + conv.bias  # (n, t, channels)
    curve_features, argmax = per_position.max(dim=1)
    joined = torch.cat([nn.functional.leaky_relu(normed, _LEAKY_SLOPE), curve_features], dim=1)
    out = torch.addmm(linear2.bias, joined, linear2.weight.T)
    z = nn.functional.leaky_relu(out, _LEAKY_SLOPE).double()
    return _ExtractorPass(hidden, normed, save_mean, save_invstd, argmax, joined, out, z)


def _gp_loss_and_gradients(
    model: GPModel, z: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """The negative marginal likelihood of the targets given features ``z``, its gradient
    with respect to the GP's hyperparameters (by raw parameter name) and to ``z``
    (Rasmussen & Williams, Eq. 5.9)."""
    covar, likelihood = model.covar_module, model.likelihood
    n = len(targets)
    lengthscale = covar.base_kernel.lengthscale.reshape(())
    outputscale = covar.outputscale
    scaled, _, _, unscaled = _rbf_terms(z, z, lengthscale)
    k = outputscale * unscaled
    k.diagonal().add_(likelihood.noise.reshape(()))
    chol = _training_cholesky(k)
    residual = (targets - model.mean_module.constant).unsqueeze(-1)
    whitened = torch.linalg.solve_triangular(chol, residual, upper=False)
    log_det = 2.0 * chol.diagonal().log().sum()
    loss = 0.5 * (whitened.square().sum() + log_det + n * math.log(2 * math.pi)) / n

    alpha = torch.linalg.solve_triangular(chol.T, whitened, upper=True)
    grad_k = (torch.cholesky_inverse(chol) - alpha @ alpha.T).mul_(0.5 / n)
    grad_noise = grad_k.diagonal().sum()
    grad_constant = -alpha.sum() / n
    grad_k_unscaled = grad_k.mul_(unscaled)  # grad_k is not needed after this
    grad_outputscale = grad_k_unscaled.sum()
    # 0 where the kernel is cut off; where a distance was clamped at 0 (rounding: z_i = z_j)
    # the gradient is 0 in exact arithmetic either way
    grad_sq_dist = grad_k_unscaled.mul_(-0.5 * outputscale)
    grad_scaled = 4.0 * (grad_sq_dist.sum(1, keepdim=True) * scaled - grad_sq_dist @ scaled)
    grad_lengthscale = -(grad_scaled * scaled).sum() / lengthscale
    raw_lengthscale = covar.base_kernel.raw_lengthscale
    grads = {
        "likelihood.noise_covar.raw_noise": grad_noise
        * _softplus_derivative(likelihood.noise_covar.raw_noise, likelihood.noise_covar.raw_noise_constraint),
        "mean_module.raw_constant": grad_constant.reshape(model.mean_module.raw_constant.shape),
        "covar_module.raw_outputscale": grad_outputscale
        * _softplus_derivative(covar.raw_outputscale, covar.raw_outputscale_constraint),
        "covar_module.base_kernel.raw_lengthscale": (
            grad_lengthscale * _softplus_derivative(raw_lengthscale, covar.base_kernel.raw_lengthscale_constraint)
        ).reshape(raw_lengthscale.shape),
    }
    return loss, grads, grad_scaled / lengthscale


def _extractor_gradients(
    extractor: nn.Module,
    config_budget: torch.Tensor,
    windows: torch.Tensor,
    forward: _ExtractorPass,
    grad_z: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The gradient with respect to the feature extractor's parameters (by name, prefixed
    ``extractor.``) given the gradient with respect to its output features."""
    _, batch_norm, conv, linear2 = _extractor_layers(extractor)
    grad_out = _leaky_backward(grad_z.float(), forward.out)
    grad_joined = grad_out @ linear2.weight
    hidden_width = forward.normed.shape[1]
    grad_normed = _leaky_backward(grad_joined[:, :hidden_width], forward.normed)
    grad_curve = grad_joined[:, hidden_width:]  # (n, channels)
    grad_hidden, grad_bn_weight, grad_bn_bias = private_ops.native_batch_norm_backward(
        grad_normed, forward.hidden, batch_norm, forward.save_mean, forward.save_invstd
    )
    # max over positions: the gradient goes to one maximising window (autograd shares it among
    # ties: the same sum, as tied windows are in practice identical, or all zero beyond the
    # curve's end)
    at_max = windows[torch.arange(len(windows)).unsqueeze(1), forward.argmax]  # (n, channels, window)
    return {
        "extractor.config_layer.0.weight": grad_hidden.T @ config_budget,
        "extractor.config_layer.0.bias": grad_hidden.sum(0),
        "extractor.config_layer.1.weight": grad_bn_weight,
        "extractor.config_layer.1.bias": grad_bn_bias,
        "extractor.curve_conv.weight": torch.einsum("nc,ncw->cw", grad_curve, at_max).reshape(
            conv.weight.shape
        ),
        "extractor.curve_conv.bias": grad_curve.sum(0),
        "extractor.output_layer.0.weight": grad_out.T @ forward.joined,
        "extractor.output_layer.0.bias": grad_out.sum(0),
    }


def negative_mll_and_gradients(
    model: GPModel, targets: torch.Tensor, prepared: tuple[torch.Tensor, torch.Tensor]
) -> tuple[float, dict[str, torch.Tensor]]:
    """``negative_mll(model, inputs, targets, prepared)`` and its gradient with respect to
    each of ``model.named_parameters()``, without autograd; as the module's forward in
    training mode does, it updates BatchNorm's running statistics.

    :param model: the GP model (``deep_kernel_gp.features._GPModel``) in training mode
    :param targets: training targets, float64, shape (n,)
    :param prepared: ``model.extractor.prepare(inputs)``
    :return: the loss and a dict of gradients keyed by parameter name

    Where torch's private BatchNorm operators do not work (:mod:`.private_ops`), the same by
    autograd through :func:`negative_mll`.
    """
    if not private_ops.works(private_ops.BATCH_NORM):
        return autograd_negative_mll_and_gradients(model, targets, prepared)
    with torch.no_grad():
        forward = _extractor_forward(model.extractor, *prepared)
        loss, grads, grad_z = _gp_loss_and_gradients(model, forward.z, targets)
        grads.update(_extractor_gradients(model.extractor, *prepared, forward, grad_z))
    return float(loss), grads


def autograd_negative_mll_and_gradients(
    model: GPModel, targets: torch.Tensor, prepared: tuple[torch.Tensor, torch.Tensor]
) -> tuple[float, dict[str, torch.Tensor]]:
    """:func:`negative_mll_and_gradients` by autograd through :func:`negative_mll` (public
    torch only)."""
    names, params = zip(*model.named_parameters())
    with torch.enable_grad():
        value = negative_mll(model, None, targets, prepared)
        grads = torch.autograd.grad(value, params)
    return float(value.detach()), dict(zip(names, grads))
