"""benchmarks/pair.py: two folders' runs (or two methods) paired by task and seed, with the means
and p of each cell known from hand-made long tables and from runs written by the lab's runner."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import data_folder

from benchmarks import pair
from benchmarks.report import signed_rank_test
from benchmarks.runner import RunSpec, run_one


def _long(method, regrets, trained, starts, seeds=(0, 1, 2, 3, 4, 5), delay=1.0, workers=1):
    """One row per (task, seed, budget point); regret at 25/50/100 % = regrets[i] * (3, 2, 1)."""
    rows = []
    for task_index, task in enumerate(("car", "adult")):
        for seed in seeds:
            i = task_index * 6 + seed  # the same index for a (task, seed) whatever the seeds given
            for f, scale in ((0.25, 3), (0.5, 2), (1.0, 1)):
                rows.append(dict(benchmark="LCBench", n_workers=workers, start_delay=delay, method=method,
                                 task=task, seed=seed, budget_point=f, regret=regrets[i] * scale,
                                 trained_regret=trained[i] * scale, starts_per_epoch=starts[i]))
    return pd.DataFrame(rows)


BASE = np.linspace(0.01, 0.12, 12)
NEW = BASE + 0.01  # worse on every pair: p of the signed-rank test on 12 pairs, all one way
STARTS = np.full(12, 0.2)


def test_each_cell_gives_the_paired_means_and_the_signed_rank_p():
    base = _long("DyHPO-costs", BASE, BASE, STARTS)
    new = _long("DyHPO-costs", NEW, BASE, STARTS + 0.1)
    table = pair.paired_table(base, new).set_index("method")
    p = signed_rank_test(NEW, BASE)["p"]
    assert p < 0.001
    row = table.loc["DyHPO-costs"]
    assert row["pairs"] == 12 and row["family"] == "LCBench" and row["start delay"] == 1.0
    assert row["anytime 100 %"] == f"{BASE.mean():.3f} -> {NEW.mean():.3f} (p <0.001)"
    assert row["anytime 25 %"] == f"{3 * BASE.mean():.3f} -> {3 * NEW.mean():.3f} (p <0.001)"
    # equal fully-trained regrets: every pair ties, p = 1
    assert row["fully-trained 50 %"] == f"{2 * BASE.mean():.3f} -> {2 * BASE.mean():.3f} (p 1)"
    assert row["job starts per epoch"] == "0.200 -> 0.300"


def test_only_the_pairs_both_ran_count_and_cells_stay_apart():
    base = pd.concat([_long("DyHPO-costs", BASE, BASE, STARTS), _long("DyHPO-costs", BASE, BASE, STARTS, delay=10.0)])
    new = _long("DyHPO-costs", NEW, BASE, STARTS, seeds=(0, 1, 2))  # delay 1 only, seeds 0-2
    table = pair.paired_table(base, new)
    assert len(table) == 1 and table.loc[0, "pairs"] == 6 and table.loc[0, "start delay"] == 1.0
    kept = np.r_[BASE[:3], BASE[6:9]]
    assert table.loc[0, "anytime 100 %"].startswith(f"{kept.mean():.3f} -> {kept.mean() + 0.01:.3f}")
    assert pair.paired_table(*pair.selected(base, new, seeds=[0])).loc[0, "pairs"] == 2


def test_one_method_against_another_in_the_same_folder():
    both = pd.concat([_long("DyHPO", BASE, BASE, STARTS), _long("DyHPO-costs", NEW, NEW, STARTS)])
    table = pair.paired_table(*pair.selected(both, both, base_method="DyHPO", new_method="DyHPO-costs"))
    assert list(table["method"]) == ["DyHPO-costs"]
    assert table.loc[0, "fully-trained 100 %"].startswith(f"{BASE.mean():.3f} -> {NEW.mean():.3f}")
    # without the pairing of methods, each is paired with itself: no change anywhere
    same = pair.paired_table(both, both).set_index("method")
    assert same.loc["DyHPO", "anytime 100 %"].endswith("(p 1)")
    with pytest.raises(ValueError, match="new_method=None"):
        pair.selected(both, both, base_method="DyHPO")


def test_by_task_each_task_is_a_cell_of_its_own_paired_by_seed():
    base = _long("DyHPO-costs", BASE, BASE, STARTS)
    new = _long("DyHPO-costs", np.r_[BASE[:6] + 0.01, BASE[6:]], BASE, STARTS)  # worse on car only
    table = pair.paired_table(base, new, by_task=True).set_index("task")
    assert list(table.index) == ["adult", "car"] and (table["pairs"] == 6).all()
    p = signed_rank_test(BASE[:6] + 0.01, BASE[:6])["p"]
    assert table.loc["car", "anytime 100 %"] == f"{BASE[:6].mean():.3f} -> {BASE[:6].mean() + 0.01:.3f} (p {p:.2g})"
    assert table.loc["adult", "anytime 100 %"].endswith("(p 1)")
    only_car = pair.paired_table(*pair.selected(base, new, tasks=["car"]), by_task=True)
    assert list(only_car["task"]) == ["car"]
    assert "task" not in pair.paired_table(base, new).columns


def test_the_command_pairs_two_folders_of_real_runs(tmp_path, capsys):
    for method in ("RandomSearch", "ASHA"):
        run_one(RunSpec(method, str(data_folder("lcbench")), "car", 0, 60, 1, "wallclock", 1), tmp_path / "runs")
    code = pair.main([str(tmp_path / "runs"), str(tmp_path / "runs"), "--base-method", "RandomSearch",
                      "--new-method", "ASHA", "--out", str(tmp_path / "pair.md")])
    out = capsys.readouterr().out
    assert code == 0 and "| LCBench | 1 | 1 | ASHA | 1 |" in out
    assert (tmp_path / "pair.md").read_text().strip() == out.strip()
    assert "other package versions" not in out
    summary_file = next((tmp_path / "runs").rglob("ASHA/**/run.json"))
    summary = json.loads(summary_file.read_text())
    assert summary["versions"]["numpy"] == np.__version__ and summary["versions"]["syne-tune"]
    assert "commit" in summary and summary["processor"]["torch_cpu_capability"]
    summary["versions"]["numpy"] = "0.0"
    summary_file.write_text(json.dumps(summary))
    assert pair.main([str(tmp_path / "runs"), str(tmp_path / "runs"), "--base-method", "RandomSearch",
                      "--new-method", "ASHA"]) == 0
    out = capsys.readouterr().out
    assert "other package versions" in out and "numpy 0.0" in out
    # no runs of the epoch protocol there: a clear error naming the folder
    with pytest.raises(SystemExit, match="no finished runs of the epochs protocol"):
        pair.main([str(tmp_path / "runs"), str(tmp_path / "runs"), "--protocol", "epochs"])
