"""How much DyHPO's GP training amplifies rounding (a benchmark, not a test).

The closed-form gradient (``syne_dyhpo/surrogates/marginal_likelihood.py``) computes the same
training step as autograd through :func:`negative_mll` up to rounding, in a different order.
This script trains the deep kernel from the same initial weights on the same synthetic curves
three ways: with autograd's gradient, with the closed-form one, and with autograd's from
weights perturbed by a relative ``--perturbation`` (default 1e-7, float32's resolution) in one
matrix. It prints how far the weights of the other two have moved from autograd's after each
number of Adam steps, and how far their predictive means at 256 new configurations are apart
at the end. If the perturbation moves the weights as far as the closed form does, the
decisions the two gradients lead to differ by rounding amplified in training, not by a
different computation.

Command (from the repository root)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/rounding_sensitivity.py
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import replace
from collections.abc import Callable

import numpy as np
import torch

from syne_dyhpo.core.observations import Observations
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGP, DeepKernelGPConfig, model_inputs
from syne_dyhpo.surrogates.marginal_likelihood import negative_mll, negative_mll_and_gradients
from syne_dyhpo.surrogates.optim import Adam
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform

Gradient = Callable[[torch.nn.Module, torch.Tensor, tuple], tuple[float, dict[str, torch.Tensor]]]


def autograd_gradient(model: torch.nn.Module, targets: torch.Tensor, prepared: tuple) -> tuple[float, dict[str, torch.Tensor]]:
    named = list(model.named_parameters())
    loss = negative_mll(model, None, targets, prepared)
    grads = torch.autograd.grad(loss, [p for _, p in named])
    return float(loss.detach()), {name: g for (name, _), g in zip(named, grads)}


def synthetic_gp(n_trials: int, max_t: int, seed: int) -> DeepKernelGP:
    """A GP holding power-law curves of ``n_trials`` configurations, built but untrained."""
    rng = np.random.RandomState(seed)
    x = rng.rand(n_trials, 2)
    t = np.arange(1, max_t + 1)
    curves = (0.6 + 0.3 * x[:, :1]) - (0.3 + 0.2 * x[:, 1:]) * t ** -(0.4 + 0.6 * x[:, :1]) + 0.01 * rng.randn(n_trials, max_t)
    obs = Observations(max_t=max_t, do_minimize=False)
    for tid, length in enumerate(rng.randint(1, max_t, size=n_trials)):
        obs.add_trial(tid, {}, x[tid])
        for epoch in range(1, length + 1):
            obs.add_result(tid, epoch, curves[tid, epoch - 1])
    transform = ScoreTransform()
    transform.fit(obs.all_scores())
    raw = obs.training_data()
    data = replace(raw, y=transform(raw.y), curves=transform.curves(raw.curves), version=(raw.version, transform.version))
    gp = DeepKernelGP(DeepKernelGPConfig(max_iterations=1))  # one step: built, near the initial weights
    gp.fit(data, from_scratch=True, seed=seed)
    return gp


def train(model: torch.nn.Module, gradient: Gradient, steps: int, lr: float) -> list[torch.Tensor]:
    """Weights (flattened) after each of ``steps`` Adam steps."""
    model.train()
    model.likelihood.train()
    names, params = zip(*model.named_parameters())
    adam = Adam(list(params), lr=lr)
    prepared = model.extractor.prepare(model.train_inputs[0])
    trajectory = []
    for _ in range(steps):
        _, grads = gradient(model, model.train_targets, prepared)
        adam.step([grads[name] for name in names])
        trajectory.append(torch.cat([p.detach().double().reshape(-1) for p in params]))
    return trajectory


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=6, help="configurations with curves")
    p.add_argument("--steps", type=int, default=300, help="Adam steps (a fit from scratch: 300)")
    p.add_argument("--perturbation", type=float, default=1e-7)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    gp = synthetic_gp(args.trials, 8, args.seed)
    start = gp._model
    lr = gp.config.lr
    perturbed = copy.deepcopy(start)
    with torch.no_grad():
        perturbed.extractor.output_layer[0].weight.mul_(1 + args.perturbation)
    runs = {
        "autograd": (copy.deepcopy(start), autograd_gradient),
        "closed form": (copy.deepcopy(start), negative_mll_and_gradients),
        f"autograd, perturbed {args.perturbation:g}": (perturbed, autograd_gradient),
    }
    trajectories = {label: train(model, gradient, args.steps, lr) for label, (model, gradient) in runs.items()}
    reference = trajectories["autograd"]
    others = [label for label in runs if label != "autograd"]
    print(f"{len(start.train_targets)} rows, lr {lr}; max |weight - autograd's weight| after k steps")
    print("| k | " + " | ".join(others) + " |")
    print("|---|" + "---|" * len(others))
    for k in sorted({1, 2, 5, 10, 20, 50, 100, 200, args.steps} & set(range(1, args.steps + 1))):
        row = [f"{float((trajectories[label][k - 1] - reference[k - 1]).abs().max()):.3g}" for label in others]
        print(f"| {k} | " + " | ".join(row) + " |")
    rng = np.random.RandomState(1)
    inputs = model_inputs(rng.rand(256, 2), np.ones(256, dtype=int), np.full((256, 8), np.nan), 8)
    means = {}
    for label, (model, _) in runs.items():
        gp._model, gp._likelihood = model, model.likelihood
        gp._params_version += 1
        gp._posterior = None
        means[label] = gp._predict(inputs)[0]
    for label in others:
        print(f"max |predictive mean - autograd's| at 256 new configurations, {label}: "
              f"{np.abs(means[label] - means['autograd']).max():.3g}")


if __name__ == "__main__":
    main()
