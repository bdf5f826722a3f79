"""Every path a Syne Tune user takes keeps working (issue 10): saving and pickling the tuner, a
finite set of configurations running out, bad input, late reports, tiny spaces, and
``points_to_evaluate``. Continuation with ``Tuner.load`` is in ``test_continuation.py``."""

import math
import pickle
import re

import dill
import numpy as np
import pytest
from conftest import drive_one_worker, make_trial, one_epoch_per_decision, simulate_tuner, tiny_blackbox
from syne_tune.config_space import choice, loguniform, uniform
from syne_tune.optimizer.scheduler import SchedulerDecision as D

from syne_dyhpo import (
    CandidateOptions,
    DeepKernelGPConfig,
    DeepPowerLaw,
    DyHPO,
    DyHPOSurrogate,
    FitSchedule,
    FreezeThawOptions,
    PowerLawConfig,
)
from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.search_space import ConfigSpaceError

METHODS = [DyHPO, DeepPowerLaw]
FAST = {DyHPO: {}, DeepPowerLaw: {}}


# ----- 1. the Tuner pickles the scheduler (dill) with its default save_tuner=True -----------


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_tuner_with_default_save_tuner_runs_to_the_end(method, tmp_path):
    blackbox = tiny_blackbox(num_configs=30, max_t=10)
    scheduler = method(blackbox.configuration_space, metric="error", do_minimize=True, max_t=10, random_seed=0)
    tuner, df = simulate_tuner(scheduler, blackbox, n_workers=2, max_epochs=60, save_tuner=True)
    assert len(df) >= 60
    with open(tuner.tuner_path / "tuner.dill", "rb") as f:
        loaded = dill.load(f)
    assert loaded.scheduler.observations.num_observations == scheduler.observations.num_observations


def test_power_law_ensemble_pickle_round_trip_keeps_predictions_and_optimizer_state():
    s = DeepPowerLaw({"x": uniform(0, 1)}, metric="loss", max_t=5, random_seed=0,
                     options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=8)))
    drive_one_worker(s, 12)
    assert pickle.loads(pickle.dumps(s)).observations.num_observations == s.observations.num_observations
    clone = dill.loads(dill.dumps(s))
    from syne_dyhpo.core.candidates import make_candidates

    records = list(s.observations.trials.values())
    cands = make_candidates(records, [], np.zeros((0, 1)), s.observations, lambda r: 5)
    for scheduler in (s, clone):  # one more refinement: from the same weights and Adam moments
        scheduler.policy.surrogate.fit(scheduler.policy._training_data(scheduler.observations), False, seed=3)
    mean, std = s.policy.fit(s.observations, seed=0).predict(cands, np.full(len(cands), 5))
    mean_clone, std_clone = clone.policy.fit(clone.observations, seed=0).predict(cands, np.full(len(cands), 5))
    np.testing.assert_array_equal(mean, mean_clone)
    np.testing.assert_array_equal(std, std_clone)


# ----- 3. a finite set of configurations runs out while workers are busy ---------------------


@pytest.mark.slow
@pytest.mark.parametrize("num_configs, n_workers", [(7, 4), (2, 3)])
@pytest.mark.parametrize("method", METHODS)
def test_every_config_of_a_used_up_pool_is_trained_to_max_t(method, num_configs, n_workers):
    max_t = 30
    blackbox = tiny_blackbox(num_configs=num_configs, max_t=max_t)
    scheduler = method(
        blackbox.configuration_space, metric="error", do_minimize=True, max_t=max_t, random_seed=0,
        max_resource_attr="max_epoch",
    )
    _, df = simulate_tuner(scheduler, blackbox, n_workers=n_workers, max_epochs=10_000, max_resource_attr="max_epoch")
    # before: suggest() found nothing once while workers were busy, Syne Tune never asked again
    # and trials paused afterwards stayed paused (158 of 210 epochs, 2 of 60)
    assert len(df) == num_configs * max_t
    assert scheduler.metadata()["status_counts"] == {"finished": num_configs}
    for _, trial in df.groupby("trial_id"):
        assert sorted(trial["epoch"].astype(int)) == list(range(1, max_t + 1))


def test_large_pool_keeps_exact_segments_with_max_resource_attr():
    table = [{"x": v} for v in np.linspace(0, 1, 200)]
    s = DyHPO({"x": choice([t["x"] for t in table])}, metric="loss", max_t=10, random_seed=0,
              options=FreezeThawOptions(candidates=CandidateOptions(configs=table)), max_resource_attr="max_epoch")
    assert s.suggest().config["max_epoch"] == 1


# ----- 4. bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("do_minimize", ["max", None, 1])
def test_do_minimize_must_be_a_bool(do_minimize):
    with pytest.raises(ValueError, match=f"do_minimize must be True or False, got {do_minimize!r}"):
        DyHPO({"x": uniform(0, 1)}, metric="loss", max_t=5, do_minimize=do_minimize)


@pytest.mark.parametrize(
    "argument, value, expected",
    [
        ("options.checkpoints", {"max_kept": 2}, "a PausedCheckpoints"),
        ("options.candidates", {"num_candidates": 8}, "a CandidateOptions"),
        ("options.promotion", 0.25, "a SuccessiveHalvingPromotion or None"),
        ("options.budget_step", "2", "an integer >= 1"),
        ("options.log_decisions", "yes", "True or False"),
        ("options", {"budget_step": 2}, "a FreezeThawOptions"),
        ("completion", False, "a DyHPOCompletion or None"),
        ("depth_gate", 0.75, "a DepthGate or None"),
        ("max_t", "abc", "an integer >= 1"),
        ("max_t", [5], "an integer >= 1"),
        ("max_t", float("nan"), "an integer >= 1"),
        ("max_t", 5.5, "an integer >= 1"),
        ("random_seed", "seven", "an integer in [0, 4294967295] or None"),
        ("random_seed", -1, "an integer in [0, 4294967295] or None"),
        ("random_seed", True, "an integer in [0, 4294967295] or None"),
        ("surrogate.condition_on_running", "yes", "True or False"),
        ("surrogate.normalisation_scores", "per-trial", "one of 'epochs', 'trials', 'trials_if_alike'"),
    ],
)
def test_scheduler_arguments_of_the_wrong_kind_are_refused_by_name(argument, value, expected):
    # a string once failed inside a comparison (TypeError, no argument named), 2.5
    # candidates passed the check, and max_t="abc" failed inside int() naming nothing.
    # ARGUMENT.FIELD: the field of the settings object passed as ARGUMENT, named in the message
    settings = {"options": FreezeThawOptions, "surrogate": DyHPOSurrogate}
    top, _, field = argument.partition(".")
    name = f"{settings[top].__name__}.{field}" if field else argument
    with pytest.raises(ValueError, match=re.escape(f"{name} must be {expected}, got {value!r}")):
        kwargs = {"max_t": 5, top: settings[top](**{field: value}) if field else value}
        DyHPO({"x": uniform(0, 1)}, metric="loss", **kwargs)


def test_integral_floats_and_numpy_values_read_from_data_are_accepted():
    # max_t is often read from a blackbox's fidelities, which may be floats or numpy scalars
    s = DyHPO({"x": uniform(0, 1)}, metric="loss", max_t=np.float64(52.0), random_seed=np.int64(3),
              options=FreezeThawOptions(budget_step=2.0), surrogate=DyHPOSurrogate(condition_on_running=np.True_))
    assert (s.max_t, s.budget_step, s.random_seed) == (52, 2, 3)
    assert all(type(v) is int for v in (s.max_t, s.budget_step, s.random_seed))
    assert s.policy.condition_on_pending is True


@pytest.mark.parametrize(
    "settings, field, value, expected",
    [
        (DeepKernelGPConfig, "hidden", 0, "an integer >= 1"),
        (DeepKernelGPConfig, "features", 16.0, "an integer >= 1"),
        (DeepKernelGPConfig, "refine_iterations", -1, "an integer >= 0"),
        (DeepKernelGPConfig, "max_fit_points", 0, "an integer >= 1 or None"),
        (DeepKernelGPConfig, "lr", 0.0, "a finite number > 0"),
        (DeepKernelGPConfig, "predict_noisy", "yes", "True or False"),
        (PowerLawConfig, "hidden", -64, "an integer >= 1"),
        (PowerLawConfig, "batch_size", 0, "an integer >= 1"),
        (PowerLawConfig, "refine_epochs", 2.5, "an integer >= 0"),
        (PowerLawConfig, "max_refine_steps", 0, "an integer >= 1 or None"),
        (PowerLawConfig, "lr", float("inf"), "a finite number > 0"),
    ],
)
def test_surrogate_settings_are_checked_when_made(settings, field, value, expected):
    # before, a zero width or learning rate failed (or silently trained nothing) at the
    # first fit, deep inside torch, after the tuner had started
    with pytest.raises(ValueError, match=re.escape(f"{field} must be {expected}, got {value!r}")):
        settings(**{field: value})
    settings(**{field: None if "None" in expected else getattr(settings(), field)})  # the default passes


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("refine_every", 0, "an integer >= 1"),
        ("refine_every", 2.0, "an integer >= 1"),
        ("initial_full_fits", "1", "an integer >= 1"),
        ("refit_growth", 1.0, "a number > 1 (inf: never)"),
        ("refit_growth", "4", "a number > 1 (inf: never)"),
        ("refit_growth", float("nan"), "a number > 1 (inf: never)"),
        ("refit_on_stall", 0.0, "a number > 0 or None"),
        ("refit_on_stall", "1.2", "a number > 0 or None"),
        ("refine_on_misfit", 1.0, "a number in (0, 1) or None"),
        ("refine_on_misfit", "0.01", "a number in (0, 1) or None"),
        ("refine_every_fraction", "0.01", "a finite number > 0 or None"),
        ("rescale_when_outdated", 1, "True or False"),
    ],
)
def test_fit_schedule_fields_are_checked_by_name(field, value, expected):
    # a string in a float field once failed inside a comparison (TypeError, no field named)
    kwargs = {"refine_every": 5, field: value}
    with pytest.raises(ValueError, match=re.escape(f"{field} must be {expected}, got {value!r}")):
        FitSchedule(**kwargs)


def test_fit_schedule_keeps_plain_types_and_its_open_bounds():
    schedule = FitSchedule(refine_every=np.int64(21), refit_growth=np.float64(4.0), refit_on_stall=1,
                           refine_on_misfit=np.float32(0.01), refine_every_fraction=0.01,
                           rescale_when_outdated=np.True_)
    assert schedule == FitSchedule(refine_every=21, refit_growth=4.0, refit_on_stall=1.0,
                                   refine_on_misfit=float(np.float32(0.01)), refine_every_fraction=0.01,
                                   rescale_when_outdated=True)
    assert type(schedule.refine_every) is int and type(schedule.refit_growth) is float
    assert type(schedule.rescale_when_outdated) is bool
    # the values just inside the open bounds, and inf where it means "never", pass
    FitSchedule(refine_every=1, refit_growth=math.nextafter(1.0, 2.0), refit_on_stall=math.inf,
                refine_on_misfit=math.nextafter(1.0, 0.0))
    assert FitSchedule(refine_every=1).refit_growth == math.inf


SPACE = {"lr": loguniform(1e-4, 1e-1), "dropout": uniform(0.0, 0.5)}


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"lr": 50.0, "dropout": 0.1}, r"candidates\.configs\[1\]: lr=50.0 is outside its domain"),
        ({"lr": 1e-3, "dropout": -3.0}, r"candidates\.configs\[1\]: dropout=-3.0 is outside its domain"),
        ({"lr": 1e-3}, r"candidates\.configs\[1\] lacks hyperparameter 'dropout'"),
    ],
)
def test_candidate_configs_outside_the_space_are_refused(bad, message):
    with pytest.raises(ConfigSpaceError, match=message):
        candidates = CandidateOptions(configs=[{"lr": 1e-3, "dropout": 0.1}, bad])
        DyHPO(SPACE, metric="loss", max_t=5, options=FreezeThawOptions(candidates=candidates))


def test_empty_candidate_configs_are_refused_by_name():
    with pytest.raises(ConfigSpaceError, match=r"candidates\.configs is empty"):
        DyHPO(SPACE, metric="loss", max_t=5, options=FreezeThawOptions(candidates=CandidateOptions(configs=[])))


@pytest.mark.parametrize("epoch", [float("inf"), float("nan"), 1.5, 2.5, 0, "two"])
def test_bad_epochs_are_refused_naming_time_attr_and_value(epoch):
    s = DyHPO(SPACE, metric="loss", max_t=5, random_seed=0)
    trial = make_trial(0, s.suggest().config)
    s.on_trial_add(trial)
    with pytest.raises(ValueError, match=r"'epoch' .*" + repr(epoch).replace("(", r"\(").replace(")", r"\)")):
        s.on_trial_result(trial, {"epoch": epoch, "loss": 0.5})
    assert s.observations.trials[0].scores == []  # nothing recorded
    assert s.on_trial_result(trial, {"epoch": 1.0, "loss": 0.5}) in (D.CONTINUE, D.PAUSE)  # 1.0 is epoch 1


def test_bad_constructor_arguments_name_the_argument():
    for kwargs, name in [
        ({"time_attr": ""}, "time_attr"),
        ({"random_seed": 1.5}, "random_seed"),
        ({"max_t": 0}, "max_t"),
    ]:
        with pytest.raises(ValueError, match=name):
            DyHPO(SPACE, metric="loss", **{"max_t": 5, **kwargs})


# ----- 5. late results for a paused trial -----------------------------------------------------


def _paused_trial(max_t=5):
    # prefers new configurations: every decision pauses the reporting trial
    s = DyHPO(
        {"x": uniform(0, 1)},
        metric="loss",
        max_t=max_t,
        random_seed=0,
        options=FreezeThawOptions(candidates=CandidateOptions(num_initial_random=10)),
    )
    trial = make_trial(0, s.suggest().config)
    s.on_trial_add(trial)
    assert s.on_trial_result(trial, {"epoch": 1, "loss": 0.5}) == D.PAUSE
    s.on_trial_remove(trial)
    return s, trial


def test_late_nan_after_pause_marks_the_trial_diverged_and_it_is_never_resumed():
    s, trial = _paused_trial()
    assert s.on_trial_result(trial, {"epoch": 2, "loss": float("nan")}) == D.STOP
    assert s.trial_status(0) is TrialStatus.DIVERGED
    trials = {0: trial}
    for _ in range(20):
        assert one_epoch_per_decision(s, trials, lambda epoch: 0.9).trial_id != 0


def test_late_reports_up_to_max_t_finish_the_trial():
    s, trial = _paused_trial(max_t=3)
    assert s.on_trial_result(trial, {"epoch": 2, "loss": 0.4}) == D.PAUSE  # still resumable
    assert s.on_trial_result(trial, {"epoch": 3, "loss": 0.3}) == D.STOP
    assert s.trial_status(0) is TrialStatus.FINISHED
    assert s.observations.trials[0].scores == [-0.5, -0.4, -0.3]


# ----- 6. tiny spaces with several workers ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("num_configs, n_workers", [(2, 3), (3, 4)])
def test_tiny_space_with_more_workers_than_configs_needs_no_fallback(num_configs, n_workers):
    blackbox = tiny_blackbox(num_configs=num_configs, max_t=10)
    s = DyHPO(blackbox.configuration_space, metric="error", do_minimize=True, max_t=10, random_seed=0)
    _, df = simulate_tuner(s, blackbox, n_workers=n_workers, max_epochs=10_000)
    assert len(df) == num_configs * 10
    # before: the GP was fitted on a single row (batch norm failed) and the decision was random
    assert s.metadata()["num_fallbacks"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_a_metric_that_never_changes_is_tuned_to_the_end_without_fallbacks(method):
    """Every configuration reports the same value at every epoch (a broken metric, or a task
    too easy to tell configurations apart): the outcome transform has no spread to scale by and
    the surrogate sees constant targets; the run must still use its budget and finish trials."""
    blackbox = tiny_blackbox(num_configs=12, max_t=6)
    blackbox.objectives_evaluations[..., 0] = 0.25
    s = method(blackbox.configuration_space, metric="error", do_minimize=True, max_t=6, random_seed=0)
    _, df = simulate_tuner(s, blackbox, n_workers=4, max_epochs=40)
    assert len(df) >= 40 and (df["error"] == 0.25).all()
    assert df.groupby("trial_id")["epoch"].max().max() == 6  # some trial was trained to max_t
    assert s.metadata()["num_fallbacks"] == 0


# ----- 7. points_to_evaluate -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_points_to_evaluate_are_started_first_in_order(method):
    blackbox = tiny_blackbox(num_configs=40, max_t=5)
    points = [{"x": 17, "c": "a"}, {"x": 3, "c": "a"}, {"x": 29, "c": "a"}]
    s = method(
        blackbox.configuration_space,
        metric="error",
        do_minimize=True,
        max_t=5,
        random_seed=0,
        points_to_evaluate=points,
    )
    _, df = simulate_tuner(s, blackbox, n_workers=2, max_epochs=40)
    first = df.sort_values("st_tuner_time", kind="stable").drop_duplicates("trial_id")["config_x"].tolist()
    assert first[:3] == [17, 3, 29]
    assert len(set(first)) == len(first)  # never started twice


def test_points_to_evaluate_are_validated():
    with pytest.raises(ConfigSpaceError, match=r"points_to_evaluate\[0\]: lr=5.0 is outside"):
        DyHPO(SPACE, metric="loss", max_t=5, points_to_evaluate=[{"lr": 5.0, "dropout": 0.1}])
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] = .* is not one of the candidate configurations"):
        DyHPO(
            SPACE,
            metric="loss",
            max_t=5,
            options=FreezeThawOptions(candidates=CandidateOptions(configs=[{"lr": 1e-3, "dropout": 0.1}])),
            points_to_evaluate=[{"lr": 1e-2, "dropout": 0.1}],
        )
    # None: nothing special, as Syne Tune 0.16's searchers (no default configuration)
    s = DyHPO(SPACE, metric="loss", max_t=5, random_seed=0, points_to_evaluate=None)
    assert s.suggest().config != DyHPO(SPACE, metric="loss", max_t=5, random_seed=1).suggest().config


# ----- 9. the suite itself: hangs fail fast ----------------------------------------------------


def test_tests_time_out(pytestconfig):
    assert float(pytestconfig.getini("timeout")) > 0
