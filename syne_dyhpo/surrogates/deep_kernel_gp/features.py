"""The deep part of DyHPO's kernel: the feature extractor over (config, budget, curve), the
gpytorch model on its features, and the packing of observations into model inputs."""

from __future__ import annotations

import gpytorch
import numpy as np
import torch
from torch import nn

from syne_dyhpo.surrogates.deep_kernel_gp.settings import DeepKernelGPConfig


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
        bias = self.curve_conv.bias
        assert bias is not None  # the convolution is built with a bias
        weight = self.curve_conv.weight.reshape(self.curve_conv.out_channels, -1)
        curve_features = (windows @ weight.T + bias).amax(dim=1)
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
    scaled_budget = (np.asarray(budget, dtype=float) / max_t)[:, None]
    stacked = np.concatenate([x, scaled_budget, values, mask.astype(float)], axis=1)
    return torch.from_numpy(stacked).to(torch.float64)
