"""The private torch operators the surrogates' fast training steps call, each checked once
per process before its first use.

- ``torch._fused_adam_``: Adam's fused kernel (:mod:`.optim`);
- ``torch.ops.aten.native_batch_norm`` and ``native_batch_norm_backward``: BatchNorm's
  training-mode forward with its batch statistics, and its backward (:mod:`.power_law`,
  :mod:`.marginal_likelihood`);
- ``torch.ops.aten.leaky_relu_backward`` (:mod:`.power_law`).

They are not part of torch's public API: a release may drop them or change their signature
or meaning. :func:`works` probes an operator by calling it as the fast path does
(the wrappers below), on tiny fixed tensors, and comparing its result with the public
computation it replaces (``torch.optim.Adam``, ``nn.functional.batch_norm`` and autograd).
Where it is missing, refuses the call or gives other numbers, :func:`works` is False, a
``RuntimeWarning`` names the operator and the problem, and the surrogates take the public
path instead (:mod:`.optim`'s ``torch.optim.Adam``, autograd through the models' forward): slower,
the same numbers up to rounding. The probes draw no random numbers (the global generators
stay as they were).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

FUSED_ADAM = "torch._fused_adam_"
BATCH_NORM = "torch.ops.aten.native_batch_norm"  # with native_batch_norm_backward
LEAKY_RELU_BACKWARD = "torch.ops.aten.leaky_relu_backward"

_verdicts: dict[str, bool] = {}  # operator -> whether it works, once probed


def works(op: str) -> bool:
    """Whether the private operator ``op`` (one of :data:`FUSED_ADAM`, :data:`BATCH_NORM`,
    :data:`LEAKY_RELU_BACKWARD`) gives the numbers of its public counterpart in this torch;
    probed at the first call, warning if not.

    :param op: the operator
    """
    verdict = _verdicts.get(op)
    if verdict is None:
        try:
            problem = _PROBES[op]()
        except Exception as ex:  # noqa: BLE001 - missing (AttributeError, RuntimeError) or a changed signature
            problem = f"fails ({type(ex).__name__}: {ex})"
        verdict = _verdicts[op] = problem is None
        if problem is not None:
            warnings.warn(
                f"{op} {problem} in torch {torch.__version__}: the surrogates train by the public "
                "torch.optim.Adam and autograd instead (slower, the same numbers up to rounding)",
                RuntimeWarning,
                stacklevel=2,
            )
    return verdict


# ----- the calls of the fast paths -------------------------------------------------------------


def fused_adam_(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor],
                exp_avg_sqs: list[torch.Tensor], step: torch.Tensor, lr: float, beta1: float, beta2: float,
                eps: float) -> None:
    """One Adam step (no weight decay, no amsgrad) of tensors of one dtype, in place, by the
    kernel ``torch.optim.Adam(fused=True)`` calls; ``step``: the step count, after this step."""
    torch._fused_adam_(
        params, grads, exp_avgs, exp_avg_sqs, [], [step] * len(params),
        lr=lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=eps, amsgrad=False, maximize=False,
    )


def native_batch_norm(x: torch.Tensor, norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BatchNorm ``norm`` in training mode on ``x`` (rows, channels): the output, and the batch
    mean and inverse standard deviation its backward needs; updates the running statistics
    (but not ``num_batches_tracked``)."""
    return torch.ops.aten.native_batch_norm(
        x, norm.weight, norm.bias, norm.running_mean, norm.running_var, True, norm.momentum, norm.eps
    )


def native_batch_norm_backward(grad_out: torch.Tensor, x: torch.Tensor, norm: nn.Module, save_mean: torch.Tensor,
                               save_invstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of :func:`native_batch_norm`'s output with respect to its input, the
    norm's weight and its bias, given ``grad_out``."""
    return torch.ops.aten.native_batch_norm_backward(
        grad_out, x, norm.weight, norm.running_mean, norm.running_var, save_mean, save_invstd, True, norm.eps,
        [True, True, True],
    )


def leaky_relu_backward(grad_out: torch.Tensor, x: torch.Tensor, slope: float) -> torch.Tensor:
    """The gradient of ``leaky_relu(x, slope)`` with respect to ``x``, given ``grad_out``."""
    return torch.ops.aten.leaky_relu_backward(grad_out, x, slope, False)


# ----- the probes: None if the operator gives the public computation's numbers ------------------


def _fixed(*shape: int, offset: float = 0.0) -> torch.Tensor:
    """Deterministic values of both signs, without drawing random numbers."""
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * 1.7 + offset).reshape(shape)


def _differs(got: torch.Tensor, want: torch.Tensor, what: str) -> str | None:
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-4, atol=1e-6):
        return f"gives other numbers than {what}"
    return None


def _probe_fused_adam() -> str | None:
    params = [_fixed(3, 2), _fixed(4, offset=1.0)]
    reference = [p.clone() for p in params]
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    optimizer = torch.optim.Adam(reference, lr=0.1, foreach=False)
    for step in (1, 2):
        grads = [_fixed(*p.shape, offset=float(step)) for p in params]
        with torch.no_grad():
            fused_adam_(params, grads, exp_avgs, exp_avg_sqs, torch.tensor(float(step)), 0.1, 0.9, 0.999, 1e-8)
        for r, g in zip(reference, grads):
            r.grad = g
        optimizer.step()
    for p, r in zip(params, reference):
        if (problem := _differs(p, r.detach(), "torch.optim.Adam")) is not None:
            return problem
    return None


def _probe_batch_norm() -> str | None:
    x = _fixed(5, 3)
    norm, reference = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    with torch.no_grad():
        for module in (norm, reference):
            module.weight.copy_(_fixed(3, offset=0.5) + 1.5)
            module.bias.copy_(_fixed(3, offset=2.0))
    with torch.no_grad():
        out, save_mean, save_invstd = native_batch_norm(x, norm)
        grad_out = _fixed(5, 3, offset=3.0)
        grad_in, grad_weight, grad_bias = native_batch_norm_backward(grad_out, x, norm, save_mean, save_invstd)
    # BatchNorm1d's defaults: running statistics tracked with momentum 0.1
    assert reference.momentum is not None
    assert norm.running_mean is not None and norm.running_var is not None
    assert reference.running_mean is not None and reference.running_var is not None
    x_ref = x.clone().requires_grad_()
    with torch.enable_grad():
        out_ref = nn.functional.batch_norm(
            x_ref, reference.running_mean, reference.running_var, reference.weight, reference.bias, True,
            reference.momentum, reference.eps,
        )
        want = torch.autograd.grad(out_ref, [x_ref, reference.weight, reference.bias], grad_out)
    checks = [
        (out, out_ref.detach(), "nn.functional.batch_norm"),
        (norm.running_mean, reference.running_mean, "nn.functional.batch_norm's running mean"),
        (norm.running_var, reference.running_var, "nn.functional.batch_norm's running variance"),
        (save_mean, x.mean(dim=0), "the batch mean"),
        (grad_in, want[0], "autograd (input)"),
        (grad_weight, want[1], "autograd (weight)"),
        (grad_bias, want[2], "autograd (bias)"),
    ]
    for got, expected, what in checks:
        if (problem := _differs(got, expected, what)) is not None:
            return problem
    return None


def _probe_leaky_relu_backward() -> str | None:
    x, grad_out = _fixed(4, 3), _fixed(4, 3, offset=1.0)
    with torch.no_grad():
        got = leaky_relu_backward(grad_out, x, 0.01)
    x_ref = x.clone().requires_grad_()
    with torch.enable_grad():
        (want,) = torch.autograd.grad(nn.functional.leaky_relu(x_ref, 0.01), x_ref, grad_out)
    return _differs(got, want, "autograd")


_PROBES: dict[str, Callable[[], str | None]] = {
    FUSED_ADAM: _probe_fused_adam,
    BATCH_NORM: _probe_batch_norm,
    LEAKY_RELU_BACKWARD: _probe_leaky_relu_backward,
}
