"""Smoke check of a core install (``pip install .``, no extras): both schedulers drive a real
Syne Tune Tuner with the PythonBackend on a synthetic, checkpointed learning curve, with
pauses and resumes. Run by ``.ci/run`` in a fresh virtual environment."""

import os
import sys

# Syne Tune's experiment folder in the working folder: .ci/run runs this in its scratch folder,
# which it removes on exit (a folder under /tmp would be left behind by every CI run)
os.environ.setdefault("SYNETUNE_FOLDER", os.path.abspath("syne-tune-results"))

from syne_tune import StoppingCriterion, Tuner
from syne_tune.backend import PythonBackend
from syne_tune.config_space import loguniform, uniform

from syne_dyhpo import DeepPowerLaw, DyHPO

MAX_T = 6


def curve(lr, width, max_epoch, st_checkpoint_dir):
    """A synthetic learning curve that checkpoints its epoch and resumes after it."""
    import json
    import os
    import time

    from syne_tune import Reporter

    path = os.path.join(st_checkpoint_dir, "epoch.json")
    start = 1
    if os.path.exists(path):
        with open(path) as f:
            start = json.load(f)["epoch"] + 1
    report = Reporter()
    for epoch in range(start, int(max_epoch) + 1):
        time.sleep(0.05)
        os.makedirs(st_checkpoint_dir, exist_ok=True)
        with open(path, "w") as f:
            json.dump({"epoch": epoch}, f)
        report(epoch=epoch, loss=abs(lr - 0.01) * 10 + width + 1.0 / epoch)


def main() -> int:
    space = {"lr": loguniform(1e-4, 1e-1), "width": uniform(0, 1), "max_epoch": MAX_T, "st_checkpoint_dir": "/tmp"}
    failures = []
    for method in (DyHPO, DeepPowerLaw):
        scheduler = method(space, metric="loss", do_minimize=True, time_attr="epoch", max_t=MAX_T,
                           random_seed=0, max_resource_attr="max_epoch")
        # 48 evaluations: DyHPO's completion starts once 27 configurations have reported, so in
        # 24 its resumes came from the acquisition alone and a run could have none
        tuner = Tuner(trial_backend=PythonBackend(tune_function=curve, config_space=space), scheduler=scheduler,
                      stop_criterion=StoppingCriterion(max_num_evaluations=48), n_workers=2, sleep_time=0.2,
                      save_tuner=False)
        tuner.run()
        obs = scheduler.observations
        resumed = [r for r in obs.trials.values() if r.last_epoch > 1]
        print(f"{method.__name__}: {obs.num_observations} epochs, {len(obs.trials)} trials, {len(resumed)} resumed")
        if obs.num_observations < 20 or not resumed:
            failures.append(method.__name__)
    print("core install smoke:", "FAILED " + ", ".join(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
