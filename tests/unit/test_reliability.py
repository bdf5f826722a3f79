"""Bad inputs and odd spaces that a run must either handle or refuse at once, naming what is
wrong: huge integer ranges, lists as categories, Ray's grid_search, checkpoint contents and
epochs, reports past ``max_t``, clashing result keys, lost epochs after a pause."""

from __future__ import annotations

import logging
import pathlib
import tracemalloc
from collections import OrderedDict
from datetime import datetime

import numpy as np
import pytest
import torch
from syne_tune.backend.trial_status import Trial
from syne_tune.config_space import choice, randint, uniform
from syne_tune.optimizer.scheduler import SchedulerDecision as D

from syne_dyhpo import CandidateOptions, DeepPowerLaw, DyHPO, FreezeThawOptions
from syne_dyhpo.checkpointing import capture_training_state, load_checkpoint, save_checkpoint
from syne_dyhpo.core.observations import TrialStatus
from syne_dyhpo.search_space import MAX_ENUMERATED_CONFIGS, CandidateSampler, ConfigEncoder

METHODS = [DyHPO, DeepPowerLaw]


def _trial(trial_id: int, config: dict) -> Trial:
    return Trial(trial_id=trial_id, config=config, creation_time=datetime.now())


def _start(scheduler, trials: dict) -> Trial:
    """The scheduler's next suggestion, started (or resumed) as Syne Tune's Tuner does."""
    suggestion = scheduler.suggest()
    if suggestion.spawn_new_trial_id:
        trial = trials[len(trials)] = _trial(len(trials), suggestion.config)
        scheduler.on_trial_add(trial)
        return trial
    return trials[suggestion.checkpoint_trial_id]


# ----- huge integer ranges ---------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("upper", [2**31 - 2, 10**8, 10**12])
def test_a_huge_integer_range_is_never_listed(method, upper):
    tracemalloc.start()
    try:
        scheduler = method({"seed": randint(0, upper), "lr": uniform(0, 1)}, metric="loss", max_t=3, random_seed=0,
                           points_to_evaluate=[{"seed": upper, "lr": 0.5}])
        first = scheduler.suggest().config
        second = scheduler.suggest().config
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first == {"seed": upper, "lr": 0.5}  # validated without listing the range
    assert 0 <= second["seed"] <= upper and isinstance(second["seed"], int)
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB for construction and two suggestions"


def test_only_small_finite_spaces_are_enumerated():
    assert ConfigEncoder({"n": randint(0, 10**12), "a": choice(["x", "y"])}).grid() is None
    small = ConfigEncoder({"n": randint(1, 100), "a": choice(["x", "y"])}).grid()
    assert len(small) == 200 and {c["n"] for c in small} == set(range(1, 101))
    edge = ConfigEncoder({"n": randint(1, MAX_ENUMERATED_CONFIGS)}).grid()
    assert len(edge) == MAX_ENUMERATED_CONFIGS
    assert ConfigEncoder({"n": randint(0, MAX_ENUMERATED_CONFIGS)}).grid() is None


@pytest.mark.parametrize(
    "value, inside",
    [(5, True), (5.0, True), (np.int64(7), True), ("5", True), (True, True), (-1, False), (10**12 + 1, False),
     (5.5, False), ("5.0", False), (" 5", False), (float("nan"), False), (float("inf"), False), ("x", False)],
)
def test_integer_values_are_validated_as_before_without_listing(value, inside):
    encoder = ConfigEncoder({"n": randint(0, 10**12)})
    if inside:
        encoder.validate({"n": value}, where="point")
    else:
        with pytest.raises(ValueError, match="n="):
            encoder.validate({"n": value}, where="point")


# ----- lists as categories ---------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("finite", [False, True])
def test_lists_as_categories_are_suggested_as_the_lists(method, finite):
    layers = [[64, 64], [128], [32, 32, 32]]
    space = {"layers": choice(layers), "lr": choice([0.1, 0.01]) if finite else uniform(0, 1)}
    scheduler = method(
        space,
        metric="loss",
        max_t=2,
        random_seed=1,
        options=FreezeThawOptions(candidates=CandidateOptions(num_initial_random=2)),
        points_to_evaluate=[{"layers": [128], "lr": 0.1}],
    )
    trials: dict = {}
    seen = []
    for _ in range(6):
        trial = _start(scheduler, trials)
        assert trial.config["layers"] in layers and isinstance(trial.config["layers"], list)
        seen.append(trial.config["layers"])
        epoch = scheduler.observations.trials[trial.trial_id].last_epoch + 1
        scheduler.on_trial_result(trial, {"epoch": epoch, "loss": len(trial.config["layers"]) / epoch})
        scheduler.on_trial_remove(trial)
    assert seen[0] == [128]
    assert scheduler.observations.num_observations == 6
    if finite:  # a pool of 6 configurations: each started once
        started = [(tuple(t.config["layers"]), t.config["lr"]) for t in trials.values()]
        assert len(started) == len(set(started))


def test_list_categories_are_encoded_and_keyed_by_index():
    encoder = ConfigEncoder({"layers": choice([[64, 64], [128]]), "x": uniform(0, 1)})
    assert encoder.key({"layers": [128], "x": 0.5}) == (1, 0.5)
    np.testing.assert_array_equal(encoder.encode({"layers": [128], "x": 0.5}), [0.0, 1.0, 0.5])
    configs = encoder.sample(np.random.RandomState(0), 20)
    assert {tuple(c["layers"]) for c in configs} == {(64, 64), (128,)}
    configs[0]["layers"].append(1)  # a trial's list is its own copy: the space is unchanged
    assert encoder.config_space["layers"].categories == [[64, 64], [128]]
    sampler = CandidateSampler(ConfigEncoder({"layers": choice([[64, 64], [128]])}))
    assert sampler.num_free() == 2
    sampler.mark_used({"layers": [128]})
    assert sampler.propose(np.random.RandomState(0), 5)[0] == [{"layers": [64, 64]}]


# ----- Ray's grid_search -----------------------------------------------------------------------


def test_ray_grid_search_becomes_a_choice():
    tune = pytest.importorskip("ray.tune", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
    from syne_dyhpo.ray_tune import config_space_from_ray, ray_scheduler

    space = config_space_from_ray({"n": tune.grid_search([1, 2, 3]), "lr": tune.uniform(0, 1), "c": 5})
    assert list(space["n"].categories) == [1, 2, 3] and space["c"] == 5
    with pytest.raises(ValueError, match="'n'"):
        config_space_from_ray({"n": tune.grid_search([])})
    # a space whose only hyperparameter is a grid is converted too
    scheduler = ray_scheduler(
        "dyhpo", {"n": tune.grid_search([[64], [128, 128]]), "c": 5}, metric="loss", max_t=3, random_seed=0
    )
    values = [scheduler.core.suggest().config["n"] for _ in range(2)]
    assert sorted(values) == [[64], [128, 128]]


# ----- checkpoints -----------------------------------------------------------------------------


EXTRAS = {
    "np.float64": np.float64(0.97),
    "np.int64": np.int64(3),
    "np.float32": np.float32(0.25),
    "np.bool_": np.bool_(True),
    "ndarray": np.arange(6, dtype=np.int32).reshape(2, 3),
    "str ndarray": np.array(["a", "bc"]),
    "object ndarray of ints": np.array([1, "a"], dtype=object),
    "path": pathlib.Path("/data/train"),
    "pure path": pathlib.PurePosixPath("rel/x"),
    "set": {1, 2},
    "bytes": b"\x00\x01",
    "complex": 1 + 2j,
    "ordered": OrderedDict(a=1),
    "dtype": torch.float16,
    "generator state": torch.Generator().manual_seed(3).get_state(),
}


def _equal(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("key", list(EXTRAS))
def test_what_a_checkpoint_saves_it_loads_back_equal(tmp_path, key):
    model = torch.nn.Linear(2, 1)
    save_checkpoint(tmp_path, capture_training_state(model, extra={key: EXTRAS[key]}), 2)
    loaded = load_checkpoint(tmp_path).state["extra"][key]
    assert _equal(loaded, EXTRAS[key]), (loaded, EXTRAS[key])


class _Sampler:
    pass


@pytest.mark.parametrize(
    "extra, named",
    [
        (lambda: {"sampler": _Sampler()}, r"state\['extra'\]\['sampler'\] is a .*_Sampler"),
        (lambda: {"it": iter([1, 2])}, r"\['it'\] is a builtins.list_iterator"),
        (lambda: {"pos": {"a": frozenset([1])}}, r"\['pos'\]\['a'\] is a builtins.frozenset"),
        (lambda: {"fn": len}, r"\['fn'\] is a builtins.builtin_function_or_method"),
        (lambda: {"objects": np.array([_Sampler()], dtype=object)}, r"\['objects'\].flat\[0\] is a .*_Sampler"),
        (lambda: {"matrix": np.asmatrix([[1]])}, r"\['matrix'\] is a numpy.matrix"),
    ],
    ids=["object", "iterator", "frozenset", "function", "object array", "ndarray subclass"],
)
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
def test_what_a_checkpoint_cannot_load_back_is_refused_at_save_naming_key_and_type(tmp_path, extra, named):
    with pytest.raises(TypeError, match=named):
        save_checkpoint(tmp_path, capture_training_state(extra=extra()), 2)
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("epoch", [2.7, True, -1, "3", None, float("nan")])
def test_a_checkpoint_epoch_that_is_not_a_whole_number_is_refused_at_save(tmp_path, epoch):
    with pytest.raises(ValueError, match=rf"epoch must be an integer >= 0, got {epoch!r}"):
        save_checkpoint(tmp_path, {"x": 1}, epoch)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("epoch, stored", [(0, 0), (3, 3), (np.int64(4), 4), (5.0, 5)])
def test_whole_epochs_are_stored_as_ints(tmp_path, epoch, stored):
    save_checkpoint(tmp_path, {"x": 1}, epoch)
    loaded = load_checkpoint(tmp_path).epoch
    assert loaded == stored and type(loaded) is int


# ----- reports past max_t and result keys ------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_a_first_report_past_max_t_is_refused_naming_time_attr_value_and_max_t(method):
    scheduler = method({"x": uniform(0, 1)}, metric="loss", time_attr="step", max_t=5, random_seed=0)
    trial = _start(scheduler, {})
    with pytest.raises(ValueError, match=r"step=7 .*max_t=5.*time_attr 'step'"):
        scheduler.on_trial_result(trial, {"step": 7, "loss": 0.5})
    assert scheduler.trial_status(0) is TrialStatus.RUNNING  # nothing decided, nothing lost


def test_a_report_past_max_t_after_a_curve_still_stops_the_trial():
    scheduler = DyHPO(
        {"x": uniform(0, 1)}, metric="loss", max_t=2, options=FreezeThawOptions(budget_step=2), random_seed=0
    )
    trial = _start(scheduler, {})
    assert scheduler.on_trial_result(trial, {"epoch": 1, "loss": 0.5}) == D.CONTINUE
    assert scheduler.on_trial_result(trial, {"epoch": 3, "loss": 0.4}) == D.STOP
    assert scheduler.observations.trials[0].scores == [-0.5]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"metric": "epoch", "time_attr": "epoch"},
            "metric and time_attr must be different result keys, both are 'epoch'",
        ),
        (
            {"metric": "loss", "time_attr": "epoch", "max_resource_attr": "epoch"},
            "max_resource_attr must differ from time_attr \\('epoch'\\)",
        ),
    ],
)
@pytest.mark.parametrize("method", METHODS)
def test_clashing_result_keys_are_refused_at_construction(method, kwargs, message):
    with pytest.raises(ValueError, match=message):
        method({"x": uniform(0, 1)}, max_t=3, **kwargs)


# ----- lost epochs (call by call; tests/test_reliability_local_backend.py has real processes) --


def _paused_after_epoch_one(**kwargs):
    """Two configurations; trial 0 reports epoch 1 and is paused for a random second trial."""
    scheduler = DyHPO(
        {"x": choice([0.1, 0.2])},
        metric="loss",
        max_t=6,
        random_seed=0,
        options=FreezeThawOptions(candidates=CandidateOptions(num_initial_random=2)),
        **kwargs,
    )
    trials: dict = {}
    t0 = _start(scheduler, trials)
    assert scheduler.on_trial_result(t0, {"epoch": 1, "loss": 0.5}) == D.PAUSE
    scheduler.on_trial_remove(t0)
    return scheduler, trials, t0


def _resumed_after_the_other(scheduler, trials):
    """Trial 1 runs until it is paused or finished; trial 0, the only other one, is resumed."""
    t1 = _start(scheduler, trials)
    assert t1.trial_id == 1
    decision, epoch = D.CONTINUE, 0
    while decision == D.CONTINUE:
        epoch += 1
        decision = scheduler.on_trial_result(t1, {"epoch": epoch, "loss": 0.9})
    scheduler.on_trial_remove(t1)
    assert scheduler.suggest().checkpoint_trial_id == 0


def _errors(caplog):
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_resumed_trial_reporting_past_its_next_epoch_logs_an_error_once_and_keeps_the_gap(caplog):
    scheduler, trials, t0 = _paused_after_epoch_one()
    _resumed_after_the_other(scheduler, trials)
    # its old job trained epochs 2 and 3 after the pause (results dropped), the new one goes on
    with caplog.at_level(logging.INFO, logger="syne_dyhpo"):
        scheduler.on_trial_result(t0, {"epoch": 4, "loss": 0.2})
        errors = _errors(caplog)
        assert len(errors) == 1
        assert (
            "trial_id 0: lost epochs 2-3 of its curve" in errors[0].getMessage()
            and "max_resource_attr" in errors[0].getMessage()
        )
        curve = scheduler.observations.trials[0].scores
        assert curve[0] == -0.5 and np.isnan(curve[1]) and np.isnan(curve[2]) and curve[3] == -0.2
        # another loss in the same run: INFO, not another ERROR
        scheduler._lifecycle.lost_epochs(scheduler.observations.trials[1], 2, 2, "test")
        assert len(_errors(caplog)) == 1
        assert sum("of its curve (" in r.getMessage() for r in caplog.records) == 2


def test_no_error_when_a_resumed_trial_reports_its_next_epoch(caplog):
    scheduler, trials, t0 = _paused_after_epoch_one()
    _resumed_after_the_other(scheduler, trials)
    scheduler.on_trial_result(t0, {"epoch": 2, "loss": 0.3})
    assert _errors(caplog) == [] and scheduler.observations.trials[0].scores == [-0.5, -0.3]


def test_a_paused_trials_job_reporting_past_its_segment_logs_an_error(caplog):
    scheduler, _trials, t0 = _paused_after_epoch_one(max_resource_attr="epochs")
    assert scheduler.on_trial_result(t0, {"epoch": 2, "loss": 0.4}) == D.PAUSE  # a late report
    errors = _errors(caplog)
    assert len(errors) == 1 and "config['epochs'] (max_resource_attr='epochs')" in errors[0].getMessage()
    assert scheduler.observations.trials[0].scores == [-0.5, -0.4]  # the report itself is data


def test_a_resumed_job_ending_without_a_report_logs_an_error(caplog):
    scheduler, trials, t0 = _paused_after_epoch_one()
    _resumed_after_the_other(scheduler, trials)
    scheduler.on_trial_complete(t0, {"epoch": 1, "loss": 0.5})  # its checkpoint was at max_t already
    errors = _errors(caplog)
    assert len(errors) == 1 and "trial_id 0: lost epochs from 2 on of its curve" in errors[0].getMessage()
    assert scheduler.trial_status(0) is TrialStatus.COMPLETED and scheduler.observations.trials[0].scores == [-0.5]
