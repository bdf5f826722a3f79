"""
Syne Tune configuration space for ``launch/train_mlp.py`` (MLP on scikit-learn
digits). Importing this module has no side effects.

The constants ``epochs`` and ``max_epochs`` play different roles:

* ``max_epochs`` is the fixed training horizon. The cosine learning rate schedule
  is defined over it, so it must not change between segments of a trial.
* ``epochs`` is the epoch at which the job stops by itself. A pause-and-resume
  scheduler created with ``max_resource_attr="epochs"`` overwrites it with the end
  of the current segment on every start and resume. Its value in the config space
  only matters for schedulers that leave it alone (e.g. ``RandomSearch``).
"""

from __future__ import annotations

from typing import Any

from syne_tune.config_space import choice, loguniform, randint, uniform

MAX_EPOCHS = 30
"""Default training horizon (epochs) of the MLP on digits."""

METRIC = "val_accuracy"
"""Reported metric to optimize (fraction of correct validation digits, in [0, 1])."""

MODE = "max"
"""Optimization mode of :data:`METRIC`."""

RESOURCE_ATTR = "epoch"
"""Key of the reported epoch (1-based)."""

MAX_RESOURCE_ATTR = "epochs"
"""Config key at which the job stops by itself (pass as ``max_resource_attr``)."""


def make_config_space(max_epochs: int = MAX_EPOCHS, seed: int = 0) -> dict[str, Any]:
    """
    :param max_epochs: Training horizon; also the default value of ``epochs``
    :param seed: Seed of model initialisation, dropout and shuffling (the
        train/validation split is fixed and does not depend on it)
    :return: Syne Tune configuration space for ``train_mlp.py``
    """
    return {
        "learning_rate": loguniform(1e-3, 0.3),
        "weight_decay": loguniform(1e-6, 1e-2),
        "momentum": uniform(0.0, 0.95),
        "n_units": choice([16, 32, 64, 128, 256]),
        "n_layers": randint(1, 3),
        "dropout": uniform(0.0, 0.5),
        "batch_size": choice([16, 32, 64, 128]),
        MAX_RESOURCE_ATTR: max_epochs,
        "max_epochs": max_epochs,
        "seed": seed,
    }


config_space: dict[str, Any] = make_config_space()
"""Default configuration space (``max_epochs=30``, ``seed=0``)."""
