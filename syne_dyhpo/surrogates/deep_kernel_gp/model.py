"""DyHPO's deep-kernel GP surrogate: the surrogate protocol, training by exact marginal
likelihood, and the choice and upkeep of the rows the posterior is conditioned on (see
:mod:`syne_dyhpo.surrogates.deep_kernel_gp`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable

import gpytorch
import numpy as np
import torch
from linear_operator.utils.errors import NanError, NotPSDError

from syne_dyhpo.core.candidates import Candidates
from syne_dyhpo.core.observations import TrainingData
from syne_dyhpo.core.policy import Surrogate, SurrogateCapabilities
from syne_dyhpo.surrogates.deep_kernel_gp.features import FeatureExtractor, _GPModel, model_inputs
from syne_dyhpo.surrogates.deep_kernel_gp.posterior import _Posterior, _robust_cholesky
from syne_dyhpo.surrogates.deep_kernel_gp.settings import DeepKernelGPConfig
from syne_dyhpo.surrogates.marginal_likelihood import negative_mll_and_gradients
from syne_dyhpo.surrogates.optim import Adam

logger = logging.getLogger(__name__)

_NUMERICAL_ERRORS = (NotPSDError, NanError, RuntimeError, ValueError)


class DeepKernelGP(Surrogate):
    """DyHPO's deep-kernel GP surrogate (see :mod:`syne_dyhpo.surrogates.deep_kernel_gp`).
    Reports its misfit and conditions predictions on pending results.

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
        self._data_version: Hashable | None = None  # TrainingData.version of the rows held
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
            if pending_budget is None:
                raise ValueError("pending_budget must be given with pending")
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
        post = self._update_posterior()
        return post.rows[: post.size].copy()

    # -- internals --

    def _fitted(self) -> tuple[_GPModel, gpytorch.likelihoods.GaussianLikelihood]:
        """The GP model and likelihood of the last fit (:meth:`fit` has run)."""
        assert self._model is not None and self._likelihood is not None, "DeepKernelGP.fit has not run"
        return self._model, self._likelihood

    def _hold(self, data: TrainingData) -> None:
        """Keeps the model inputs of all rows, converting only rows new since the last call
        when the data only grew (same version)."""
        self._max_t = data.max_t
        n = len(data)
        width = data.x.shape[1] + 1 + 2 * data.max_t
        if data.version != self._data_version or n < self._n or self._inputs.shape[1] != width:
            self._data_version = data.version
            self._n = 0
            self._drop_posterior()
            self._inputs = torch.zeros(max(64, n), width, dtype=torch.float64)
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
        model, likelihood = self._fitted()
        model.train()
        likelihood.train()
        inputs, targets = model.train_inputs[0], model.train_targets
        prepared = model.extractor.prepare(inputs)
        names, params = zip(*model.named_parameters(), strict=True)
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
                for tensor, best in zip(state, best_state, strict=True):
                    tensor.copy_(best)

    def _features(self, inputs: torch.Tensor) -> torch.Tensor:
        return self._fitted()[0].extractor(inputs.float()).double()

    def _update_posterior(self) -> _Posterior:
        """Brings the posterior up to date with the rows held: rebuilt after a training or
        when the bounded conditioning set must be chosen again, else extended by the new
        rows.

        :return: the posterior, up to date
        """
        model, likelihood = self._fitted()
        if model.training:
            model.eval()
            likelihood.eval()
        with torch.no_grad():
            post = self._posterior
            if post is None or post.params_version != self._params_version:
                self._posterior = self._factorise()
                return self._posterior
            new = self._n - post.n_seen
            if new <= 0:
                return post
            bound = self.config.max_condition_points
            if bound is not None and post.size + new > bound + max(bound // 4, 1):
                self._posterior = self._factorise()
                return self._posterior
            self._extend(post, np.arange(post.n_seen, self._n))
            return post

    def _select_rows(self) -> np.ndarray:
        """The conditioning set: all rows, or (``max_condition_points``) every configuration's
        latest row, then the most recent rows, in arrival order."""
        n, bound = self._n, self.config.max_condition_points
        if bound is None or n <= bound:
            return np.arange(n)
        d = self._fitted()[0].extractor.dim
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
        model, likelihood = self._fitted()
        covar = model.covar_module
        post = _Posterior(self._params_version, rows, z.shape[1], n_seen=self._n, centre=z.mean(dim=0, keepdim=True),
                          lengthscale=float(covar.base_kernel.lengthscale), outputscale=float(covar.outputscale),
                          slots_hint=self._cache_slots)
        zs, sq = post.scaled(z)
        k = post.kernel(zs, sq, zs, sq)
        k.diagonal().add_(likelihood.noise.item())
        chol = _robust_cholesky(k)
        residual = (self._targets[rows] - model.mean_module.constant).unsqueeze(1)
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
        model, likelihood = self._fitted()
        noise = likelihood.noise.item()
        constant = float(model.mean_module.constant)
        features = None
        for j, row in enumerate(rows):
            n = post.size
            slot = post.keys.get(arr[j].tobytes(), -1)
            if slot >= 0:
                post.bring_up_to_date(np.array([slot]))
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

    def _predict(
        self, inputs: torch.Tensor, pending_inputs: torch.Tensor | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact GP posterior predictive at ``inputs`` (of an observation, or of the latent
        score if ``predict_noisy`` is False) given the conditioning rows, from the model's
        mean, kernel and likelihood; :func:`gpytorch_posterior` gives the same numbers through
        gpytorch's generic path (the tests check it). With ``pending_inputs``, also conditioned
        on their predicted means (see :meth:`predict`)."""
        post = self._update_posterior()
        model, likelihood = self._fitted()
        with torch.no_grad():
            # one call for candidates and pending inputs: a call may compact the cache, which
            # keeps only the slots that call uses
            both = inputs if pending_inputs is None else torch.cat([inputs, pending_inputs])
            slots = self._candidate_slots(post, both)
            index = torch.from_numpy(slots[: len(inputs)])
            mean = model.mean_module.constant + post.cand_vw[index]
            # RBF: k(x, x) is the outputscale
            variance = model.covar_module.outputscale - post.cand_vv[index]
            if pending_inputs is not None:
                reduction = self._believer_variance_reduction(post, slots[: len(inputs)], slots[len(inputs) :])
                variance = variance - reduction
            if self.config.predict_noisy:
                variance = variance + likelihood.noise.item()
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
        among.diagonal().add_(self._fitted()[1].noise.item())
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
            fresh: dict[bytes, np.integer] = {}  # distinct new inputs (a config may appear twice), first position
            for i in np.flatnonzero(slots < 0):
                fresh.setdefault(keys[i], i)
            if len(post.keys) + len(fresh) > post.max_slots:
                post.compact(slots)
            first = len(post.keys)
            z, sq = post.scaled(self._features(inputs[np.array(list(fresh.values()), dtype=np.int64)]))
            v = post.whiten(z, sq).T
            post.append_slots(z, sq, v, v @ post.w[:n], v.square().sum(dim=1), n)
            for j, key in enumerate(fresh):
                post.keys[key] = first + j
            slots = np.array([post.keys[k] for k in keys], dtype=np.int64)
        post.bring_up_to_date(slots)
        return slots

    def _state(self) -> dict:
        return {"model": {k: v.detach().clone() for k, v in self._fitted()[0].state_dict().items()}}

    def _load_state(self, state: dict | None) -> None:
        if state is None:
            raise RuntimeError("no successful fit to roll back to")
        self._fitted()[0].load_state_dict(state["model"], strict=False)
        self._params_version += 1
        self._drop_posterior()
