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

How it is computed (same numbers as gpytorch's generic path, which the tests use as the
reference, at a fraction of the cost):
- training maximises the same exact marginal likelihood as gpytorch's
  ``ExactMarginalLogLikelihood``, computed directly from the kernel matrix's Cholesky factor
  with its gradient in closed form (:mod:`.marginal_likelihood`; the same gradient as
  autograd's up to rounding), and Adam by torch's fused kernel (:mod:`.optim`);
- between trainings the Cholesky factor of the conditioning rows is extended row by row
  (O(n) per row and candidate), and each candidate's whitened cross-covariance
  ``v = L^-1 k(X, x)`` is kept, keyed by the candidate's exact input, and extended as rows
  arrive: a paused trial or a row of a finite candidate pool scored again costs O(n), not
  O(n^2); mean and variance are ``m + v^T w`` and ``s - v^T v`` with ``w = L^-1 (y - m)``;
- the new entries of ``w`` are the standardised one-step-ahead prediction errors of the rows
  just conditioned on (:meth:`DeepKernelGP.misfit`), which a fit schedule may use to refine
  only on evidence of misfit (``FitSchedule.refine_on_misfit``).

One named deviation bounds the cost beyond a few thousand observations:
``max_condition_points`` (None: the paper's exact GP on all observations).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import gpytorch
import numpy as np
import torch
from linear_operator.utils.errors import NanError, NotPSDError
from torch import nn

from syne_dyhpo.checks import checked_flag, checked_integer, checked_positive
from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import TrainingData
from syne_dyhpo.core.policy import Surrogate, SurrogateCapabilities
from syne_dyhpo.surrogates.marginal_likelihood import _MAX_HALF_SQ_DIST, negative_mll_and_gradients
from syne_dyhpo.surrogates.optim import Adam

logger = logging.getLogger(__name__)

_NUMERICAL_ERRORS = (NotPSDError, NanError, RuntimeError, ValueError)


@dataclass(frozen=True)
class DeepKernelGPConfig:
    """Training settings of :class:`DeepKernelGP`. The defaults are DyHPO's (what
    :class:`~syne_dyhpo.methods.dyhpo.DyHPO` uses when given none): the paper's, except three
    caps that bound a decision's cost (``max_iterations``, ``max_fit_points``,
    ``max_condition_points``; docs/deviations.md says why and what each costs).
    :meth:`paper` gives the paper's settings (Adam, lr 0.1, early stop after 10 non-improving
    epochs, at most 1000 epochs from scratch, all observations); the authors' code instead uses
    lr 1e-3 with 1000 epochs from scratch and 50 warm-started epochs per refinement.
    Changing a field changes only that field: ``DeepKernelGPConfig(lr=0.05)`` is DyHPO's
    default with another learning rate.

    :param hidden: width of the (config, budget) layer. Defaults to 64 (code; paper: 128)
    :param features: width of the output layer the kernel sees. Defaults to 128 (code;
        paper: 256)
    :param conv_channels: channels of the learning-curve convolution. Defaults to 4
    :param lr: Adam learning rate. Defaults to 0.1 (paper)
    :param max_iterations: most epochs of a fit from scratch. Defaults to 300 (paper: 1000)
    :param refine_iterations: most epochs of a warm-started refinement. Defaults to 50
    :param patience: stop after this many epochs without improving the loss; the weights
        with the best loss seen are kept. Defaults to 10
    :param max_fit_points: train the kernel on at most this many observations (a random
        subset drawn per fit; predictions always condition on all of them). An exact-GP
        training epoch costs O(n^3); None trains on all (paper). Defaults to 128
    :param predict_noisy: EI uses the predictive distribution of an observation (latent
        variance + noise variance), as the authors' code does (``likelihood(model(x))``);
        False uses the latent function's. Defaults to True
    :param max_condition_points: condition the GP's posterior on at most about this many
        observations (not in the paper, whose exact GP conditions on all: None). Chosen when
        the factor is rebuilt (after a training, or once the set has grown by a quarter past
        the bound): every configuration's latest observation, then the most recent ones; rows
        arriving in between are appended. Bounds a decision's cost, which otherwise grows as
        O(n^2) per candidate and O(n^3) per refit. Defaults to 512
    """

    hidden: int = 64
    features: int = 128
    conv_channels: int = 4
    lr: float = 0.1
    max_iterations: int = 300
    refine_iterations: int = 50
    patience: int = 10
    max_fit_points: int | None = 128
    predict_noisy: bool = True
    max_condition_points: int | None = 512

    def __post_init__(self):
        for name in ("hidden", "features", "conv_channels", "max_iterations", "patience"):
            checked_integer(name, getattr(self, name), 1)
        checked_integer("refine_iterations", self.refine_iterations, 0)
        for name in ("max_fit_points", "max_condition_points"):
            checked_integer(name, getattr(self, name), 1, allow_none=True)
        checked_positive("lr", self.lr)
        checked_flag("predict_noisy", self.predict_noisy)

    @classmethod
    def paper(cls) -> "DeepKernelGPConfig":
        """The paper's settings: at most 1000 epochs from scratch, trained on and conditioned
        on all observations."""
        return cls(max_iterations=1000, max_fit_points=None, max_condition_points=None)


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
        return self.embed(*self.prepare(inputs))

    def prepare(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The parameter-free part of :meth:`forward`: (config, budget) and the learning
        curve's convolution windows, in float32 (computed once per training, not per epoch).
        """
        d, t = self.dim, self.max_t
        inputs = inputs.float()
        config_budget = inputs[:, : d + 1]
        curve = torch.stack([inputs[:, d + 1 : d + 1 + t], inputs[:, d + 1 + t :]], dim=1)
        # Conv1d computed as a matmul over unfolded windows: same result, but torch's float64
        # CPU convolution backward is ~50x slower than this
        windows = nn.functional.pad(curve, (1, 1)).unfold(2, 3, 1)  # (n, 2, t, 3)
        windows = windows.permute(0, 2, 1, 3).reshape(curve.shape[0], t, -1)
        return config_budget, windows

    def embed(self, config_budget: torch.Tensor, windows: torch.Tensor) -> torch.Tensor:
        """The trained part of :meth:`forward`, on :meth:`prepare`'s output."""
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
    """The same posterior through gpytorch's generic prediction path, conditioned on the same
    rows (reference for tests)."""
    model = surrogate._model
    rows = surrogate.conditioning_rows()
    model.set_train_data(surrogate._inputs[rows], surrogate._targets[rows], strict=False)
    model.eval()
    surrogate._likelihood.eval()
    with torch.no_grad(), _Settings():
        posterior = model(inputs)
        if surrogate.config.predict_noisy:
            posterior = surrogate._likelihood(posterior)
        return posterior.mean.numpy(), posterior.variance.clamp_min(1e-12).sqrt().numpy()


class _Posterior:
    """The GP conditioned on a set of training rows, for fixed weights: features ``z`` (kept
    centred and divided by the lengthscale, with their squared norms ``sq``) and Cholesky
    factor ``chol`` of the rows (in arrival order, grown by appending), the whitened targets
    ``w = chol^-1 (y - m)``, and the candidates' whitened cross-covariances ``v`` (keyed by
    their exact input) with their features. Buffers have spare capacity so that appending a
    row copies nothing."""

    def __init__(self, params_version: int, rows: np.ndarray, dim: int, n_seen: int, centre: torch.Tensor,
                 lengthscale: float, outputscale: float, slots_hint: int = 0):
        self.params_version = params_version
        # candidate slots the cache is first allocated with: those the previous posterior's
        # cache grew to (growing by doubling copies every cached ``v`` at each step)
        self.slots_hint = slots_hint
        self.centre, self.lengthscale, self.outputscale = centre, lengthscale, outputscale
        self.n_seen = n_seen  # training rows 0..n_seen-1 were considered (in the set or left out)
        size = len(rows)
        cap = max(64, int(1.25 * size) + 16)
        self.rows = np.empty(cap, dtype=np.int64)
        self.rows[:size] = rows
        self.z = torch.zeros(cap, dim, dtype=torch.float64)  # scaled: see scaled()
        self.sq = torch.zeros(cap, dtype=torch.float64)
        self.chol = torch.zeros(cap, cap, dtype=torch.float64)
        self.w = torch.zeros(cap, dtype=torch.float64)
        self.size = size
        self._contiguous: torch.Tensor | None = None
        # candidate cache
        self.keys: dict[bytes, int] = {}
        self.cand_z = torch.zeros(0, dim, dtype=torch.float64)
        self.cand_sq = torch.zeros(0, dtype=torch.float64)
        self.cand_v = torch.zeros(0, cap, dtype=torch.float64)
        self.cand_vw = torch.zeros(0, dtype=torch.float64)  # v^T w
        self.cand_vv = torch.zeros(0, dtype=torch.float64)  # v^T v
        self.cand_len = np.zeros(0, dtype=np.int64)  # rows v covers

    @property
    def capacity(self) -> int:
        return len(self.w)

    @property
    def max_slots(self) -> int:
        """Most candidates cached (:data:`CANDIDATE_CACHE_BYTES`; at least
        :data:`_MIN_CACHED_CANDIDATES`)."""
        return max(_MIN_CACHED_CANDIDATES, CANDIDATE_CACHE_BYTES // (8 * self.capacity))

    def grow(self, size: int) -> None:
        if size <= self.capacity:
            return
        cap = max(size, 2 * self.capacity)
        n = self.size
        rows, z, sq, chol, w, cand_v = self.rows, self.z, self.sq, self.chol, self.w, self.cand_v
        self.rows = np.empty(cap, dtype=np.int64)
        self.rows[:n] = rows[:n]
        self.z = torch.zeros(cap, z.shape[1], dtype=torch.float64)
        self.z[:n] = z[:n]
        self.sq = torch.zeros(cap, dtype=torch.float64)
        self.sq[:n] = sq[:n]
        self.chol = torch.zeros(cap, cap, dtype=torch.float64)
        self.chol[:n, :n] = chol[:n, :n]
        self.w = torch.zeros(cap, dtype=torch.float64)
        self.w[:n] = w[:n]
        self.cand_v = torch.empty(len(cand_v), cap, dtype=torch.float64)  # read up to cand_len only
        self.cand_v[:, :n] = cand_v[:, :n]

    def whiten(self, z: torch.Tensor, sq: torch.Tensor) -> torch.Tensor:
        """``chol^-1 k(rows, x)`` for inputs with scaled features ``z`` (squared norms
        ``sq``), shape (rows, inputs): forward substitution through a contiguous copy of the
        factor's leading block (a block of the capacity buffer is strided, and LAPACK's
        triangular solve would copy the whole factor at each call), then through the rows
        appended since the copy was made. The copy is renewed when those rows exceed
        :data:`_PREFIX_STALE_ROWS` or a 16th of the set."""
        n = self.size
        if self._contiguous is None or n - len(self._contiguous) > max(_PREFIX_STALE_ROWS, n // 16):
            self._contiguous = self.chol[:n, :n].contiguous()
        n0 = len(self._contiguous)
        k = self.kernel(self.z[:n], self.sq[:n], z, sq)
        head = torch.linalg.solve_triangular(self._contiguous, k[:n0], upper=False)
        if n0 == n:
            return head
        rhs = k[n0:] - self.chol[n0:n, :n0] @ head
        tail = torch.linalg.solve_triangular(self.chol[n0:n, n0:n], rhs, upper=False)
        # column-major, as LAPACK returns ``head``: the candidate cache stores the transpose,
        # which is then a contiguous copy (a row-major result made it a strided one, the
        # largest cost of caching 256 new candidates at 5,000 observations)
        whitened = torch.empty(z.shape[0], n, dtype=head.dtype).T
        whitened[:n0] = head
        whitened[n0:] = tail
        return whitened

    def scaled(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features centred and divided by the lengthscale, and their squared norms."""
        zs = (z - self.centre) / self.lengthscale
        return zs, zs.square().sum(dim=1)

    def kernel(self, a: torch.Tensor, a_sq: torch.Tensor, b: torch.Tensor, b_sq: torch.Tensor) -> torch.Tensor:
        """``ScaleKernel(RBFKernel())`` between scaled features (:meth:`scaled`), entries
        below ``exp(-700)`` set to 0 (:data:`_MAX_HALF_SQ_DIST`)."""
        # one (len(a), len(b)) buffer, updated in place: at 1,000 rows x 256 candidates the
        # temporaries of the textbook expression cost a third of the kernel
        sq_dist = torch.addmm(a_sq.unsqueeze(1), a, b.T, alpha=-2.0).add_(b_sq.unsqueeze(0))
        far = sq_dist > 2 * _MAX_HALF_SQ_DIST
        return sq_dist.clamp_(0, 2 * _MAX_HALF_SQ_DIST).mul_(-0.5).exp_().masked_fill_(far, 0.0).mul_(self.outputscale)


#: memory for the candidates' whitened cross-covariances (the cache is emptied when full)
CANDIDATE_CACHE_BYTES = 48 * 2**20
_MIN_CACHED_CANDIDATES = 1024
#: rows appended to the conditioning set before the contiguous copy of its factor is renewed
_PREFIX_STALE_ROWS = 64
#: candidates whose cached v has one length are extended as a group if at least this many
_SAME_LENGTH_GROUP = 32


class DeepKernelGP(Surrogate):
    """DyHPO's deep-kernel GP surrogate (see module docstring). Reports its misfit and
    conditions predictions on pending results.

    :param config: training settings
    """

    capabilities = SurrogateCapabilities(misfit=True, pending=True)

    def __init__(self, config: DeepKernelGPConfig | None = None):
        self.config = config or DeepKernelGPConfig()
        self._model: _GPModel | None = None
        self._likelihood: gpytorch.likelihoods.GaussianLikelihood | None = None
        self._good_state: dict | None = None  # weights of the last successful fit (rollback)
        self._max_t = 1
        self._params_version = 0  # bumped whenever weights change
        self._data_version = None  # TrainingData.version of the rows held
        self._inputs = torch.zeros(0, 0, dtype=torch.float64)  # model inputs of all rows held
        self._targets = torch.zeros(0, dtype=torch.float64)
        self._n = 0  # rows held
        self._posterior: _Posterior | None = None  # conditioning state (a cache)
        self._cache_slots = 0  # candidate slots the last posterior's cache grew to
        self._errors: list[float] = []  # standardised one-step-ahead errors since training
        self.num_failures = 0

    def __getstate__(self) -> dict:
        # the Tuner pickles the scheduler every few seconds: drop the O(n^2) posterior cache
        # and the spare capacity of the row buffers
        state = dict(self.__dict__)
        state["_posterior"] = None
        state["_inputs"] = self._inputs[: self._n].clone()
        state["_targets"] = self._targets[: self._n].clone()
        return state

    # -- Surrogate protocol --

    def fit(self, data: TrainingData, from_scratch: bool, seed: int) -> None:
        self._hold(data)
        all_inputs, all_targets = self._inputs[: self._n], self._targets[: self._n]
        inputs, targets = all_inputs, all_targets
        limit = self.config.max_fit_points
        if limit is not None and len(targets) > limit:
            rows = np.sort(np.random.RandomState(seed).choice(len(targets), size=limit, replace=False))
            inputs, targets = all_inputs[rows], all_targets[rows]
        else:
            inputs, targets = inputs.clone(), targets.clone()  # not views of the row buffers
        with torch.random.fork_rng():
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
        self._params_version += 1
        self._drop_posterior()
        self._errors = []
        self._good_state = self._state()

    def condition(self, data: TrainingData) -> None:
        self._hold(data)
        if self._model is None:
            return
        try:
            self._update_posterior()
        except (NotPSDError, NanError) as err:
            logger.warning(f"Deep-kernel GP conditioning failed ({type(err).__name__}); refactorising at prediction")
            self._drop_posterior()  # predict() recovers (restores the last good weights if needed)

    def predict(
        self,
        candidates: Candidates,
        budget: np.ndarray,
        pending: Candidates | None = None,
        pending_budget: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive at the candidates' budgets.

        :param pending: inputs whose observations are on their way (running trials at their
            next budget): the posterior is conditioned on them as if each had returned its
            predicted mean (the kriging believer of asynchronous BO), which leaves the mean
            unchanged and shrinks the variance of candidates correlated with them
        :param pending_budget: budgets of the pending inputs
        """
        inputs = model_inputs(candidates.x, budget, candidates.curves, self._max_t)
        pending_inputs = None
        if pending is not None and len(pending):
            pending_inputs = model_inputs(pending.x, pending_budget, pending.curves, self._max_t)
        try:
            return self._predict(inputs, pending_inputs)
        except _NUMERICAL_ERRORS as err:
            self.num_failures += 1
            logger.warning(f"Deep-kernel GP prediction failed ({type(err).__name__}); restoring last good weights")
            self._load_state(self._good_state)
            return self._predict(inputs, pending_inputs)

    def misfit(self) -> np.ndarray:
        """Standardised one-step-ahead prediction errors of the rows conditioned on since the
        GP was last trained: each row's error under the predictive distribution given all
        rows before it, N(0, 1) and independent if the model is right. Free: they are the new
        entries of ``w`` when the Cholesky factor is extended."""
        return np.array(self._errors)

    def conditioning_rows(self) -> np.ndarray:
        """Indices (arrival order) of the training rows the posterior is conditioned on."""
        self._update_posterior()
        return self._posterior.rows[: self._posterior.size].copy()

    # -- internals --

    def _hold(self, data: TrainingData) -> None:
        """Keeps the model inputs of all rows, converting only rows new since the last call
        when the data only grew (same version)."""
        self._max_t = data.max_t
        n = len(data)
        if data.version != self._data_version or n < self._n or self._inputs.shape[1] != data.x.shape[1] + 1 + 2 * data.max_t:
            self._data_version = data.version
            self._n = 0
            self._drop_posterior()
            self._inputs = torch.zeros(max(64, n), data.x.shape[1] + 1 + 2 * data.max_t, dtype=torch.float64)
            self._targets = torch.zeros(max(64, n), dtype=torch.float64)
        if n > len(self._targets):
            cap = max(n, 2 * len(self._targets))
            inputs, targets = self._inputs, self._targets
            self._inputs = torch.zeros(cap, inputs.shape[1], dtype=torch.float64)
            self._inputs[: self._n] = inputs[: self._n]
            self._targets = torch.zeros(cap, dtype=torch.float64)
            self._targets[: self._n] = targets[: self._n]
        if n > self._n:
            new = slice(self._n, n)
            self._inputs[new] = model_inputs(data.x[new], data.budget[new], data.curves[new], data.max_t)
            self._targets[new] = torch.from_numpy(np.array(data.y[new], dtype=float))
            self._n = n

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
        inputs, targets = model.train_inputs[0], model.train_targets
        prepared = model.extractor.prepare(inputs)
        names, params = zip(*model.named_parameters())
        adam = Adam(list(params), lr=self.config.lr)
        # weights and BatchNorm statistics, snapshot by clones of the tensors themselves
        # (state_dict() walks the module tree at each call: 0.1 ms of a 1.9 ms step)
        state = list(model.state_dict(keep_vars=True).values())
        best_loss, best_state, since_best = np.inf, None, 0
        for _ in range(iterations):
            value, grads = negative_mll_and_gradients(model, targets, prepared)
            if not np.isfinite(value):
                raise NanError("non-finite marginal likelihood")
            # the weights the loss was evaluated at, before Adam moves them: what is restored
            # at the end has the best loss seen, not that of the step after it
            if value < best_loss - 1e-6:
                best_loss, best_state, since_best = value, [t.detach().clone() for t in state], 0
            else:
                since_best += 1
                if since_best >= self.config.patience:
                    break
            adam.step([grads[name] for name in names])
        if best_state is not None:
            with torch.no_grad():
                for tensor, best in zip(state, best_state):
                    tensor.copy_(best)

    def _features(self, inputs: torch.Tensor) -> torch.Tensor:
        return self._model.extractor(inputs.float()).double()

    def _update_posterior(self) -> None:
        """Brings the posterior up to date with the rows held: rebuilt after a training or
        when the bounded conditioning set must be chosen again, else extended by the new
        rows."""
        if self._model.training:
            self._model.eval()
            self._likelihood.eval()
        with torch.no_grad():
            post = self._posterior
            if post is None or post.params_version != self._params_version:
                self._posterior = self._factorise()
                return
            new = self._n - post.n_seen
            if new <= 0:
                return
            bound = self.config.max_condition_points
            if bound is not None and post.size + new > bound + max(bound // 4, 1):
                self._posterior = self._factorise()
                return
            self._extend(post, np.arange(post.n_seen, self._n))

    def _select_rows(self) -> np.ndarray:
        """The conditioning set: all rows, or (``max_condition_points``) every configuration's
        latest row, then the most recent rows, in arrival order."""
        n, bound = self._n, self.config.max_condition_points
        if bound is None or n <= bound:
            return np.arange(n)
        d = self._model.extractor.dim
        configs = self._inputs[:n, :d].numpy()
        # latest row of each configuration: unique on the reversed rows keeps the last occurrence
        _, first_in_reversed = np.unique(configs[::-1], axis=0, return_index=True)
        latest = np.sort(n - 1 - first_in_reversed)
        if len(latest) >= bound:
            return latest[-bound:]
        chosen = np.zeros(n, dtype=bool)
        chosen[latest] = True
        rest = np.flatnonzero(~chosen)
        chosen[rest[len(rest) - (bound - len(latest)) :]] = True
        return np.flatnonzero(chosen)

    def _drop_posterior(self) -> None:
        """Drops the conditioning state, keeping the size its candidate cache grew to."""
        if self._posterior is not None:
            self._cache_slots = len(self._posterior.cand_len)
        self._posterior = None

    def _factorise(self) -> _Posterior:
        self._drop_posterior()
        rows = self._select_rows()
        z = self._features(self._inputs[rows])
        covar = self._model.covar_module
        post = _Posterior(self._params_version, rows, z.shape[1], n_seen=self._n, centre=z.mean(dim=0, keepdim=True),
                          lengthscale=float(covar.base_kernel.lengthscale), outputscale=float(covar.outputscale),
                          slots_hint=self._cache_slots)
        zs, sq = post.scaled(z)
        k = post.kernel(zs, sq, zs, sq)
        k.diagonal().add_(self._likelihood.noise.item())
        chol = _robust_cholesky(k)
        residual = (self._targets[rows] - self._model.mean_module.constant).unsqueeze(1)
        w = torch.linalg.solve_triangular(chol, residual, upper=False).squeeze(1)
        size = len(rows)
        post.z[:size], post.sq[:size], post.chol[:size, :size], post.w[:size] = zs, sq, chol, w
        return post

    def _extend(self, post: _Posterior, rows: np.ndarray) -> None:
        """Appends rows to the conditioning set, one at a time: the Cholesky factor grows by
        a row ``[l21, l22]`` with ``l21 = chol^-1 k(set, row)``, ``w`` by the row's standardised
        one-step-ahead error. A row that was a candidate at the last decision (the trial that
        just reported was scored at this very input) has ``l21`` in the candidate cache: it
        is extended there in O(n) instead of solved for in O(n^2)."""
        post.grow(post.size + len(rows))
        inputs = self._inputs[rows]
        arr = inputs.numpy()
        noise = self._likelihood.noise.item()
        constant = float(self._model.mean_module.constant)
        features = None
        for j, row in enumerate(rows):
            n = post.size
            slot = post.keys.get(arr[j].tobytes(), -1)
            if slot >= 0:
                self._bring_up_to_date(post, np.array([slot]))
                z, sq = post.cand_z[slot : slot + 1], post.cand_sq[slot : slot + 1]
                l21 = post.cand_v[slot, :n]
            else:
                if features is None:
                    features = post.scaled(self._features(inputs))
                z, sq = features[0][j : j + 1], features[1][j : j + 1]
                l21 = post.whiten(z, sq)[:, 0]
            k22 = float(post.kernel(z, sq, z, sq)[0, 0]) + noise
            # the row's predictive variance given the set (noise included: > 0 in exact
            # arithmetic); floored like the robust factorisation's jitter if rounding says not
            l22 = math.sqrt(max(k22 - float(l21 @ l21), 1e-8 * k22))
            w_new = (float(self._targets[row]) - constant - float(l21 @ post.w[:n])) / l22
            post.chol[n, :n] = l21
            post.chol[n, n] = l22
            post.z[n], post.sq[n] = z[0], sq[0]
            post.w[n] = w_new
            post.rows[n] = row
            post.size = n + 1
            self._errors.append(w_new)
        post.n_seen = self._n

    def _predict(self, inputs: torch.Tensor, pending_inputs: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Exact GP posterior predictive at ``inputs`` (of an observation, or of the latent
        score if ``predict_noisy`` is False) given the conditioning rows, from the model's
        mean, kernel and likelihood; :func:`gpytorch_posterior` gives the same numbers through
        gpytorch's generic path (the tests check it). With ``pending_inputs``, also conditioned
        on their predicted means (see :meth:`predict`)."""
        self._update_posterior()
        post = self._posterior
        with torch.no_grad():
            # one call for candidates and pending inputs: a call may compact the cache, which
            # keeps only the slots that call uses
            both = inputs if pending_inputs is None else torch.cat([inputs, pending_inputs])
            slots = self._candidate_slots(post, both)
            index = torch.from_numpy(slots[: len(inputs)])
            mean = self._model.mean_module.constant + post.cand_vw[index]
            # RBF: k(x, x) is the outputscale
            variance = self._model.covar_module.outputscale - post.cand_vv[index]
            if pending_inputs is not None:
                variance = variance - self._believer_variance_reduction(post, slots[: len(inputs)], slots[len(inputs) :])
            if self.config.predict_noisy:
                variance = variance + self._likelihood.noise.item()
        return mean.numpy(), variance.clamp_min(1e-12).sqrt().numpy()

    def _believer_variance_reduction(self, post: _Posterior, slots: np.ndarray, pending: np.ndarray) -> torch.Tensor:
        """How much the latent variance of each candidate (cache ``slots``) shrinks when the
        posterior is also conditioned on noisy observations at the ``pending`` inputs (any
        values: a Gaussian posterior's variance does not depend on them): ``c^T S^-1 c`` with
        ``c`` the posterior covariance of candidate and pending inputs and ``S`` that of the
        pending observations."""
        n = post.size
        cand, pend = torch.from_numpy(slots), torch.from_numpy(pending)
        v_c, v_p = post.cand_v[cand, :n], post.cand_v[pend, :n]
        cross = post.kernel(post.cand_z[cand], post.cand_sq[cand], post.cand_z[pend], post.cand_sq[pend]) - v_c @ v_p.T
        among = post.kernel(post.cand_z[pend], post.cand_sq[pend], post.cand_z[pend], post.cand_sq[pend]) - v_p @ v_p.T
        among.diagonal().add_(self._likelihood.noise.item())
        chol = _robust_cholesky(among)
        whitened = torch.linalg.solve_triangular(chol, cross.T, upper=False)
        return whitened.square().sum(dim=0)

    def _candidate_slots(self, post: _Posterior, inputs: torch.Tensor) -> np.ndarray:
        """Cache slots of the inputs, whose ``v = chol^-1 k(rows, x)`` (whitened
        cross-covariance, with ``v^T w`` and ``v^T v``) is up to date: computed for inputs not
        seen since the last factorisation, extended by the rows appended since for the others
        (their ``v`` is kept)."""
        n = post.size
        arr = inputs.numpy()
        keys = [arr[i].tobytes() for i in range(len(arr))]
        slots = np.array([post.keys.get(k, -1) for k in keys], dtype=np.int64)
        if np.any(slots < 0):
            fresh = {}  # distinct new inputs (a config may appear twice), first position
            for i in np.flatnonzero(slots < 0):
                fresh.setdefault(keys[i], i)
            if len(post.keys) + len(fresh) > post.max_slots:
                self._compact(post, slots)
            first = len(post.keys)
            z, sq = post.scaled(self._features(inputs[np.array(list(fresh.values()), dtype=np.int64)]))
            v = post.whiten(z, sq).T
            self._append_slots(post, z, sq, v, v @ post.w[:n], v.square().sum(dim=1), n)
            for j, key in enumerate(fresh):
                post.keys[key] = first + j
            slots = np.array([post.keys[k] for k in keys], dtype=np.int64)
        self._bring_up_to_date(post, slots)
        return slots

    @staticmethod
    def _bring_up_to_date(post: _Posterior, slots: np.ndarray) -> None:
        """Extends the cached ``v`` of these candidates by the rows appended since they were
        computed: ``v_new = chol_22^-1 (k(new rows, x) - chol_21 v)``, O(n) per row and
        candidate. One batched pass per group: candidates whose v has the same length (the
        paused trials and the pool rows scored at the last decision: most of them), then the
        rest in buckets of similar lengths (log2 of the rows missing), for which the part of v
        past the bucket's shortest is recomputed."""
        n = post.size
        stale = slots[post.cand_len[slots] < n]
        if not len(stale):
            return
        if len(stale) == 1:
            groups = [(stale, True)]
        else:
            stale = np.unique(stale)
            lengths = post.cand_len[stale]
            values, counts = np.unique(lengths, return_counts=True)
            if len(values) == 1:
                groups = [(stale, True)]
            else:
                common = values[counts >= _SAME_LENGTH_GROUP]
                exact = np.isin(lengths, common)
                groups = [(stale[lengths == length], True) for length in common]
                rest = stale[~exact]
                buckets = np.floor(np.log2(n - post.cand_len[rest])).astype(np.int64)
                groups += [(rest[buckets == b], False) for b in np.unique(buckets)]
        for group, same_length in groups:
            start = int(post.cand_len[group].min())
            index = torch.from_numpy(group)
            known = post.cand_v[index, :start]
            k_new = post.kernel(post.z[start:n], post.sq[start:n], post.cand_z[index], post.cand_sq[index])
            rhs = k_new - post.chol[start:n, :start] @ known.T
            v_new = torch.linalg.solve_triangular(post.chol[start:n, start:n], rhs, upper=False).T
            post.cand_v[index, start:n] = v_new
            if same_length:  # v grew by v_new: add its share
                post.cand_vw[index] += v_new @ post.w[start:n]
                post.cand_vv[index] += v_new.square().sum(dim=1)
            else:
                post.cand_vw[index] = known @ post.w[:start] + v_new @ post.w[start:n]
                post.cand_vv[index] = known.square().sum(dim=1) + v_new.square().sum(dim=1)
            post.cand_len[group] = n

    @staticmethod
    def _append_slots(post: _Posterior, z: torch.Tensor, sq: torch.Tensor, v: torch.Tensor, vw: torch.Tensor,
                      vv: torch.Tensor, length: int) -> None:
        used, m = len(post.keys), len(z)
        if used + m > len(post.cand_len):
            # grown by doubling up to the cache's bound; emptying the cache keeps the buffers
            cap = max(used + m, min(max(2 * len(post.cand_len), 256, post.slots_hint), post.max_slots))
            old = (post.cand_z, post.cand_sq, post.cand_v, post.cand_vw, post.cand_vv, post.cand_len)
            post.cand_z = torch.zeros(cap, z.shape[1], dtype=torch.float64)
            post.cand_sq = torch.zeros(cap, dtype=torch.float64)
            # v is read only up to each entry's length (cand_len): no need to zero it
            post.cand_v = torch.empty(cap, post.capacity, dtype=torch.float64)
            post.cand_vw = torch.zeros(cap, dtype=torch.float64)
            post.cand_vv = torch.zeros(cap, dtype=torch.float64)
            post.cand_len = np.zeros(cap, dtype=np.int64)
            for new, prev in zip((post.cand_z, post.cand_sq, post.cand_v, post.cand_vw, post.cand_vv, post.cand_len), old):
                new[:used] = prev[:used]
        post.cand_z[used : used + m] = z
        post.cand_sq[used : used + m] = sq
        post.cand_v[used : used + m, :length] = v
        post.cand_vw[used : used + m] = vw
        post.cand_vv[used : used + m] = vv
        post.cand_len[used : used + m] = length

    @staticmethod
    def _compact(post: _Posterior, slots: np.ndarray) -> None:
        """Empties the candidate cache but for the entries this call uses (renumbering
        ``slots`` in place): they move to the front of the buffers, which keep their size."""
        keep = np.unique(slots[slots >= 0])
        remap = np.full(len(post.cand_len), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        post.keys = {k: int(remap[s]) for k, s in post.keys.items() if remap[s] >= 0}
        slots[slots >= 0] = remap[slots[slots >= 0]]
        m, index = len(keep), torch.from_numpy(keep)
        for buffer in (post.cand_z, post.cand_sq, post.cand_v, post.cand_vw, post.cand_vv):
            buffer[:m] = buffer[index]  # the gather copies first: overlapping rows are safe
        post.cand_len[:m] = post.cand_len[keep]

    def _state(self) -> dict:
        return {"model": {k: v.detach().clone() for k, v in self._model.state_dict().items()}}

    def _load_state(self, state: dict | None) -> None:
        if state is None:
            raise RuntimeError("no successful fit to roll back to")
        self._model.load_state_dict(state["model"], strict=False)
        self._params_version += 1
        self._drop_posterior()
