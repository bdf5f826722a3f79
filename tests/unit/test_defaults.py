"""One source per default: each settings class's defaults are its method's, changing one field
of a settings object passed to a method changes only that field of what the method uses, the
papers' settings are each class's ``paper()``, and ``max_t`` is required. Explicit signatures:
every argument a user may pass is listed, annotated and (but the required ones) defaulted, at
most 12 per method, and each reaches the scheduler."""

import inspect
import math
from dataclasses import MISSING, asdict, fields

import pytest
from syne_tune.config_space import uniform

import syne_dyhpo
from syne_dyhpo import (
    DeepKernelGPConfig,
    DeepPowerLaw,
    DeepPowerLawSurrogate,
    DyHPO,
    DyHPOSurrogate,
    FitSchedule,
    FreezeThawOptions,
    FreezeThawScheduler,
    IncumbentCompletion,
    PowerLawConfig,
)

SPACE = {"x": uniform(0, 1)}

#: (method, ARGUMENT or ARGUMENT.FIELD) -> (name of the settings class passed there, where the
#: built scheduler keeps it)
SETTINGS = {
    ("DyHPO", "surrogate.model"): ("DeepKernelGPConfig", lambda s: s.policy.surrogate.config),
    ("DyHPO", "surrogate.fit_schedule"): ("DyHPOFitSchedule", lambda s: s.policy.schedule),
    ("DyHPO", "completion"): ("DyHPOCompletion", lambda s: s.completion),
    ("DeepPowerLaw", "surrogate.model"): ("PowerLawConfig", lambda s: s.policy.surrogate.config),
    ("DeepPowerLaw", "surrogate.fit_schedule"): ("DeepPowerLawFitSchedule", lambda s: s.policy.schedule),
    ("DeepPowerLaw", "completion"): ("DeepPowerLawCompletion", lambda s: s.completion),
    **{
        (method, argument): (class_name, used)
        for method in ("DyHPO", "DeepPowerLaw")
        for argument, (class_name, used) in {
            "depth_gate": ("DepthGate", lambda s: s.depth_gate),
            "options.candidates": ("CandidateOptions", lambda s: s.candidates),
            "options.checkpoints": ("PausedCheckpoints", lambda s: s.checkpoints),
        }.items()
    },
}

#: a valid value for each field, used where it differs from the field's default (else OTHER)
CHANGED = {
    "hidden": 32, "features": 64, "conv_channels": 2, "lr": 0.05, "max_iterations": 77,
    "refine_iterations": 7, "patience": 3, "max_fit_points": 99, "predict_noisy": False,
    "max_condition_points": 333, "num_members": 3, "batch_size": 16, "fit_epochs": 11,
    "refine_epochs": 4, "loss": "l1", "max_refine_steps": 5, "max_fit_steps": 123,
    "batch_norm": True, "refine_steps_shrink_after": 50,
    "refine_every": 15, "refit_growth": 3.0, "initial_full_fits": 4, "refit_on_stall": 2.0,
    "refine_on_misfit": 0.05, "refine_every_fraction": 0.02, "rescale_when_outdated": True,
    "after": 5, "delay": 1.0, "share": 0.25, "leaders_until_trained": True, "committed": 2,
    "commit_after": 0.75, "limit": 3, "leader_score": "latest",
    "top_fraction": 0.5, "min_kept": 3, "num_candidates": 100, "num_kept": 7, "num_initial_random": 4,
    "divide_initial_random": True, "divide_initial_random_by_start": True,
    "configs": [{"x": 0.25}, {"x": 0.75}], "max_kept": 6, "restart_if_lost": True,
}
OTHER = {"lr": 0.01, "batch_norm": False, "leaders_until_trained": False, "committed": 0, "share": 0.5}

#: the settings objects that group a method's arguments: ARGUMENT -> its class's name
GROUPS = {"surrogate": "{method}Surrogate", "options": "FreezeThawOptions"}


def _changed_value(field: str, default):
    value = CHANGED[field]
    return OTHER[field] if value == default else value


def _build(method: str, **arguments):
    return getattr(syne_dyhpo, method)(SPACE, metric="loss", max_t=5, **arguments)


def _argument(method: str, path: str, value) -> dict:
    """The keyword argument passing ``value`` at ``path`` (ARGUMENT or ARGUMENT.FIELD of a
    settings object whose other fields are the defaults)."""
    top, _, field = path.partition(".")
    if not field:
        return {top: value}
    return {top: getattr(syne_dyhpo, GROUPS[top].format(method=method))(**{field: value})}


def _cases():
    for (method, argument), (class_name, _) in SETTINGS.items():
        for field in fields(getattr(syne_dyhpo, class_name)):
            yield pytest.param(method, argument, field.name, id=f"{method}-{argument}-{field.name}")


@pytest.mark.parametrize("method, argument, field", list(_cases()))
def test_changing_one_field_of_a_settings_object_changes_only_that_field_of_what_the_method_uses(
    method, argument, field
):
    class_name, used = SETTINGS[method, argument]
    settings_class = getattr(syne_dyhpo, class_name)
    default = asdict(used(_build(method)))
    value = _changed_value(field, default[field])
    changed = used(_build(method, **_argument(method, argument, settings_class(**{field: value}))))
    assert asdict(changed) == {**default, field: value}


def test_the_issues_examples_keep_the_methods_caps():
    # DeepKernelGPConfig(lr=0.05) keeps DyHPO's caps; PowerLawConfig(lr=0.05) DeepPowerLaw's caps
    # and its network without BatchNorm
    gp = _build("DyHPO", surrogate=DyHPOSurrogate(model=DeepKernelGPConfig(lr=0.05))).policy.surrogate.config
    assert (gp.lr, gp.max_iterations, gp.max_fit_points, gp.max_condition_points) == (0.05, 300, 128, 512)
    dpl = _build("DeepPowerLaw",
                 surrogate=DeepPowerLawSurrogate(model=PowerLawConfig(lr=0.05))).policy.surrogate.config
    assert (dpl.lr, dpl.max_refine_steps, dpl.max_fit_steps, dpl.refine_steps_shrink_after, dpl.batch_norm) == (
        0.05, 16, 4000, 2000, False)


@pytest.mark.parametrize("method, argument", list(SETTINGS))
def test_each_settings_class_with_no_arguments_is_what_the_method_uses_by_default(method, argument):
    class_name, used = SETTINGS[method, argument]
    settings_class = getattr(syne_dyhpo, class_name)
    assert used(_build(method)) == settings_class()
    # the signature shows that default (help(), IDEs)
    top, _, field = argument.partition(".")
    default = inspect.signature(getattr(syne_dyhpo, method)).parameters[top].default
    assert (getattr(default, field) if field else default) == settings_class()


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
def test_the_groups_with_no_arguments_are_the_methods_defaults(method):
    parameters = inspect.signature(getattr(syne_dyhpo, method)).parameters
    for argument, class_name in GROUPS.items():
        assert parameters[argument].default == getattr(syne_dyhpo, class_name.format(method=method))()


def test_the_papers_settings_are_one_named_constructor_each():
    assert DeepKernelGPConfig.paper() == DeepKernelGPConfig(max_iterations=1000, max_fit_points=None,
                                                           max_condition_points=None)
    assert PowerLawConfig.paper() == PowerLawConfig(max_refine_steps=None, max_fit_steps=None,
                                                    refine_steps_shrink_after=None, batch_norm=True)
    dyhpo_paper = syne_dyhpo.DyHPOFitSchedule.paper()
    assert (dyhpo_paper.refine_every, dyhpo_paper.refit_growth, dyhpo_paper.refine_every_fraction,
            dyhpo_paper.refit_on_stall, dyhpo_paper.initial_full_fits) == (1, math.inf, None, 1.2, 1)
    dpl_paper = syne_dyhpo.DeepPowerLawFitSchedule.paper()
    assert (dpl_paper.refine_every, dpl_paper.initial_full_fits, dpl_paper.refit_on_stall) == (1, 10, 1.2)
    # each method's surrogate settings: the paper's model and fit schedule, one argument away
    assert DyHPOSurrogate.paper() == DyHPOSurrogate(model=DeepKernelGPConfig.paper(), fit_schedule=dyhpo_paper)
    assert DeepPowerLawSurrogate.paper() == DeepPowerLawSurrogate(model=PowerLawConfig.paper(), fit_schedule=dpl_paper)
    # the paper's settings reach the method unchanged; no completion and no depth gate
    s = _build("DyHPO", surrogate=DyHPOSurrogate.paper(), completion=None, depth_gate=None)
    assert s.policy.surrogate.config == DeepKernelGPConfig.paper() and s.policy.schedule == dyhpo_paper
    assert s.policy.condition_on_pending is False
    assert s.completion is None and s.depth_gate is None and s._decider.depth_gate is None
    s = _build("DeepPowerLaw", surrogate=DeepPowerLawSurrogate.paper(), completion=None)
    assert s.policy.surrogate.config == PowerLawConfig.paper() and s.policy.schedule == dpl_paper


@pytest.mark.parametrize("method, argument, wrong", [
    ("DyHPO", "surrogate.fit_schedule", FitSchedule(refine_every=15)),
    ("DyHPO", "surrogate.fit_schedule", syne_dyhpo.DeepPowerLawFitSchedule()),
    ("DyHPO", "completion", IncumbentCompletion(limit=3)),
    ("DyHPO", "surrogate.model", PowerLawConfig()),
    ("DyHPO", "surrogate", DeepPowerLawSurrogate()),
    ("DeepPowerLaw", "surrogate.fit_schedule", FitSchedule(refine_every=1)),
    ("DeepPowerLaw", "completion", syne_dyhpo.DyHPOCompletion()),
    ("DeepPowerLaw", "surrogate.model", DeepKernelGPConfig()),
    ("DeepPowerLaw", "surrogate", DyHPOSurrogate()),
])
def test_a_method_refuses_settings_whose_defaults_are_not_its_own_naming_the_class_to_use(method, argument, wrong):
    expected = SETTINGS[method, argument][0] if (method, argument) in SETTINGS else f"{method}Surrogate"
    top, _, field = argument.partition(".")
    name = f"{GROUPS[top].format(method=method)}.{field}" if field else argument
    message = (rf"^{name} must be a {expected}( or None)?, got .*\({expected}\(\)'s defaults are {method}'s; "
               rf"to change one field, pass {expected}\(field=value\)\)$")
    with pytest.raises(ValueError, match=message):
        _build(method, **_argument(method, argument, wrong))


def test_the_core_options_refuse_another_class_naming_the_one_to_use():
    with pytest.raises(ValueError, match=r"^options must be a FreezeThawOptions, got CandidateOptions\("):
        _build("DyHPO", options=syne_dyhpo.CandidateOptions())
    with pytest.raises(
        ValueError, match=r"^FreezeThawOptions.checkpoints must be a PausedCheckpoints, got DepthGate\("
    ):
        FreezeThawOptions(checkpoints=syne_dyhpo.DepthGate())


@pytest.mark.parametrize("cls", [DyHPO, DeepPowerLaw, FreezeThawScheduler])
def test_max_t_is_a_required_keyword_argument(cls):
    parameter = inspect.signature(cls).parameters["max_t"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'max_t'"):
        cls(SPACE, metric="loss") if cls is not FreezeThawScheduler else cls(SPACE, "loss", None, completion=None)


def test_the_core_has_no_default_where_the_methods_differ_and_the_methods_defaults_where_they_agree():
    parameters = inspect.signature(FreezeThawScheduler).parameters
    assert parameters["completion"].default is inspect.Parameter.empty
    from syne_dyhpo.core.policy import SurrogatePolicy

    normalisation = inspect.signature(SurrogatePolicy).parameters["normalisation_scores"].default
    for method in (DyHPO, DeepPowerLaw):
        assert inspect.signature(method).parameters["surrogate"].default.normalisation_scores == normalisation
        assert _build(method.__name__).policy.normalisation_scores == normalisation == "trials_if_alike"


# ----- explicit signatures ----------------------------------------------------------------------

#: Syne Tune's constructor arguments, flat in both methods so that they swap in for ASHA or BOHB
SYNE_TUNE_ARGUMENTS = {
    "config_space",
    "metric",
    "do_minimize",
    "time_attr",
    "max_t",
    "random_seed",
    "points_to_evaluate",
    "max_resource_attr",
}


@pytest.mark.parametrize(
    "cls, required, limit",
    [
        (DyHPO, {"config_space", "metric", "max_t"}, 12),
        (DeepPowerLaw, {"config_space", "metric", "max_t"}, 12),
        (FreezeThawScheduler, {"config_space", "metric", "policy", "max_t", "completion"}, 15),
    ],
)
def test_signatures_list_every_argument_annotated_with_its_default(cls, required, limit):
    parameters = inspect.signature(cls).parameters
    kinds = {p.kind for p in parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds and inspect.Parameter.VAR_POSITIONAL not in kinds
    assert len(parameters) <= limit
    assert set(parameters) >= SYNE_TUNE_ARGUMENTS
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters.values())
    assert {name for name, p in parameters.items() if p.default is inspect.Parameter.empty} == required
    # help() documents every argument
    assert all(f":param {name}:" in (cls.__doc__ or "") for name in parameters)
    # an argument of the former signatures is refused, not swallowed
    with pytest.raises(TypeError, match="unexpected keyword argument 'budget_step'"):
        cls(SPACE, metric="loss", max_t=5, budget_step=2) if cls is not FreezeThawScheduler else cls(
            SPACE, "loss", None, max_t=5, completion=None, budget_step=2
        )


@pytest.mark.parametrize("cls", [DyHPOSurrogate, DeepPowerLawSurrogate, FreezeThawOptions])
def test_the_groups_fields_are_annotated_with_defaults_and_documented(cls):
    for field in fields(cls):
        assert field.type and field.default is not MISSING and f":param {field.name}:" in cls.__doc__


#: every argument and every field of the groups: a value other than its default, and where the
#: built scheduler keeps what it was given
REACHES = {
    "metric": ("acc", lambda s: s.metric),
    "do_minimize": (False, lambda s: s.do_minimize),
    "time_attr": ("step", lambda s: s.time_attr),
    "max_t": (7, lambda s: s.observations.max_t),
    "max_resource_attr": ("stop_at", lambda s: s._lifecycle.max_resource_attr),
    "random_seed": (11, lambda s: s._decider.random_seed),
    "points_to_evaluate": ([{"x": 0.5}], lambda s: s._offers.points),
    "completion": (None, lambda s: s._decider.completion),
    "depth_gate": (None, lambda s: s._decider.depth_gate),
    "surrogate.normalisation_scores": ("epochs", lambda s: s.policy.normalisation_scores),
    "options.budget_step": (2, lambda s: s._lifecycle.budget_step),
    "options.promotion": (syne_dyhpo.SuccessiveHalvingPromotion(), lambda s: s._decider.promotion),
    "options.log_decisions": (False, lambda s: s._log.enabled),
    "options.job_costs": (syne_dyhpo.JobCosts(start_seconds=2.0), lambda s: s.job_costs),
    "options.candidates": (syne_dyhpo.CandidateOptions(num_candidates=9), lambda s: s._decider.candidates),
    "options.checkpoints": (
        syne_dyhpo.PausedCheckpoints(max_kept=4, restart_if_lost=True),
        lambda s: (s._decider.max_kept_paused, s._lifecycle.restart_if_lost),
    ),
}
REACHES_DYHPO = {"surrogate.condition_on_running": (True, lambda s: s.policy.condition_on_pending)}
EXPECTED = {"options.checkpoints": (4, True)}  # where what the scheduler keeps is not the value itself
# the settings objects' fields are covered field by field above (SETTINGS)
BY_SETTINGS = {"surrogate.model", "surrogate.fit_schedule"}


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
def test_every_argument_and_group_field_reaches_the_scheduler(method):
    reaches = {**REACHES, **(REACHES_DYHPO if method == "DyHPO" else {})}
    parameters = inspect.signature(getattr(syne_dyhpo, method)).parameters
    paths = {name for name in parameters if name not in GROUPS and name != "config_space"}
    for group, class_name in GROUPS.items():
        paths |= {f"{group}.{f.name}" for f in fields(getattr(syne_dyhpo, class_name.format(method=method)))}
    assert paths == set(reaches) | BY_SETTINGS  # a new argument needs a row here
    default = _build(method)
    for path, (value, kept) in reaches.items():
        expected = EXPECTED.get(path, value)
        assert kept(default) != expected, path  # the value is not the default: the check can fail
        arguments = {"metric": "loss", "max_t": 5, **_argument(method, path, value)}
        assert kept(getattr(syne_dyhpo, method)(SPACE, **arguments)) == expected, path
