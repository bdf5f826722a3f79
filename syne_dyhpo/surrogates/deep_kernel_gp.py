"""DyHPO's surrogate: a Gaussian process with a deep kernel over (config, budget, curve).

Architecture as in Wistuba et al. (2022) and the authors' code: the feature extractor maps the
encoded configuration and the normalised budget through Linear(d+1 -> 64), BatchNorm,
LeakyReLU; the learning curve observed before the budget through Conv1d(kernel 3) and global
max pooling; both are concatenated and mapped by Linear(-> 128), LeakyReLU. A gpytorch ExactGP
with constant mean and ScaleKernel(RBF) sits on the 128 features; feature extractor and GP
hyperparameters are trained jointly by maximising the exact marginal likelihood with Adam.

Deliberate differences from the code (not from the paper):
- the curve branch gets a second input channel, a mask, so a missing epoch is not confused
  with a real score of zero (the code zero-pads);
- all GP numerics (kernel, likelihood, Cholesky) run in float64 with forced Cholesky (gpytorch switches to iterative solvers
  above 800 points by default), and a failed factorisation restores the last good weights and
  refits from scratch instead of crashing.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import gpytorch
import numpy as np
import torch
from linear_operator.utils.errors import NanError, NotPSDError
from torch import nn

from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import TrainingData

logger = logging.getLogger(__name__)

_NUMERICAL_ERRORS = (NotPSDError, NanError, RuntimeError, ValueError)


@dataclass
class DeepKernelGPConfig:
    """Training settings of :class:`DeepKernelGP`.

    Defaults follow the paper (Adam, lr 0.1, early stop after 10 non-improving epochs, at most
    1000 epochs from scratch); the authors' code instead uses lr 1e-3 with 1000 epochs from
    scratch and 50 warm-started epochs per refinement.

    :param hidden: width of the (config, budget) layer. Defaults to 64 (code; paper: 128)
    :param features: width of the output layer the kernel sees. Defaults to 128 (code;
        paper: 256)
    :param conv_channels: channels of the learning-curve convolution. Defaults to 4
    :param lr: Adam learning rate. Defaults to 0.1 (paper)
    :param max_iterations: most epochs of a fit from scratch. Defaults to 1000
    :param refine_iterations: most epochs of a warm-started refinement. Defaults to 50
    :param patience: stop after this many epochs without improving the loss. Defaults to 10
    :param max_fit_points: train the kernel on at most this many observations (a random
        subset drawn per fit; predictions always condition on all of them). An exact-GP
        training epoch costs O(n^3); None trains on all (paper). Defaults to None
    :param predict_noisy: EI uses the predictive distribution of an observation (latent
        variance + noise variance), as the authors' code does (``likelihood(model(x))``);
        False uses the latent function's. Defaults to True
    """

    hidden: int = 64
    features: int = 128
    conv_channels: int = 4
    lr: float = 0.1
    max_iterations: int = 1000
    refine_iterations: int = 50
    patience: int = 10
    max_fit_points: int | None = None
    predict_noisy: bool = True


class FeatureExtractor(nn.Module):
    """phi(config, budget, curve): the deep part of DyHPO's kernel."""

    def __init__(self, dim: int, max_t: int, cfg: DeepKernelGPConfig):
        super().__init__()
        self.dim = dim
        self.max_t = max_t
        self.config_layer = nn.Sequential(nn.Linear(dim + 1, cfg.hidden), nn.BatchNorm1d(cfg.hidden), nn.LeakyReLU())
        self.curve_conv = nn.Conv1d(2, cfg.conv_channels, kernel_size=3, padding=1)
        self.output_layer = nn.Sequential(nn.Linear(cfg.hidden + cfg.conv_channels, cfg.features), nn.LeakyReLU())

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        # inputs = [config (d) | budget / max_t (1) | curve values (max_t) | curve mask (max_t)]
        d, t = self.dim, self.max_t
        config_budget = inputs[:, : d + 1]
        curve = torch.stack([inputs[:, d + 1 : d + 1 + t], inputs[:, d + 1 + t :]], dim=1)
        # Conv1d computed as a matmul over unfolded windows: same result, but torch's float64
        # CPU convolution backward is ~50x slower than this
        windows = nn.functional.pad(curve, (1, 1)).unfold(2, 3, 1)  # (n, 2, t, 3)
        windows = windows.permute(0, 2, 1, 3).reshape(curve.shape[0], t, -1)
        weight = self.curve_conv.weight.reshape(self.curve_conv.out_channels, -1)
        curve_features = (windows @ weight.T + self.curve_conv.bias).amax(dim=1)
        return self.output_layer(torch.cat([self.config_layer(config_budget), curve_features], dim=1))


class _GPModel(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, likelihood, extractor: FeatureExtractor):
        super().__init__(train_x, train_y, likelihood)
        self.extractor = extractor
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, inputs):
        # the network runs in float32 (cheap), the kernel and all GP algebra in float64
        z = self.extractor(inputs.float()).double()
        return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))


def model_inputs(x: np.ndarray, budget: np.ndarray, curves: np.ndarray, max_t: int) -> torch.Tensor:
    """Packs (config, budget, curve, mask) rows into one float64 tensor."""
    mask = ~np.isnan(curves)
    values = np.where(mask, curves, 0.0)
    stacked = np.concatenate([x, (np.asarray(budget, dtype=float) / max_t)[:, None], values, mask.astype(float)], axis=1)
    return torch.from_numpy(stacked).to(torch.float64)


def _cholesky_settings():
    # exact GP: always Cholesky (default switches to CG above 800 points), float64 jitter
    return (
        gpytorch.settings.max_cholesky_size(100_000),
        gpytorch.settings.cholesky_jitter(float_value=1e-6, double_value=1e-6),
        gpytorch.settings.cholesky_max_tries(4),
    )


class _Settings:
    def __enter__(self):
        self._stack = [s for s in _cholesky_settings()]
        for s in self._stack:
            s.__enter__()

    def __exit__(self, *exc):
        for s in reversed(self._stack):
            s.__exit__(*exc)
        return False


def _robust_cholesky(matrix: torch.Tensor, max_tries: int = 4) -> torch.Tensor:
    """Cholesky factor, adding growing jitter (1e-8 .. 1e-5 x mean diagonal) if needed."""
    chol, info = torch.linalg.cholesky_ex(matrix)
    jitter = 1e-8 * float(matrix.diagonal().mean())
    for _ in range(max_tries):
        if int(info) == 0:
            return chol
        chol, info = torch.linalg.cholesky_ex(matrix + jitter * torch.eye(len(matrix), dtype=matrix.dtype))
        jitter *= 10
    if int(info) == 0:
        return chol
    raise NotPSDError(f"kernel matrix not positive definite even with jitter {jitter / 10:.1e}")


def gpytorch_posterior(surrogate: "DeepKernelGP", inputs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The same posterior through gpytorch's generic prediction path (reference for tests)."""
    model = surrogate._model
    model.eval()
    surrogate._likelihood.eval()
    with torch.no_grad(), _Settings():
        posterior = model(inputs)
        if surrogate.config.predict_noisy:
            posterior = surrogate._likelihood(posterior)
        return posterior.mean.numpy(), posterior.variance.clamp_min(1e-12).sqrt().numpy()


class DeepKernelGP:
    """DyHPO's deep-kernel GP surrogate (see module docstring).

    :param config: training settings
    """

    def __init__(self, config: DeepKernelGPConfig | None = None):
        self.config = config or DeepKernelGPConfig()
        self._model: _GPModel | None = None
        self._likelihood: gpytorch.likelihoods.GaussianLikelihood | None = None
        self._good_state: dict | None = None  # weights of the last successful fit (rollback)
        self._max_t = 1
        self._params_version = 0  # bumped whenever weights change
        self._data_version = -1  # TrainingData.version of the rows the model holds
        self._factor_cache: tuple | None = None  # ((params, data) versions, features, Cholesky)
        self.num_failures = 0

    def __getstate__(self) -> dict:
        # the Tuner pickles the scheduler every few seconds: drop the O(n^2) factor cache
        state = dict(self.__dict__)
        state["_factor_cache"] = None
        return state

    # -- Surrogate protocol --

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        all_inputs, all_targets = self._tensors(data)
        inputs, targets = all_inputs, all_targets
        limit = self.config.max_fit_points
        if limit is not None and len(targets) > limit:
            rows = np.sort(np.random.RandomState(seed).choice(len(targets), size=limit, replace=False))
            inputs, targets = all_inputs[rows], all_targets[rows]
        with torch.random.fork_rng(), _Settings():
            torch.manual_seed(seed)
            if from_scratch or self._model is None or self._model.extractor.dim != data.x.shape[1]:
                self._build(inputs, targets, data)
                iterations = self.config.max_iterations
            else:
                self._model.set_train_data(inputs, targets, strict=False)
                iterations = self.config.refine_iterations
            try:
                self._train(iterations)
            except _NUMERICAL_ERRORS as err:
                self.num_failures += 1
                logger.warning(f"Deep-kernel GP fit failed ({type(err).__name__}); refitting from scratch")
                self._build(inputs, targets, data)
                self._train(self.config.max_iterations)
        self._model.set_train_data(all_inputs, all_targets, strict=False)
        self._params_version += 1
        self._good_state = copy.deepcopy(self._state())

    def condition(self, data: TrainingData) -> None:
        inputs, targets = self._tensors(data)
        self._model.set_train_data(inputs, targets, strict=False)

    def predict(self, candidates: Candidates, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inputs = model_inputs(candidates.x, budget, candidates.curves, self._max_t)
        try:
            return self._predict(inputs)
        except _NUMERICAL_ERRORS as err:
            self.num_failures += 1
            logger.warning(f"Deep-kernel GP prediction failed ({type(err).__name__}); restoring last good weights")
            self._load_state(self._good_state)
            return self._predict(inputs)

    # -- internals --

    def _tensors(self, data: TrainingData) -> tuple[torch.Tensor, torch.Tensor]:
        self._max_t = data.max_t
        self._data_version = data.version
        return model_inputs(data.x, data.budget, data.curves, data.max_t), torch.from_numpy(np.asarray(data.y, dtype=float))

    def _build(self, inputs: torch.Tensor, targets: torch.Tensor, data: TrainingData) -> None:
        extractor = FeatureExtractor(data.x.shape[1], data.max_t, self.config)
        self._likelihood = gpytorch.likelihoods.GaussianLikelihood()
        self._model = _GPModel(inputs, targets, self._likelihood, extractor)
        for module in (self._model.mean_module, self._model.covar_module, self._likelihood):
            module.to(torch.float64)

    def _train(self, iterations: int) -> None:
        model, likelihood = self._model, self._likelihood
        model.train()
        likelihood.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        optimizer = torch.optim.Adam(model.parameters(), lr=self.config.lr)
        best_loss, best_state, since_best = np.inf, None, 0
        for _ in range(iterations):
            optimizer.zero_grad()
            loss = -mll(model(*model.train_inputs), model.train_targets)
            loss.backward()
            optimizer.step()
            value = float(loss.detach())
            if not np.isfinite(value):
                raise NanError("non-finite marginal likelihood")
            if value < best_loss - 1e-6:
                best_loss, best_state, since_best = value, copy.deepcopy(self._state()), 0
            else:
                since_best += 1
                if since_best >= self.config.patience:
                    break
        if best_state is not None:
            self._load_state(best_state)

    def _predict(self, inputs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Exact GP posterior predictive at ``inputs`` (of an observation, or of the latent
        score if ``predict_noisy`` is False), from the model's gpytorch mean, kernel and
        likelihood.

        gpytorch's generic prediction path gives the same numbers (see
        :func:`gpytorch_posterior`, used by the tests) but recomputes the features and the
        Cholesky factor of all n training rows at every call, and factorises twice. A decision
        is made after every epoch and, between fits, rows are only appended, so the factor of
        the known rows is kept and extended by the new ones (O(n^2) per decision, not O(n^3)).
        """
        model, likelihood = self._model, self._likelihood
        model.eval()
        likelihood.eval()
        with torch.no_grad():
            z_train, chol = self._train_factor()
            z_test = model.extractor(inputs.float()).double()
            k_cross = model.covar_module(z_test, z_train).to_dense()
            constant = model.mean_module.constant
            alpha = torch.cholesky_solve((model.train_targets - constant)[:, None], chol)
            mean = constant + (k_cross @ alpha).squeeze(1)
            v = torch.linalg.solve_triangular(chol, k_cross.T, upper=False)
            # RBF: k(x, x) is the outputscale
            variance = model.covar_module.outputscale - (v * v).sum(dim=0)
            if self.config.predict_noisy:
                variance = variance + likelihood.noise.item()
        return mean.numpy(), variance.clamp_min(1e-12).sqrt().numpy()

    def _train_factor(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Features of the training rows and the Cholesky factor of K + noise I, reusing
        (and extending) the cached ones when only rows were appended since."""
        model, noise = self._model, self._likelihood.noise.item()
        train_x = model.train_inputs[0]
        key = (self._params_version, self._data_version)
        cache = self._factor_cache
        if cache is None or cache[0] != key or cache[1].shape[0] > len(train_x):
            z = model.extractor(train_x.float()).double()
            k = model.covar_module(z).to_dense()
            k.diagonal().add_(noise)
            chol = _robust_cholesky(k)
        else:
            _, z_old, chol_old = cache
            n_old = z_old.shape[0]
            if n_old == len(train_x):
                return z_old, chol_old
            z_new = model.extractor(train_x[n_old:].float()).double()
            k12 = model.covar_module(z_old, z_new).to_dense()
            k22 = model.covar_module(z_new).to_dense()
            k22.diagonal().add_(noise)
            l21 = torch.linalg.solve_triangular(chol_old, k12, upper=False).T
            l22 = _robust_cholesky(k22 - l21 @ l21.T)
            n = len(train_x)
            chol = torch.zeros(n, n, dtype=torch.float64)
            chol[:n_old, :n_old] = chol_old
            chol[n_old:, :n_old] = l21
            chol[n_old:, n_old:] = l22
            z = torch.cat([z_old, z_new])
        self._factor_cache = (key, z, chol)
        return z, chol

    def _state(self) -> dict:
        return {"model": self._model.state_dict()}

    def _load_state(self, state: dict | None) -> None:
        if state is None:
            raise RuntimeError("no successful fit to roll back to")
        self._model.load_state_dict(state["model"], strict=False)
        self._params_version += 1
