"""Run a grid of simulated benchmark runs and write a report.

Sources are the data the repo ships (default), serialized blackbox folders (--data), or
blackboxes of Syne Tune's repository by name, read offline from ~/.blackbox-repository or
--repository (e.g. ``--blackbox fcnet --tasks protein_structure naval_propulsion``).

Example (from the repository root)::

    PYTHONPATH=. python benchmarks/run_benchmarks.py \\
        --methods RandomSearch ASHA BOHB --seeds 0 1 2 --n-workers 1 4 --n-jobs 2

Results of finished runs are reused (the grid is resumable). The report (summary.md,
per_task.md, paired.md, CSVs, plots) groups runs by benchmark and number of workers.

``--protocol wallclock`` runs the wall-clock protocol instead (:mod:`benchmarks.wallclock`):
the budget is simulated time (the epoch budget times the task's mean epoch time, divided by the
number of workers) and every job start or resume costs each ``--start-delay`` (multiples of the
task's median epoch time); its runs go to ``wallclock-d{delay}/`` of --results-dir and its
report is ``wallclock.md``::

    PYTHONPATH=. python benchmarks/run_benchmarks.py --protocol wallclock --start-delay 0 1 10 \\
        --methods ASHA BOHB DyHPO DeepPowerLaw --seeds 0 --results-dir results/wallclock
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# run as a script, sys.path[0] is benchmarks/ itself, whose modules have generic names
# (runner, metrics, report): import them as the benchmarks package from the repo root instead
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks.blackboxes import (  # noqa: E402
    KNOWN_BLACKBOXES,
    REPOSITORY_ENV,
    BlackboxNotAvailableError,
    is_serialized_folder,
    list_tasks,
    load_benchmark,
)
from benchmarks.report import OURS, REFERENCES, make_report  # noqa: E402
from benchmarks.runner import METHODS, make_grid, run_grid  # noqa: E402
from benchmarks.wallclock import EPOCHS, PROTOCOLS, START_DELAYS, WALLCLOCK  # noqa: E402

# the small subsets the repo ships (2 LCBench + 2 TaskSet tasks, benchmarks/data/README.md)
DEFAULT_DATA = [str(REPO / "benchmarks/data/lcbench"), str(REPO / "benchmarks/data/taskset")]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", nargs="+", default=None,
                   help="serialized blackbox folders or repository names (lcbench, fcnet, ...); "
                        "default: the data the repo ships, unless --blackbox is given")
    p.add_argument("--blackbox", nargs="+", default=None, choices=sorted(KNOWN_BLACKBOXES),
                   help="blackboxes of Syne Tune's repository by name (same as --data NAME), read "
                        "offline from ~/.blackbox-repository or --repository")
    p.add_argument("--repository", default=None,
                   help=f"folder to read --blackbox names from instead of ~/.blackbox-repository "
                        f"(sets {REPOSITORY_ENV}), e.g. synthetic data of benchmarks/synthetic.py")
    p.add_argument("--tasks", nargs="*", default=None,
                   help="task names to run (default: all tasks of each source)")
    p.add_argument("--methods", nargs="+", default=["RandomSearch", "ASHA", "BOHB"],
                   help=f"methods, among {sorted(METHODS)}")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--budget-factor", type=float, default=20.0,
                   help="epoch budget = factor x max fidelity of the task")
    p.add_argument("--protocol", choices=PROTOCOLS, default=EPOCHS,
                   help="epochs: the budget counts epochs, job starts are free (the papers'); "
                        "wallclock: the budget is simulated time and every job start costs "
                        "--start-delay (benchmarks/wallclock.py)")
    p.add_argument("--start-delay", type=float, nargs="+", default=None,
                   help=f"wallclock: delays of a job start or resume, in multiples of the task's "
                        f"median epoch time; one grid each (default: {' '.join(f'{d:g}' for d in START_DELAYS)})")
    p.add_argument("--n-workers", type=int, nargs="+", default=None,
                   help="simulated workers; several values run the grid for each (default: 1). "
                        "The report covers these worker counts (default: all in --results-dir)")
    p.add_argument("--n-jobs", type=int, default=None, help="parallel processes (default: cores)")
    p.add_argument("--results-dir", default=str(REPO / "benchmarks/results"))
    p.add_argument("--report-dir", default=None,
                   help="where the table and plots go (default: --results-dir)")
    p.add_argument("--baseline", default="RandomSearch",
                   help="method the speed-up is measured against (a random search)")
    p.add_argument("--ours", nargs="+", default=list(OURS),
                   help="name prefixes of the methods compared with the references in paired.md")
    p.add_argument("--references", nargs="+", default=list(REFERENCES),
                   help="methods ours are compared with (the better one per cell)")
    p.add_argument("--report-only", action="store_true",
                   help="only aggregate the finished runs in --results-dir")
    p.add_argument("--tuner-sleep-time", type=float, default=None,
                   help="simulated seconds per Tuner loop (default: 0.1 x median epoch time)")
    p.add_argument("--charge-scheduler-time", action="store_true",
                   help="add the scheduler's real compute time to simulated time (Syne Tune's "
                        "default; runs then depend on machine load). Use a separate --results-dir")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    args.data = _sources(args)
    if args.budget_factor <= 0:
        print(f"--budget-factor must be > 0, got {args.budget_factor}", file=sys.stderr)
        return 2
    if args.start_delay is not None and args.protocol != WALLCLOCK:
        print(f"--start-delay {' '.join(f'{d:g}' for d in args.start_delay)}: only with --protocol "
              f"{WALLCLOCK} (the epoch protocol's starts are free)", file=sys.stderr)
        return 2
    delays = [] if args.protocol != WALLCLOCK else list(args.start_delay or START_DELAYS)
    bad = [d for d in delays if not (d >= 0 and d < float("inf"))]
    if bad:
        print(f"--start-delay {bad[0]:g}: must be finite and >= 0", file=sys.stderr)
        return 2
    if args.repository is not None:
        if not Path(args.repository).is_dir():
            print(f"--repository {args.repository}: not a folder", file=sys.stderr)
            return 2
        # an environment variable: the grid's spawned worker processes inherit it
        os.environ[REPOSITORY_ENV] = str(Path(args.repository).resolve())
    unknown = set(args.methods) - set(METHODS)
    if unknown:
        print(f"Unknown methods {sorted(unknown)}; known: {sorted(METHODS)}", file=sys.stderr)
        return 2
    for source in args.data:
        if not (is_serialized_folder(source) or source in KNOWN_BLACKBOXES):
            print(f"--data {source}: neither a folder in Syne Tune's serialized blackbox layout nor one "
                  f"of {sorted(KNOWN_BLACKBOXES)}", file=sys.stderr)
            return 2
    pairs, budgets = [], {}
    try:
        tasks_of = {source: list_tasks(source) for source in args.data}
    except BlackboxNotAvailableError as ex:
        print(str(ex), file=sys.stderr)
        return 2
    unknown_tasks = set(args.tasks or []) - {t for tasks in tasks_of.values() for t in tasks}
    if unknown_tasks:
        print(f"--tasks {sorted(unknown_tasks)}: not a task of {args.data}; tasks: {tasks_of}", file=sys.stderr)
        return 2
    for source in args.data:
        source = os.path.normpath(source) if os.path.exists(source) else source
        for task in list_tasks(source):
            if args.tasks and task not in args.tasks:
                continue
            d, _ = load_benchmark(source, task=task)
            pairs.append((source, task))
            budgets[(source, task)] = int(round(args.budget_factor * d.max_t))
    if not pairs:
        print("No (source, task) selected", file=sys.stderr)
        return 2
    errors = []
    if not args.report_only:
        workers = args.n_workers or [1]
        specs = [s for n in workers for s in make_grid(pairs, args.methods, args.seeds, budgets, n,
                                                       protocol=args.protocol, start_delays=delays or (0.0,))]
        print(f"{len(specs)} runs ({len(pairs)} tasks x {len(args.methods)} methods x "
              f"{len(args.seeds)} seeds x {len(workers)} worker counts {workers}"
              + (f" x {len(delays)} start delays {delays})" if delays else ")"))
        _, errors = run_grid(specs, args.results_dir, n_jobs=args.n_jobs,
                             tuner_sleep_time=args.tuner_sleep_time,
                             charge_scheduler_time=args.charge_scheduler_time)
    report_dir = args.report_dir or args.results_dir
    if args.protocol == WALLCLOCK:
        return _wallclock_report(args, report_dir, errors)
    print(make_report(args.results_dir, report_dir, seeds=args.seeds, methods=args.methods,
                      baseline=args.baseline, n_workers=args.n_workers, ours=args.ours,
                      references=args.references))
    print(f"\nTables (summary.md, per_task.md, paired.md, CSVs) and plots written to {report_dir}")
    for spec, msg in errors:
        print(f"FAILED {spec}: {msg.splitlines()[0]}", file=sys.stderr)
    return 1 if errors else 0


def _wallclock_report(args: argparse.Namespace, report_dir: str, errors: list) -> int:
    """Writes ``wallclock.md`` (the wall-clock section of RESULTS.md) of the runs in
    --results-dir of the selected methods, seeds and worker counts, and prints it."""
    from benchmarks.report import load_runs, wallclock_long_table
    from benchmarks.results import _as_families, wallclock_sections

    runs = [r for r in _as_families(load_runs(args.results_dir, protocol=WALLCLOCK))
            if r.summary["method"] in args.methods and r.summary["seed"] in args.seeds
            and (args.n_workers is None or r.summary["n_workers"] in args.n_workers)]
    for spec, msg in errors:
        print(f"FAILED {spec}: {msg.splitlines()[0]}", file=sys.stderr)
    if not runs:
        print(f"--results-dir {args.results_dir}: no finished wall-clock runs of these methods and seeds",
              file=sys.stderr)
        return 1
    text = "\n\n".join(wallclock_sections(wallclock_long_table(runs), args.results_dir)) + "\n"
    Path(report_dir).mkdir(parents=True, exist_ok=True)
    (Path(report_dir) / "wallclock.md").write_text(text)
    print(text)
    print(f"Wall-clock tables written to {Path(report_dir) / 'wallclock.md'}")
    return 1 if errors else 0


def _sources(args: argparse.Namespace) -> list[str]:
    """--blackbox names then --data entries; the shipped data if neither is given."""
    if args.data is None and args.blackbox is None:
        return list(DEFAULT_DATA)
    return list(args.blackbox or []) + list(args.data or [])


if __name__ == "__main__":
    sys.exit(main())
