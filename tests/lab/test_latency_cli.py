"""benchmarks/latency.py's command line: scheduler arguments and method names."""

import re

import numpy as np
import pytest

from benchmarks import latency


def test_scheduler_args_reach_our_schedulers_and_not_bohb():
    args = latency.parse_args(["--methods", "DyHPO", "BOHB", "--scheduler-arg", "options.candidates.num_kept=224",
                               "--scheduler-arg", "options.candidates.num_candidates=300",
                               "--scheduler-arg", "options.budget_step=2"])
    assert args.options == {"options.candidates.num_kept": 224, "options.candidates.num_candidates": 300,
                            "options.budget_step": 2}
    dyhpo = latency.make_scheduler("DyHPO", 10, 0, **args.options)
    assert dyhpo.metadata()["candidates"]["num_kept"] == 224 and dyhpo.metadata()["candidates"]["num_candidates"] == 300
    assert dyhpo.budget_step == 2
    # BOHB takes no such arguments (it would raise): make_scheduler leaves them out
    bohb = latency.make_scheduler("BOHB", 10, 0, **args.options)
    assert type(bohb).__name__ == "BOHB"


def test_scheduler_arg_fields_change_that_field_of_the_methods_default_only():
    from dataclasses import replace

    from syne_dyhpo import DeepKernelGPConfig, DyHPOFitSchedule

    args = latency.parse_args(["--methods", "DyHPO", "--scheduler-arg", "surrogate.model.max_condition_points=1024",
                               "--scheduler-arg", "surrogate.fit_schedule.refine_every=15",
                               "--scheduler-arg", "surrogate.condition_on_running=True"])
    policy = latency.make_scheduler("DyHPO", 10, 0, **args.options).policy
    assert policy.surrogate.config == replace(DeepKernelGPConfig(), max_condition_points=1024)
    assert policy.schedule == replace(DyHPOFitSchedule(), refine_every=15)
    assert policy.condition_on_pending is True and policy.normalisation_scores == "trials_if_alike"
    # a field the method's settings do not have is refused by name
    with pytest.raises(TypeError, match="max_condition_points"):
        latency.make_scheduler("DeepPowerLaw", 10, 0, **args.options)


@pytest.mark.parametrize("method", ["DyHPO", "DeepPowerLaw"])
def test_scheduler_arg_fields_of_the_settings_objects_start_from_each_methods_default(method):
    from dataclasses import replace

    from syne_dyhpo import CandidateOptions, SuccessiveHalvingPromotion
    from syne_dyhpo.methods import deep_power_law, dyhpo

    default_completion = {"DyHPO": dyhpo, "DeepPowerLaw": deep_power_law}[method].DEFAULT_COMPLETION
    args = latency.parse_args(["--methods", method, "--scheduler-arg", "completion.after=54",
                               "--scheduler-arg", "options.candidates.num_kept=224",
                               "--scheduler-arg", "options.promotion.probability=0.5"])
    scheduler = latency.make_scheduler(method, 10, 0, **args.options)
    # the method's own completion with one field changed: the two methods' defaults differ elsewhere
    assert scheduler.completion == replace(default_completion, after=54)
    assert scheduler.candidates == CandidateOptions(num_kept=224)
    assert scheduler.promotion == SuccessiveHalvingPromotion(probability=0.5)
    # without the arguments: the defaults (no promotion)
    plain = latency.make_scheduler(method, 10, 0)
    assert plain.completion == default_completion and plain.promotion is None


def test_completion_none_turns_the_completion_off():
    args = latency.parse_args(["--methods", "DyHPO", "DeepPowerLaw", "--scheduler-arg", "completion=None"])
    assert args.options == {"completion": None}
    for method in ("DyHPO", "DeepPowerLaw"):
        assert latency.make_scheduler(method, 10, 0, **args.options).completion is None


def test_a_field_the_settings_object_lacks_is_refused_by_name():
    with pytest.raises(TypeError, match="num_kept_candidates"):
        latency.make_scheduler("DyHPO", 10, 0, **{"options.candidates.num_kept_candidates": 224})


def test_scheduler_arg_values_are_literals_or_words():
    assert latency.scheduler_arg("completion=None") == ("completion", None)
    assert latency.scheduler_arg("completion.leaders_until_trained=False") == (
        "completion.leaders_until_trained",
        False,
    )
    assert latency.scheduler_arg("options.promotion.probability=0.25") == ("options.promotion.probability", 0.25)
    assert latency.scheduler_arg("time_attr=epoch") == ("time_attr", "epoch")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "Foo"], "unknown \\['Foo'\\]"),
        (["--scheduler-arg", "bad"], "must be KEY=VALUE or ARGUMENT.FIELD=VALUE .*, got 'bad'"),
        (
            ["--scheduler-arg", "num_candidates.x=1"],
            "ARGUMENT one of \\('surrogate', 'completion', 'depth_gate', 'options'\\), got 'num_candidates.x=1'",
        ),
        (
            ["--scheduler-arg", "options.candidates.=1"],
            "must be KEY=VALUE or ARGUMENT.FIELD=VALUE .*, got 'options.candidates.=1'",
        ),
        (["--scheduler-arg", "x=1", "--simulator", "src", "task"], "applies to the synthetic task"),
    ],
)
def test_bad_arguments_are_refused_naming_them(argv, message, capsys):
    with pytest.raises(SystemExit):
        latency.parse_args(argv)
    assert re.search(message, capsys.readouterr().err)


def test_runner_variants_are_accepted_with_the_simulator():
    args = latency.parse_args(["--simulator", "src", "task", "--methods", "DyHPO-no-completion"])
    assert args.methods == ["DyHPO-no-completion"]


def test_latency_report_has_max_and_p99():
    costs = np.full(200, 0.001)
    costs[150] = 0.5  # one slow decision
    (stats,) = latency.bin_stats(costs, [(1, 200)])
    assert stats[0] == pytest.approx(1e3 * costs.mean())
    assert stats[2] == pytest.approx(1e3 * np.percentile(costs, 99)) and stats[3] == pytest.approx(500.0)
    table = latency.format_table(["DyHPO"], {"DyHPO": [stats]}, [(1, 200)])
    assert "mean / p95 / p99 / max ms" in table and "/ 500.0 |" in table


def test_a_start_delay_is_learned_by_job_costs_from_the_simulated_time_in_the_results(monkeypatch):
    args = latency.parse_args(
        ["--methods", "DyHPO", "--start-delay", "2.5", "--scheduler-arg", "options.job_costs.segment_factor=3"]
    )
    made = []
    original = latency.make_scheduler

    def keeping(*a, **k):
        made.append(original(*a, **k))
        return made[-1]

    monkeypatch.setattr(latency, "make_scheduler", keeping)
    # 80 observations: whether and when a paused trial is resumed follows the model's decisions,
    # and in 40 there may be none (the resume price then falls back to all starts')
    costs = latency.drive("DyHPO", 80, cpu=None, **{**latency.driver_settings(args), "max_t": 6})
    assert len(costs) == 80
    learned = made[0].metadata()["job_costs"]
    assert learned["segment_factor"] == 3.0 and learned["start_seconds_given"] is None
    # the synthetic task's epochs take 1-4 s, a start 2.5 s: learned with the mean epoch of all
    # configurations in place of each job's own, so about 2.5 s (without the delay about 0)
    assert 1.0 <= learned["epoch_seconds"] <= 4.0
    assert learned["starts"]["new"] >= 5 and learned["starts"]["resume"] >= 1
    assert 1.5 <= learned["new_start_seconds"] <= 3.5 and 1.5 <= learned["resume_seconds"] <= 3.5
