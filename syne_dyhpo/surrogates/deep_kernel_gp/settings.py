"""Training settings of DyHPO's deep-kernel GP surrogate."""

from __future__ import annotations

from dataclasses import dataclass

from syne_dyhpo.checks import checked_flag, checked_integer, checked_positive


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
    def paper(cls) -> DeepKernelGPConfig:
        """The paper's settings: at most 1000 epochs from scratch, trained on and conditioned
        on all observations."""
        return cls(max_iterations=1000, max_fit_points=None, max_condition_points=None)
