"""Shared fixtures: a fake Trial factory, paths to the benchmark data the repo ships, and a local Ray."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

import pytest

# Syne Tune writes its experiment folders under SYNETUNE_FOLDER: keep them out of $HOME
os.environ.setdefault("SYNETUNE_FOLDER", tempfile.mkdtemp(prefix="syne-dyhpo-tests-"))

REPO = Path(__file__).resolve().parent.parent
REPO_DATA = REPO / "benchmarks" / "data"


BENCHMARKS_EXTRA = "syne-dyhpo[benchmarks]"


def _blackbox_repository_missing() -> str | None:
    """Why ``syne_tune.blackbox_repository`` (Syne Tune's simulator and tabular blackboxes)
    cannot be imported, or None if it can: it imports ``huggingface_hub``, which only the extra
    ``syne-dyhpo[benchmarks]`` installs."""
    try:
        import syne_tune.blackbox_repository  # noqa: F401
    except ImportError as ex:
        return f"{type(ex).__name__}: {ex}"
    return None


def require_blackbox_repository() -> None:
    """Skips the calling test, naming the missing extra, where ``syne_tune.blackbox_repository``
    cannot be imported (a plain ``pip install '.[dev]'``)."""
    missing = _blackbox_repository_missing()
    if missing is not None:
        import pytest

        pytest.skip(
            f"needs Syne Tune's simulator, syne_tune.blackbox_repository, which cannot be imported ({missing}): "
            f"install the extra {BENCHMARKS_EXTRA} (pip install '.[dev,benchmarks]')"
        )


def pytest_report_header(config) -> str | None:
    missing = _blackbox_repository_missing()
    if missing is not None:
        return (
            f"WARNING: syne_tune.blackbox_repository cannot be imported ({missing}): the tests through "
            f"Syne Tune's simulator skip; install the extra {BENCHMARKS_EXTRA} to run them"
        )
    return None


def data_folder(name: str) -> Path:
    """The repo's small copy of a benchmark folder (``benchmarks/data``, shipped with the repo)."""
    folder = REPO_DATA / name
    assert (folder / "metadata.json").exists(), f"shipped benchmark data missing: {folder}"
    return folder


def shipped_task(name: str, task: str):
    """A task of the repo's benchmark data, read with Syne Tune's ``deserialize``: returns the
    blackbox, its table rows as configurations (native values, the space's constants included)
    and the folder's ``metadata.json`` (``default_metric``, ``time_attr``, ``metric_elapsed_time``)."""
    require_blackbox_repository()
    import json

    from syne_tune.blackbox_repository.blackbox_tabular import deserialize
    from syne_tune.config_space import postprocess_config

    from syne_dyhpo.search_space import to_native

    folder = data_folder(name)
    blackbox = deserialize(str(folder))[task]
    configs = [
        postprocess_config({k: to_native(v) for k, v in row.items()}, blackbox.configuration_space)
        for row in blackbox.hyperparameters.to_dict("records")
    ]
    return blackbox, configs, json.loads((folder / "metadata.json").read_text())


def make_trial(trial_id: int, config: dict):
    from syne_tune.backend.trial_status import Trial

    return Trial(trial_id=trial_id, config=config, creation_time=datetime.now())


def suggested_trial(scheduler, trials: dict):
    """The trial of the scheduler's next suggestion, as Syne Tune's Tuner starts or resumes it
    (a new one is added to ``trials`` and to the scheduler), or None if it suggests nothing."""
    suggestion = scheduler.suggest()
    if suggestion is None:
        return None
    if suggestion.spawn_new_trial_id:
        trial = trials[len(trials)] = make_trial(len(trials), suggestion.config)
        scheduler.on_trial_add(trial)
        return trial
    return trials[suggestion.checkpoint_trial_id]


def one_epoch_per_decision(scheduler, trials: dict, value, metric: str = "loss"):
    """One decision as Syne Tune's Tuner drives it, then one reported epoch: the suggested
    trial (a new one is added to ``trials``) reports ``metric`` = ``value(epoch)`` for its next
    epoch and is removed; returns the trial."""
    trial = suggested_trial(scheduler, trials)
    epoch = scheduler.observations.trials[trial.trial_id].last_epoch + 1
    scheduler.on_trial_result(trial, {"epoch": epoch, metric: value(epoch)})
    scheduler.on_trial_remove(trial)
    return trial


def drive_one_worker(scheduler, steps: int, value=lambda trial, epoch: 1.0 / epoch + 0.01 * trial.trial_id,
                     metric: str = "loss", after_segment=None):
    """One worker, as Syne Tune's Tuner drives a scheduler: suggest, then report epoch after
    epoch (``metric`` = ``value(trial, epoch)``) while the answer is CONTINUE, then remove the
    trial and call ``after_segment(trial)`` if given; returns the trials by id."""
    from syne_tune.optimizer.scheduler import SchedulerDecision

    trials = {}
    for _ in range(steps):
        trial = suggested_trial(scheduler, trials)
        if trial is None:
            break
        decision = SchedulerDecision.CONTINUE
        while decision == SchedulerDecision.CONTINUE:
            epoch = scheduler.observations.trials[trial.trial_id].last_epoch + 1
            decision = scheduler.on_trial_result(trial, {"epoch": epoch, metric: value(trial, epoch)})
        scheduler.on_trial_remove(trial)
        if after_segment is not None:
            after_segment(trial)
    return trials


def tiny_blackbox(num_configs: int, max_t: int, seed: int = 0):
    """A tabular blackbox of ``num_configs`` crossing power-law error curves over one
    categorical hyperparameter ``x`` (and a constant one: Syne Tune's lookup needs two
    columns), one unit of time per epoch; objectives ``error`` and ``time``."""
    require_blackbox_repository()
    import numpy as np
    import pandas as pd
    from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
    from syne_tune.config_space import choice, randint

    rng = np.random.RandomState(seed)
    t = np.arange(1, max_t + 1, dtype=float)
    y = np.zeros((num_configs, 1, max_t, 2))
    for i in range(num_configs):
        final, speed = 0.1 + 0.5 * rng.rand(), 0.2 + rng.rand()
        y[i, 0, :, 0] = final + (0.9 - final) * t ** (-speed) + 0.002 * rng.randn(max_t)
        y[i, 0, :, 1] = t
    return BlackboxTabular(
        hyperparameters=pd.DataFrame([{"x": i, "c": "a"} for i in range(num_configs)]),
        configuration_space={"x": choice(list(range(num_configs))), "c": choice(["a"])},
        fidelity_space={"epoch": randint(1, max_t)},
        objectives_evaluations=y,
        fidelity_values=np.arange(1, max_t + 1),
        objectives_names=["error", "time"],
    )


def training_time_only_backend() -> type:
    """Syne Tune's simulator backend advancing simulated time by training time only (not by the
    scheduler's real compute), so that a run is reproducible from its seed on any machine."""
    require_blackbox_repository()
    from syne_tune.blackbox_repository.simulated_tabular_backend import UserBlackboxBackend

    class TrainingTimeOnlyBackend(UserBlackboxBackend):
        def _advance_by_outside_time(self):
            pass

    return TrainingTimeOnlyBackend


def simulate_tuner(scheduler, blackbox, n_workers: int, max_epochs: int, max_resource_attr=None,
                   elapsed_time_attr: str = "time", tuner_sleep_time: float = 0.05, **tuner_kwargs):
    """Runs ``scheduler`` in a real Syne Tune Tuner on ``blackbox`` (simulator, training time
    only) until ``max_epochs`` results or the scheduler has nothing left; returns the tuner
    and the dataframe of results the scheduler saw."""
    import contextlib
    import io

    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback

    backend = training_time_only_backend()(
        blackbox=blackbox, elapsed_time_attr=elapsed_time_attr, tuner_sleep_time=tuner_sleep_time, seed=0,
        max_resource_attr=max_resource_attr
    )
    callback = SimulatorCallback()
    tuner_kwargs.setdefault("save_tuner", False)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=StoppingCriterion(max_num_evaluations=max_epochs),
        n_workers=n_workers,
        sleep_time=0,
        callbacks=[callback],
        **tuner_kwargs,
    )
    with contextlib.redirect_stdout(io.StringIO()):
        tuner.run()
    return tuner, callback.dataframe()


@pytest.fixture(scope="module")
def local_ray(request):
    """A local Ray (2 CPUs) for the tests of one module, shut down after them. Ray workers
    cannot import a test module by name, so the requesting module is shipped by value (its
    trainables with it)."""
    ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
    ray.cloudpickle.register_pickle_by_value(request.module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
