"""Deep Power Law's surrogate: an ensemble of nets conditioning a power law on the config.

As in Kadra et al. (2023): each member g(config) -> (alpha, beta, gamma) predicts the loss
``alpha + beta * b^(-gamma)`` at normalised budget ``b = epoch / max_t`` in (0, 1]; members
differ by their initial weights and minibatch order; mean and standard deviation across
members are the posterior. Nets are MLP d -> 128 -> 128 -> 3 with LeakyReLU; beta and gamma go
through a sigmoid (the paper; the authors' code uses SiLU), so every predicted curve improves
monotonically with the budget. Trained with Adam (lr 1e-3, batch 64) on all observed
(config, epoch, value) points: 250 epochs from scratch, 20 epochs per warm-started refinement.

The members are trained as one batched module (weights stacked along a member axis), which
gives the same ensemble as training them one after another at a fraction of the cost.

The model predicts a loss; scores (maximised, normalised by the policy's outcome transform)
are negated on the way in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import TrainingData


@dataclass
class PowerLawConfig:
    """Settings of :class:`PowerLawEnsemble` (defaults: the paper's).

    :param num_members: ensemble size. Defaults to 5
    :param hidden: width of the two hidden layers. Defaults to 128
    :param lr: Adam learning rate. Defaults to 1e-3
    :param batch_size: minibatch size. Defaults to 64
    :param fit_epochs: epochs of a fit from scratch. Defaults to 250
    :param refine_epochs: epochs of a warm-started refinement. Defaults to 20
    :param loss: "mse" (paper) or "l1" (authors' code, more robust to outliers)
    :param max_refine_steps: cap on the minibatch steps of one refinement; 20 epochs over
        1000 observations are 320 steps per decision. None: no cap (paper). Defaults to None
    """

    num_members: int = 5
    hidden: int = 128
    lr: float = 1e-3
    batch_size: int = 64
    fit_epochs: int = 250
    refine_epochs: int = 20
    loss: str = "mse"
    max_refine_steps: int | None = None

    def __post_init__(self):
        if self.loss not in ("mse", "l1"):
            raise ValueError(f"loss must be 'mse' or 'l1', got {self.loss!r}")
        if self.num_members < 1:
            raise ValueError(f"num_members must be >= 1, got {self.num_members}")


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
    """The ensemble: config -> (alpha, beta, gamma) for each member."""

    def __init__(self, dim: int, cfg: PowerLawConfig):
        super().__init__()
        m = cfg.num_members
        self.layers = nn.ModuleList(
            [_BatchedLinear(m, dim, cfg.hidden), _BatchedLinear(m, cfg.hidden, cfg.hidden), _BatchedLinear(m, cfg.hidden, 3)]
        )

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        :param x: encoded configs, (members, rows, dim)
        :param b: normalised budgets in (0, 1], (members, rows)
        :return: predicted loss, (members, rows)
        """
        h = nn.functional.leaky_relu(self.layers[0](x))
        h = nn.functional.leaky_relu(self.layers[1](h))
        out = self.layers[2](h)
        alpha, beta, gamma = out[..., 0], torch.sigmoid(out[..., 1]), torch.sigmoid(out[..., 2])
        return alpha + beta * b.pow(-gamma)


class PowerLawEnsemble:
    """DPL's ensemble of conditioned power laws (see module docstring).

    :param config: training settings
    """

    def __init__(self, config: PowerLawConfig | None = None):
        self.config = config or PowerLawConfig()
        self._nets: PowerLawNets | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._max_t = 1

    def __getstate__(self) -> dict:
        # the Tuner dill-pickles the scheduler every few seconds; a torch optimizer object does
        # not survive dill (typing_extensions sentinels), its state dict does
        state = dict(self.__dict__)
        optimizer = state.pop("_optimizer")
        state["_optimizer_state"] = None if optimizer is None else optimizer.state_dict()
        return state

    def __setstate__(self, state: dict) -> None:
        optimizer_state = state.pop("_optimizer_state")
        self.__dict__.update(state)
        self._optimizer = None
        if self._nets is not None:
            self._optimizer = torch.optim.Adam(self._nets.parameters(), lr=self.config.lr)
            self._optimizer.load_state_dict(optimizer_state)

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        cfg = self.config
        self._max_t = data.max_t
        x = torch.from_numpy(np.asarray(data.x, dtype=np.float32))
        b = torch.from_numpy((np.asarray(data.budget, dtype=np.float32) / data.max_t))
        loss_target = torch.from_numpy(-np.asarray(data.y, dtype=np.float32))
        n = len(loss_target)
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            if from_scratch or self._nets is None or self._nets.layers[0].weight.shape[1] != x.shape[1]:
                self._nets = PowerLawNets(x.shape[1], cfg)
                self._optimizer = torch.optim.Adam(self._nets.parameters(), lr=cfg.lr)
                epochs = cfg.fit_epochs
            else:
                epochs = cfg.refine_epochs
        loss_fn = nn.functional.mse_loss if cfg.loss == "mse" else nn.functional.l1_loss
        self._nets.train()
        m = cfg.num_members
        steps_left = cfg.max_refine_steps if (not from_scratch and cfg.max_refine_steps) else None
        for _ in range(epochs):
            # each member sees its own shuffling of the data
            order = torch.argsort(torch.rand(m, n, generator=generator), dim=1)
            for start in range(0, n, cfg.batch_size):
                if steps_left is not None:
                    if steps_left == 0:
                        return
                    steps_left -= 1
                idx = order[:, start : start + cfg.batch_size]
                self._optimizer.zero_grad()
                pred = self._nets(x[idx], b[idx])
                loss = loss_fn(pred, loss_target[idx]) * m  # sum over members of their mean loss
                loss.backward()
                self._optimizer.step()

    def condition(self, data: TrainingData) -> None:
        """The ensemble has no data-conditioned posterior: new data enters at the next fit."""

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = self.config.num_members
        x = torch.from_numpy(np.asarray(candidates.x, dtype=np.float32)).expand(m, -1, -1)
        b = torch.from_numpy(np.asarray(budget, dtype=np.float32) / self._max_t).expand(m, -1)
        self._nets.eval()
        with torch.no_grad():
            scores = -self._nets(x, b).double().numpy()  # (members, m) predicted scores
        return scores.mean(axis=0), scores.std(axis=0)
