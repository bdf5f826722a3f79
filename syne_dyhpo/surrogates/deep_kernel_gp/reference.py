"""DyHPO's deep-kernel GP posterior through gpytorch's generic prediction path: the reference
the tests compare :class:`~syne_dyhpo.surrogates.deep_kernel_gp.DeepKernelGP`'s own numerics with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gpytorch
import numpy as np
import torch

if TYPE_CHECKING:
    from syne_dyhpo.surrogates.deep_kernel_gp.model import DeepKernelGP


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


def gpytorch_posterior(surrogate: DeepKernelGP, inputs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The same posterior through gpytorch's generic prediction path, conditioned on the same
    rows (reference for tests)."""
    model, likelihood = surrogate._fitted()
    rows = surrogate.conditioning_rows()
    model.set_train_data(surrogate._inputs[rows], surrogate._targets[rows], strict=False)
    model.eval()
    likelihood.eval()
    with torch.no_grad(), _Settings():
        posterior = model(inputs)
        if surrogate.config.predict_noisy:
            posterior = likelihood(posterior)
        return posterior.mean.numpy(), posterior.variance.clamp_min(1e-12).sqrt().numpy()
