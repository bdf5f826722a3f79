"""Which path of a decision resumed which trials, on one simulated run (a diagnosis, not a test).

Runs one run of the benchmark grid (``benchmarks/runner.py``; results go to ``--results-dir``)
and counts the scheduler's decisions by path: a new configuration started, a trial resumed by
the completion (:meth:`~syne_dyhpo.core.completion.CompletionRun.choose`), or a trial resumed
by the acquisition (or a successive-halving promotion). Resumes are split by whether the
trial's best value so far lies within ``--within`` of ``--near``: e.g. chance level of a binary
task's log-loss, ln 2 = 0.6931::

    PYTHONPATH=. python benchmarks/decision_paths.py --data ../shared/data/taskset \
        --task FixedTextRNNClassification_imdb_patch32_IRNN64_relu_last_bs128 \
        --method DeepPowerLaw --seed 2 --n-workers 4 --near 0.6931 --within 0.002

Decisions are counted as made; with several workers a few are made again when the trial they
chose was taken meanwhile, so the counts exceed the epochs run.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import tempfile
from typing import Iterator

from benchmarks.runner import RunSpec, run_one
from syne_dyhpo.core import completion, decision


@contextlib.contextmanager
def counting_decisions(near: float, within: float) -> Iterator[collections.Counter]:
    """Counts the decisions of every :class:`~syne_dyhpo.core.decision.DecisionMaker` while
    active, by path and by whether the resumed trial's best value is within ``within`` of
    ``near``."""
    counts: collections.Counter = collections.Counter()
    decide, choose = decision.DecisionMaker.decide, completion.CompletionRun.choose
    chosen: dict[int, int | None] = {}  # id of a CompletionRun -> the trial it chose last

    def recording_choose(self, records, num_workers=1):
        record = choose(self, records, num_workers)
        chosen[id(self)] = None if record is None else record.trial_id
        return record

    def recording_decide(self, *args, **kwargs):
        chosen[id(self.completion)] = None
        made = decide(self, *args, **kwargs)
        if made is None:
            return made
        if made.kind is decision.DecisionKind.START:
            counts["start"] += 1
            return made
        record = self.observations.trials[made.trial_id]
        value = self.observations.sign * self.observations.best_of(record)
        kind = "near" if abs(value - near) <= within else "elsewhere"
        path = "completion" if chosen[id(self.completion)] == made.trial_id else "acquisition"
        counts[f"resume by {path}, best value {kind}"] += 1
        return made

    decision.DecisionMaker.decide = recording_decide
    completion.CompletionRun.choose = recording_choose
    try:
        yield counts
    finally:
        decision.DecisionMaker.decide, completion.CompletionRun.choose = decide, choose


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="serialized blackbox folder or repository name")
    parser.add_argument("--task", required=True)
    parser.add_argument("--method", required=True, help="a method of benchmarks/runner.py")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-workers", type=int, default=1)
    parser.add_argument("--budget-epochs", type=int, default=1000)
    parser.add_argument("--near", type=float, required=True, help="value the resumed trials are compared with")
    parser.add_argument("--within", type=float, required=True, help="largest distance counted as near")
    parser.add_argument("--results-dir", default=None, help="where the run goes (default: a temporary folder)")
    args = parser.parse_args(argv)
    spec = RunSpec(args.method, args.data, args.task, args.seed, args.budget_epochs, args.n_workers)
    with tempfile.TemporaryDirectory() as scratch, counting_decisions(args.near, args.within) as counts:
        summary = run_one(spec, args.results_dir or scratch, overwrite=True)
    print(f"{args.method} seed {args.seed}, {args.n_workers} worker(s): regret at 25/50/100 % "
          + " / ".join(f"{summary['regret'][k]:.3f}" for k in ("0.25", "0.5", "1.0")))
    for key, count in sorted(counts.items()):
        print(f"  {key}: {count}")


if __name__ == "__main__":
    main()
