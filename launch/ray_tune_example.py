"""
DyHPO or Deep Power Law tuning a PyTorch MLP on scikit-learn's digits under Ray Tune.

Local Ray instance (default)::

    python launch/ray_tune_example.py --method dyhpo --num-samples 20 --max-epochs 20

Existing Ray cluster (every node needs torch, scikit-learn and syne-dyhpo[ray]; the storage
path must be shared by all nodes, a shared filesystem or cloud storage, since a paused trial may
resume on another node)::

    python launch/ray_tune_example.py --address auto --storage-path /mnt/shared/ray_results  # on a cluster node
    python launch/ray_tune_example.py --address ray://head:10001 --storage-path s3://bucket/ray_results  # Ray Client

One Ray training iteration is one epoch: the trainable (launch/train_mlp.py's training loop)
reports ``epoch`` and ``val_accuracy`` with a checkpoint (model, optimizer, LR schedule, RNG
states) after every epoch and resumes from ``ray.tune.get_checkpoint()``, so a paused trial
continues exactly where it stopped. The scheduler pauses and resumes trials one epoch at a
time.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

if importlib.util.find_spec("syne_dyhpo") is None:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray
from ray import tune
from syne_tune.config_space import Domain

from syne_dyhpo.ray_tune import ray_scheduler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlp_config_space
import train_mlp as training_script
from cli_args import positive_int, positive_number, seed

# Ray ships the trainable to its workers with cloudpickle: send the training module by value
# so that workers need syne-dyhpo installed but not this launch/ folder on their path
ray.cloudpickle.register_pickle_by_value(training_script)

METRIC, MODE = mlp_config_space.METRIC, mlp_config_space.MODE
# hyperparameters only: constants (max_epochs, seed) go into Ray's param_space
CONFIG_SPACE: dict[str, Any] = {
    k: v for k, v in mlp_config_space.config_space.items() if isinstance(v, Domain)
}


def train_mlp(config: dict[str, Any]) -> None:
    """Ray Tune function trainable running launch/train_mlp.py's training loop (same model,
    data and checkpoint contents as on Syne Tune's backends); its checkpoint folder travels
    through Ray: restored from ``tune.get_checkpoint()``, reported with every epoch."""
    import shutil

    work_dir = tempfile.mkdtemp(prefix="train_mlp_")
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            shutil.copytree(d, work_dir, dirs_exist_ok=True)

    def report(**metrics: float) -> None:
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(work_dir, d, dirs_exist_ok=True)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))

    try:
        training_script.train({**config, "st_checkpoint_dir": work_dir}, report=report)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["dyhpo", "dpl"], default="dyhpo")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to connect to ('auto', 'ray://host:10001'); default: start a local Ray",
    )
    parser.add_argument("--num-cpus", type=positive_int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--num-samples", type=positive_int, default=20, help="most configurations started")
    parser.add_argument("--max-epochs", type=positive_int, default=20, help="epochs of a fully trained configuration")
    parser.add_argument(
        "--total-epochs",
        type=positive_int,
        default=None,
        help="epoch budget of the run, summed over trials (default: 4 * max-epochs)",
    )
    parser.add_argument(
        "--max-concurrent", type=positive_int, default=None, help="trials at once (default: CPUs of the cluster)"
    )
    parser.add_argument("--cpus-per-trial", type=positive_number, default=1.0)
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument(
        "--storage-path",
        default=None,
        help="Ray results folder (default: ~/ray_results); on a cluster, a shared filesystem or cloud storage (s3://...)",
    )
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)

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
