"""Small synthetic blackboxes in the exact on-disk schemas of Syne Tune 0.16's FCNet,
NAS-Bench-201 and PD1 imports.

The real blackboxes are downloaded by ``load_blackbox(name)`` into ``~/.blackbox-repository``
(see README); these stand-ins let tests and smoke runs exercise the very same loading path
(``load_blackbox(name, local_files_only=True)``) and simulation offline. Each schema is written
by Syne Tune's own code wherever that code does not need the raw sources:

* ``nasbench201``: the raw NATS-Bench pickle layout is built in memory and converted by
  ``nasbench201_import.convert_dataset`` (which also imputes a seed missing for an architecture);
* ``pd1``: the raw per-configuration curves (lists of different lengths, ``None`` for a run
  without any evaluation) are converted by ``pd1_import.convert_task``, which pads them with
  NaN to the task's longest curve, and written by ``pd1_import.serialize`` (one file set per
  task, read back by ``pd1_import.deserialize``);
* ``fcnet``: ``fcnet_import.convert_dataset`` reads HDF5 (h5py, not a dependency here), so
  the table is assembled the way it assembles it (same objectives, order, seeds, fidelities,
  elapsed time linear in the epoch) and written by ``blackbox_tabular.serialize``.

Names, spaces and metadata keys are imported from those scripts, never retyped. Curves are
made to look like training curves: noisy, power-law-like decrease, some with a plateau before
they start to improve, some overfitting, fast starters that end worse than slow ones (curves
cross), a per-seed offset plus per-epoch noise.

Command line (``--repository`` is required: this never writes to Syne Tune's own folder
unless asked, and never over a blackbox it did not write)::

    python -m benchmarks.synthetic fcnet nasbench201 pd1 --repository /tmp/synthetic-bb
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
from syne_tune.blackbox_repository.blackbox_tabular import serialize as serialize_tabular
from syne_tune.blackbox_repository.conversion_scripts.scripts import (
    default_metric,
    fcnet_import,
    metric_elapsed_time,
    nasbench201_import,
    pd1_import,
    time_attr,
)
from syne_tune.config_space import is_log_space, randint

SCHEMAS = ("fcnet", "nasbench201", "pd1")

# metadata key marking a folder as written here (extra keys are ignored by Syne Tune's loaders)
SYNTHETIC_KEY = "synthetic"

FCNET_TASKS = ("protein_structure", "naval_propulsion", "parkinsons_telemonitoring", "slice_localization")
FCNET_NUM_SEEDS = 4  # fcnet_import.convert_dataset: n_seeds = 4
NB201_TASKS = ("cifar10", "cifar100", "ImageNet16-120")
NB201_SEEDS = (777, 888, 999)  # the seeds nasbench201_import.convert_dataset reads
NB201_MAX_EPOCH = 200
NB201_OPS = ("avg_pool_3x3", "nor_conv_3x3", "skip_connect", "nor_conv_1x1", "none")
# PD1 task names follow pd1_import: "{dataset}_{model}[_{activation}]_batch_size_{bs}"; the
# value is the task's number of evaluation points (its longest curve, the fidelity's max)
PD1_TASKS: dict[str, int] = {
    "imagenet_resnet50_batch_size_512": 40,
    "lm1b_transformer_batch_size_2048": 25,
    "fashion_mnist_max_pooling_cnn_relu_batch_size_256": 30,
}


# ----- curve shapes ---------------------------------------------------------------------------


def learning_curves(
    rng: np.random.RandomState,
    quality: np.ndarray,
    num_steps: int,
    num_seeds: int,
    start: float,
    best: float,
    worst: float,
    noise: float = 0.02,
    overfit_probability: float = 0.0,
) -> np.ndarray:
    """
    Decreasing, noisy curves of a loss-like value (smaller is better).

    Config ``i`` goes from about ``start`` to an asymptote between ``best`` (``quality`` 1) and
    ``worst`` (``quality`` 0) along ``(1 + t / tau) ** -alpha``. ``tau`` is drawn against
    quality for half the configs, so some fast starters end worse than slow ones (crossings);
    a quarter wait on a plateau at ``start`` before improving; with ``overfit_probability``
    a curve turns up again after its minimum.

    :param rng: Random state
    :param quality: Shape ``(num_configs,)``, in [0, 1]
    :param num_steps: Number of fidelity steps
    :param num_seeds: Number of seeds (each gets its own offset and noise)
    :param start: Value before training
    :param best: Asymptote of the best config
    :param worst: Asymptote of the worst config
    :param noise: Per-step noise, relative to the distance to ``best``
    :param overfit_probability: Fraction of curves that rise again late
    :return: Shape ``(num_configs, num_seeds, num_steps)``
    """
    n = len(quality)
    t = np.arange(1, num_steps + 1, dtype=np.float64)[None, :]
    asymptote = best + (worst - best) * (1.0 - np.clip(quality, 0.0, 1.0)) ** 1.5
    # speed: unrelated to quality for half, anti-correlated for the other half (crossings)
    log_tau = rng.uniform(np.log(0.03), np.log(0.4), n) + np.log(num_steps)
    anti = rng.rand(n) < 0.5
    log_tau[anti] = np.log(num_steps) + np.log(0.03) + quality[anti] * (np.log(0.6) - np.log(0.03))
    tau = np.exp(log_tau)[:, None]
    alpha = rng.uniform(0.7, 1.6, n)[:, None]
    delay = np.where(rng.rand(n) < 0.25, rng.uniform(0.05, 0.25, n) * num_steps, 0.0)[:, None]
    progress = np.maximum(t - delay, 0.0)
    mean = asymptote[:, None] + (start - asymptote[:, None]) * (1.0 + progress / tau) ** -alpha
    overfit = (rng.rand(n) < overfit_probability)[:, None]
    rise = rng.uniform(0.05, 0.3, n)[:, None] * (start - asymptote[:, None])
    turn = rng.uniform(0.4, 0.8, n)[:, None] * num_steps
    mean = mean + overfit * rise * np.maximum(t - turn, 0.0) / num_steps
    scale = np.maximum(mean - best, 0.0) + 0.05 * (worst - best)
    offset = rng.normal(0.0, noise, (n, num_seeds, 1)) * scale[:, None, :1]
    eps = rng.normal(0.0, noise, (n, num_seeds, num_steps)) * scale[:, None, :]
    return mean[:, None, :] + offset + eps


def _quality(rng: np.random.RandomState, features: np.ndarray, noise: float = 0.1) -> np.ndarray:
    """A smooth random function of the [0, 1]-scaled features, ranked to [0, 1]: similar
    configurations are similarly good, so a surrogate has something to learn."""
    w = rng.normal(0.0, 1.0, features.shape[1])
    centre = rng.uniform(0.2, 0.8, features.shape[1])
    score = features @ w - 2.0 * ((features - centre) ** 2).sum(axis=1) + rng.normal(0.0, noise, len(features))
    return (np.argsort(np.argsort(score)) + 0.5) / len(score)


def _check_count(name: str, value: int, low: int, high: int | None = None) -> None:
    if not isinstance(value, (int, np.integer)) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


# ----- FCNet ----------------------------------------------------------------------------------


def fcnet_blackboxes(
    num_configs: int = 40, tasks: Sequence[str] = FCNET_TASKS[:2], seed: int = 0
) -> dict[str, BlackboxTabular]:
    """
    FCNet tasks as ``fcnet_import.convert_dataset`` builds them: objectives
    ``metric_{valid_loss, train_loss, final_test_error, n_params, elapsed_time}``, fidelity
    ``hp_epoch`` 1..100, 4 seeds, elapsed time linear in the epoch, ``hp_*`` hyperparameters
    on the grid of ``fcnet_import.CONFIGURATION_SPACE`` (the same rows for every task).

    :param num_configs: Distinct grid points (rows)
    :param tasks: Task (dataset) names
    :param seed: Random seed
    :return: Blackbox per task
    """
    space = fcnet_import.CONFIGURATION_SPACE
    grid = {k: list(getattr(d, "categories", None) or d.values) for k, d in space.items()}
    _check_count("num_configs", num_configs, 2, int(np.prod([len(v) for v in grid.values()])))
    rng = np.random.RandomState(seed)
    picks: set[tuple[int, ...]] = set()
    while len(picks) < num_configs:
        picks.add(tuple(rng.randint(len(v)) for v in grid.values()))
    idx = np.array(sorted(picks))
    hyperparameters = pd.DataFrame({k: [grid[k][i] for i in idx[:, j]] for j, k in enumerate(grid)})
    features = idx / np.maximum([len(v) - 1 for v in grid.values()], 1)
    max_t = fcnet_import.MAX_RESOURCE_LEVEL
    fidelity_values = np.arange(1, max_t + 1)
    n_params = 1000.0 + hyperparameters["hp_n_units_1"].to_numpy() * hyperparameters["hp_n_units_2"].to_numpy()
    out = {}
    for task in tasks:
        quality = _quality(rng, features)
        # valid/train MSE on a log scale: from ~1 down to 1e-3 .. 0.3
        log_valid = learning_curves(rng, quality, max_t, FCNET_NUM_SEEDS, 0.0, -3.0, -0.5, 0.03, 0.3)
        valid = 10.0**log_valid
        train = valid * rng.uniform(0.5, 0.9, (num_configs, 1, 1))
        final = valid[:, :, -1:] * rng.uniform(0.9, 1.1, (num_configs, FCNET_NUM_SEEDS, 1))
        test_error = np.repeat(final, max_t, axis=-1)  # convert_dataset repeats the final value
        # total runtime per (config, seed): more units and smaller batches cost more
        runtime = (
            20.0
            * (1.0 + n_params / 3e4)[:, None]
            * (64.0 / hyperparameters["hp_batch_size"].to_numpy())[:, None] ** 0.5
            * rng.uniform(0.9, 1.1, (num_configs, FCNET_NUM_SEEDS))
        )
        elapsed = (fidelity_values / max_t)[None, None, :] * runtime[:, :, None]
        params = np.broadcast_to(n_params[:, None, None], valid.shape)
        objectives = np.stack([valid, train, test_error, params, elapsed], axis=-1).astype("float32")
        out[task] = BlackboxTabular(
            hyperparameters=hyperparameters,
            configuration_space=space,
            fidelity_space={fcnet_import.TIME_ATTR: randint(lower=1, upper=max_t)},
            objectives_evaluations=objectives,
            fidelity_values=fidelity_values,
            objectives_names=[
                fcnet_import.METRIC_VALID_LOSS,
                "metric_train_loss",
                "metric_final_test_error",
                "metric_n_params",
                fcnet_import.METRIC_ELAPSED_TIME,
            ],
        )
    return out


# ----- NAS-Bench-201 --------------------------------------------------------------------------


def _arch_str(ops: Sequence[str]) -> str:
    """NATS-Bench cell string of 6 operations, the format ``nasbench201_import.str_to_list`` parses."""
    return f"|{ops[0]}~0|+|{ops[1]}~0|{ops[2]}~1|+|{ops[3]}~0|{ops[4]}~1|{ops[5]}~2|"


def nasbench201_raw(
    num_configs: int = 40,
    tasks: Sequence[str] = NB201_TASKS,
    seed: int = 0,
    missing_seed: bool = True,
) -> dict[str, Any]:
    """
    The part of the NATS-Bench topology pickle that ``nasbench201_import.convert_dataset``
    reads, for ``num_configs`` distinct architectures.

    :param num_configs: Number of architectures
    :param tasks: Datasets
    :param seed: Random seed
    :param missing_seed: Leave out one (architecture, seed) run per dataset, as in the real
        data (the import imputes it from the other seeds)
    :return: ``{"total_archs": n, "arch2infos": {i: {"200": {...}}}}``
    """
    _check_count("num_configs", num_configs, 2, len(NB201_OPS) ** 6)
    rng = np.random.RandomState(seed)
    picks: set[tuple[int, ...]] = set()
    while len(picks) < num_configs:
        picks.add(tuple(rng.randint(len(NB201_OPS), size=6)))
    archs = np.array(sorted(picks))
    # how good each op is in a cell (conv3x3 best, none worst), plus a random interaction
    op_value = np.array([0.35, 1.0, 0.5, 0.75, 0.0])
    features = op_value[archs]
    cost = np.array([1.0, 3.0, 0.5, 1.5, 0.2])[archs].sum(axis=1)  # relative epoch time
    n_epochs = NB201_MAX_EPOCH
    infos: dict[int, dict] = {i: {"200": {"arch_str": _arch_str([NB201_OPS[o] for o in a]), "all_results": {}}}
                              for i, a in enumerate(archs)}
    chance = {"cifar10": 0.9, "cifar100": 0.99, "ImageNet16-120": 0.992}
    best = {"cifar10": 0.06, "cifar100": 0.27, "ImageNet16-120": 0.53}
    for task in tasks:
        start, low = chance.get(task, 0.9), best.get(task, 0.1)
        quality = _quality(rng, features, noise=0.3)
        valid = learning_curves(rng, quality, n_epochs, len(NB201_SEEDS), start, low, start - 0.15, 0.03)
        valid = np.clip(valid, 0.0, 1.0)
        train = np.clip(valid - rng.uniform(0.0, 0.1, (num_configs, 1, 1)) * np.linspace(0, 1, n_epochs), 0, 1)
        skip = (int(rng.randint(num_configs)), int(rng.randint(len(NB201_SEEDS)))) if missing_seed else None
        for i in range(num_configs):
            epoch_time = 5.0 * cost[i] * (1.0 + 0.5 * (task == "ImageNet16-120"))
            for s, run_seed in enumerate(NB201_SEEDS):
                if (i, s) == skip:
                    continue
                train_times = epoch_time * rng.uniform(0.9, 1.1, n_epochs)
                infos[i]["200"]["all_results"][(task, run_seed)] = {
                    "eval_acc1es": {f"ori-test@{e}": 100.0 * (1.0 - valid[i, s, e]) for e in range(n_epochs)},
                    "train_acc1es": {e: 100.0 * (1.0 - train[i, s, e]) for e in range(n_epochs)},
                    "train_times": {e: float(train_times[e]) for e in range(n_epochs)},
                    "eval_times": {f"ori-test@{e}": 0.1 * epoch_time for e in range(n_epochs)},
                    "latency": [0.001 * cost[i]],
                    "flop": 10.0 * cost[i],
                    "params": 0.1 * cost[i],
                }
        if skip is not None and skip[1] == 0:
            # the import reads latency, flops and params from seed 777 even where that run is missing
            i = skip[0]
            infos[i]["200"]["all_results"][(task, NB201_SEEDS[0])] = {
                "latency": [0.001 * cost[i]], "flop": 10.0 * cost[i], "params": 0.1 * cost[i],
            }
    return {"total_archs": num_configs, "arch2infos": infos}


def nasbench201_blackboxes(
    num_configs: int = 40, tasks: Sequence[str] = NB201_TASKS, seed: int = 0
) -> dict[str, BlackboxTabular]:
    """
    NAS-Bench-201 tasks converted by Syne Tune's own ``nasbench201_import.convert_dataset``:
    ``metric_valid_error`` (and 6 more objectives), fidelity ``hp_epoch`` 1..200, 3 seeds,
    categorical ``hp_x0`` .. ``hp_x5``.

    :param num_configs: Number of architectures (rows)
    :param tasks: Datasets
    :param seed: Random seed
    :return: Blackbox per task
    """
    raw = nasbench201_raw(num_configs, tasks, seed)
    return {task: nasbench201_import.convert_dataset(raw, task) for task in tasks}


# ----- PD1 ------------------------------------------------------------------------------------


def pd1_task_data(
    num_configs: int, num_steps: int, rng: np.random.RandomState, num_empty: int = 1
) -> pd.DataFrame:
    """
    One PD1 task in the layout ``pd1_import.convert_task`` takes (columns renamed by
    ``COLUMN_RENAMING``): hyperparameters in ``pd1_import.CONFIGURATION_SPACE``, one curve
    (a list) per configuration and objective, curves of different lengths (the longest has
    ``num_steps`` points), ``None`` for configurations that never got evaluated.

    :param num_configs: Number of configurations, the empty ones included
    :param num_steps: Length of the task's longest curve
    :param rng: Random state
    :param num_empty: Configurations without any evaluation
    :return: DataFrame, one row per configuration
    """
    _check_count("num_configs", num_configs, num_empty + 2)
    _check_count("num_steps", num_steps, 2)
    _check_count("num_empty", num_empty, 0)
    space = pd1_import.CONFIGURATION_SPACE
    unit = rng.rand(num_configs, len(space))  # position in each domain, log-scaled where it is
    hps = {}
    for j, (name, domain) in enumerate(space.items()):
        lo, hi = float(domain.lower), float(domain.upper)
        if is_log_space(domain):
            hps[name] = np.exp(np.log(lo) + unit[:, j] * (np.log(hi) - np.log(lo)))
        else:
            hps[name] = lo + unit[:, j] * (hi - lo)
    df = pd.DataFrame(hps)
    # learning rates far from ~0.3 (log10 in [-5, 1]) are worse
    log_lr = np.log10(df["lr_initial_value"].to_numpy())
    quality = np.clip(_quality(rng, unit, noise=0.2) - 0.15 * np.abs(log_lr + 0.5), 0.0, 1.0)
    error = np.clip(learning_curves(rng, quality, num_steps, 1, 0.95, 0.2, 0.8, 0.03)[:, 0, :], 0.0, 1.0)
    diverged = log_lr > 0.3  # too large: stuck at chance
    error[diverged] = np.clip(0.999 + rng.normal(0, 0.002, (int(diverged.sum()), num_steps)), 0, 1)
    ce_loss = -np.log(np.clip(1.0 - error, 1e-3, 1.0)) * rng.uniform(0.9, 1.1, error.shape)
    eval_time = np.cumsum(rng.uniform(50.0, 70.0, error.shape), axis=1)  # _convert_data: cumsum
    # curve lengths: a third run to the end, the rest stop early (diverged runs stop soonest)
    length = np.where(rng.rand(num_configs) < 1 / 3, num_steps, rng.randint(2, num_steps, num_configs))
    length[diverged] = np.minimum(length[diverged], rng.randint(2, max(3, num_steps // 3), int(diverged.sum())))
    length[int(np.argmax(np.where(diverged, -1, quality)))] = num_steps  # the longest curve is a real one
    empty = rng.choice(np.flatnonzero(length < num_steps), size=num_empty, replace=False) if num_empty else []
    curves: dict[str, list] = {
        pd1_import.METRIC_VALID_ERROR: [], "metric_valid_ce_loss": [], pd1_import.METRIC_ELAPSED_TIME: [],
    }
    for i in range(num_configs):
        n = int(length[i])
        for name, values in zip(curves, (error, ce_loss, eval_time)):
            curves[name].append(None if i in empty else values[i, :n].tolist())
    for name, values in curves.items():
        df[name] = values
    steps = [None if c is None else list(range(1, len(c) + 1)) for c in curves[pd1_import.METRIC_ELAPSED_TIME]]
    df["epoch"] = steps
    df[pd1_import.TIME_ATTR] = df["epoch"]
    return df[list(pd1_import.COLUMN_RENAMING.values())]


def pd1_blackboxes(
    num_configs: int = 40, tasks: dict[str, int] | None = None, seed: int = 0, num_empty: int = 1
) -> dict[str, BlackboxTabular]:
    """
    PD1 tasks converted by Syne Tune's own ``pd1_import.convert_task``: objectives
    ``metric_valid_error_rate``, ``metric_valid_ce_loss``, ``metric_elapsed_time``, fidelity
    ``global_step`` 1..(the task's longest curve), 1 seed, curves padded with NaN.

    :param num_configs: Configurations per task
    :param tasks: Task name -> number of evaluation points; default :data:`PD1_TASKS`
    :param seed: Random seed
    :param num_empty: Configurations per task with no evaluation (all NaN)
    :return: Blackbox per task
    """
    tasks = PD1_TASKS if tasks is None else tasks
    rng = np.random.RandomState(seed)
    return {
        task: pd1_import.convert_task(pd1_task_data(num_configs, n, rng, num_empty))
        for task, n in tasks.items()
    }


# ----- writing --------------------------------------------------------------------------------

_METADATA = {
    "fcnet": (fcnet_import.METRIC_ELAPSED_TIME, fcnet_import.METRIC_VALID_LOSS, fcnet_import.TIME_ATTR),
    "nasbench201": (
        nasbench201_import.METRIC_ELAPSED_TIME,
        nasbench201_import.METRIC_VALID_ERROR,
        nasbench201_import.TIME_ATTR,
    ),
    "pd1": (pd1_import.METRIC_ELAPSED_TIME, pd1_import.METRIC_VALID_ERROR, pd1_import.TIME_ATTR),
}


def synthetic_blackboxes(name: str, num_configs: int = 40, seed: int = 0) -> dict[str, BlackboxTabular]:
    """
    :param name: One of :data:`SCHEMAS`
    :param num_configs: Configurations (rows) per task
    :param seed: Random seed
    :return: Blackbox per task, as the conversion script of ``name`` builds them
    """
    makers = {"fcnet": fcnet_blackboxes, "nasbench201": nasbench201_blackboxes, "pd1": pd1_blackboxes}
    if name not in makers:
        raise ValueError(f"name must be one of {SCHEMAS}, got {name!r}")
    return makers[name](num_configs=num_configs, seed=seed)


def write_synthetic_blackbox(
    name: str,
    repository: str | Path,
    num_configs: int = 40,
    seed: int = 0,
    bb_dict: dict[str, BlackboxTabular] | None = None,
) -> Path:
    """
    Writes a synthetic blackbox to ``repository/name``, as the conversion script writes the
    real one to ``~/.blackbox-repository/name`` (same files and metadata keys, plus
    ``"synthetic": true``).

    :param name: One of :data:`SCHEMAS`
    :param repository: Repository folder (plays the role of ``~/.blackbox-repository``)
    :param num_configs: Configurations per task
    :param seed: Random seed
    :param bb_dict: Blackboxes to write instead of generating them
    :return: The blackbox folder
    :raises FileExistsError: if the folder holds a blackbox this module did not write
    """
    if name not in SCHEMAS:
        raise ValueError(f"name must be one of {SCHEMAS}, got {name!r}")
    path = Path(repository).expanduser() / name
    meta_file = path / "metadata.json"
    if meta_file.exists() and not json.loads(meta_file.read_text()).get(SYNTHETIC_KEY, False):
        raise FileExistsError(f"{path} holds a blackbox not written by benchmarks.synthetic; not overwriting it")
    if path.exists():
        shutil.rmtree(path)  # a previous synthetic one: files of other tasks must not linger
    path.mkdir(parents=True)
    bbs = bb_dict if bb_dict is not None else synthetic_blackboxes(name, num_configs, seed)
    elapsed, metric, fidelity = _METADATA[name]
    metadata = {
        metric_elapsed_time: elapsed,
        default_metric: metric,
        time_attr: fidelity,
        SYNTHETIC_KEY: True,
        "provenance": f"benchmarks.synthetic (num_configs={num_configs}, seed={seed}): not measured data",
    }
    writer = pd1_import.serialize if name == "pd1" else serialize_tabular
    writer(bb_dict=bbs, path=str(path), metadata=metadata)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="+", choices=SCHEMAS, help="blackboxes to write")
    p.add_argument("--repository", required=True,
                   help="folder playing ~/.blackbox-repository (point run_benchmarks.py --repository at it)")
    p.add_argument("--num-configs", type=int, default=40, help="configurations per task")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in args.names:
        try:
            path = write_synthetic_blackbox(name, args.repository, args.num_configs, args.seed)
        except (ValueError, FileExistsError) as ex:
            print(f"{name}: {ex}", file=sys.stderr)
            return 2
        print(f"wrote synthetic {name} to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
