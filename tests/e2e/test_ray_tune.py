"""Ray Tune front end: a local Ray (2 CPUs) tunes a tiny checkpointing trainable with DyHPO;
trials must be paused and resumed from their checkpoints, no epoch may be trained twice, and
the run must end with a best config. An interrupted run continues with ``Tuner.restore``, and
``TuneConfig(max_concurrent_trials=...)`` either runs or is refused by name."""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
from ray import tune  # noqa: E402
from syne_tune.config_space import choice, uniform  # noqa: E402

from syne_dyhpo import CandidateOptions, DyHPOSurrogate, FreezeThawOptions  # noqa: E402
from syne_dyhpo.ray_tune import FreezeThawRayScheduler, config_space_from_ray, ray_scheduler  # noqa: E402
from syne_dyhpo.surrogates.deep_kernel_gp import DeepKernelGPConfig  # noqa: E402

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
    for _, e, r in restored:
        assert e > r  # continued after the checkpoint's epoch
    for int_id, paused_after, first_after in sched.resume_log:
        assert first_after == paused_after + 1, (int_id, paused_after, first_after)
    assert {t for t, _, _ in restored} == {sched.ray_trial_id(i) for i, _, _ in sched.resume_log}

    # ---- several trials ran at once (two CPUs, max_concurrent=2): busy spans (an epoch, the
    # first of a segment from the worker's start) of different trials overlapping in time
    spans = [(t, float(b), float(f)) for t, _, _, b, f in rows]
    overlaps = sum(
        1 for i, (t1, b1, f1) in enumerate(spans) for t2, b2, f2 in spans[i + 1 :] if t1 != t2 and b1 < f2 and b2 < f1
    )
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
    _ray_id, config, value = sched.best_trial()
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


# ----- short runs: Tuner.restore, max_concurrent_trials ---------------------------------------

SHORT_EPOCHS = 4


def short_trainable(config: dict) -> None:
    """Loss (x - 0.3)^2 + 1/epoch, one report with a checkpoint per epoch; every epoch trained
    is logged as ``trial epoch restored_from`` (0: not restored)."""
    trial_id = tune.get_context().get_trial_id()
    restored_from = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            restored_from = json.loads(Path(d, "state.json").read_text())["epoch"]
    for epoch in range(restored_from + 1, config["max_epochs"] + 1):
        time.sleep(0.05)
        with open(config["log_path"], "a") as f:
            f.write(f"{trial_id} {epoch} {restored_from}\n")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report(
                {"epoch": epoch, "loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch},
                checkpoint=tune.Checkpoint.from_directory(d),
            )


def _short_scheduler(**kwargs) -> FreezeThawRayScheduler:
    return ray_scheduler(
        "dyhpo", {"x": uniform(0.0, 1.0)}, metric="loss", mode="min", max_t=SHORT_EPOCHS, max_concurrent=2,
        options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)), random_seed=3,
        surrogate=DyHPOSurrogate(model=DeepKernelGPConfig(max_iterations=30, refine_iterations=5)), **kwargs,
    )


def _epochs(log_path: Path, skip: int = 0) -> list[tuple[str, int, int]]:
    lines = log_path.read_text().splitlines()[skip:]
    return [(t, int(e), int(r)) for t, e, r in (line.split() for line in lines)]


class InterruptMidRun(tune.Callback):
    """Sends SIGINT to this process (Ray's handler ends the run and saves the experiment) once
    ``num_trials`` trials exist, one paused and one running, both mid-curve; keeps the
    statuses and last epochs of that moment, which is the experiment state Ray saves last. Once
    only: the restored Tuner runs with a copy of it (Ray keeps the run config), hence ``marker``."""

    def __init__(self, num_trials: int, marker: Path):
        self.num_trials = num_trials
        self.marker = marker
        self.at_interrupt: dict[str, tuple[str, int]] | None = None

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        if self.marker.exists() or len(trials) < self.num_trials:
            return
        state = {t.trial_id: (t.status, int(t.last_result.get("epoch", 0))) for t in trials}
        mid_curve = {s for s, e in state.values() if 1 <= e < SHORT_EPOCHS}
        if {"PAUSED", "RUNNING"} <= mid_curve:
            handler = signal.getsignal(signal.SIGINT)
            installed = getattr(handler, "__name__", "") == "signal_interrupt_tune_run"
            assert installed, f"Ray's SIGINT handler is not installed: {handler}"
            self.at_interrupt = state
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.slow  # starts two Tuners
def test_restored_run_resumes_its_trials_from_their_checkpoints_and_logs_a_new_session(local_ray, tmp_path):
    import pandas as pd

    log_path = tmp_path / "epochs.log"
    num_trials = 3
    sched = _short_scheduler(max_num_trials=num_trials)
    interrupt = InterruptMidRun(num_trials, tmp_path / "interrupted")
    train = tune.with_resources(short_trainable, {"cpu": 1})
    tune.Tuner(
        train,
        param_space={"max_epochs": SHORT_EPOCHS, "log_path": str(log_path)},
        tune_config=sched.tune_config(reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0, callbacks=[interrupt]),
    ).fit()
    at_interrupt = interrupt.at_interrupt
    assert at_interrupt is not None, "the run ended before it could be interrupted mid-run"
    phase1 = _epochs(log_path)
    last1 = {t: max(e for tt, e, _ in phase1 if tt == t) for t, _, _ in phase1}

    # ---- restore, without param_space: its constants come with Ray's saved experiment
    results = tune.Tuner.restore(str(tmp_path / "exp"), trainable=train).fit()
    assert not results.errors, results.errors  # e.g. KeyError: 'max_epochs' in new trials
    phase2 = _epochs(log_path, skip=len(phase1))

    # ---- the restored scheduler went on with the trials of the interrupted run (max_num_trials
    # were started there), each from its last checkpoint, to max_t. A paused trial's checkpoint
    # is its last result; a running trial's may be older (Ray registers a checkpoint after the
    # scheduler answered its result), and it then trains those epochs again
    assert {t for t, _, _ in phase2} == set(at_interrupt), "the restored run started trials afresh"
    paused = [t for t, (s, e) in at_interrupt.items() if s == "PAUSED" and e < SHORT_EPOCHS]
    for t, (status, reported) in at_interrupt.items():
        first_epoch, restored_from = next((e, r) for tt, e, r in phase2 if tt == t)
        assert first_epoch == restored_from + 1, (t, first_epoch, restored_from)
        if status == "PAUSED":
            assert restored_from == reported == last1[t], (t, restored_from, at_interrupt[t])
        else:
            assert restored_from <= reported, (t, restored_from, at_interrupt[t])
        epochs = [e for tt, e, _ in phase1 + phase2 if tt == t]
        assert sorted(set(epochs)) == list(range(1, SHORT_EPOCHS + 1)), (t, epochs)
    trained = Counter((t, e) for t, e, _ in phase1 + phase2)
    assert all(trained[t, e] == 1 for t in paused for e in range(1, SHORT_EPOCHS + 1))  # no epoch twice
    assert sorted(r.metrics["epoch"] for r in results) == [SHORT_EPOCHS] * num_trials

    # ---- the decision log: session 0, then session 1, every (session, decision) once (a
    # decision of session 0 carried out or dropped after the restore is written then)
    log = pd.read_csv(tmp_path / "exp" / "decision_log.csv")
    assert set(log["session"]) == {0, 1}
    duplicated = log.duplicated(["session", "decision"], keep=False)
    assert not duplicated.any(), log[duplicated]
    for _, rows in log.groupby("session"):
        assert sorted(rows["decision"]) == list(range(len(rows)))
    session1 = log[log["session"] == 1]
    assert (session1["next"] == "resume").sum() >= len(paused)  # the paused trials were resumed
    assert "start" not in set(session1["next"])
    # the trials running in the core at the interrupt (running or being started in Ray; a trial
    # answered PAUSE may still run in Ray) are resumable again
    restored = session1.loc[session1["reason"] == "restored", "trial_id"]
    assert 1 <= len(restored) <= sum(s != "PAUSED" for s, _ in at_interrupt.values())


@pytest.mark.slow  # starts a Tuner
def test_hand_built_tune_config_with_max_concurrent_trials_runs_to_its_budget(local_ray, tmp_path):
    """Ray wraps the searcher in a ConcurrencyLimiter, which counts paused trials as running:
    the run must not stall once two trials are paused and two new ones are decided
    (time_budget_s bounds a stall)."""
    sched = _short_scheduler(max_num_trials=6, max_total_epochs=8)
    time_budget_s = 60
    config = tune.TuneConfig(
        metric="loss",
        mode="min",
        search_alg=sched.searcher,
        scheduler=sched,
        num_samples=-1,
        max_concurrent_trials=2,
        time_budget_s=time_budget_s,
        reuse_actors=True,
    )
    started = time.time()
    tune.Tuner(
        tune.with_resources(short_trainable, {"cpu": 1}),
        param_space={"max_epochs": SHORT_EPOCHS, "log_path": str(tmp_path / "epochs.log")},
        tune_config=config,
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    assert sched.core.observations.num_observations >= 8, sched.debug_string()
    assert sched.num_pauses >= 2 and sched.num_resumes >= 1
    assert time.time() - started < 0.9 * time_budget_s, "the run ended by time_budget_s, not by its epoch budget"


def test_a_different_max_concurrent_trials_is_refused_by_name():
    from ray.tune.search import ConcurrencyLimiter

    sched = _short_scheduler(max_num_trials=3)
    expected = "max_concurrent_trials=3) differs from the freeze-thaw scheduler's max_concurrent=2"
    with pytest.raises(ValueError, match=re.escape(expected)):
        sched.tune_config(max_concurrent_trials=3)
    with pytest.raises(ValueError, match=re.escape(expected)):
        ConcurrencyLimiter(sched.searcher, max_concurrent=3)  # what Ray does with a hand-built TuneConfig
    assert sched.tune_config(max_concurrent_trials=2).max_concurrent_trials == 2
