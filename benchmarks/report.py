"""Aggregating a results folder into tables.

Everything is computed from the stored files of each run (``run.json`` holds
the metric, direction, ``max_t`` and table bounds), so reports need no
blackbox. Metric definitions: :mod:`benchmarks.metrics`. Every table groups
runs by benchmark family and number of workers; methods or worker counts that
are missing from the results are simply absent from the tables.

Paired comparison (:func:`paired_comparison`): each of our methods (a name
starting with one of ``ours``) against the best reference (ASHA or BOHB, the
one with the lower mean regret over the pairs compared) of the same benchmark,
number of workers, budget point and regret kind, pooled over the family's tasks
and per task. A pair is one (task, seed, budget) both methods ran. See
:func:`signed_rank_test` for ties and the p-value.
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
    budget_use_at_epochs,
    budget_use_at_fractions,
    epochs_until,
    incumbent_trajectory,
    regret_at_fractions,
    regret_at_time_fractions,
    regret_curve,
    speedup_vs_random,
)
from benchmarks.provenance import versions_key
from benchmarks.runner import RESULTS_FILE, RUN_FILE
from benchmarks.wallclock import EPOCHS, JOBS_FILE, PROTOCOLS, WALLCLOCK, job_starts_until

FRACTIONS = (0.25, 0.5, 1.0)
BASELINE = "RandomSearch"
OURS = ("DyHPO", "DeepPowerLaw")
"""Our methods: every method whose name starts with one of these (variants included)."""
REFERENCES = ("ASHA", "BOHB")
"""Methods ours are compared with in the paired table (the better one per cell)."""
RATIO_TO = "ASHA"
"""The paired table also gives the ratio of mean regrets to this method."""
REGRET_KINDS = {"regret": "anytime", "trained_regret": "fully-trained"}
"""Regret columns of :func:`long_table` and their names in the tables."""
TIE_TOLERANCE = 1e-12
"""Paired differences of regret at most this large in absolute value are ties."""
POOLED = "(pooled)"
"""``task`` value of the paired rows pooled over all tasks of a family."""

EXPLANATION = (
    "Regret = (best - incumbent) / (best - worst), best = best table value at any fidelity, "
    "worst = 0.9 quantile of finite final-fidelity values (benchmarks.table.MetricBounds), "
    "clipped to [0, 1]. *Anytime* regret: incumbent = best value seen at any epoch. "
    "*Fully-trained* regret: incumbent = best value AT max_t among the trials trained to max_t "
    "so far (the value of the trained model, not the best epoch of such a trial); 1 while no "
    "trial has reached max_t. @25/50/100%: after that share of the epoch budget. "
    "started / trained: trials with a result / with a result at max_t, per run. "
    "1st-epoch share = trials started / epochs (budget spent on first epochs); "
    "stopped@1 share = share of epochs spent on trials that never got past their first epoch "
    "(as of the end of the run); these are per run at 100% in the summary. avg rank: of the "
    "anytime regret within each (task, seed, budget point) of the same workers."
)


@dataclass
class RunRecord:
    """
    A finished run: its summary and its trajectory.

    :param summary: Content of ``run.json``
    :param trajectory: See :func:`~benchmarks.metrics.incumbent_trajectory`
        (with the fully-trained incumbent, ``trial_id`` and ``level``)
    :param jobs: Of a wall-clock run: its job starts, resumes, pauses and stops
        (:class:`~benchmarks.wallclock.JobLog`); None otherwise
    """

    summary: dict[str, Any]
    trajectory: pd.DataFrame
    jobs: pd.DataFrame | None = None

    @property
    def group(self) -> tuple:
        """Runs comparable with each other (same benchmark, task, seed, budget, workers)."""
        s = self.summary
        return (s["benchmark"], s["task"], s["seed"], s["budget_epochs"], s["n_workers"])

    def regret_curve(
        self, epochs: Sequence[int] | np.ndarray, column: str = "incumbent"
    ) -> np.ndarray:
        """
        Normalised regret after each number of epochs.

        :param column: "incumbent" (anytime) or "trained_incumbent" (fully trained)
        """
        b = self.summary["bounds"]
        return regret_curve(self.trajectory, epochs, b["best_any"], b["worst"], column)


def protocol_of(summary: dict[str, Any]) -> str:
    """
    :param summary: Content of a ``run.json``
    :return: The run's protocol (runs written before protocols existed: the epoch protocol)
    """
    return summary.get("protocol", EPOCHS)


def load_runs(results_dir: str | Path, protocol: str = EPOCHS) -> list[RunRecord]:
    """
    :param results_dir: Root folder given to the runner
    :param protocol: Only the runs of this protocol (see :mod:`benchmarks.wallclock`): runs of
        different protocols never mix in a table
    :return: All finished runs under it of that protocol
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol={protocol!r}: not one of {list(PROTOCOLS)}")
    runs = []
    for run_file in sorted(Path(results_dir).rglob(RUN_FILE)):
        with open(run_file) as f:
            summary = json.load(f)
        if protocol_of(summary) != protocol:
            continue
        df = pd.read_csv(run_file.parent / RESULTS_FILE)
        d = summary["definition"]
        traj = incumbent_trajectory(
            df, d["metric"], d["do_minimize"], time_attr=d["time_attr"], max_t=d["max_t"]
        )
        jobs = pd.read_csv(run_file.parent / JOBS_FILE) if protocol == WALLCLOCK else None
        runs.append(RunRecord(summary, traj, jobs))
    return runs


def long_table(
    runs: Sequence[RunRecord], fractions: Sequence[float] = FRACTIONS, baseline: str = BASELINE
) -> pd.DataFrame:
    """
    One row per (run, budget fraction): anytime regret (``regret``),
    fully-trained regret (``trained_regret``) and budget use there (columns
    :data:`~benchmarks.metrics.BUDGET_USE_KEYS`), plus per-run columns
    (scheduler seconds, speed-up against random search of the same group, ``versions``: the
    packages the run was made with, :func:`benchmarks.provenance.versions_key`).

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
        budget = s["budget_epochs"]
        regrets = regret_at_fractions(r.trajectory, budget, b["best_any"], b["worst"], fractions)
        trained = regret_at_fractions(
            r.trajectory, budget, b["best_any"], b["worst"], fractions, column="trained_incumbent"
        )
        use = budget_use_at_fractions(r.trajectory, budget, s["definition"]["max_t"], fractions)
        rs = rs_by_group.get(r.group)
        speedup = (
            speedup_vs_random(
                r.trajectory, rs.trajectory, s["definition"]["do_minimize"], budget
            )
            if rs is not None
            else np.nan
        )
        for f in fractions:
            rows.append(
                dict(
                    benchmark=s["benchmark"], task=s["task"], method=s["method"],
                    seed=s["seed"], budget=budget, n_workers=s["n_workers"],
                    budget_point=f, regret=regrets[f], trained_regret=trained[f],
                    **use[f], speedup=speedup,
                    scheduler_seconds=s["scheduler_seconds"], wall_seconds=s["wall_seconds"],
                    versions=versions_key(s),
                )
            )
    return pd.DataFrame(rows)


def wallclock_long_table(runs: Sequence[RunRecord], fractions: Sequence[float] = FRACTIONS) -> pd.DataFrame:
    """
    The wall-clock protocol's :func:`long_table`: one row per (run, fraction of the wall-clock
    budget ``budget_seconds``), the regrets and budget use of the results reported by then
    (:func:`~benchmarks.metrics.regret_at_time_fractions`), with ``start_delay`` (in median
    epoch times), ``job_starts`` (jobs started or resumed by then, from the run's
    ``jobs.csv``) and ``starts_per_epoch`` (``job_starts / epochs``, NaN for 0 epochs).

    :param runs: Runs of the wall-clock protocol (``load_runs(..., protocol="wallclock")``)
    :param fractions: Fractions of the wall-clock budget
    :return: Long DataFrame, the columns of :func:`long_table` but ``speedup`` and those above
    """
    rows = []
    for r in runs:
        s = r.summary
        if protocol_of(s) != WALLCLOCK or r.jobs is None:
            raise ValueError(f"run {s['method']} {s['task']} seed {s['seed']}: not a wall-clock run with its jobs")
        b, seconds = s["bounds"], s["budget_seconds"]
        regrets = regret_at_time_fractions(r.trajectory, seconds, b["best_any"], b["worst"], fractions)
        trained = regret_at_time_fractions(
            r.trajectory, seconds, b["best_any"], b["worst"], fractions, column="trained_incumbent"
        )
        times = [f * seconds for f in fractions]
        epochs = epochs_until(r.trajectory, times)
        end = int(epochs_until(r.trajectory, [seconds])[0])
        use = budget_use_at_epochs(r.trajectory, epochs, end, s["definition"]["max_t"])
        starts = job_starts_until(r.jobs, times)
        for f, u, n_starts in zip(fractions, use, starts):
            rows.append(dict(
                benchmark=s["benchmark"], task=s["task"], method=s["method"], seed=s["seed"],
                budget=s["budget_epochs"], n_workers=s["n_workers"], start_delay=s["start_delay"],
                budget_seconds=seconds, budget_point=f, regret=regrets[f], trained_regret=trained[f],
                **u, job_starts=int(n_starts),
                starts_per_epoch=n_starts / u["epochs"] if u["epochs"] else np.nan,
                scheduler_seconds=s["scheduler_seconds"], wall_seconds=s["wall_seconds"],
                versions=versions_key(s),
            ))
    return pd.DataFrame(rows)


def method_order(
    methods: Sequence[str], ours: Sequence[str] = OURS, references: Sequence[str] = REFERENCES
) -> list[str]:
    """
    :return: ``methods`` with ours first (sorted), then the references (in the
        given order), then the others (sorted)
    """
    methods = set(methods)
    first = sorted(m for m in methods if m.startswith(tuple(ours)))
    refs = [m for m in references if m in methods and m not in first]
    return first + refs + sorted(methods - set(first) - set(refs))


def _pct(f: float) -> str:
    return f"{int(round(100 * f))}%"


def summary_table(
    long: pd.DataFrame, ours: Sequence[str] = OURS, references: Sequence[str] = REFERENCES
) -> pd.DataFrame:
    """
    Per (benchmark, n_workers, method): mean anytime and fully-trained regret
    at each budget fraction; per run at the full budget: trials started,
    trials trained to max_t, first-epoch share and stopped-after-1 share;
    average rank of the anytime regret (ranks within each task, seed, budget
    and budget point, then averaged); speed-up against random search (mean,
    unreached = 0) with the fraction of runs reaching random search's final
    incumbent; mean scheduler compute and wall seconds per run.

    :param long: See :func:`long_table`
    :param ours: See :func:`method_order`
    :param references: See :func:`method_order`
    :return: Summary DataFrame
    """
    out = []
    last = long["budget_point"].max()
    for (bench, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        ranks = average_ranks(g, group_cols=("task", "seed", "budget", "budget_point"))
        per_run = g[g["budget_point"] == last]
        for method in method_order(g["method"].unique(), ours, references):
            gm = g[g["method"] == method]
            pr = per_run[per_run["method"] == method]
            sp = pr["speedup"].dropna()
            row = {"benchmark": bench, "n_workers": n_workers, "method": method, "runs": len(pr)}
            for col, label in (("regret", "regret"), ("trained_regret", "trained regret")):
                for f, gf in gm.groupby("budget_point"):
                    row[f"{label}@{_pct(f)}"] = gf[col].mean()
            row["started"] = pr["trials_started"].mean()
            row["trained"] = pr["trials_trained"].mean()
            row["1st-epoch share"] = pr["first_epoch_share"].mean()
            row["stopped@1 share"] = pr["stopped_after_first_share"].mean()
            row["avg rank"] = ranks.get(method, np.nan)
            row["speed-up vs RS"] = sp.mean() if len(sp) else np.nan
            row["reached RS"] = (sp > 0).mean() if len(sp) else np.nan
            row["scheduler s/run"] = pr["scheduler_seconds"].mean()
            row["wall s/run"] = pr["wall_seconds"].mean()
            out.append(row)
    return pd.DataFrame(out)


def budget_use_table(
    long: pd.DataFrame, ours: Sequence[str] = OURS, references: Sequence[str] = REFERENCES
) -> pd.DataFrame:
    """
    Per (benchmark, n_workers, method, budget point): mean over runs of the
    budget-use counts and shares (:func:`~benchmarks.metrics.budget_use_at_fractions`).

    :param long: See :func:`long_table`
    :return: DataFrame with columns benchmark, n_workers, method, budget, runs,
        started, trained, 1st-epoch share, stopped@1 share
    """
    out = []
    for (bench, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        for method in method_order(g["method"].unique(), ours, references):
            for f, gf in g[g["method"] == method].groupby("budget_point"):
                out.append({
                    "benchmark": bench, "n_workers": n_workers, "method": method,
                    "budget": _pct(f), "runs": len(gf),
                    "started": gf["trials_started"].mean(),
                    "trained": gf["trials_trained"].mean(),
                    "1st-epoch share": gf["first_epoch_share"].mean(),
                    "stopped@1 share": gf["stopped_after_first_share"].mean(),
                })
    return pd.DataFrame(out)


def per_task_table(long: pd.DataFrame, budget_point: float = 1.0) -> pd.DataFrame:
    """
    :param long: See :func:`long_table`
    :param budget_point: Budget fraction
    :return: Per (benchmark, n_workers, task, method): seeds, mean anytime
        regret and mean fully-trained regret at ``budget_point``, mean trials
        trained to max_t there
    """
    g = long[np.isclose(long["budget_point"], budget_point)]
    out = (
        g.groupby(["benchmark", "n_workers", "task", "method"], sort=True)
        .agg(
            seeds=("seed", "nunique"),
            regret=("regret", "mean"),
            trained_regret=("trained_regret", "mean"),
            trained=("trials_trained", "mean"),
        )
        .reset_index()
    )
    return out


def per_task_markdown(
    per_task: pd.DataFrame,
    ours: Sequence[str] = OURS,
    references: Sequence[str] = REFERENCES,
    digits: int = 3,
) -> str:
    """
    :param per_task: See :func:`per_task_table`
    :return: One markdown table per regret kind: rows (benchmark, n_workers,
        task), one column per method
    """
    if per_task.empty:
        return "(no runs)"
    methods = method_order(per_task["method"].unique(), ours, references)
    parts = []
    for col, kind in REGRET_KINDS.items():
        wide = per_task.pivot_table(
            index=["benchmark", "n_workers", "task"], columns="method", values=col
        )
        wide = wide[[m for m in methods if m in wide.columns]].reset_index()
        wide.columns.name = None
        parts.append(f"### {kind.capitalize()} regret\n\n" + to_markdown(wide, digits))
    return "\n\n".join(parts)


def signed_rank_test(
    values: Sequence[float] | np.ndarray,
    reference: Sequence[float] | np.ndarray,
    tie_tolerance: float = TIE_TOLERANCE,
) -> dict[str, float]:
    """
    Paired comparison of regrets (lower is better) by the Wilcoxon signed-rank
    test, two-sided.

    * Differences ``values - reference`` with absolute value at most
      ``tie_tolerance`` are ties: they count in ``ties`` and are dropped before
      the test (Wilcoxon's own treatment of zero differences, scipy's
      ``zero_method="wilcox"``). Equal non-zero absolute differences get
      average ranks.
    * p-value from ``scipy.stats.wilcoxon`` with ``method="auto"``: the exact
      null distribution for up to 50 differences without tied absolute values,
      otherwise a permutation test (exhaustive, so deterministic, for up to 13
      differences) or the normal approximation.
    * No pairs: p = NaN. Only ties (no non-zero difference): p = 1, nothing
      speaks for a difference.

    :param values: Regrets of the method, one per pair
    :param reference: Regrets of the reference on the same pairs
    :param tie_tolerance: See above
    :return: ``pairs``, ``wins`` (method lower), ``ties``, ``losses``,
        ``mean_diff`` (mean of ``values - reference``; negative = method
        better) and ``p``
    """
    from scipy.stats import wilcoxon

    d = np.asarray(values, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    d = np.where(np.abs(d) <= tie_tolerance, 0.0, d)
    nonzero = d[d != 0]
    if len(d) == 0:
        p = np.nan
    elif len(nonzero) == 0:
        p = 1.0
    else:
        p = float(wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided").pvalue)
    return {
        "pairs": len(d),
        "wins": int((d < 0).sum()),
        "ties": int((d == 0).sum()),
        "losses": int((d > 0).sum()),
        "mean_diff": float(d.mean()) if len(d) else np.nan,
        "p": p,
    }


def paired_comparison(
    long: pd.DataFrame,
    ours: Sequence[str] = OURS,
    references: Sequence[str] = REFERENCES,
    ratio_to: str = RATIO_TO,
    per_task: bool = True,
) -> pd.DataFrame:
    """
    Each of our methods against the best reference, per (benchmark, n_workers,
    task or :data:`POOLED`, budget point, regret kind). The reference of a
    cell is the one of ``references`` with the lower mean regret over the
    pairs it shares with the method (first in ``references`` on equal means).

    :param long: See :func:`long_table`
    :param ours: Name prefixes of our methods
    :param references: Candidate references
    :param ratio_to: The ``ratio`` column is mean regret of the method divided by
        this method's, over the pairs both ran (NaN if absent or both 0, inf if
        only its mean is 0)
    :param per_task: Also compare per task (else pooled only)
    :return: DataFrame with columns benchmark, n_workers, task, budget, regret
        (kind), method, reference, pairs, mean, ref mean, diff, W/T/L, wins,
        ties, losses, p, ratio (to ``ratio_to``)
    """
    rows = []
    key = ["task", "seed", "budget"]
    for (bench, n_workers), g in long.groupby(["benchmark", "n_workers"], sort=True):
        present = set(g["method"])
        mine = [m for m in method_order(present, ours, references) if m.startswith(tuple(ours))]
        if not mine or not present & set(references):
            continue
        scopes = [(POOLED, g)]
        if per_task:
            scopes += list(g.groupby("task", sort=True))
        for scope, gs in scopes:
            for f, gb in gs.groupby("budget_point", sort=True):
                for col, kind in REGRET_KINDS.items():
                    wide = gb.pivot_table(index=key, columns="method", values=col)
                    for m in mine:
                        row = _paired_row(wide, m, references, ratio_to)
                        if row is not None:
                            rows.append({
                                "benchmark": bench, "n_workers": n_workers, "task": scope,
                                "budget": _pct(f), "regret": kind, **row,
                            })
    return pd.DataFrame(rows)


def _paired_row(
    wide: pd.DataFrame, method: str, references: Sequence[str], ratio_to: str
) -> dict[str, Any] | None:
    """One comparison on a (pairs x methods) table of regrets; None if nothing to pair."""
    if method not in wide.columns:
        return None
    best = None
    for ref in references:
        if ref not in wide.columns or ref == method:
            continue
        pairs = wide[[method, ref]].dropna()
        if len(pairs) and (best is None or pairs[ref].mean() < best[1][best[0]].mean()):
            best = (ref, pairs)
    if best is None:
        return None
    ref, pairs = best
    test = signed_rank_test(pairs[method], pairs[ref])
    ratio = np.nan
    if ratio_to in wide.columns and ratio_to != method:
        both = wide[[method, ratio_to]].dropna()
        num, den = both[method].mean(), both[ratio_to].mean()
        if len(both) and den > 0:
            ratio = num / den
        elif len(both) and num > 0:
            ratio = np.inf
    return {
        "method": method, "reference": ref, "pairs": test["pairs"],
        "mean": pairs[method].mean(), "ref mean": pairs[ref].mean(), "diff": test["mean_diff"],
        "W/T/L": f"{test['wins']}/{test['ties']}/{test['losses']}",
        "wins": test["wins"], "ties": test["ties"], "losses": test["losses"],
        "p": test["p"], f"ratio to {ratio_to}": ratio,
    }


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


def paired_markdown(
    paired: pd.DataFrame,
    ratio_to: str = RATIO_TO,
    ours: Sequence[str] = OURS,
    references: Sequence[str] = REFERENCES,
) -> str:
    """
    :param paired: See :func:`paired_comparison`
    :return: The pooled rows (all budget points), then the per-task rows at the
        full budget (all points are in ``paired.csv``)
    """
    if paired.empty:
        return (
            f"(no paired comparison: it needs runs of a method starting with {' or '.join(ours)} "
            f"and of {' or '.join(references)} on the same benchmark and number of workers)"
        )
    cols = ["benchmark", "n_workers", "task", "budget", "regret", "method", "reference",
            "pairs", "mean", "ref mean", "diff", "W/T/L", "p", f"ratio to {ratio_to}"]
    pooled = paired[paired["task"] == POOLED]
    per_task = paired[(paired["task"] != POOLED) & (paired["budget"] == "100%")]
    text = (
        "Each of our methods against the better of the references in the same cell (lower mean "
        "regret over the pairs compared). Pair = (task, seed, budget). diff = mean(method - "
        "reference), negative = ours better; W/T/L = pairs where ours is lower / equal (|d| <= "
        f"{TIE_TOLERANCE:g}) / higher; p = two-sided Wilcoxon signed-rank test on the non-tied "
        f"pairs (1 if all are tied); ratio to {ratio_to} = mean regret / {ratio_to}'s mean "
        "regret on the pairs both ran.\n\n"
        f"## Pooled over tasks\n\n{to_markdown(pooled[cols])}"
    )
    if not per_task.empty:
        text += f"\n\n## Per task, 100 % of the budget\n\n{to_markdown(per_task[cols])}"
    return text


def make_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    baseline: str = BASELINE,
    *,
    n_workers: Sequence[int] | None = None,
    fractions: Sequence[float] = FRACTIONS,
    ours: Sequence[str] = OURS,
    references: Sequence[str] = REFERENCES,
    plots: bool = True,
) -> str:
    """
    Writes to ``out_dir``: ``summary.md`` (summary and budget-use tables),
    ``per_task.md`` (both regrets at 100 % per task), ``paired.md`` (ours
    against the best reference), the CSVs ``summary.csv``, ``budget_use.csv``,
    ``per_task.csv``, ``paired.csv``, ``long.csv`` (one row per run and budget
    point), and the plots.

    :param results_dir: Root folder of results
    :param out_dir: Where to write (default: ``results_dir``)
    :param seeds: Only runs with these seeds (default: all)
    :param methods: Only these methods (default: all)
    :param baseline: Method the speed-up is measured against
    :param n_workers: Only runs with these numbers of workers (default: all)
    :param fractions: Budget fractions of the tables (the last one is "the end")
    :param ours: See :func:`paired_comparison`
    :param references: See :func:`paired_comparison`
    :param plots: Whether to draw the plots
    :return: The summary markdown followed by the pooled paired comparison
    """
    from benchmarks.plots import plot_regret_curves, plot_regret_vs_time

    out_dir = Path(out_dir or results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [
        r
        for r in load_runs(results_dir)
        if (seeds is None or r.summary["seed"] in seeds)
        and (methods is None or r.summary["method"] in methods)
        and (n_workers is None or r.summary["n_workers"] in n_workers)
    ]
    if not runs:
        return "(no finished runs)"
    long = long_table(runs, fractions, baseline=baseline)
    table = summary_table(long, ours, references)
    use = budget_use_table(long, ours, references)
    per_task = per_task_table(long, max(fractions))
    paired = paired_comparison(long, ours, references)
    md = (
        f"{EXPLANATION} Speed-up vs {baseline}: unreached = 0.\n\n"
        + to_markdown(table)
        + "\n\n## Budget use\n\n"
        + to_markdown(use)
    )
    (out_dir / "summary.md").write_text(md + "\n")
    (out_dir / "per_task.md").write_text(
        f"Mean over seeds at {_pct(max(fractions))} of the budget. {EXPLANATION}\n\n"
        + per_task_markdown(per_task, ours, references)
        + "\n"
    )
    paired_md = paired_markdown(paired, ours=ours, references=references)
    (out_dir / "paired.md").write_text(paired_md + "\n")
    table.to_csv(out_dir / "summary.csv", index=False)
    use.to_csv(out_dir / "budget_use.csv", index=False)
    per_task.to_csv(out_dir / "per_task.csv", index=False)
    paired.to_csv(out_dir / "paired.csv", index=False)
    long.to_csv(out_dir / "long.csv", index=False)
    if plots:
        plot_regret_curves(runs, out_dir)
        plot_regret_curves(runs, out_dir, column="trained_incumbent")
        plot_regret_vs_time(runs, out_dir)
    return md + "\n\n" + paired_md.split("\n\n## Per task")[0]
