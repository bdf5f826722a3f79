"""
DyHPO or Deep Power Law tuning a PyTorch MLP on scikit-learn's digits under Ray Tune.

Local Ray instance (default)::

    python launch/ray_tune_example.py --method dyhpo --num-samples 20 --max-epochs 20

Existing Ray cluster (every node needs torch, scikit-learn and syne-dyhpo[ray])::

    python launch/ray_tune_example.py --address auto            # on a cluster node
    python launch/ray_tune_example.py --address ray://head:10001  # Ray Client

One Ray training iteration is one epoch: the trainable reports ``epoch`` and
``val_accuracy`` with a checkpoint (model, optimizer, LR schedule, RNG states) after every
epoch and resumes from ``ray.tune.get_checkpoint()``, so a paused trial continues exactly
where it stopped. The scheduler pauses and resumes trials one epoch at a time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import syne_dyhpo  # noqa: F401
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray
from ray import tune
from syne_tune.config_space import choice, loguniform, randint, uniform

from syne_dyhpo.ray_tune import ray_scheduler

METRIC, MODE = "val_accuracy", "max"

CONFIG_SPACE: dict[str, Any] = {
    "learning_rate": loguniform(1e-3, 0.3),
    "weight_decay": loguniform(1e-6, 1e-2),
    "momentum": uniform(0.0, 0.95),
    "n_units": choice([16, 32, 64, 128, 256]),
    "n_layers": randint(1, 3),
    "dropout": uniform(0.0, 0.5),
    "batch_size": choice([16, 32, 64, 128]),
}


def train_mlp(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: MLP on digits, cosine LR over ``max_epochs``, one report
    and checkpoint per epoch, resumes from the last checkpoint."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torch import nn

    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x / 16.0, y, test_size=0.2, random_state=0, stratify=y)
    x_tr, x_va = torch.tensor(x_tr, dtype=torch.float32), torch.tensor(x_va, dtype=torch.float32)
    y_tr, y_va = torch.tensor(y_tr), torch.tensor(y_va)

    torch.manual_seed(config.get("seed", 0))
    layers: list[nn.Module] = []
    width = x_tr.shape[1]
    for _ in range(int(config["n_layers"])):
        layers += [nn.Linear(width, int(config["n_units"])), nn.ReLU(), nn.Dropout(float(config["dropout"]))]
        width = int(config["n_units"])
    model = nn.Sequential(*layers, nn.Linear(width, 10))
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=float(config["learning_rate"]),
        momentum=float(config["momentum"]),
        weight_decay=float(config["weight_decay"]),
    )
    max_epochs = int(config["max_epochs"])
    lr_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_epochs)
    generator = torch.Generator().manual_seed(config.get("seed", 0))

    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        lr_schedule.load_state_dict(state["lr_schedule"])
        generator.set_state(state["generator"])
        start = state["epoch"] + 1

    loss_fn = nn.CrossEntropyLoss()
    batch_size = int(config["batch_size"])
    for epoch in range(start, max_epochs + 1):
        model.train()
        order = torch.randperm(len(x_tr), generator=generator)
        train_loss = 0.0
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            optimizer.step()
            train_loss += float(loss.detach()) * len(idx)
        lr_schedule.step()
        model.eval()
        with torch.no_grad():
            logits = model(x_va)
            val_loss = float(loss_fn(logits, y_va))
            val_accuracy = float((logits.argmax(1) == y_va).float().mean())
        if not np.isfinite(val_loss):
            val_accuracy = float("nan")  # diverged: the scheduler stops it and never resumes it
        metrics = {
            "epoch": epoch,
            METRIC: val_accuracy,
            "val_loss": val_loss,
            "train_loss": train_loss / len(order),
            "resumed_from_epoch": start - 1,
        }
        with tempfile.TemporaryDirectory() as d:
            torch.save(
                {
                    "epoch": epoch,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "lr_schedule": lr_schedule.state_dict(),
                    "generator": generator.get_state(),
                },
                os.path.join(d, "state.pt"),
            )
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["dyhpo", "dpl"], default="dyhpo")
    parser.add_argument(
        "--address", default=None, help="Ray cluster to connect to ('auto', 'ray://host:10001'); default: start a local Ray"
    )
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--num-samples", type=int, default=20, help="most configurations started")
    parser.add_argument("--max-epochs", type=int, default=20, help="epochs of a fully trained configuration")
    parser.add_argument(
        "--total-epochs", type=int, default=None, help="epoch budget of the run, summed over trials (default: 4 * max-epochs)"
    )
    parser.add_argument("--max-concurrent", type=int, default=None, help="trials at once (default: CPUs of the cluster)")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage-path", default=None, help="Ray results folder (default: ~/ray_results)")
    args = parser.parse_args(argv)

    if args.address is None:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    else:
        ray.init(address=args.address)
    max_concurrent = args.max_concurrent or max(1, int(ray.cluster_resources().get("CPU", 1) // args.cpus_per_trial))
    total_epochs = args.total_epochs or 4 * args.max_epochs

    scheduler = ray_scheduler(
        args.method,
        CONFIG_SPACE,
        metric=METRIC,
        mode=MODE,
        max_t=args.max_epochs,
        max_concurrent=max_concurrent,
        max_num_trials=args.num_samples,
        max_total_epochs=total_epochs,
        random_seed=args.seed,
    )
    tuner = tune.Tuner(
        tune.with_resources(train_mlp, {"cpu": args.cpus_per_trial}),
        param_space={"max_epochs": args.max_epochs, "seed": args.seed},
        tune_config=scheduler.tune_config(),
        run_config=tune.RunConfig(name=f"syne_dyhpo_{args.method}", storage_path=args.storage_path),
    )
    results = tuner.fit()

    best = results.get_best_result(metric=METRIC, mode=MODE, scope="all")
    best_config = {k: best.config[k] for k in CONFIG_SPACE}
    if scheduler.core.observations.num_observations:  # the scheduler ran in this process
        print(f"\n{scheduler.debug_string()}")
    else:  # with ray:// the scheduler ran on the cluster: count from the results
        frames = [r.metrics_dataframe for r in results if r.metrics_dataframe is not None]
        print(f"\n{len(results)} trials, {sum(int(df['epoch'].max()) for df in frames if len(df))} epochs")
    print(f"Best {METRIC}: {best.metrics_dataframe[METRIC].max():.4f}")
    print(f"Best config: {best_config}")
    return best_config


if __name__ == "__main__":
    main()
