"""Deep Power Law's surrogate: an ensemble of nets conditioning a power law on the config.

As in Kadra et al. (2023): each member g(config) -> (alpha, beta, gamma) predicts the loss
``alpha + beta * b^(-gamma)`` at normalised budget ``b = epoch / max_t`` in (0, 1]; members
differ by their initial weights and minibatch order; mean and standard deviation across
members are the posterior. Nets are MLP d -> 128 -> 128 -> 3 with LeakyReLU; beta and gamma go
through a sigmoid (the paper; the authors' code uses SiLU), so every predicted curve improves
monotonically with the budget. BatchNorm in the hidden layers, as in the paper's appendix
(``PowerLawConfig.paper()``), or none, as in the authors' code and DeepPowerLaw's default.
Trained with Adam (lr 1e-3, batch 64) on all observed (config, epoch, value) points: 250
epochs from scratch, 20 epochs per warm-started refinement.

The members are trained as one batched module (weights stacked along a member axis), which
gives the same ensemble as training them one after another at a fraction of the cost. A
training step computes the loss gradient in closed form and takes the Adam step by torch's
fused kernel (:func:`train_step`, :mod:`.optim`): the same numbers as autograd and
``torch.optim.Adam`` up to rounding (a test checks it), at a fifth of the cost for nets this
small, where the overhead of autograd and of the optimizer's bookkeeping is most of the time.
Where a private torch operator of this path does not work, autograd and ``torch.optim.Adam``
take over (:mod:`.private_ops`).

The model predicts a loss; scores (maximised, normalised by the policy's outcome transform)
are negated on the way in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn

from syne_dyhpo.checks import checked_choice, checked_flag, checked_integer, checked_positive
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import TrainingData
from syne_dyhpo.core.policy import Surrogate, SurrogateCapabilities
from syne_dyhpo.surrogates import private_ops
from syne_dyhpo.surrogates.optim import Adam
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


@dataclass(frozen=True)
class PowerLawConfig:
    """Settings of :class:`PowerLawEnsemble`. The defaults are DeepPowerLaw's (what
    :class:`~syne_dyhpo.methods.deep_power_law.DeepPowerLaw` uses when given none): the paper's
    network without its appendix's BatchNorm (as the authors' code), and capped training steps,
    which are most of a decision's cost (docs/deviations.md says why each cap and what it
    costs). :meth:`paper` gives the paper's settings. Changing a field changes only that
    field: ``PowerLawConfig(lr=0.05)`` is DeepPowerLaw's default with another learning rate.

    :param num_members: ensemble size. Defaults to 5
    :param hidden: width of the two hidden layers. Defaults to 128
    :param lr: Adam learning rate. Defaults to 1e-3
    :param batch_size: minibatch size. Defaults to 64
    :param fit_epochs: epochs of a fit from scratch. Defaults to 250
    :param refine_epochs: epochs of a warm-started refinement. Defaults to 20
    :param loss: "mse" (paper) or "l1" (authors' code, more robust to outliers). Defaults to
        "mse"
    :param max_refine_steps: cap on the minibatch steps of one refinement; 20 epochs over
        1000 observations are 320 steps per decision. None: no cap (paper). Defaults to 16
    :param max_fit_steps: cap on the minibatch steps of a fit from scratch; 250 epochs over
        1000 observations are 4000 steps (the paper's 250 epochs up to 1024 observations).
        None: no cap (paper). Defaults to 4000
    :param refine_steps_shrink_after: beyond this many observations, the refinement cap
        shrinks in proportion to their inverse, ``max(1, max_refine_steps *
        refine_steps_shrink_after // n)`` steps at ``n`` observations, so that a decision's
        cost stays about flat as the data grows: the steps are a constant cost per decision,
        while predicting the candidates costs more with more data. Each new observation is
        also a smaller share of the data the warm start was trained on. None: the cap holds at
        any size (paper: no cap). Defaults to 2000
    :param batch_norm: BatchNorm after each hidden layer's linear map, before its LeakyReLU,
        statistics per member (the paper's appendix). Trained on minibatch statistics (a
        minibatch of a single row is skipped: it has none), predictions use the running
        statistics. Defaults to False (the authors' code; the paper: True)
    """

    num_members: int = 5
    hidden: int = 128
    lr: float = 1e-3
    batch_size: int = 64
    fit_epochs: int = 250
    refine_epochs: int = 20
    loss: str = "mse"
    max_refine_steps: int | None = 16
    max_fit_steps: int | None = 4000
    batch_norm: bool = False
    refine_steps_shrink_after: int | None = 2000

    def __post_init__(self):
        checked_choice("loss", self.loss, ("mse", "l1"))
        for name in ("num_members", "hidden", "batch_size", "fit_epochs"):
            checked_integer(name, getattr(self, name), 1)
        checked_integer("refine_epochs", self.refine_epochs, 0)
        for name in ("max_refine_steps", "max_fit_steps", "refine_steps_shrink_after"):
            checked_integer(name, getattr(self, name), 1, allow_none=True)
        checked_positive("lr", self.lr)
        # frozen: the checked flag is stored as a plain bool
        object.__setattr__(self, "batch_norm", checked_flag("batch_norm", self.batch_norm))

    @classmethod
    def paper(cls) -> PowerLawConfig:
        """The paper's settings: BatchNorm in the hidden layers, and 250 epochs from scratch
        and 20 per refinement, whatever their number of steps."""
        return cls(max_refine_steps=None, max_fit_steps=None, refine_steps_shrink_after=None, batch_norm=True)


def refine_step_cap(config: PowerLawConfig, n: int) -> int | None:
    """Most minibatch steps of a refinement on ``n`` observations (None: no cap), see
    :class:`PowerLawConfig`'s ``max_refine_steps`` and ``refine_steps_shrink_after``."""
    cap, after = config.max_refine_steps, config.refine_steps_shrink_after
    if cap is None or after is None or n <= after:
        return cap
    return max(1, cap * after // n)


class _BatchedLinear(nn.Module):
    """``num_members`` independent Linear layers applied as one batched matmul."""

    def __init__(self, members: int, fan_in: int, fan_out: int):
        super().__init__()
        bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default initialisation, per member
        self.weight = nn.Parameter(torch.empty(members, fan_in, fan_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, fan_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (members, rows, fan_in)
        return torch.baddbmm(self.bias, x, self.weight)


class PowerLawNets(nn.Module):
    """The ensemble: config -> (alpha, beta, gamma) for each member.

    The predicted curve goes through a fixed affine map, ``out_shift + out_scale * curve``
    (identity until :meth:`rescale`), the output normalisation of PopArt (van Hasselt et al.,
    2016, "Learning values across many orders of magnitude"): when the targets' units change,
    the map absorbs the change and every prediction stays exactly what it was, so the trained
    members carry over. A sigmoid-bounded beta could not be rescaled through the last layer.

    With ``cfg.batch_norm``, ``norms`` holds one ``BatchNorm1d`` per hidden layer over its
    ``members * hidden`` units: each member's unit is a channel, normalised over that member's
    rows. The module's training mode uses minibatch statistics, its eval mode the running ones.
    """

    def __init__(self, dim: int, cfg: PowerLawConfig):
        super().__init__()
        m = cfg.num_members
        self.layers = nn.ModuleList(
            [
                _BatchedLinear(m, dim, cfg.hidden),
                _BatchedLinear(m, cfg.hidden, cfg.hidden),
                _BatchedLinear(m, cfg.hidden, 3),
            ]
        )
        self.norms = nn.ModuleList([nn.BatchNorm1d(m * cfg.hidden) for _ in range(2)]) if cfg.batch_norm else None
        self.out_scale = 1.0
        self.out_shift = 0.0

    def linear_layers(self) -> list[_BatchedLinear]:
        """The two hidden layers' and the output layer's linear maps."""
        return [cast(_BatchedLinear, layer) for layer in self.layers]

    def batch_norms(self) -> list[nn.BatchNorm1d | None]:
        """The two hidden layers' BatchNorms (None: without BatchNorm)."""
        if self.norms is None:
            return [None, None]
        return [cast(nn.BatchNorm1d, norm) for norm in self.norms]

    def _hidden(self, i: int, pre_activation: torch.Tensor) -> torch.Tensor:
        """Hidden layer ``i``'s LeakyReLU of its pre-activation (members, rows, units), after
        its BatchNorm if any."""
        if self.norms is not None:
            pre_activation = _per_member(self.norms[i], pre_activation)
        return nn.functional.leaky_relu(pre_activation)

    def rescale(self, ratio: float, shift: float) -> None:
        """Maps every prediction ``p`` to ``ratio * p + shift`` from now on (exactly)."""
        self.out_scale *= ratio
        self.out_shift = self.out_shift * ratio + shift

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        :param x: encoded configs, (members, rows, dim)
        :param b: normalised budgets in (0, 1], (members, rows)
        :return: predicted loss, (members, rows)
        """
        h = self._hidden(0, self.layers[0](x))
        h = self._hidden(1, self.layers[1](h))
        out = self.layers[2](h)
        alpha, beta, gamma = out[..., 0], torch.sigmoid(out[..., 1]), torch.sigmoid(out[..., 2])
        return self.out_shift + self.out_scale * (alpha + beta * b.pow(-gamma))


def _as_channels(units: torch.Tensor) -> torch.Tensor:
    """(members, rows, hidden) -> (rows, members * hidden): each member's unit a BatchNorm
    channel, normalised over that member's rows."""
    members, rows, hidden = units.shape
    return units.transpose(0, 1).reshape(rows, members * hidden)


def _from_channels(flat: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The inverse of :func:`_as_channels`, back to ``shape`` (members, rows, hidden)."""
    members, rows, hidden = shape
    return flat.reshape(rows, members, hidden).transpose(0, 1)


def _per_member(norm: nn.Module, units: torch.Tensor) -> torch.Tensor:
    """``norm`` (a ``BatchNorm1d`` over members x units channels) applied to ``units``
    (members, rows, hidden)."""
    return _from_channels(norm(_as_channels(units)), units.shape)


_LEAKY_SLOPE = 0.01  # nn.functional.leaky_relu's default


class _NormPass:
    """A hidden layer's BatchNorm in training mode by torch's own kernel (which also updates
    the running statistics, as the module's forward in training does), and its backward; the
    identity when the nets have no BatchNorm."""

    def __init__(self, norm: nn.BatchNorm1d | None, pre_activation: torch.Tensor):
        self.norm, self.shape = norm, pre_activation.shape
        if norm is None:
            self.out = pre_activation
            return
        self.flat_in = _as_channels(pre_activation)
        assert norm.num_batches_tracked is not None  # BatchNorm1d's default: it counts its batches
        norm.num_batches_tracked.add_(1)
        flat_out, self.save_mean, self.save_invstd = private_ops.native_batch_norm(self.flat_in, norm)
        self.out = _from_channels(flat_out, self.shape)

    def backward(self, grad_out: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """:return: the gradient with respect to the pre-activation, and those of the norm's
        weight and bias (none without BatchNorm)"""
        if self.norm is None:
            return grad_out, []
        grad_in, grad_weight, grad_bias = private_ops.native_batch_norm_backward(
            _as_channels(grad_out), self.flat_in, self.norm, self.save_mean, self.save_invstd
        )
        return _from_channels(grad_in, self.shape), [grad_weight, grad_bias]


def loss_and_gradients(
    nets: PowerLawNets, x: torch.Tensor, b: torch.Tensor, target: torch.Tensor, loss: str
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The training loss (sum over members of each member's mean loss over its rows) and its
    gradient with respect to ``nets.parameters()``, in closed form (no autograd graph). With
    BatchNorm, the forward pass is the training mode's and updates the running statistics.
    Where a private torch operator this needs does not work (:mod:`.private_ops`), by
    autograd through the nets' forward (:func:`autograd_loss_and_gradients`).

    :param x: configs, (members, rows, dim)
    :param b: normalised budgets, (members, rows)
    :param target: losses to fit, (members, rows)
    :param loss: "mse" or "l1"
    """
    if not private_ops.works(private_ops.LEAKY_RELU_BACKWARD) or (
        nets.norms is not None and not private_ops.works(private_ops.BATCH_NORM)
    ):
        return autograd_loss_and_gradients(nets, x, b, target, loss)
    (w1, b1), (w2, b2), (w3, b3) = [(layer.weight, layer.bias) for layer in nets.linear_layers()]
    norms = nets.batch_norms()
    with torch.no_grad():
        a1 = torch.baddbmm(b1, x, w1)
        n1 = _NormPass(norms[0], a1)
        h1 = nn.functional.leaky_relu(n1.out)
        a2 = torch.baddbmm(b2, h1, w2)
        n2 = _NormPass(norms[1], a2)
        h2 = nn.functional.leaky_relu(n2.out)
        out = torch.baddbmm(b3, h2, w3)
        alpha, beta, gamma = out[..., 0], torch.sigmoid(out[..., 1]), torch.sigmoid(out[..., 2])
        power = b.pow(-gamma)
        residual = nets.out_shift + nets.out_scale * (alpha + beta * power) - target
        rows = residual.shape[1]
        if loss == "mse":
            value = residual.square().sum() / rows
            grad_pred = residual * (2.0 * nets.out_scale / rows)
        else:
            value = residual.abs().sum() / rows
            grad_pred = residual.sign() * (nets.out_scale / rows)
        grad_out = torch.stack(
            [
                grad_pred,
                grad_pred * power * beta * (1 - beta),
                grad_pred * beta * power * (-torch.log(b)) * gamma * (1 - gamma),
            ],
            dim=-1,
        )
        grad_w3 = torch.bmm(h2.transpose(1, 2), grad_out)
        grad_b3 = grad_out.sum(dim=1, keepdim=True)
        grad_a2, grad_norm2 = n2.backward(
            private_ops.leaky_relu_backward(torch.bmm(grad_out, w3.transpose(1, 2)), n2.out, _LEAKY_SLOPE)
        )
        grad_w2 = torch.bmm(h1.transpose(1, 2), grad_a2)
        grad_b2 = grad_a2.sum(dim=1, keepdim=True)
        grad_a1, grad_norm1 = n1.backward(
            private_ops.leaky_relu_backward(torch.bmm(grad_a2, w2.transpose(1, 2)), n1.out, _LEAKY_SLOPE)
        )
        grad_w1 = torch.bmm(x.transpose(1, 2), grad_a1)
        grad_b1 = grad_a1.sum(dim=1, keepdim=True)
    # in the order of nets.parameters(): the linear layers', then the norms'
    return value, [grad_w1, grad_b1, grad_w2, grad_b2, grad_w3, grad_b3, *grad_norm1, *grad_norm2]


def autograd_loss_and_gradients(
    nets: PowerLawNets, x: torch.Tensor, b: torch.Tensor, target: torch.Tensor, loss: str
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """:func:`loss_and_gradients` by autograd through the nets' forward in training mode
    (public torch only)."""
    with torch.enable_grad():
        residual = nets(x, b) - target
        rows = residual.shape[1]
        value = (residual.square() if loss == "mse" else residual.abs()).sum() / rows
        grads = torch.autograd.grad(value, list(nets.parameters()))
    return value.detach(), list(grads)


def train_step(
    nets: PowerLawNets, adam: Adam, x: torch.Tensor, b: torch.Tensor, target: torch.Tensor, loss: str
) -> float:
    """One minibatch step: the loss gradient (:func:`loss_and_gradients`) and an Adam step."""
    value, grads = loss_and_gradients(nets, x, b, target, loss)
    adam.step(grads)
    return float(value)


class PowerLawEnsemble(Surrogate):
    """DPL's ensemble of conditioned power laws (see module docstring). Can be carried over to
    a new outcome transform (``rescale``).

    :param config: training settings
    """

    capabilities = SurrogateCapabilities(rescale=True)

    def __init__(self, config: PowerLawConfig | None = None):
        self.config = config or PowerLawConfig()
        self._nets: PowerLawNets | None = None
        self._adam: Adam | None = None
        self._max_t = 1

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        cfg = self.config
        self._max_t = data.max_t
        x = torch.from_numpy(np.asarray(data.x, dtype=np.float32))
        b = torch.from_numpy(np.asarray(data.budget, dtype=np.float32) / data.max_t)
        loss_target = torch.from_numpy(-np.asarray(data.y, dtype=np.float32))
        n = len(loss_target)
        generator = torch.Generator().manual_seed(seed)
        if from_scratch or self._nets is None or self._nets.linear_layers()[0].weight.shape[1] != x.shape[1]:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                self._nets = PowerLawNets(x.shape[1], cfg)
            self._adam = Adam(list(self._nets.parameters()), lr=cfg.lr)
            epochs, steps_left = cfg.fit_epochs, cfg.max_fit_steps
        else:
            epochs, steps_left = cfg.refine_epochs, refine_step_cap(cfg, n)
        nets, adam = self._nets, self._adam
        assert nets is not None and adam is not None  # made together by a fit from scratch
        m = cfg.num_members
        for _ in range(epochs):
            # each member sees its own shuffling of the data
            order = torch.argsort(torch.rand(m, n, generator=generator), dim=1)
            for start in range(0, n, cfg.batch_size):
                if steps_left is not None:
                    if steps_left <= 0:
                        return
                    steps_left -= 1
                idx = order[:, start : start + cfg.batch_size]
                if cfg.batch_norm and idx.shape[1] < 2:
                    continue  # one row has no batch statistics
                train_step(nets, adam, x[idx], b[idx], loss_target[idx], cfg.loss)

    def rescale(self, old: ScoreTransform, new: ScoreTransform) -> None:
        """Carries the trained members over to a new outcome transform, predictions unchanged
        (:class:`PowerLawNets`' output map): a loss ``-z`` in ``old``'s units is
        ``-z * s / s' + (l' - l) / s'`` in ``new``'s (``l``, ``s``: location and scale).

        :param old: the transform the members were trained with
        :param new: the transform they are to predict in from now on
        """
        if self._nets is not None:
            self._nets.rescale(old.scale / new.scale, (new.loc - old.loc) / new.scale)

    def condition(self, data: TrainingData) -> None:
        """The ensemble has no data-conditioned posterior: new data enters at the next fit."""

    def predict(
        self,
        candidates: Candidates,
        budget: np.ndarray,
        pending: Candidates | None = None,
        pending_budget: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over the members (``pending`` is not used: the
        ensemble declares no ``pending`` capability)."""
        nets = self._nets
        assert nets is not None, "predict follows a fit"
        m = self.config.num_members
        x = torch.from_numpy(np.asarray(candidates.x, dtype=np.float32)).expand(m, -1, -1)
        b = torch.from_numpy(np.asarray(budget, dtype=np.float32) / self._max_t).expand(m, -1)
        nets.eval()  # BatchNorm's running statistics, if any
        try:
            with torch.inference_mode():
                scores = -nets(x, b).double().numpy()  # (members, m) predicted scores
        finally:
            nets.train()
        return scores.mean(axis=0), scores.std(axis=0)
