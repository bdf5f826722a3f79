"""benchmarks/best_configs.py: hand-made runs on the shipped LCBench `car` table (300 rows)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.best_configs import _mean_over_seeds, best_config_reach, best_rows, main
from benchmarks.blackboxes import load_benchmark

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lcbench"
TASK = "car"


@pytest.fixture(scope="module")
def table():
    blackbox = load_benchmark(DATA, TASK)[1]
    metric = blackbox.objectives_names.index("val_accuracy")
    final = np.nanmean(blackbox.objectives_evaluations[:, :, -1, metric], axis=1)
    return blackbox.hyperparameters, final


def _write_run(root: Path, method: str, seed: int, workers: int, trials: list[tuple[pd.Series, int]], task: str = TASK):
    """A run whose trial ``i`` evaluates ``trials[i][0]`` (a table row) for epochs 1..``trials[i][1]``."""
    folder = root / "lcbench" / task / method / f"seed{seed}-budget1000-w{workers}"
    folder.mkdir(parents=True)
    rows = [
        {"trial_id": i, "epoch": e, "val_accuracy": 50.0, **{f"config_{k}": v for k, v in config.items()}}
        for i, (config, depth) in enumerate(trials)
        for e in range(1, depth + 1)
    ]
    pd.DataFrame(rows).to_csv(folder / "results.csv.gz", index=False)
    definition = {"metric": "val_accuracy", "do_minimize": False, "time_attr": "epoch", "max_t": 50}
    summary = {
        "method": method,
        "task": task,
        "benchmark": "lcbench",
        "seed": seed,
        "n_workers": workers,
        "definition": definition,
    }
    (folder / "run.json").write_text(json.dumps(summary))


def test_best_rows_ranks_by_the_value_at_max_t_in_the_metrics_direction(table):
    hp, final = table
    best = best_rows(hp, final, do_minimize=False, top=3)
    order = np.argsort(-final)
    assert sorted(best.values()) == [0, 1, 2]
    assert {i for i in range(len(hp)) if tuple(f"{float(v):.6g}" for v in hp.iloc[i].values) in best} == set(order[:3])
    worst = best_rows(hp, final, do_minimize=True, top=1)
    assert list(worst) == [tuple(f"{float(v):.6g}" for v in hp.iloc[int(np.argmin(final))].values)]


def test_runs_that_started_or_trained_the_best_configurations_are_counted(tmp_path, table, capsys):
    hp, final = table
    order = np.argsort(-final)
    best, second, poor = hp.iloc[order[0]], hp.iloc[order[1]], hp.iloc[order[-1]]
    # seed 0: the best paused at 3 epochs; seed 1: the second trained to max_t; seed 2: none of them
    _write_run(tmp_path, "A", 0, 1, [(poor, 50), (best, 3)])
    _write_run(tmp_path, "A", 1, 1, [(second, 50), (best, 1)])
    _write_run(tmp_path, "A", 2, 1, [(poor, 50)])
    # another folder, worker count and method; a run of another task is not read
    _write_run(tmp_path / "more", "B", 5, 4, [(best, 50)])
    _write_run(tmp_path, "A", 3, 1, [(best, 50)], task="Australian")
    reach = best_config_reach([tmp_path / "lcbench", tmp_path / "more"], DATA, TASK, top=2)
    assert reach[["method", "n_workers", "runs", "started", "trained"]].values.tolist() == [
        ["A", 1, 3, 2, 1],
        ["B", 4, 1, 1, 1],
    ]
    assert reach.depths.tolist() == [[1, 3, 50], [50]]
    # with only the best, seed 1's trained configuration no longer counts
    only_best = best_config_reach([tmp_path / "lcbench"], DATA, TASK, top=1)
    assert only_best[["runs", "started", "trained"]].values.tolist() == [[3, 2, 0]]
    main([str(tmp_path / "lcbench"), "--data", str(DATA), "--task", TASK, "--top", "2"])
    assert "| A | 1 | 3 | 2 | 1 | 1 3 50 |" in capsys.readouterr().out


def test_no_runs_and_a_bad_top_are_errors_naming_the_value(tmp_path):
    with pytest.raises(ValueError, match="no runs of task 'car'"):
        best_config_reach([tmp_path], DATA, TASK)
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--data", str(DATA), "--task", TASK, "--top", "0"])


def test_a_diverged_configuration_ranks_last_in_either_direction():
    hp = pd.DataFrame({"x": [0.1, 0.2, 0.3]})
    # row 1 diverged in every seed of the table, row 2 in one of two
    evaluations = np.array([[1.0, 1.0], [np.nan, np.nan], [3.0, np.nan]])
    values = _mean_over_seeds(evaluations)
    assert values[0] == 1.0 and np.isnan(values[1]) and values[2] == 3.0
    assert best_rows(hp, values, do_minimize=False, top=3) == {("0.3",): 0, ("0.1",): 1, ("0.2",): 2}
    assert best_rows(hp, values, do_minimize=True, top=3) == {("0.1",): 0, ("0.3",): 1, ("0.2",): 2}
