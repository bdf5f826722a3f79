"""Aggregating a results folder into tables.

Everything is computed from the stored files of each run (``run.json`` holds
the metric, direction and table bounds), so reports need no blackbox.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.metrics import (
    average_ranks,
    incumbent_trajectory,
    regret_at_fractions,
    regret_curve,
    speedup_vs_random,
)
from benchmarks.runner import RESULTS_FILE, RUN_FILE

FRACTIONS = (0.25, 0.5, 1.0)
BASELINE = "RandomSearch"


@dataclass
class RunRecord:
    """
    A finished run: its summary and its anytime-incumbent trajectory.

    :param summary: Content of ``run.json``
    :param trajectory: See :func:`~benchmarks.metrics.incumbent_trajectory`
    """

    summary: dict[str, Any]
    trajectory: pd.DataFrame

    @property
    def group(self) -> tuple:
        """Runs comparable with each other (same benchmark, task, seed, budget, workers)."""
        s = self.summary
        return (s["benchmark"], s["task"], s["seed"], s["budget_epochs"], s["n_workers"])

    def regret_curve(self, epochs: Sequence[int] | np.ndarray) -> np.ndarray:
        """Normalised regret after each number of epochs."""
        b = self.summary["bounds"]
        return regret_curve(self.trajectory, epochs, b["best_any"], b["worst"])


def load_runs(results_dir: str | Path) -> list[RunRecord]:
    """
    :param results_dir: Root folder given to the runner
    :return: All finished runs under it
    """
    runs = []
    for run_file in sorted(Path(results_dir).rglob(RUN_FILE)):
        with open(run_file) as f:
            summary = json.load(f)
        df = pd.read_csv(run_file.parent / RESULTS_FILE)
        d = summary["definition"]
        traj = incumbent_trajectory(df, d["metric"], d["do_minimize"])
        runs.append(RunRecord(summary, traj))
    return runs


def long_table(
    runs: Sequence[RunRecord], fractions: Sequence[float] = FRACTIONS, baseline: str = BASELINE
) -> pd.DataFrame:
    """
    One row per (run, budget fraction): regret there, plus per-run columns
    (scheduler seconds, speed-up against random search of the same group).

    :param runs: See :func:`load_runs`
    :param fractions: Budget fractions
    :param baseline: Method the speed-up is measured against (random search)
    :return: Long DataFrame
    """
    rs_by_group = {r.group: r for r in runs if r.summary["method"] == baseline}
    rows = []
    for r in runs:
        s = r.summary
        b = s["bounds"]
        regrets = regret_at_fractions(
            r.trajectory, s["budget_epochs"], b["best_any"], b["worst"], fractions
        )
        rs = rs_by_group.get(r.group)
        speedup = (
            speedup_vs_random(
                r.trajectory, rs.trajectory, s["definition"]["do_minimize"], s["budget_epochs"]
            )
            if rs is not None
            else np.nan
        )
        for f, reg in regrets.items():
            rows.append(
                dict(
                    benchmark=s["benchmark"], task=s["task"], method=s["method"],
                    seed=s["seed"], budget=s["budget_epochs"], n_workers=s["n_workers"],
                    budget_point=f, regret=reg, speedup=speedup,
                    scheduler_seconds=s["scheduler_seconds"], wall_seconds=s["wall_seconds"],
                )
            )
    return pd.DataFrame(rows)


def summary_table(long: pd.DataFrame) -> pd.DataFrame:
    """
    Per (benchmark, method): mean normalised regret at each budget fraction,
    average rank (ranks within each task, seed, budget and budget point,
    then averaged), speed-up against random search (mean, unreached = 0) with
    the fraction of runs reaching random search's final incumbent, and mean
    scheduler compute seconds per run.

    :param long: See :func:`long_table`
    :return: Summary DataFrame
    """
    out = []
    for bench, g in long.groupby("benchmark", sort=True):
        ranks = average_ranks(
            g, group_cols=("task", "seed", "budget", "n_workers", "budget_point")
        )
        per_run = g.drop_duplicates(["task", "method", "seed", "budget", "n_workers"])
        for method, gm in g.groupby("method", sort=True):
            pr = per_run[per_run["method"] == method]
            sp = pr["speedup"].dropna()
            row = {"benchmark": bench, "method": method, "runs": len(pr)}
            for f, gf in gm.groupby("budget_point"):
                row[f"regret@{int(round(100 * f))}%"] = gf["regret"].mean()
            row["avg rank"] = ranks.get(method, np.nan)
            row["speed-up vs RS"] = sp.mean() if len(sp) else np.nan
            row["reached RS"] = (sp > 0).mean() if len(sp) else np.nan
            row["scheduler s/run"] = pr["scheduler_seconds"].mean()
            row["wall s/run"] = pr["wall_seconds"].mean()
            out.append(row)
    return pd.DataFrame(out)


def to_markdown(table: pd.DataFrame, digits: int = 3) -> str:
    """
    :param table: Any DataFrame
    :param digits: Significant digits for floats
    :return: Markdown table (no extra dependency)
    """

    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "nan" if np.isnan(v) else f"{v:.{digits}g}"
        return str(v)

    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(fmt(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def make_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    baseline: str = BASELINE,
) -> str:
    """
    Writes ``summary.md``, ``summary.csv`` and regret plots to ``out_dir``.

    :param results_dir: Root folder of results
    :param out_dir: Where to write (default: ``results_dir``)
    :param seeds: Only runs with these seeds (default: all)
    :param methods: Only these methods (default: all)
    :param baseline: Method the speed-up is measured against
    :return: The markdown table
    """
    from benchmarks.plots import plot_regret_curves, plot_regret_vs_time

    out_dir = Path(out_dir or results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [
        r
        for r in load_runs(results_dir)
        if (seeds is None or r.summary["seed"] in seeds) and (methods is None or r.summary["method"] in methods)
    ]
    if not runs:
        return "(no finished runs)"
    table = summary_table(long_table(runs, baseline=baseline))
    md = (
        "Normalised regret = (best - incumbent) / (best - worst), best over all "
        "fidelities, worst = 0.9 quantile of finite final-fidelity values "
        "(see benchmarks.table.MetricBounds), clipped to [0, 1]. "
        f"Speed-up vs {baseline}: unreached = 0.\n\n" + to_markdown(table)
    )
    (out_dir / "summary.md").write_text(md + "\n")
    table.to_csv(out_dir / "summary.csv", index=False)
    plot_regret_curves(runs, out_dir)
    plot_regret_vs_time(runs, out_dir)
    return md
