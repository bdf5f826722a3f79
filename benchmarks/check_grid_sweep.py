"""DyHPO (with/without successive-halving promotions) and DeepPowerLaw on the synthetic grid of
../shared/tools/check_e2e.py, in a deterministic simulation (training time only), scheduler
seeds 0-5, 1 and 4 workers. Run from the repository root: .venv/bin/python benchmarks/check_grid_sweep.py
"""
import sys, os, logging, io, contextlib, numpy as np
from pathlib import Path
sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "shared" / "tools"), str(Path(__file__).resolve().parents[1])]
import check_e2e as ce
from syne_tune import Tuner
from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
from syne_dyhpo import DyHPO, DeepPowerLaw
from syne_dyhpo.benchmarking.runner import _backend_class
logging.getLogger("syne_tune").setLevel(logging.ERROR)
bb = ce.grid_blackbox()
res = {}
for cls, sh in [(DyHPO, 0.0), (DyHPO, 0.25), (DeepPowerLaw, 0.0)]:
    for w in (1, 4):
        for seed in range(6):
            sched = cls(bb.configuration_space, metric="valid_error", do_minimize=True, time_attr="epoch", max_t=30, random_seed=seed, sh_probability=sh)
            backend = _backend_class(False)(blackbox=bb, elapsed_time_attr="elapsed_time", tuner_sleep_time=0.01, seed=0)
            t = Tuner(trial_backend=backend, scheduler=sched, stop_criterion=lambda s: s.overall_metric_statistics.count >= 200, n_workers=w, sleep_time=0, callbacks=[SimulatorCallback()], save_tuner=False, tuner_name="sweep")
            with contextlib.redirect_stdout(io.StringIO()):
                t.run()
            df = t.callbacks[0].dataframe()
            fin = int((df.groupby("trial_id").epoch.max() == 30).sum())
            res.setdefault((cls.__name__, sh, w), []).append((fin, df.valid_error.min(), df.trial_id.nunique()))
for k, v in res.items():
    a = np.array(v)
    print(k, "runs with a finished trial:", int((a[:, 0] > 0).sum()), "/", len(a), "mean best %.4f" % a[:, 1].mean(), "mean trials %.0f" % a[:, 2].mean())
