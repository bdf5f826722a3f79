"""Regret-vs-epochs plots (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from benchmarks.metrics import normalized_regret

KIND_LABELS = {"incumbent": "regret", "trained_incumbent": "fully-trained regret"}
FILE_PREFIXES = {"incumbent": "regret", "trained_incumbent": "trained_regret"}


def _cell_suffix(n_workers: int) -> str:
    """File-name suffix of a worker count; none for 1 worker (the names the docs link)."""
    return "" if n_workers == 1 else f"_w{n_workers}"


def _cell_title(bench: str, n_workers: int) -> str:
    return f"{bench}, {n_workers} worker{'s' if n_workers > 1 else ''}"


def plot_regret_curves(
    runs: Sequence,
    out_dir: str | Path,
    num_points: int = 100,
    log_y: bool = True,
    column: str = "incumbent",
) -> list[Path]:
    """
    One PNG per benchmark family and number of workers: mean normalised regret
    vs epochs over all its tasks and seeds, one line per method, shaded +- one
    standard error. Runs of a family may have different budgets; the x-axis
    goes up to the smallest one. Files: ``regret_<family>.png`` (anytime) or
    ``trained_regret_<family>.png`` (fully trained), with ``_w<n>`` before
    ``.png`` for ``n`` > 1 workers.

    :param runs: :class:`~benchmarks.report.RunRecord` list
    :param out_dir: Output folder
    :param num_points: Points on the epoch grid
    :param log_y: Log-scale regret axis
    :param column: "incumbent" (anytime regret) or "trained_incumbent"
        (fully-trained regret, see :mod:`benchmarks.metrics`)
    :return: Paths of the written files
    """
    by_cell = defaultdict(list)
    for r in runs:
        by_cell[(r.summary["benchmark"], r.summary["n_workers"])].append(r)
    paths = []
    for (bench, n_workers), rs in sorted(by_cell.items()):
        budget = min(r.summary["budget_epochs"] for r in rs)
        grid = np.unique(np.linspace(1, budget, num_points).round().astype(int))
        curves = defaultdict(list)
        for r in rs:
            curves[r.summary["method"]].append(r.regret_curve(grid, column))
        fig, ax = plt.subplots(figsize=(6, 4))
        for method, cs in sorted(curves.items()):
            c = np.array(cs)
            mean = c.mean(axis=0)
            se = c.std(axis=0, ddof=1) / np.sqrt(len(c)) if len(c) > 1 else 0 * mean
            if log_y:  # regret 0 (best found) would vanish on a log axis
                mean = np.maximum(mean, 1e-4)
            ax.plot(grid, mean, label=f"{method} (n={len(c)})")
            ax.fill_between(grid, np.maximum(mean - se, 1e-6), mean + se, alpha=0.2)
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("epochs (fidelity steps) simulated")
        ax.set_ylabel(f"mean normalised {KIND_LABELS[column]}")
        n_tasks = len({r.summary["task"] for r in rs})
        ax.set_title(f"{_cell_title(bench, n_workers)}: {n_tasks} tasks")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / f"{FILE_PREFIXES[column]}_{bench}{_cell_suffix(n_workers)}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_regret_vs_time(runs: Sequence, out_dir: str | Path, num_points: int = 100) -> list[Path]:
    """
    One PNG per task and number of workers: mean normalised regret vs simulated time (the
    table's training times; the scheduler's compute is included only for runs made with
    ``charge_scheduler_time``), one line per method. Files ``regret_time_<family>_<task>.png``,
    with ``_w<n>`` before ``.png`` for ``n`` > 1 workers.

    :param runs: :class:`~benchmarks.report.RunRecord` list
    :param out_dir: Output folder
    :param num_points: Points on the (log-spaced) time grid
    :return: Paths of the written files
    """
    by_task = defaultdict(list)
    for r in runs:
        by_task[(r.summary["benchmark"], r.summary["task"], r.summary["n_workers"])].append(r)
    paths = []
    for (bench, task, n_workers), rs in sorted(by_task.items()):
        ends = [r.trajectory["time"].max() for r in rs if r.trajectory["time"].notna().any()]
        starts = [r.trajectory["time"].min() for r in rs if r.trajectory["time"].notna().any()]
        if not ends:
            continue
        grid = np.geomspace(max(min(starts), 1e-3), min(ends), num_points)
        curves = defaultdict(list)
        for r in rs:
            b = r.summary["bounds"]
            traj = r.trajectory
            idx = np.searchsorted(traj["time"].to_numpy(), grid, side="right") - 1
            inc = np.where(idx >= 0, traj["incumbent"].to_numpy()[np.maximum(idx, 0)], np.nan)
            curves[r.summary["method"]].append(normalized_regret(inc, b["best_any"], b["worst"]))
        fig, ax = plt.subplots(figsize=(6, 4))
        for method, cs in sorted(curves.items()):
            ax.plot(grid, np.maximum(np.mean(cs, axis=0), 1e-4), label=f"{method} (n={len(cs)})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("simulated time (table's time unit)")
        ax.set_ylabel("mean normalised regret")
        ax.set_title(f"{_cell_title(bench, n_workers)}: {task}"[:80], fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / f"regret_time_{bench}_{task}{_cell_suffix(n_workers)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
