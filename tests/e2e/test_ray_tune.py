"""Ray Tune front end: a local Ray (2 CPUs) tunes a tiny checkpointing trainable with DyHPO;
trials must be paused and resumed from their checkpoints, no epoch may be trained twice, and
the run must end with a best config."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
from ray import tune  # noqa: E402
from syne_tune.config_space import choice, uniform  # noqa: E402

from syne_dyhpo import CandidateOptions, FreezeThawOptions  # noqa: E402
from syne_dyhpo.ray_tune import FreezeThawRayScheduler, config_space_from_ray, ray_scheduler  # noqa: E402

MAX_EPOCHS = 6
MAX_TRIALS = 6
TOTAL_EPOCHS = 20

# one method: the adapter's path is the same for both (DeepPowerLaw's real-process run is the
# LocalBackend's, tests/e2e/test_local_backend.py)
METHODS = ["dyhpo"]


def _fast_kwargs(method: str) -> dict:
    """Small surrogate fits so that a decision takes well under a second on 2 CPUs."""
    if method == "dyhpo":
        from syne_dyhpo import DeepKernelGPConfig, DyHPOSurrogate

        return {"surrogate": DyHPOSurrogate(model=DeepKernelGPConfig(max_iterations=30, refine_iterations=5))}
    from syne_dyhpo import DeepPowerLawSurrogate, PowerLawConfig

    return {"surrogate": DeepPowerLawSurrogate(model=PowerLawConfig(fit_epochs=50, refine_epochs=5))}


def trainable(config: dict) -> None:
    """Loss (x - 0.3)^2 + 0.5 * opt_penalty + 1/epoch; one report + checkpoint per epoch. Every
    epoch actually trained is appended to a log shared by all trials (local Ray).

    A trial's first epoch lasts until some other trial has started (at most 15 s): with 1-epoch
    segments, 0.4 s epochs can otherwise run back to back while Ray starts the next worker, and
    the test's overlap check would measure start-up latency instead of concurrency. A scheduler
    that never runs two trials at once still fails that check (the wait then times out)."""
    entered = time.time()  # the trial's worker is busy from here (restoring counts)
    trial_id = tune.get_context().get_trial_id()
    started = Path(config["log_path"]).parent / "started"
    started.mkdir(exist_ok=True)
    (started / trial_id).touch()
    start, restored_from = 1, 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            restored_from = json.loads(Path(d, "state.json").read_text())["epoch"]
        start = restored_from + 1
    penalty = 0.0 if config["opt"] == "good" else 0.5
    for epoch in range(start, config["max_epochs"] + 1):
        began = entered if epoch == start else time.time()
        time.sleep(0.4)  # "training"
        deadline = time.time() + 15.0
        while epoch == 1 and time.time() < deadline and not any(p.name != trial_id for p in started.iterdir()):
            time.sleep(0.05)
        loss = (config["x"] - 0.3) ** 2 + penalty + 1.0 / epoch
        with open(config["log_path"], "a") as f:
            f.write(f"{trial_id} {epoch} {restored_from} {began} {time.time()}\n")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report(
                {"epoch": epoch, "loss": loss, "restored_from": restored_from},
                checkpoint=tune.Checkpoint.from_directory(d),
            )


@pytest.fixture(scope="module")
def local_ray():
    # Ray workers cannot import this test module by name: ship the trainable by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow  # starts a Tuner, Ray or a process
@pytest.mark.parametrize("method", METHODS)
def test_pause_resume_from_checkpoints(method, local_ray, tmp_path):
    log_path = tmp_path / "epochs.log"
    config_space = {"x": uniform(0.0, 1.0), "opt": choice(["good", "bad"])}
    sched = ray_scheduler(
        method,
        config_space,
        metric="loss",
        mode="min",
        max_t=MAX_EPOCHS,
        max_concurrent=2,
        max_num_trials=MAX_TRIALS,
        max_total_epochs=TOTAL_EPOCHS,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=32)),
        random_seed=1,
        **_fast_kwargs(method),
    )
    assert isinstance(sched, FreezeThawRayScheduler)
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"max_epochs": MAX_EPOCHS, "log_path": str(log_path)},
        tune_config=sched.tune_config(),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray_results"), name=method, verbose=0),
    )
    results = tuner.fit()

    # ---- every trial ended without error, within the limits
    assert not results.errors
    assert 2 <= len(results) <= MAX_TRIALS
    assert sched.core.observations.num_observations >= TOTAL_EPOCHS
    assert sched.core.observations.num_observations <= TOTAL_EPOCHS + 1  # max_concurrent - 1 extra at most

    # ---- epochs actually trained: each (trial, epoch) exactly once, in order, from 1
    rows = [line.split() for line in log_path.read_text().splitlines()]
    lines = [(t, e, r) for t, e, r, _, _ in rows]
    trained = Counter((t, int(e)) for t, e, _ in lines)
    assert max(trained.values()) == 1, f"epochs trained twice: {[k for k, n in trained.items() if n > 1]}"
    by_trial: dict[str, list[int]] = {}
    for t, e, _ in lines:
        by_trial.setdefault(t, []).append(int(e))
    for t, epochs in by_trial.items():
        assert epochs == list(range(1, len(epochs) + 1)), (t, epochs)

    # ---- trials were paused and resumed from their checkpoints
    restored = [(t, int(e), int(r)) for t, e, r in lines if int(r) > 0]
    assert sched.num_pauses >= 1 and sched.num_resumes >= 1
    assert restored, "no trial was ever restored from a checkpoint"
    for t, e, r in restored:
        assert e > r  # continued after the checkpoint's epoch
    for int_id, paused_after, first_after in sched.resume_log:
        assert first_after == paused_after + 1, (int_id, paused_after, first_after)
    assert {t for t, _, _ in restored} == {sched.ray_trial_id(i) for i, _, _ in sched.resume_log}

    # ---- several trials ran at once (two CPUs, max_concurrent=2): busy spans (an epoch, the
    # first of a segment from the worker's start) of different trials overlapping in time
    spans = [(t, float(b), float(f)) for t, _, _, b, f in rows]
    overlaps = sum(1 for i, (t1, b1, f1) in enumerate(spans) for t2, b2, f2 in spans[i + 1 :] if t1 != t2 and b1 < f2 and b2 < f1)
    assert overlaps >= 1, "no two trials ever trained at the same time"

    # ---- the core's decision log is in Ray's experiment folder, every decision of the run
    import pandas as pd

    on_disk = pd.read_csv(tmp_path / "ray_results" / method / "decision_log.csv").sort_values("decision")
    log = sched.core.decision_log()
    assert on_disk["decision"].tolist() == log["decision"].tolist() and len(log) >= TOTAL_EPOCHS
    assert on_disk["reason"].tolist() == log["reason"].tolist()
    started = log.loc[log["next"] == "start", "next_trial_id"]
    assert sorted(started.astype(int)) == list(range(len(results)))  # each start got its trial

    # ---- the run ends with a best config
    best = results.get_best_result(metric="loss", mode="min", scope="all")
    assert set(best.config) >= {"x", "opt"}
    ray_id, config, value = sched.best_trial()
    assert value == pytest.approx(best.metrics_dataframe["loss"].min())
    assert config["x"] == pytest.approx(best.config["x"])
    print(
        f"\n{method}: {len(results)} trials, {sched.core.observations.num_observations} epochs, "
        f"{sched.num_pauses} pauses, {sched.num_resumes} resumes, {len(restored)} epochs trained "
        f"after a restore, {overlaps} overlapping epoch pairs; "
        f"best loss {value:.4f} with {config}"
    )


def test_config_space_from_ray():
    space = config_space_from_ray(
        {"lr": tune.loguniform(1e-4, 1e-1), "units": tune.randint(8, 65), "act": tune.choice(["relu", "tanh"]), "c": 3}
    )
    assert space["lr"].lower == pytest.approx(1e-4) and space["lr"].upper == pytest.approx(1e-1)
    assert (space["units"].lower, space["units"].upper) == (8, 64)
    assert list(space["act"].categories) == ["relu", "tanh"]
    assert space["c"] == 3
    with pytest.raises(ValueError):
        config_space_from_ray({"q": tune.quniform(0, 1, 0.1)})


@pytest.mark.parametrize(
    "argument, value, expected",
    [
        ("max_concurrent", "4", "an integer >= 1"),
        ("max_concurrent", 0, "an integer >= 1"),
        ("max_num_trials", 2.5, "an integer >= 1 or None"),
        ("max_total_epochs", [100], "an integer >= 1 or None"),
    ],
)
def test_counts_of_the_wrong_kind_are_refused_by_name(argument, value, expected):
    from syne_dyhpo import DyHPO

    core = DyHPO({"x": uniform(0, 1)}, "loss", max_t=3)
    with pytest.raises(ValueError, match=re.escape(f"{argument} must be {expected}, got {value!r}")):
        FreezeThawRayScheduler(core, **{"max_num_trials": 2, argument: value})


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_refuses_max_resource_attr_and_bad_metric():
    from syne_dyhpo import DyHPO

    core = DyHPO({"x": uniform(0, 1)}, "loss", max_t=3, max_resource_attr="max_epochs")
    with pytest.raises(ValueError, match="max_resource_attr"):
        FreezeThawRayScheduler(core)
    sched = FreezeThawRayScheduler(DyHPO({"x": uniform(0, 1)}, "loss", max_t=3), max_num_trials=2)
    with pytest.raises(ValueError, match="metric"):
        sched.set_search_properties("acc", "max")


def test_new_configurations_queued_when_the_budget_ends_are_logged_as_dropped(tmp_path):
    import pandas as pd

    from syne_dyhpo import DyHPO
    from syne_dyhpo.core.decision_log import LOG_FILENAME

    core = DyHPO({"x": uniform(0, 1)}, "loss", max_t=3, points_to_evaluate=[{"x": 0.2}, {"x": 0.7}])
    sched = FreezeThawRayScheduler(core, max_concurrent=2, max_total_epochs=10)
    core.attach_decision_log(str(tmp_path))
    sched.make_decisions()  # two starts decided, queued for Ray's searcher
    assert [c["x"] for c in sched._new_configs] == [0.2, 0.7]
    sched._stop_paused_trials(tune_controller=None)  # the budget ends before Ray asked for them
    on_disk = pd.read_csv(tmp_path / LOG_FILENAME)
    log = core.decision_log()
    assert on_disk["next"].tolist() == log["next"].tolist() == ["dropped", "dropped"]
    assert on_disk["decision"].tolist() == [0, 1]
