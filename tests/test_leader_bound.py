"""benchmarks/leader_bound.py: what a completion's leader would score, on a hand-made table and
run whose regrets are worked out by hand, and end to end on an ASHA run over the shipped
LCBench copy."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.blackboxes import BenchmarkDefinition
from benchmarks.leader_bound import (
    Table,
    candidates_when,
    choose_leader,
    estimate,
    load_table,
    main,
    table_rows,
)
from benchmarks.metrics import incumbent_trajectory
from benchmarks.report import RunRecord, load_runs
from benchmarks.runner import RESULTS_FILE, RunSpec, run_dir, run_one
from tests.conftest import data_folder

MAX_T = 3
# four table rows (hyperparameter x), accuracy curves over epochs 1..3 (one table seed):
# row 1 leads after one epoch and stays flat, row 2 starts worst of the first three and ends best
X = [0.1, 0.2, 0.3, 0.4]
CURVES = np.array([[0.5, 0.6, 0.7], [0.6, 0.6, 0.6], [0.4, 0.8, 0.9], [0.3, 0.3, 0.3]])
# regret = (0.9 - value) / 0.6
BOUNDS = dict(best_any=0.9, worst=0.3)
# the explorer: first epochs of rows 0, 1, 2, 3, then second epochs of rows 1 and 0
ORDER = [(0, 1), (1, 1), (2, 1), (3, 1), (1, 2), (0, 2)]
# trial i is table row i
ROWS = {i: i for i in range(len(X))}


def _table() -> Table:
    definition = BenchmarkDefinition(
        name="b", task="t", metric="acc", do_minimize=False, time_attr="epoch", max_t=MAX_T,
        elapsed_time_attr="time", source="s",
    )
    return Table(definition, pd.DataFrame({"x": X}), [{"x": x} for x in X], {}, CURVES[:, None, :])


def _explorer(n_workers: int = 1) -> tuple[RunRecord, pd.DataFrame]:
    results = pd.DataFrame(
        [(row, epoch, CURVES[row, epoch - 1], X[row]) for row, epoch in ORDER],
        columns=["trial_id", "epoch", "acc", "config_x"],
    )
    summary = dict(
        method="E", benchmark="b", task="t", seed=0, budget_epochs=len(ORDER), n_workers=n_workers,
        bounds=BOUNDS, definition=dict(max_t=MAX_T),
    )
    return RunRecord(summary, incumbent_trajectory(results, "acc", False, time_attr="epoch", max_t=MAX_T)), results


def test_trials_are_matched_to_table_rows_and_a_foreign_configuration_is_an_error():
    _, results = _explorer()
    assert table_rows(results, pd.DataFrame({"x": X})) == {0: 0, 1: 1, 2: 2, 3: 3}
    results.loc[results["trial_id"] == 3, "config_x"] = 0.35
    with pytest.raises(ValueError, match="trial 3.*not a row of the table"):
        table_rows(results, pd.DataFrame({"x": X}))
    with pytest.raises(ValueError, match="config_y"):
        table_rows(results, pd.DataFrame({"x": X, "y": X}))
    # a categorical hyperparameter must match exactly
    ops = pd.DataFrame({"x": [0.1, 0.1], "op": ["conv", "skip"]})
    runs = pd.DataFrame({"trial_id": [0, 1, 2], "config_x": [0.1, 0.1, 0.1], "config_op": ["skip", "conv", "pool"]})
    with pytest.raises(ValueError, match="trial 2"):
        table_rows(runs, ops)
    assert table_rows(runs.iloc[:2], ops) == {0: 1, 1: 0}


def test_candidates_are_the_trials_seen_when_the_after_th_first_epoch_came():
    _, results = _explorer()
    chosen, candidates = candidates_when(results, "acc", False, after=3)
    assert chosen == 3
    assert candidates["best"].to_dict() == {0: 0.5, 1: 0.6, 2: 0.4} and set(candidates["done"]) == {1}
    chosen, candidates = candidates_when(results, "acc", False, after=4)
    assert chosen == 4 and list(candidates.index) == [0, 1, 2, 3]
    assert candidates_when(results, "acc", False, after=5) is None
    # a minimised metric: the best is the lowest
    results = pd.DataFrame([(0, 1, 0.5), (0, 2, 0.2), (0, 3, 0.7), (1, 1, 0.6), (2, 1, 0.4)], columns=["trial_id", "epoch", "loss"])
    chosen, candidates = candidates_when(results, "loss", True, after=3)
    assert chosen == 5
    assert candidates["best"].to_dict() == {0: 0.2, 1: 0.6, 2: 0.4} and candidates["done"].to_dict() == {0: 3, 1: 1, 2: 1}


def test_rules_pick_the_best_seen_or_a_final_rank():
    candidates = pd.DataFrame({"best": [0.5, 0.6, 0.4], "done": [1, 1, 1]}, index=[0, 1, 2])
    final = pd.Series([0.7, 0.6, 0.9], index=[0, 1, 2])
    never = lambda method: pytest.fail("no surrogate for these rules")  # noqa: E731
    assert choose_leader("best-so-far", candidates, final, False, never) == 1
    assert [choose_leader(f"rank-{k}", candidates, final, False, never) for k in (1, 2, 3, 9)] == [2, 0, 1, 1]
    # minimised: the lowest value seen, the lowest final value first
    assert choose_leader("best-so-far", candidates, final, True, never) == 2
    assert choose_leader("rank-1", candidates, final, True, never) == 1
    predicted = pd.Series([0.1, -2.0, 0.3], index=[0, 1, 2])
    assert choose_leader("predicted:M", candidates, final, False, lambda m: predicted if m == "M" else None) == 2
    with pytest.raises(ValueError, match="Unknown rule 'best'"):
        choose_leader("best", candidates, final, False, never)
    with pytest.raises(ValueError, match="ranks start at 1"):
        choose_leader("rank-0", candidates, final, False, never)


def test_estimates_take_the_leaders_epochs_from_exploration():
    run, results = _explorer()
    rows = {r["rule"]: r for r in estimate(run, results, _table(), ROWS, after=3, rules=["best-so-far", "rank-1", "rank-2"], budget_points=[4, 6])}
    # chosen after 3 epochs; the best seen is row 1 (flat at 0.6), the best final row 2 (0.9)
    assert rows["best-so-far"]["leader_final"] == pytest.approx(0.5)
    assert rows["rank-1"]["leader_final"] == pytest.approx(0.0)
    assert rows["rank-2"]["leader_final"] == pytest.approx(1 / 3)
    assert [rows[r]["leader_rank"] for r in ("rank-1", "rank-2", "best-so-far")] == [1, 2, 3]
    assert rows["rank-1"]["candidates"] == 3
    oracle = rows["rank-1"]
    # after 4 epochs: one went to the leader (epoch 2, 0.8); the explorer's first 3 reach 0.6
    assert oracle["anytime@4"] == pytest.approx(1 / 6)
    assert oracle["trained@4"] == 1.0 and not oracle["finished@4"]
    # after 6: both epochs it lacked; the explorer's first 4 epochs trained nothing
    assert oracle["anytime@6"] == pytest.approx(0.0) and oracle["trained@6"] == pytest.approx(0.0)
    assert oracle["finished@6"]
    # the leader that only repeats the best seen buys nothing but the trained model
    assert rows["best-so-far"]["anytime@6"] == pytest.approx(0.5) and rows["best-so-far"]["trained@6"] == pytest.approx(0.5)
    assert rows["best-so-far"]["anytime@6"] == pytest.approx(run.regret_curve([6])[0])


def test_with_more_workers_the_leader_gets_one_epoch_in_every_workers():
    run, results = _explorer(n_workers=2)
    (oracle,) = estimate(run, results, _table(), ROWS, after=3, rules=["rank-1"], budget_points=[6])
    # (6 - 3) // 2 = one epoch of the leader: it reaches epoch 2 (0.8), not max_t
    assert oracle["anytime@6"] == pytest.approx(1 / 6) and not oracle["finished@6"]
    assert estimate(run, results, _table(), ROWS, after=5, rules=["rank-1"], budget_points=[6]) == []


def test_cli_rejects_an_unknown_rule_before_reading_runs(tmp_path):
    with pytest.raises(ValueError, match="Unknown rule"):
        main([str(tmp_path), "--explorer", "E", "--reference", "R", "--rules", "oracle"])
    with pytest.raises(SystemExit, match="--after"):
        main([str(tmp_path), "--explorer", "E", "--reference", "R", "--after", "0"])
    with pytest.raises(SystemExit, match="no runs of E"):
        main([str(tmp_path), "--explorer", "E", "--reference", "R"])


@pytest.mark.slow  # starts a Tuner
def test_end_to_end_on_a_simulated_run_with_a_surrogates_prediction(tmp_path, capsys):
    source = str(data_folder("lcbench"))
    for method in ("ASHA", "RandomSearch"):
        run_one(RunSpec(method, source, "car", seed=0, budget_epochs=120, n_workers=2), tmp_path)
    (run,) = [r for r in load_runs(tmp_path) if r.summary["method"] == "ASHA"]
    results = pd.read_csv(run_dir(RunSpec("ASHA", source, "car", 0, 120, 2), tmp_path) / RESULTS_FILE)
    table = load_table(source, "car")
    # the configurations went through the results CSV and still match their rows exactly
    rows = table_rows(results, table.hyperparameters)
    assert all(table.configs[row]["learning_rate"] == pytest.approx(results.loc[results.trial_id == t, "config_learning_rate"].iloc[0]) for t, row in rows.items())
    estimates = pd.DataFrame(estimate(run, results, table, rows, after=9, rules=["best-so-far", "rank-1", "predicted:DeepPowerLaw"], budget_points=[60, 120]))
    by_rule = estimates.set_index("rule")
    # the oracle's leader is at least as good as any other rule's, and so is its estimate
    assert (by_rule.loc["rank-1", "leader_final"] <= by_rule["leader_final"] + 1e-12).all()
    assert (by_rule.loc["rank-1", "anytime@120"] <= by_rule["anytime@120"] + 1e-12).all()
    assert by_rule["leader_final"].between(0, 1).all()
    main([str(tmp_path), "--explorer", "ASHA", "--reference", "RandomSearch", "--after", "9", "--rules", "best-so-far", "rank-1", "--at", "60", "120"])
    printed = capsys.readouterr().out
    assert "rule rank-1: 1 runs" in printed and "its rank there 1 in 100% of runs" in printed and "RandomSearch" in printed and "p = " in printed
