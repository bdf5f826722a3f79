"""What a variant's epochs are worth in anytime regret, against a reference on the same
task-seed runs (``run_benchmarks.py`` results). Three figures, for each budget point ``at``
(epochs):

- **matching epochs**: after how many epochs the reference's mean anytime regret first reaches
  the variant's after ``at`` (fewer than ``at``: the variant's run is worth that many of the
  reference's epochs);
- **epochs on trained trials**: of each run's first ``at`` epochs, how many went to trials
  trained to ``max_t`` by then (mean per run);
- **shifted comparison**: the variant's anytime regret after ``at - k`` epochs against the
  reference's after ``at`` (Wilcoxon signed-rank over the pairs,
  ``benchmarks.report.signed_rank_test``): how many epochs of the variant's exploration a run
  can give up before it is behind the reference beyond seed noise. With the variant = a method
  that explores as the reference does, this bounds what any rule that spends ``k`` epochs on
  something worth nothing in anytime regret would cost.

::

    PYTHONPATH=. python benchmarks/exploration_cost.py R DyHPO:DyHPO-default-no-completion \\
        DyHPO-default-no-completion:DyHPO-v0.1 --at 250 500 --shifts 0 25 35 50 65 80

Runs are paired by (benchmark, task, seed, budget, workers); only pairs both have are used.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Sequence

import numpy as np

from benchmarks.report import RunRecord, load_runs, signed_rank_test


def paired_runs(runs: Sequence[RunRecord], variant: str, reference: str) -> list[tuple[RunRecord, RunRecord]]:
    """``(variant's run, reference's run)`` for every group (task, seed, budget, workers) both
    have, in a fixed order."""
    by_group: dict[tuple, dict[str, RunRecord]] = defaultdict(dict)
    for run in runs:
        if run.summary["method"] in (variant, reference):
            by_group[run.group][run.summary["method"]] = run
    return [(g[variant], g[reference]) for _, g in sorted(by_group.items()) if len(g) == 2]


def matching_epochs(pairs: Sequence[tuple[RunRecord, RunRecord]], at: int) -> int | None:
    """The fewest epochs after which the reference's mean anytime regret is at most the
    variant's after ``at`` (None if not within ``2 * at`` epochs)."""
    target = np.mean([variant.regret_curve([at])[0] for variant, _ in pairs])
    epochs = np.arange(1, 2 * at + 1)
    reference = np.mean([ref.regret_curve(epochs) for _, ref in pairs], axis=0)
    reached = np.flatnonzero(reference <= target)
    return int(epochs[reached[0]]) if len(reached) else None


def epochs_on_trained(run: RunRecord, at: int) -> int:
    """Of the run's first ``at`` epochs, those spent on trials trained to ``max_t`` within them."""
    first = run.trajectory.iloc[:at]
    trained = first.loc[first["level"] >= run.summary["definition"]["max_t"], "trial_id"].unique()
    return int(first["trial_id"].isin(trained).sum())


def shifted_comparison(
    pairs: Sequence[tuple[RunRecord, RunRecord]], at: int, shifts: Sequence[int]
) -> list[dict[str, float]]:
    """For each ``k`` in ``shifts``: the variant's mean anytime regret after ``at - k`` epochs,
    the reference's after ``at``, and the signed-rank test of the paired differences."""
    reference = np.array([ref.regret_curve([at])[0] for _, ref in pairs])
    rows = []
    for k in shifts:
        if not 0 <= k < at:
            raise ValueError(f"shifts must be in [0, at={at}), got {k}")
        variant = np.array([run.regret_curve([at - k])[0] for run, _ in pairs])
        test = signed_rank_test(variant, reference)
        rows.append(dict(shift=k, variant=float(variant.mean()), reference=float(reference.mean()), p=test["p"]))
    return rows


def report(runs: Sequence[RunRecord], variant: str, reference: str, budget_points: Sequence[int], shifts: Sequence[int]) -> str:
    """The three figures of the module docstring as text lines."""
    pairs = paired_runs(runs, variant, reference)
    if not pairs:
        return f"(no common runs of {variant} and {reference})"
    lines = [f"{variant} against {reference}: {len(pairs)} pairs"]
    for at in budget_points:
        variant_regret = np.mean([run.regret_curve([at])[0] for run, _ in pairs])
        lines.append(
            f"  after {at} epochs: {variant} {variant_regret:.4f}, reached by {reference} after "
            f"{matching_epochs(pairs, at)} epochs; epochs on trials trained to max_t: "
            f"{np.mean([epochs_on_trained(run, at) for run, _ in pairs]):.1f} against "
            f"{np.mean([epochs_on_trained(ref, at) for _, ref in pairs]):.1f}"
        )
        for row in shifted_comparison(pairs, at, shifts):
            lines.append(
                f"    {variant} after {at - row['shift']} ({row['shift']} fewer): {row['variant']:.4f} "
                f"against {row['reference']:.4f}, p = {row['p']:.3f}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results_dir", help="--results-dir of run_benchmarks.py")
    p.add_argument("comparisons", nargs="+", help="VARIANT:REFERENCE")
    p.add_argument("--at", nargs="+", type=int, default=[250, 500], help="budget points in epochs")
    p.add_argument("--shifts", nargs="+", type=int, default=[0, 25, 50], help="epochs the variant gives up")
    a = p.parse_args(argv)
    runs = load_runs(a.results_dir)
    for comparison in a.comparisons:
        variant, sep, reference = comparison.partition(":")
        if not sep or not variant or not reference:
            raise SystemExit(f"comparisons must be VARIANT:REFERENCE, got {comparison!r}")
        print(report(runs, variant, reference, a.at, a.shifts))


if __name__ == "__main__":
    main()
