"""Where would ``normalisation_scores="trials_if_alike"`` have acted in recorded runs?

Replays the score stream of each recorded run (``results.csv.gz`` of ``run_benchmarks.py``, in
arrival order, first ``--max-results`` results) through the surrogates' outcome transform
(:class:`~syne_dyhpo.surrogates.outcome_transform.ScoreTransform`) and lists, per run, the
prefixes (of two scores or more: the surrogates' first fit) at which the transform fitted on
every score is degenerate (only its resolution bound sets the scale), and those among them at
which each trial's best score differs from every score (as sorted values: the transform
depends on no order). A run without the latter (no degenerate prefix, or only ones where every
trial has reported once) gets the same transform at every fit with ``"trials_if_alike"`` as
with ``"epochs"``, so the same decisions and the same results::

    PYTHONPATH=. python benchmarks/normalisation_replay.py R --methods DyHPO DeepPowerLaw \
        --benchmarks lcbench lcbench-extra

(``R``: a results folder whose runs were recorded with ``"epochs"``.)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.runner import RESULTS_FILE, RUN_FILE
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


#: the surrogates are first fitted at two observations (``SurrogatePolicy.min_observations``)
MIN_SCORES = 2


@dataclass(frozen=True)
class Replay:
    """One run's replay: the degenerate prefixes (numbers of scores) and those among them at
    which each trial's best score differs from every score."""

    run_dir: Path
    degenerate: tuple[int, ...]
    differing: tuple[int, ...]


def replay_run(run_dir: Path, max_results: int = 1000) -> Replay:
    """Replays one run (see the module docstring)."""
    summary = json.loads((run_dir / RUN_FILE).read_text())
    definition = summary["definition"]
    results = pd.read_csv(run_dir / RESULTS_FILE).head(max_results)
    sign = -1.0 if definition["do_minimize"] else 1.0
    scores = sign * results[definition["metric"]].to_numpy(dtype=float)
    scores = np.where(np.isfinite(scores), scores, -np.inf)
    trial_ids = results["trial_id"].to_numpy()
    degenerate, differing = [], []
    best: dict[int, float] = {}
    for n in range(1, len(scores) + 1):
        if np.isfinite(scores[n - 1]):
            best[trial_ids[n - 1]] = max(best.get(trial_ids[n - 1], -np.inf), scores[n - 1])
        if n < MIN_SCORES:
            continue
        transform = ScoreTransform()
        transform.fit(scores[:n])
        if transform.degenerate:
            degenerate.append(n)
            finite = np.sort(scores[:n][np.isfinite(scores[:n])])
            if not np.array_equal(finite, np.sort(np.fromiter(best.values(), dtype=float))):
                differing.append(n)
    return Replay(run_dir, tuple(degenerate), tuple(differing))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir")
    parser.add_argument("--methods", nargs="+", required=True)
    parser.add_argument("--benchmarks", nargs="+", required=True, help="benchmark folders of the results dir")
    parser.add_argument("--max-results", type=int, default=1000)
    args = parser.parse_args(argv)
    for benchmark in args.benchmarks:
        for method in args.methods:
            run_dirs = sorted(p.parent for p in Path(args.results_dir, benchmark).glob(f"*/{method}/*/{RUN_FILE}"))
            replays = [replay_run(d, args.max_results) for d in run_dirs]
            acted = [r for r in replays if r.differing]
            print(f"{benchmark} {method}: {len(replays)} runs, {sum(bool(r.degenerate) for r in replays)} with a "
                  f"degenerate prefix, {len(acted)} where each trial's best differs there")
            for r in acted:
                print(f"  {r.run_dir}: from {r.differing[0]} scores on ({len(r.differing)} prefixes)")


if __name__ == "__main__":
    main()
