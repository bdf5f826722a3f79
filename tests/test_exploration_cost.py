"""benchmarks/exploration_cost.py: the epochs a variant's run is worth against a reference's,
on hand-made runs whose regrets are known."""

import pandas as pd
import pytest

from benchmarks.exploration_cost import (
    epochs_on_trained,
    main,
    matching_epochs,
    paired_runs,
    shifted_comparison,
)
from benchmarks.metrics import incumbent_trajectory
from benchmarks.report import RunRecord

MAX_T = 3


def _run(method: str, seed: int, results: list[tuple[int, int, float]]) -> RunRecord:
    """A minimised run of ``(trial_id, epoch, value)`` results in order; best 0, worst 1, so the
    regret is the incumbent itself."""
    df = pd.DataFrame(results, columns=["trial_id", "epoch", "loss"])
    summary = dict(
        method=method, benchmark="b", task="t", seed=seed, budget_epochs=len(results), n_workers=1,
        bounds=dict(best_any=0.0, worst=1.0), definition=dict(max_t=MAX_T),
    )
    return RunRecord(summary, incumbent_trajectory(df, "loss", True, time_attr="epoch", max_t=MAX_T))


def _one_trial_per_epoch(method: str, seed: int, values: list[float]) -> RunRecord:
    return _run(method, seed, [(i, 1, v) for i, v in enumerate(values)])


def test_epochs_on_trained_count_only_trials_trained_within_the_first_epochs():
    # trial 0 reaches max_t at its third result (the run's fourth); trial 1 stays at epoch 1
    run = _run("A", 0, [(0, 1, 0.9), (1, 1, 0.8), (0, 2, 0.7), (0, 3, 0.6), (1, 2, 0.5)])
    assert epochs_on_trained(run, 3) == 0  # trial 0 not trained yet
    assert epochs_on_trained(run, 4) == 3
    assert epochs_on_trained(run, 5) == 3


def test_matching_epochs_is_where_the_reference_first_reaches_the_variants_regret():
    # the reference improves by 0.1 per epoch; the variant is stuck at 0.65 from its 3rd epoch on
    reference = _one_trial_per_epoch("B", 0, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    variant = _one_trial_per_epoch("A", 0, [1.0, 0.9, 0.65, 0.65, 0.65, 0.65])
    pairs = paired_runs([variant, reference], "A", "B")
    assert matching_epochs(pairs, 6) == 5  # 0.6 <= 0.65 first after 5 epochs
    # the reference never gets as low as a variant at 0: None
    best = _one_trial_per_epoch("A", 0, [0.0] * 6)
    assert matching_epochs(paired_runs([best, reference], "A", "B"), 3) is None


def test_shifted_comparison_gives_up_epochs_of_the_variant_only():
    # on every seed the variant equals the reference one epoch earlier: one epoch fewer for
    # the variant ties every pair, none fewer puts it ahead on every pair
    runs = []
    for seed in range(8):
        values = [1.0 - 0.1 * e - 0.01 * seed for e in range(6)]
        runs.append(_one_trial_per_epoch("B", seed, values))
        runs.append(_one_trial_per_epoch("A", seed, values[1:] + [values[-1] - 0.1]))
    pairs = paired_runs(runs, "A", "B")
    assert len(pairs) == 8
    none_fewer, one_fewer = shifted_comparison(pairs, 5, [0, 1])
    assert none_fewer["variant"] == pytest.approx(none_fewer["reference"] - 0.1)
    assert none_fewer["p"] == pytest.approx(2 / 2**8)  # 8 wins of one sign, exact test
    assert one_fewer["variant"] == pytest.approx(one_fewer["reference"])
    assert one_fewer["p"] == 1.0  # only ties
    with pytest.raises(ValueError, match="shifts"):
        shifted_comparison(pairs, 5, [5])


def test_runs_are_paired_by_task_seed_and_workers_only_where_both_methods_ran():
    a0, b0, a1 = _one_trial_per_epoch("A", 0, [0.5]), _one_trial_per_epoch("B", 0, [0.4]), _one_trial_per_epoch("A", 1, [0.3])
    assert paired_runs([a0, b0, a1], "A", "B") == [(a0, b0)]
    assert paired_runs([a0, a1], "A", "B") == []


def test_cli_rejects_a_comparison_without_a_reference(tmp_path):
    with pytest.raises(SystemExit, match="VARIANT:REFERENCE"):
        main([str(tmp_path), "DyHPO"])
