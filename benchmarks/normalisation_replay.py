"""Where would ``normalisation_scores="trials_if_alike"`` have acted in recorded runs?

Replays the score stream of each recorded run (``results.csv.gz`` of ``run_benchmarks.py``, in
arrival order, first ``--max-results`` results) through the surrogates' outcome transform
(:class:`~syne_dyhpo.surrogates.outcome_transform.ScoreTransform`) and lists, per run, the
prefixes (from the surrogates' first fit on, ``SurrogatePolicy.min_observations``) at which the
transform fitted on every score is degenerate (only its resolution bound sets the scale), and
those among them at which the scores ``"trials_if_alike"`` chooses differ from every score (as
sorted values: the transform depends on no order). A run without the latter (no degenerate prefix, or only ones where every
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
from syne_dyhpo.core.observations import Observations
from syne_dyhpo.core.policy import SurrogatePolicy
from syne_dyhpo.surrogates.outcome_transform import ScoreTransform


@dataclass(frozen=True)
class Replay:
    """One run's replay: the degenerate prefixes (numbers of scores) and those among them at
    which each trial's best score differs from every score."""

    run_dir: Path
    degenerate: tuple[int, ...]
    differing: tuple[int, ...]


def replay_run(run_dir: Path, max_results: int = 1000) -> Replay:
    """Replays one run (see the module docstring) through the scheduler's own
    :class:`~syne_dyhpo.core.observations.Observations` and
    :meth:`~syne_dyhpo.core.policy.SurrogatePolicy.transform_scores`."""
    definition = json.loads((run_dir / RUN_FILE).read_text())["definition"]
    results = pd.read_csv(run_dir / RESULTS_FILE).head(max_results)
    observations = Observations(max_t=definition["max_t"], do_minimize=definition["do_minimize"])
    policy = SurrogatePolicy(surrogate=None, acquisition=None, schedule=None, normalisation_scores="trials_if_alike")
    degenerate, differing = [], []
    rows = results[["trial_id", definition["time_attr"], definition["metric"]]].itertuples(index=False)
    for n, (trial_id, epoch, value) in enumerate(rows, start=1):
        if trial_id not in observations.trials:
            observations.add_trial(trial_id, {}, np.zeros(1))  # configurations play no part here
        observations.add_result(trial_id, int(epoch), value)
        if not policy.ready(observations):
            continue
        every = observations.all_scores()
        probe = ScoreTransform()
        probe.fit(every)
        if probe.degenerate:
            degenerate.append(n)
            chosen = policy.transform_scores(observations)
            if not np.array_equal(np.sort(every[np.isfinite(every)]), np.sort(chosen[np.isfinite(chosen)])):
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
