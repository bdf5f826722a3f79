"""
Resumable PyTorch training of an MLP on scikit-learn's handwritten digits, for
Syne Tune's ``LocalBackend`` and pause-and-resume (freeze-thaw) schedulers.

Run directly::

    python launch/train_mlp.py --learning_rate 0.05 --epochs 3 --max_epochs 30 \
        --st_checkpoint_dir /tmp/ckpt        # trains epochs 1..3
    python launch/train_mlp.py --learning_rate 0.05 --epochs 5 --max_epochs 30 \
        --st_checkpoint_dir /tmp/ckpt        # resumes, trains epochs 4..5

Protocol (what a pause-and-resume scheduler relies on):

* ``--epochs`` is the epoch after which the job stops by itself (the scheduler's
  ``max_resource_attr``); ``--max_epochs`` is the fixed horizon of the cosine
  learning rate schedule, so segments do not change the schedule.
* On start the checkpoint in ``--st_checkpoint_dir`` (if any) is loaded and training
  continues at its epoch + 1. If it is already at or beyond ``--epochs``, the job
  exits (status 0) without reporting anything.
* Every epoch: train one pass, evaluate, save the checkpoint (atomically), and only
  then report ``epoch``, ``val_accuracy``, ``val_loss`` (and ``train_loss``).
* A checkpoint that exists but cannot be read (or was written with different
  hyperparameters) makes the job fail with a ``CheckpointError`` naming the file,
  unless ``--on_checkpoint_error restart`` is given (then it warns and restarts
  from epoch 1).

Model, optimizer, learning rate scheduler and all RNG states are checkpointed, so a
run that is stopped and resumed reports exactly the same numbers as an
uninterrupted one.

Slow epochs: ``--epoch_seconds S`` makes every epoch take at least ``S`` seconds of
wall-clock time, as a larger model would: after the epoch's training pass and
evaluation the job sleeps the rest of ``S`` (no sleep if the epoch took longer),
then saves the checkpoint and reports. A job stopped during the sleep loses the
epoch, as it would lose one in progress. The reported numbers are the same as
without it; only their timing changes. The option is not a hyperparameter (it is
not checked against the checkpoint).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if importlib.util.find_spec("syne_dyhpo") is None:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from torch import nn

from syne_dyhpo.checkpointing import (
    CheckpointError,
    capture_training_state,
    load_checkpoint,
    restore_training_state,
    save_checkpoint,
)

logger = logging.getLogger("train_mlp")

HYPERPARAMETERS = (
    "learning_rate",
    "weight_decay",
    "momentum",
    "n_units",
    "n_layers",
    "dropout",
    "batch_size",
    "max_epochs",
    "seed",
)
"""Config keys that must be identical across segments of one trial."""

DEFAULTS: dict[str, Any] = {
    "learning_rate": 0.05,
    "weight_decay": 1e-4,
    "momentum": 0.9,
    "n_units": 64,
    "n_layers": 2,
    "dropout": 0.1,
    "batch_size": 32,
    "max_epochs": 30,
    "seed": 0,
}

SPLIT_SEED = 0
"""Seed of the fixed, stratified train/validation split (independent of ``seed``)."""

VALIDATION_FRACTION = 0.25


def build_parser() -> argparse.ArgumentParser:
    """
    :return: Argument parser of the script (hyperparameters, ``--epochs``,
        ``--max_epochs``, ``--seed``, ``--st_checkpoint_dir``,
        ``--on_checkpoint_error``, ``--num_threads``, ``--epoch_seconds``)
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learning_rate", type=float, default=DEFAULTS["learning_rate"])
    p.add_argument("--weight_decay", type=float, default=DEFAULTS["weight_decay"])
    p.add_argument("--momentum", type=float, default=DEFAULTS["momentum"])
    p.add_argument("--n_units", type=int, default=DEFAULTS["n_units"])
    p.add_argument("--n_layers", type=int, default=DEFAULTS["n_layers"])
    p.add_argument("--dropout", type=float, default=DEFAULTS["dropout"])
    p.add_argument("--batch_size", type=int, default=DEFAULTS["batch_size"])
    p.add_argument(
        "--max_epochs",
        type=int,
        default=DEFAULTS["max_epochs"],
        help="fixed training horizon (length of the cosine LR schedule)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="stop after this epoch (default: --max_epochs); set per segment "
        "by pause-and-resume schedulers",
    )
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    p.add_argument("--st_checkpoint_dir", type=str, default=None)
    p.add_argument(
        "--on_checkpoint_error",
        choices=("raise", "restart"),
        default="raise",
        help="what to do with an unreadable checkpoint: fail (default) or warn "
        "and train from epoch 1",
    )
    p.add_argument(
        "--num_threads",
        type=int,
        default=1,
        help="torch CPU threads (fixed so that results are reproducible)",
    )
    p.add_argument(
        "--epoch_seconds",
        type=float,
        default=None,
        help="make every epoch take at least this many seconds of wall-clock time "
        "(sleep the rest after training and evaluating it); default: no sleep",
    )
    return p


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """
    Scikit-learn's handwritten digits (1797 8x8 images, 10 classes). The data ships
    with scikit-learn (no download). It is read directly from the bundled
    ``digits.csv.gz``, which gives the same arrays as
    :func:`sklearn.datasets.load_digits` but avoids importing scikit-learn (about
    1.5 s, paid again on every resume of a trial); if that file cannot be found,
    :func:`sklearn.datasets.load_digits` is used.

    :return: ``(x, y)``, float64 features of shape (1797, 64), int64 labels
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
        if path.exists():
            data = np.loadtxt(path, delimiter=",")
            return data[:, :-1], data[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return x.astype(np.float64), y.astype(np.int64)


def load_data(
    split_seed: int = SPLIT_SEED,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    Loads the digits (:func:`load_digits_arrays`), splits them into a fixed
    stratified train (75%) and validation (25%) set and standardises features
    with mean and standard deviation of the train set (constant pixels are left
    unscaled).

    :param split_seed: Seed of the split
    :return: ``(x_train, y_train, x_val, y_val)`` as float32 / int64 tensors
    """
    x, y = load_digits_arrays()
    rng = np.random.default_rng(split_seed)
    val_idx = []
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        val_idx.append(idx[: round(VALIDATION_FRACTION * len(idx))])
    is_val = np.zeros(len(y), dtype=bool)
    is_val[np.concatenate(val_idx)] = True
    x_tr, y_tr, x_va, y_va = x[~is_val], y[~is_val], x[is_val], y[is_val]
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
    std[std == 0] = 1.0
    return (
        torch.tensor((x_tr - mean) / std, dtype=torch.float32),
        torch.tensor(y_tr, dtype=torch.int64),
        torch.tensor((x_va - mean) / std, dtype=torch.float32),
        torch.tensor(y_va, dtype=torch.int64),
    )


def build_model(
    n_inputs: int, n_classes: int, n_units: int, n_layers: int, dropout: float
) -> nn.Sequential:
    """
    :param n_inputs: Number of input features
    :param n_classes: Number of classes
    :param n_units: Width of every hidden layer
    :param n_layers: Number of hidden layers (>= 1)
    :param dropout: Dropout probability after every hidden layer
    :return: MLP ``(Linear, ReLU, Dropout) * n_layers + Linear``
    """
    layers: list[nn.Module] = []
    width = n_inputs
    for _ in range(n_layers):
        layers += [nn.Linear(width, n_units), nn.ReLU(), nn.Dropout(dropout)]
        width = n_units
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def _check_epoch_seconds(epoch_seconds: float | None) -> None:
    if epoch_seconds is not None and not (
        math.isfinite(epoch_seconds) and epoch_seconds > 0
    ):
        raise ValueError(
            f"epoch_seconds must be a finite number > 0, got {epoch_seconds}"
        )


def _check_config(config: dict[str, Any]) -> None:
    if config["max_epochs"] < 1:
        raise ValueError(f"max_epochs must be >= 1, got {config['max_epochs']}")
    if not 1 <= config["epochs"] <= config["max_epochs"]:
        raise ValueError(
            f"epochs must be in [1, max_epochs={config['max_epochs']}], "
            f"got {config['epochs']}"
        )
    if config["n_layers"] < 1 or config["n_units"] < 1 or config["batch_size"] < 1:
        raise ValueError("n_layers, n_units and batch_size must be >= 1")


def train(
    config: dict[str, Any],
    report: Callable[..., None] | None = None,
    on_checkpoint_error: str = "raise",
    num_threads: int | None = 1,
    epoch_seconds: float | None = None,
) -> list[dict[str, float]]:
    """
    Trains (or resumes training of) the MLP up to epoch ``config["epochs"]``.

    :param config: Hyperparameters (keys of :data:`HYPERPARAMETERS`, missing ones
        take :data:`DEFAULTS`), plus ``epochs`` (stop after this epoch, default
        ``max_epochs``) and ``st_checkpoint_dir`` (``None``: no checkpointing)
    :param report: Called as ``report(epoch=..., val_accuracy=..., val_loss=...,
        train_loss=...)`` after each epoch's checkpoint is written, e.g. a
        :class:`syne_tune.Reporter`. ``None``: results are only returned
    :param on_checkpoint_error: "raise" or "restart", see
        :func:`syne_dyhpo.checkpointing.load_checkpoint`
    :param num_threads: If given, ``torch.set_num_threads(num_threads)``
    :param epoch_seconds: If given, every epoch takes at least this many seconds of
        wall-clock time: after training and evaluating it, the rest is slept, before
        the checkpoint is saved and the result reported. ``None``: no sleep
    :return: Results of the epochs trained in this call (empty if the checkpoint
        is already at or beyond ``epochs``)
    :raises CheckpointError: If the checkpoint cannot be used and
        ``on_checkpoint_error="raise"``
    """
    cfg = {**DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    cfg.setdefault("epochs", cfg["max_epochs"])
    _check_config(cfg)
    _check_epoch_seconds(epoch_seconds)
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    # plain Python types, so that they compare equal and load with weights_only=True
    hparams = {k: type(DEFAULTS[k])(cfg[k]) for k in HYPERPARAMETERS}
    checkpoint_dir = cfg.get("st_checkpoint_dir")

    x_tr, y_tr, x_va, y_va = load_data()

    def fresh_objects():
        torch.manual_seed(int(cfg["seed"]))
        model = build_model(
            x_tr.shape[1], 10, int(cfg["n_units"]), int(cfg["n_layers"]), cfg["dropout"]
        )
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=cfg["learning_rate"],
            momentum=cfg["momentum"],
            weight_decay=cfg["weight_decay"],
        )
        lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=int(cfg["max_epochs"])
        )
        return model, optimizer, lr_scheduler

    model, optimizer, lr_scheduler = fresh_objects()
    start_epoch = 1
    ckpt = load_checkpoint(checkpoint_dir, on_error=on_checkpoint_error)
    if ckpt is not None:
        try:
            saved = ckpt.state.get("extra", {}).get("hyperparameters")
            if saved != hparams:
                raise CheckpointError(
                    ckpt.path,
                    f"written with different hyperparameters {saved}, "
                    f"this run has {hparams}",
                )
            restore_training_state(
                ckpt.state, model, optimizer, lr_scheduler, path=ckpt.path
            )
            start_epoch = ckpt.epoch + 1
        except CheckpointError as ex:
            if on_checkpoint_error != "restart":
                raise
            logger.warning(
                f"{ex}. on_checkpoint_error='restart': training from epoch 1."
            )
            # a partial restore may have modified the objects: rebuild them
            model, optimizer, lr_scheduler = fresh_objects()
            ckpt = None
    if start_epoch > cfg["epochs"]:
        print(
            f"Checkpoint {ckpt.path} is at epoch {ckpt.epoch} >= epochs="
            f"{cfg['epochs']}: nothing to do.",
            file=sys.stderr,
        )
        return []

    loss_fn = nn.CrossEntropyLoss()
    n_train, batch_size = x_tr.shape[0], int(cfg["batch_size"])
    results = []
    for epoch in range(start_epoch, int(cfg["epochs"]) + 1):
        epoch_start = time.perf_counter()
        model.train()
        perm = torch.randperm(n_train)
        total_loss = 0.0
        for start in range(0, n_train, batch_size):
            idx = perm[start : start + batch_size]
            loss = loss_fn(model(x_tr[idx]), y_tr[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(idx)
        lr_scheduler.step()
        model.eval()
        with torch.no_grad():
            logits = model(x_va)
            val_loss = loss_fn(logits, y_va).item()
            val_accuracy = (logits.argmax(dim=1) == y_va).double().mean().item()
        if epoch_seconds is not None:
            time.sleep(max(0.0, epoch_seconds - (time.perf_counter() - epoch_start)))
        result = {
            "epoch": epoch,
            "val_accuracy": val_accuracy,
            "val_loss": val_loss if math.isfinite(val_loss) else float("inf"),
            "train_loss": total_loss / n_train,
        }
        if checkpoint_dir is not None:
            # Save *before* reporting: every reported epoch is covered by a checkpoint
            save_checkpoint(
                checkpoint_dir,
                capture_training_state(
                    model,
                    optimizer,
                    lr_scheduler,
                    extra={"hyperparameters": hparams, "result": result},
                ),
                epoch,
            )
        if report is not None:
            report(**result)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    """
    Command line entry point.

    :param argv: Arguments (default: ``sys.argv[1:]``)
    :return: Exit status (0: success, 1: unusable checkpoint)
    """
    logging.basicConfig(level=logging.INFO)
    parser = build_parser()
    args = parser.parse_args(argv)
    config = {k: getattr(args, k) for k in HYPERPARAMETERS}
    config["epochs"] = args.epochs if args.epochs is not None else args.max_epochs
    config["st_checkpoint_dir"] = args.st_checkpoint_dir
    try:
        _check_config(config)
        _check_epoch_seconds(args.epoch_seconds)
    except ValueError as ex:
        parser.error(str(ex))

    from syne_tune import Reporter

    try:
        train(
            config,
            report=Reporter(),
            on_checkpoint_error=args.on_checkpoint_error,
            num_threads=args.num_threads,
            epoch_seconds=args.epoch_seconds,
        )
    except CheckpointError as ex:
        print(
            f"CheckpointError: {ex}\nRefusing to silently restart from scratch. "
            "Delete the file or pass --on_checkpoint_error restart to discard it.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
