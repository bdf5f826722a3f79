"""Where the runs left a task's best configurations: for each method and worker count, in how
many runs one of the ``top`` best configurations of the table (by its value at ``max_t``) was
started, in how many one of them was trained to ``max_t``, and the depths (last epoch) they
reached. It tells a method that never found the best configurations from one that found them
and paused them early.

Works on tabular tasks, whose runs evaluate configurations of the table: a run's configuration
is matched to the table's row with the same hyperparameter values (rounded to 6 significant
digits); the table's value is the mean over its seeds.

Command line::

    python -m benchmarks.best_configs results/dev results/more-seeds --data $DEV/lcbench --task car --top 3
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.blackboxes import load_benchmark
from benchmarks.report import RESULTS_FILE, RUN_FILE


def _key(values: Sequence) -> tuple:
    return tuple(f"{float(v):.6g}" for v in values)


def _mean_over_seeds(values: np.ndarray) -> np.ndarray:
    """Mean of each row's non-NaN values (NaN where there is none: a diverged configuration)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "Mean of empty slice"
        return np.nanmean(values, axis=1)


def best_rows(table: pd.DataFrame, values: np.ndarray, do_minimize: bool, top: int) -> dict[tuple, int]:
    """The ``top`` best rows of a table: hyperparameter key -> rank (0 is the best).

    :param table: the table's hyperparameters, one row per configuration
    :param values: each configuration's value at ``max_t`` (NaN ranks last)
    :param do_minimize: whether lower values are better
    :param top: how many of the best
    """
    order = np.argsort(values if do_minimize else -values, kind="stable")[:top]
    return {_key(table.iloc[i].values): rank for rank, i in enumerate(order)}


def run_reach(
    results: pd.DataFrame, best: dict[tuple, int], columns: Sequence[str], time_attr: str, max_t: int
) -> dict:
    """How one run treated the best configurations.

    :param results: the run's results (one row per epoch; ``trial_id``, ``config_<name>``)
    :param best: :func:`best_rows`
    :param columns: the hyperparameter names, in the table's order
    :param time_attr: the epoch column
    :param max_t: the maximum budget
    :return: ``started``, ``trained`` (bools) and ``depths`` (the last epoch of each best
        configuration it started)
    """
    trials = results.groupby("trial_id")
    first = trials.first()
    depth = trials[time_attr].max()
    config = first[[f"config_{c}" for c in columns]].to_numpy()
    depths = [int(depth[t]) for t, row in zip(first.index, config) if _key(row) in best]
    return {"started": bool(depths), "trained": any(d >= max_t for d in depths), "depths": depths}


def best_config_reach(results_dirs: Sequence[str | Path], data: str | Path, task: str, top: int = 3) -> pd.DataFrame:
    """One row per method and worker count over the runs of ``task`` under ``results_dirs``.

    :param results_dirs: the runner's results folders (for instance seeds 0-4 in one, 5-9 in another)
    :param data: the serialized blackbox folder the runs simulated (runs are those of its
        benchmark name, the folder's name; metric, direction and ``max_t`` are its defaults)
    :param task: the task
    :param top: how many of the table's best configurations
    :return: ``method``, ``n_workers``, ``runs``, ``started`` (runs that started one of them),
        ``trained`` (runs that trained one to ``max_t``), ``depths`` (all runs' depths of them)
    """
    definition, blackbox = load_benchmark(data, task)
    columns = list(blackbox.hyperparameters.columns)
    metric = blackbox.objectives_names.index(definition.metric)
    values = _mean_over_seeds(blackbox.objectives_evaluations[:, :, -1, metric])
    best = best_rows(blackbox.hyperparameters, values, definition.do_minimize, top)
    rows: dict[tuple, dict] = {}
    run_files = [f for folder in results_dirs for f in sorted(Path(folder).rglob(RUN_FILE))]
    for run_file in run_files:
        summary = json.loads(run_file.read_text())
        if summary["task"] != task or summary["benchmark"] != definition.name:
            continue
        results = pd.read_csv(run_file.parent / RESULTS_FILE)
        reach = run_reach(results, best, columns, definition.time_attr, definition.max_t)
        row = rows.setdefault(
            (summary["method"], summary["n_workers"]), {"runs": 0, "started": 0, "trained": 0, "depths": []}
        )
        row["runs"] += 1
        row["started"] += reach["started"]
        row["trained"] += reach["trained"]
        row["depths"] += reach["depths"]
    table = pd.DataFrame([{"method": m, "n_workers": w, **r} for (m, w), r in rows.items()])
    if table.empty:
        raise ValueError(f"no runs of task {task!r} on data {str(data)!r} under {[str(f) for f in results_dirs]}")
    table["depths"] = table["depths"].map(sorted)
    return table.sort_values(["n_workers", "method"], kind="stable").reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dirs", nargs="+", help="the runner's results folders")
    parser.add_argument("--data", required=True, help="the serialized blackbox folder the runs simulated")
    parser.add_argument("--task", required=True)
    parser.add_argument("--top", type=int, default=3, help="how many of the table's best configurations (default 3)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top must be at least 1, got {args.top}")
    table = best_config_reach(args.results_dirs, args.data, args.task, args.top)
    print(f"| method | workers | runs | started one of the {args.top} best | trained one to max_t | their depths |")
    print("|---|---|---|---|---|---|")
    for r in table.itertuples():
        print(f"| {r.method} | {r.n_workers} | {r.runs} | {r.started} | {r.trained} | {' '.join(map(str, r.depths))} |")


if __name__ == "__main__":
    main()
