"""One source per default: each settings class's defaults are its method's, changing one field
of a settings object passed to a method changes only that field of what the method uses, the
papers' settings are each class's ``paper()``, and ``max_t`` is required."""

import inspect
import math
from dataclasses import asdict, fields

import pytest
from syne_tune.config_space import uniform

import syne_dyhpo
from syne_dyhpo import (
    DeepKernelGPConfig,
    DeepPowerLaw,
    DyHPO,
    FitSchedule,
    FreezeThawScheduler,
    IncumbentCompletion,
    PowerLawConfig,
)

SPACE = {"x": uniform(0, 1)}

#: (method, argument) -> (name of its settings class, where the built scheduler keeps it)
SETTINGS = {
    ("DyHPO", "surrogate_config"): ("DeepKernelGPConfig", lambda s: s.policy.surrogate.config),
    ("DyHPO", "fit_schedule"): ("DyHPOFitSchedule", lambda s: s.policy.schedule),
    ("DyHPO", "completion"): ("DyHPOCompletion", lambda s: s.completion),
    ("DeepPowerLaw", "surrogate_config"): ("PowerLawConfig", lambda s: s.policy.surrogate.config),
    ("DeepPowerLaw", "fit_schedule"): ("DeepPowerLawFitSchedule", lambda s: s.policy.schedule),
    ("DeepPowerLaw", "completion"): ("DeepPowerLawCompletion", lambda s: s.completion),
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
}
OTHER = {"lr": 0.01, "batch_norm": False, "leaders_until_trained": False, "committed": 0, "share": 0.5}


def _changed_value(field: str, default):
    value = CHANGED[field]
    return OTHER[field] if value == default else value


def _build(method: str, **arguments):
    return getattr(syne_dyhpo, method)(SPACE, metric="loss", max_t=5, **arguments)


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
    changed = used(_build(method, **{argument: settings_class(**{field: value})}))
    assert asdict(changed) == {**default, field: value}


def test_the_issues_examples_keep_the_methods_caps():
    # DeepKernelGPConfig(lr=0.05) keeps DyHPO's caps; PowerLawConfig(lr=0.05) DeepPowerLaw's caps
    # and its network without BatchNorm
    gp = _build("DyHPO", surrogate_config=DeepKernelGPConfig(lr=0.05)).policy.surrogate.config
    assert (gp.lr, gp.max_iterations, gp.max_fit_points, gp.max_condition_points) == (0.05, 300, 128, 512)
    dpl = _build("DeepPowerLaw", surrogate_config=PowerLawConfig(lr=0.05)).policy.surrogate.config
    assert (dpl.lr, dpl.max_refine_steps, dpl.max_fit_steps, dpl.refine_steps_shrink_after, dpl.batch_norm) == (
        0.05, 16, 4000, 2000, False)


@pytest.mark.parametrize("method, argument", list(SETTINGS))
def test_each_settings_class_with_no_arguments_is_what_the_method_uses_by_default(method, argument):
    class_name, used = SETTINGS[method, argument]
    settings_class = getattr(syne_dyhpo, class_name)
    assert used(_build(method)) == settings_class()
    # the signature shows that default (help(), IDEs)
    assert inspect.signature(getattr(syne_dyhpo, method)).parameters[argument].default == settings_class()


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
    # the paper's settings reach the method unchanged; no completion and no depth gate
    s = _build("DyHPO", surrogate_config=DeepKernelGPConfig.paper(), fit_schedule=dyhpo_paper, completion=None,
               depth_gate=None)
    assert s.policy.surrogate.config == DeepKernelGPConfig.paper() and s.policy.schedule == dyhpo_paper
    assert s.completion is None and s.depth_gate is None


@pytest.mark.parametrize("method, argument, wrong", [
    ("DyHPO", "fit_schedule", FitSchedule(refine_every=15)),
    ("DyHPO", "fit_schedule", syne_dyhpo.DeepPowerLawFitSchedule()),
    ("DyHPO", "completion", IncumbentCompletion(limit=3)),
    ("DyHPO", "surrogate_config", PowerLawConfig()),
    ("DeepPowerLaw", "fit_schedule", FitSchedule(refine_every=1)),
    ("DeepPowerLaw", "completion", syne_dyhpo.DyHPOCompletion()),
    ("DeepPowerLaw", "surrogate_config", DeepKernelGPConfig()),
])
def test_a_method_refuses_settings_whose_defaults_are_not_its_own_naming_the_class_to_use(method, argument, wrong):
    expected = SETTINGS[method, argument][0]
    message = (rf"^{argument} must be a {expected}( or None)?, got .*\({expected}\(\)'s defaults are {method}'s; "
               rf"to change one field, pass {expected}\(field=value\)\)$")
    with pytest.raises(ValueError, match=message):
        _build(method, **{argument: wrong})


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
        assert inspect.signature(method).parameters["normalisation_scores"].default == normalisation
        assert _build(method.__name__).policy.normalisation_scores == normalisation == "trials_if_alike"
