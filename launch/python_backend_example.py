"""
Smoke example: tune the resumable digits MLP with Syne Tune's ``PythonBackend``
(or ``LocalBackend`` on ``train_mlp.py``) and ``RandomSearch``.

    python launch/python_backend_example.py --trials 3 --max_epochs 5
    python launch/python_backend_example.py --backend local

Things ``PythonBackend`` requires (see the notes on Syne Tune 0.16):

* The function is re-created without its globals and without default argument
  values, so every import happens inside it and every argument must be a key of
  the config space.
* Only config-space keys are passed, so ``st_checkpoint_dir`` must be in the config
  space (any placeholder value; the backend replaces it with the trial's checkpoint
  directory). ``launch_dir`` (a constant) tells the function where to import the
  training code from; it must not contain spaces (arguments are split on spaces).

Results go to ``$SYNETUNE_FOLDER`` (default ``~/syne-tune``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

LAUNCH_DIR = Path(__file__).resolve().parent


def train_mlp_fn(
    learning_rate,
    weight_decay,
    momentum,
    n_units,
    n_layers,
    dropout,
    batch_size,
    epochs,
    max_epochs,
    seed,
    st_checkpoint_dir,
    launch_dir,
):
    """Training function for ``PythonBackend``: imports inside, all args in config space."""
    import sys

    if launch_dir not in sys.path:
        sys.path.insert(0, launch_dir)
    from train_mlp import main  # creates a syne_tune.Reporter and reports per epoch

    # Same code path (and CLI) as the LocalBackend script; raises SystemExit on
    # argument errors, returns 1 on an unusable checkpoint.
    config = {
        "learning_rate": learning_rate,
        "weight_decay": weight_decay,
        "momentum": momentum,
        "n_units": n_units,
        "n_layers": n_layers,
        "dropout": dropout,
        "batch_size": batch_size,
        "epochs": epochs,
        "max_epochs": max_epochs,
        "seed": seed,
        "st_checkpoint_dir": st_checkpoint_dir,
    }
    status = main([x for k, v in config.items() for x in (f"--{k}", str(v))])
    if status != 0:
        raise RuntimeError(f"train_mlp.main failed with status {status}")


def run(backend_name: str, trials: int, max_epochs: int, n_workers: int, seed: int):
    """
    :param backend_name: "python" (``PythonBackend``) or "local" (``LocalBackend``)
    :param trials: Number of completed trials after which tuning stops
    :param max_epochs: Training horizon (and ``epochs``) of every trial
    :param n_workers: Number of trials run in parallel
    :param seed: Seed of the random search
    :return: The :class:`syne_tune.Tuner` after it ran
    """
    sys.path.insert(0, str(LAUNCH_DIR))
    from mlp_config_space import METRIC, MODE, make_config_space
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend import LocalBackend, PythonBackend
    from syne_tune.optimizer.baselines import RandomSearch

    config_space = make_config_space(max_epochs=max_epochs)
    if backend_name == "python":
        config_space = {
            **config_space,
            "st_checkpoint_dir": "set-by-backend",
            "launch_dir": str(LAUNCH_DIR),
        }
        backend = PythonBackend(tune_function=train_mlp_fn, config_space=config_space)
    else:
        backend = LocalBackend(entry_point=str(LAUNCH_DIR / "train_mlp.py"))
    scheduler = RandomSearch(
        config_space, metrics=[METRIC], do_minimize=(MODE == "min"), random_seed=seed
    )
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=StoppingCriterion(max_num_trials_completed=trials),
        n_workers=n_workers,
        sleep_time=0.5,
        save_tuner=False,
        tuner_name=f"digits-mlp-random-{backend_name}",
    )
    tuner.run()
    return tuner


def build_parser() -> argparse.ArgumentParser:
    sys.path.insert(0, str(LAUNCH_DIR))
    from cli_args import positive_int, seed

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("python", "local"), default="python")
    p.add_argument("--trials", type=positive_int, default=3)
    p.add_argument("--max_epochs", type=positive_int, default=5)
    p.add_argument("--n_workers", type=positive_int, default=2)
    p.add_argument("--seed", type=seed, default=0)
    return p


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO)
    a = build_parser().parse_args()
    tuner = run(a.backend, a.trials, a.max_epochs, a.n_workers, a.seed)
    from syne_tune.experiments import load_experiment

    df = load_experiment(tuner.name).results
    cols = ["trial_id", "epoch", "val_accuracy", "val_loss", "config_learning_rate"]
    print(df[cols].to_string(index=False))
