"""How the table restriction of Syne Tune's baselines picks rows (see ``TableRestricted``).

For each task, a RandomSearch draws ``--picks`` new configurations through ``TableRestricted``
with ``sampling="nearest"`` (each draw mapped to its nearest unused row) and with
``sampling="uniform"`` (a uniformly random unused row, what our schedulers get from
``candidate_configs``), for ``--seeds`` seeds. Printed per task and mode:

- ``overlap``: mean fraction of rows that two seeds' picks share (uniform: about picks / rows);
- ``best row picked``: fraction of seeds whose picks include the table's best row (best value at
  any fidelity; uniform: about picks / rows);
- ``top-10 rows picked``: mean number of the 10 best rows among the picks.

Example (from the repository root)::

    PYTHONPATH=. python benchmarks/check_table_sampling.py --data ../shared/data/taskset --picks 200
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# run as a script, sys.path[0] is benchmarks/ itself, whose modules have generic names
# (runner, metrics, report): import them as the benchmarks package from the repo root instead
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from syne_tune.optimizer.baselines import RandomSearch  # noqa: E402

from benchmarks.blackboxes import list_tasks, load_benchmark  # noqa: E402
from benchmarks.table import TABLE_SAMPLING, TableRestricted, table_configs  # noqa: E402


def best_rows(blackbox, metric: str, do_minimize: bool, k: int) -> np.ndarray:
    """Indices of the ``k`` rows with the best value at any fidelity (NaN/inf count as worst)."""
    j = blackbox.objectives_names.index(metric)
    y = blackbox.objectives_evaluations[:, 0, :, j].astype(np.float64)
    loss = np.where(np.isfinite(y), y if do_minimize else -y, np.inf)
    return np.argsort(loss.min(axis=1))[:k]


def picks(configs, space, sampling: str, seed: int, n: int) -> set[int]:
    sched = TableRestricted(RandomSearch(space, metrics=["y"], random_seed=seed), configs, sampling=sampling)
    return {configs.index(sched.suggest().config) for _ in range(n)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", nargs="+", default=["../shared/data/taskset"])
    p.add_argument("--picks", type=int, default=200, help="new configs per run (ASHA starts ~200 in 1000 epochs)")
    p.add_argument("--seeds", type=int, default=10)
    args = p.parse_args(argv)
    logging.getLogger("syne_tune").setLevel(logging.WARNING)
    print("| task | rows | sampling | overlap between seeds | best row picked | top-10 rows picked |")
    print("|---|---|---|---|---|---|")
    for source in args.data:
        for task in list_tasks(source):
            d, bb = load_benchmark(source, task)
            configs = table_configs(bb)
            top = best_rows(bb, d.metric, d.do_minimize, 10)
            for sampling in TABLE_SAMPLING:
                runs = [picks(configs, bb.configuration_space, sampling, s, args.picks) for s in range(args.seeds)]
                overlap = np.mean([len(a & b) / args.picks for a, b in itertools.combinations(runs, 2)])
                best = np.mean([top[0] in r for r in runs])
                top10 = np.mean([len(set(top.tolist()) & r) for r in runs])
                print(f"| {task} | {len(configs)} | {sampling} | {overlap:.2f} | {best:.2f} | {top10:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
