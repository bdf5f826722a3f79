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
- all GP numerics (kernel, likelihood, Cholesky) run in float64 with forced Cholesky
  (gpytorch switches to iterative solvers above 800 points by default), and a failed
  factorisation restores the last good weights and refits from scratch instead of crashing.

How it is computed (same numbers as gpytorch's generic path, which the tests use as the
reference, at a fraction of the cost):
- training maximises the same exact marginal likelihood as gpytorch's
  ``ExactMarginalLogLikelihood``, computed directly from the kernel matrix's Cholesky factor
  with its gradient in closed form (:mod:`syne_dyhpo.surrogates.marginal_likelihood`; the same gradient as
  autograd's up to rounding), and Adam by torch's fused kernel (:mod:`syne_dyhpo.surrogates.optim`);
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

Modules: :mod:`.settings` (:class:`DeepKernelGPConfig`), :mod:`.features` (the feature extractor
and the gpytorch model), :mod:`.posterior` (the incremental Cholesky factor and the candidate
cache), :mod:`.model` (:class:`DeepKernelGP`: the surrogate protocol and training) and
:mod:`.reference` (the same posterior through gpytorch's generic path, for tests).
"""

from syne_dyhpo.surrogates.deep_kernel_gp.features import FeatureExtractor, _GPModel, model_inputs
from syne_dyhpo.surrogates.deep_kernel_gp.model import DeepKernelGP
from syne_dyhpo.surrogates.deep_kernel_gp.reference import gpytorch_posterior
from syne_dyhpo.surrogates.deep_kernel_gp.settings import DeepKernelGPConfig

# _GPModel: a fitted DeepKernelGP pickles its model; a pickle naming this package loads
__all__ = ["DeepKernelGP", "DeepKernelGPConfig", "FeatureExtractor", "_GPModel", "gpytorch_posterior", "model_inputs"]
