"""Record every decision of a scheduler on simulator runs, and compare two recordings.

A refactor must keep every decision identical under the same seeds. This script runs the
given methods on the given shipped tasks through a real ``Tuner`` on Syne Tune's simulator
(:func:`benchmarks.runner.run_one`) and records, in call order, each ``suggest()`` (the new
config, or the trial it resumes) and each ``on_trial_result`` (trial, epoch, the returned
CONTINUE / PAUSE / STOP). ``--compare A B`` reports the first difference between two
recordings, or that they are identical.

Example (from the repository root)::

    PYTHONPATH=. python benchmarks/decision_trace.py --out /tmp/before
    # ... change the code ...
    PYTHONPATH=. python benchmarks/decision_trace.py --out /tmp/after
    PYTHONPATH=. python benchmarks/decision_trace.py --compare /tmp/before /tmp/after
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks import runner  # noqa: E402

DEFAULT_SOURCES = [str(REPO / "benchmarks/data/lcbench"), str(REPO / "benchmarks/data/taskset")]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: repr(v)))


class _Recording(runner.TimedScheduler):
    """TimedScheduler that also appends every decision to ``self.events``."""

    def __init__(self, scheduler):
        super().__init__(scheduler)
        self.events: list[list[Any]] = []

    def suggest(self):
        suggestion = super().suggest()
        if suggestion is None:
            self.events.append(["suggest", None])
        elif suggestion.spawn_new_trial_id:
            self.events.append(["new", _jsonable(suggestion.config)])
        else:
            self.events.append(["resume", suggestion.checkpoint_trial_id, _jsonable(suggestion.config)])
        return suggestion

    def on_trial_result(self, trial, result):
        decision = super().on_trial_result(trial, result)
        self.events.append(["result", trial.trial_id, _jsonable(result.get("epoch")), decision])
        return decision

    def on_trial_complete(self, trial, result):
        self.events.append(["complete", trial.trial_id])
        return super().on_trial_complete(trial, result)


def record(sources: list[str], methods: list[str], seeds: list[int], workers: list[int],
           budget: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    recordings: list[_Recording] = []
    original = runner.TimedScheduler

    def make(scheduler):
        rec = _Recording(scheduler)
        recordings.append(rec)
        return rec

    runner.TimedScheduler = make
    try:
        for source in sources:
            for task in _tasks(source):
                for method in methods:
                    for n in workers:
                        for seed in seeds:
                            spec = runner.RunSpec(method, source, task, seed, budget, n)
                            with tempfile.TemporaryDirectory() as tmp:
                                runner.run_one(spec, tmp)
                            name = f"{Path(source).name}-{task}-{method}-w{n}-s{seed}.json"
                            events = recordings[-1].events
                            (out / name).write_text(json.dumps(events))
                            print(f"{name}: {len(events)} events, "
                                  f"{sum(e[0] == 'result' for e in events)} results")
    finally:
        runner.TimedScheduler = original


def _tasks(source: str) -> list[str]:
    from benchmarks.blackboxes import list_tasks

    return list_tasks(source)


def compare(a: Path, b: Path) -> int:
    names_a = sorted(p.name for p in a.glob("*.json"))
    names_b = sorted(p.name for p in b.glob("*.json"))
    if names_a != names_b:
        print(f"different runs: {sorted(set(names_a) ^ set(names_b))}")
        return 1
    differing = 0
    for name in names_a:
        ea = json.loads((a / name).read_text())
        eb = json.loads((b / name).read_text())
        first = next((i for i, (x, y) in enumerate(zip(ea, eb)) if x != y), None)
        if first is None and len(ea) == len(eb):
            print(f"{name}: identical ({len(ea)} events)")
            continue
        differing += 1
        first = min(len(ea), len(eb)) if first is None else first
        print(f"{name}: DIFFERENT at event {first}: {ea[first:first + 1]} vs {eb[first:first + 1]}")
    print(f"{len(names_a) - differing} of {len(names_a)} runs identical")
    return 1 if differing else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="folder to write the recordings to")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="two recording folders")
    p.add_argument("--data", nargs="+", default=DEFAULT_SOURCES)
    p.add_argument("--methods", nargs="+", default=["DyHPO", "DeepPowerLaw"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--n-workers", nargs="+", type=int, default=[1, 4])
    p.add_argument("--budget", type=int, default=300, help="epochs per run")
    args = p.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        p.error("--out or --compare is required")
    runner._quiet_logging()
    record(args.data, args.methods, args.seeds, args.n_workers, args.budget, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
