"""DyHPO (with and without successive-halving promotions) and DeepPowerLaw on the synthetic grid
of benchmarks/check_e2e.py, in a deterministic simulation (training time only), scheduler
seeds 0-5, 1 and 4 workers, 200 epochs each. Prints, per setting, the runs in which a trial
reached max_t, the mean best value and the mean number of trials started.

Run from the repository root: .venv/bin/python benchmarks/check_grid_sweep.py
"""

import contextlib
import io
import logging
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# run as a script, sys.path[0] is benchmarks/ itself, whose modules have generic names
# (runner, metrics, report): import them as the benchmarks package from the repo root instead
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks import check_e2e  # noqa: E402
from syne_tune import Tuner  # noqa: E402
from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback  # noqa: E402

from syne_dyhpo import DeepPowerLaw, DyHPO, SuccessiveHalvingPromotion  # noqa: E402
from benchmarks.runner import simulator_backend_class  # noqa: E402

BUDGET = 200
SEEDS = range(6)
SETTINGS = [(DyHPO, 0.0), (DyHPO, 0.25), (DeepPowerLaw, 0.0)]


def run(scheduler_cls, sh_probability: float, n_workers: int, seed: int) -> tuple[bool, float, int]:
    bb = check_e2e.grid_blackbox()
    scheduler = scheduler_cls(
        bb.configuration_space, metric="valid_error", do_minimize=True, time_attr="epoch",
        max_t=check_e2e.MAX_T, random_seed=seed,
        promotion=SuccessiveHalvingPromotion(sh_probability) if sh_probability > 0 else None,
    )
    backend = simulator_backend_class()(blackbox=bb, elapsed_time_attr="elapsed_time", tuner_sleep_time=0.01, seed=0)
    tuner = Tuner(
        trial_backend=backend, scheduler=scheduler, n_workers=n_workers, sleep_time=0,
        stop_criterion=lambda status: status.overall_metric_statistics.count >= BUDGET,
        callbacks=[SimulatorCallback()], save_tuner=False, tuner_name="grid-sweep",
    )
    with contextlib.redirect_stdout(io.StringIO()):
        tuner.run()
    df = tuner.callbacks[0].dataframe()
    finished = bool((df.groupby("trial_id")["epoch"].max() == check_e2e.MAX_T).any())
    return finished, float(df["valid_error"].min()), int(df["trial_id"].nunique())


def main() -> None:
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    for scheduler_cls, sh_probability in SETTINGS:
        for n_workers in (1, 4):
            rows = np.array([run(scheduler_cls, sh_probability, n_workers, seed) for seed in SEEDS])
            print(
                f"{scheduler_cls.__name__} sh={sh_probability} workers={n_workers}: reached max_t "
                f"{int(rows[:, 0].sum())}/{len(rows)}, mean best {rows[:, 1].mean():.4f}, "
                f"mean trials {rows[:, 2].mean():.0f}"
            )


if __name__ == "__main__":
    main()
