"""The benchmark runner's variants keep the settings they were measured with when a default
changes (each pins the defaults of its time: ``benchmarks/runner.py``)."""

from types import SimpleNamespace

import pytest
from syne_tune.config_space import uniform

from benchmarks.defaults import _GROUPED
from benchmarks.runner import BN_FOUR_STEPS, LEADERS_AFTER_9, METHODS

TODAY = dict(batch_norm=False, max_refine_steps=16, max_fit_steps=4000, refine_steps_shrink_after=2000)
VERSION_0_1 = dict(batch_norm=False, max_refine_steps=16, max_fit_steps=None, refine_steps_shrink_after=None)


def _metadata(method: str) -> dict:
    definition = SimpleNamespace(metric="loss", do_minimize=True, time_attr="epoch", max_t=50)
    return METHODS[method](definition, {"x": uniform(0, 1)}, None, 0).metadata()


@pytest.mark.parametrize(
    "method, expected",
    [
        ("DeepPowerLaw", TODAY),
        ("DeepPowerLaw-bn-four-steps", BN_FOUR_STEPS),  # the default before
        ("DeepPowerLaw-batch-norm", BN_FOUR_STEPS),
        ("DeepPowerLaw-no-batch-norm", {**BN_FOUR_STEPS, "batch_norm": False}),
        ("DeepPowerLaw-SH", {**BN_FOUR_STEPS, "batch_norm": False}),
        ("DeepPowerLaw-limit1", BN_FOUR_STEPS),
        ("DeepPowerLaw-one-leader-after27", BN_FOUR_STEPS),
        ("DeepPowerLaw-bn-r16f500", {**BN_FOUR_STEPS, "max_refine_steps": 16}),
        ("DeepPowerLaw-l1", {**BN_FOUR_STEPS, "batch_norm": False, "loss": "l1"}),
        ("DeepPowerLaw-h64", {**BN_FOUR_STEPS, "batch_norm": False, "hidden": 64}),
        ("DeepPowerLaw-v0.1", VERSION_0_1),
        ("DeepPowerLaw-v0.1-surrogate", VERSION_0_1),
        ("DeepPowerLaw-one-leader-after27-no-bn-r16", TODAY),
    ],
)
def test_deep_power_law_variants_train_their_ensemble_as_when_they_were_measured(method, expected):
    config = _metadata(method)["policy"]["surrogate_config"]
    assert {key: config[key] for key in expected} == expected


ONE_LEADER_AFTER_15 = dict(complete_incumbent_after=15, complete_incumbent_share=0.0, committed_completions=1)


@pytest.mark.parametrize(
    "method, expected",
    [
        ("DeepPowerLaw", LEADERS_AFTER_9),
        ("DeepPowerLaw-one-leader-after15-committed", ONE_LEADER_AFTER_15),
        ("DeepPowerLaw-v0.1-surrogate", LEADERS_AFTER_9),
        ("DeepPowerLaw-bn-four-steps", LEADERS_AFTER_9),
        ("DeepPowerLaw-delay4", LEADERS_AFTER_9),
        ("DeepPowerLaw-limit2", LEADERS_AFTER_9),
        ("DeepPowerLaw-one-leader-after18", dict(complete_incumbent_after=18, complete_incumbent_share=0.0,
                                                 committed_completions=0)),
        ("DyHPO", dict(complete_incumbent_after=27, complete_incumbent_share=0.0, committed_completions=1)),
        ("DyHPO-leaders-after9", LEADERS_AFTER_9),
    ],
)
def test_variants_complete_incumbents_as_when_they_were_measured(method, expected):
    completion = _metadata(method)["completion"]
    fields = {_GROUPED[key][1]: value for key, value in expected.items()}  # the variants' names -> fields
    assert {key: completion[key] for key in fields} == fields


@pytest.mark.parametrize(
    "method, class_name, changed",
    [
        ("DyHPO-default-no-completion", "DyHPO", None),  # None: no completion
        ("DeepPowerLaw-default-no-completion", "DeepPowerLaw", None),
        ("DyHPO-default-limit2", "DyHPO", {"limit": 2}),
        ("DyHPO-default-after54", "DyHPO", {"after": 54}),
        ("DyHPO-default-after54-limit1", "DyHPO", {"after": 54, "limit": 1}),
    ],
)
def test_default_variants_differ_from_the_default_only_in_the_settings_they_name(method, class_name, changed):
    default, variant = _metadata(class_name), _metadata(method)
    expected = None if changed is None else {**default["completion"], **changed}
    assert variant["completion"] == expected != default["completion"]
    others = [key for key in default if key != "completion"]
    assert {k: variant[k] for k in others} == {k: default[k] for k in others}
