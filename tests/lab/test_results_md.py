"""benchmarks/results.py: the tables of RESULTS.md on a hand-built long table, and the file
written from real (tiny) runs."""

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_blackbox

from benchmarks import results
from benchmarks.runner import RunSpec, run_one


def _rows(bench, n_workers, method, values, trained=None, tasks=("t1", "t2"), seeds=(0, 1, 2)):
    """``values``: anytime regret per (task, seed) pair, the same at every budget point."""
    rows = []
    pairs = [(t, s) for t in tasks for s in seeds]
    values = np.broadcast_to(np.asarray(values, dtype=float), (len(pairs),))
    trained = values if trained is None else np.broadcast_to(np.asarray(trained, dtype=float), (len(pairs),))
    for f in (0.25, 0.5, 1.0):
        for i, (task, seed) in enumerate(pairs):
            rows.append(dict(benchmark=bench, n_workers=n_workers, task=task, seed=seed, budget=100,
                             method=method, budget_point=f, regret=values[i], trained_regret=trained[i],
                             trials_trained=2, scheduler_seconds=1.5))
    return rows


@pytest.fixture
def long():
    rows = []
    rows += _rows("LCBench", 1, "ASHA", 0.3)
    rows += _rows("LCBench", 1, "BOHB", 0.2, trained=0.5)
    # DyHPO: 0.1 better than BOHB on every pair (anytime); fully trained 0.4 against ASHA's 0.3
    rows += _rows("LCBench", 1, "DyHPO", 0.1 + 0.001 * np.arange(6), trained=0.4)
    # the variant: worse than DyHPO on t1 by 0.2, equal on t2
    rows += _rows("LCBench", 1, "DyHPO-no-completion", [0.3, 0.3, 0.3, 0.103, 0.104, 0.105], trained=0.4)
    return pd.DataFrame(rows)


def test_headline_tests_compare_with_the_better_reference(long):
    table = results.headline_tests(long)
    assert list(table["method"]) == ["DyHPO", "DyHPO"]  # the variant is not in the headline
    anytime = table[table["regret"] == "anytime"].iloc[0]
    # 6 pairs all lower than BOHB's 0.2: exact two-sided p = 2 / 2**6 = 0.031
    assert anytime["100 %"] == "-0.097 (6/0/0, p 0.031) vs BOHB"
    trained = table[table["regret"] == "fully-trained"].iloc[0]
    assert trained["25 %"] == "+0.100 (0/0/6, p 0.031) vs ASHA"  # ASHA 0.3 beats BOHB's 0.5


def test_deviation_tests_pair_the_default_with_its_variant(long):
    table = results.deviation_tests(long, "DyHPO", "DyHPO-no-completion")
    assert list(zip(table["family"], table["workers"], table["regret"])) == [
        ("LCBench", 1, "anytime"), ("LCBench", 1, "fully-trained")]
    # t1: 0.100-0.102 against 0.3 (3 wins), t2: 0.103-0.105 against the same (3 ties); means 0.1025, 0.2025
    assert table.iloc[0]["50 %"] == "0.102 / 0.202, -0.099 (3/3/0, p 0.25)"
    assert table.iloc[1]["100 %"] == "0.400 / 0.400, +0.000 (0/6/0, p 1)"
    assert results.deviation_tests(long, "DeepPowerLaw", "DeepPowerLaw-no-completion").empty


def test_worst_task_is_the_largest_ratio_to_the_better_reference():
    rows = _rows("TaskSet", 4, "ASHA", [0.2, 0.2, 0.2, 0.0, 0.0, 0.0])
    rows += _rows("TaskSet", 4, "DyHPO", [0.1, 0.1, 0.1, 0.0, 0.0, 0.0])
    rows += _rows("TaskSet", 4, "DeepPowerLaw", [0.1, 0.1, 0.1, 0.05, 0.05, 0.05], trained=0.1)
    table = results.worst_tasks(pd.DataFrame(rows)).set_index("method")
    # DyHPO: 0.5x on t1, 0 / 0 = 1 on t2; DeepPowerLaw: anything above a reference's 0 is inf
    assert table.loc["DyHPO", "anytime worst"] == "1.00x (t2: 0.000 vs 0.000)"
    assert table.loc["DyHPO", "anytime > 1.5x"] == "0/2"
    assert table.loc["DeepPowerLaw", "anytime worst"] == "infx (t2: 0.050 vs 0.000)"
    assert table.loc["DeepPowerLaw", "fully-trained worst"] == "infx (t2: 0.100 vs 0.000)"
    assert table.loc["DeepPowerLaw", "fully-trained > 1.5x"] == "1/2"


def test_worst_task_counts_the_tasks_over_the_limit():
    tasks, one = ("t1", "t2", "t3", "t4"), dict(tasks=("t1", "t2", "t3", "t4"), seeds=(0,))
    rows = _rows("LCBench", 1, "ASHA", [0.2, 0.0, 0.1, 0.0], **one)
    rows += _rows("LCBench", 1, "BOHB", [0.1, 0.02, 0.3, 0.0], **one)
    # better reference per task: 0.1 (BOHB), 0, 0.1 (ASHA), 0
    rows += _rows("LCBench", 1, "DyHPO", [0.15, 0.0, 0.16, 0.0], trained=[0.3, 0.0, 0.1, 0.0], **one)
    rows += _rows("LCBench", 1, "DeepPowerLaw", [0.3, 0.01, 0.0, 0.02], **one)
    rows += _rows("LCBench", 1, "RandomSearch", [0.9, 0.9, 0.9, 0.9], **one)  # not ours: no row
    long = pd.DataFrame(rows)
    assert len(tasks) == 4 and results.RATIO_LIMIT == 1.5
    table = results.worst_tasks(long).set_index("method")
    assert list(table.index) == ["DeepPowerLaw", "DyHPO"]
    assert list(table.columns) == ["family", "workers", "anytime worst", "anytime > 1.5x",
                                   "fully-trained worst", "fully-trained > 1.5x"]
    # DyHPO: 1.5x exactly on t1 is not over, 1.6x on t3 is
    assert table.loc["DyHPO", "anytime worst"] == "1.60x (t3: 0.160 vs 0.100)"
    assert table.loc["DyHPO", "anytime > 1.5x"] == "1/4"
    assert table.loc["DyHPO", "fully-trained worst"] == "3.00x (t1: 0.300 vs 0.100)"
    assert table.loc["DyHPO", "fully-trained > 1.5x"] == "1/4"
    # DeepPowerLaw: 3x on t1, inf on t2 and t4 (the larger mean, t4, is the worst), 0 on t3
    assert table.loc["DeepPowerLaw", "anytime worst"] == "infx (t4: 0.020 vs 0.000)"
    assert table.loc["DeepPowerLaw", "anytime > 1.5x"] == "3/4"
    loose = results.worst_tasks(long, limit=3.0).set_index("method")
    assert loose.loc["DeepPowerLaw", "anytime > 3x"] == "2/4"  # 3x exactly is not over
    # a task without a reference run is not compared
    partial = long[~((long["method"].isin(["ASHA", "BOHB"])) & (long["task"] == "t1"))]
    assert results.worst_tasks(partial).set_index("method").loc["DyHPO", "anytime > 1.5x"] == "1/3"


def test_the_wallclock_target_counts_a_task_only_when_it_is_also_over_by_the_margin():
    one = dict(tasks=("t1", "t2", "t3"), seeds=(0,))
    rows = _rows("LCBench", 1, "ASHA", [0.0, 0.004, 0.1], **one)
    rows += _rows("LCBench", 1, "BOHB", [0.2, 0.2, 0.2], **one)
    # DyHPO-costs: inf on t1 but 0.008 above 0; 3x on t2 but 0.008 above; 1.6x and 0.06 above on t3
    rows += _rows("LCBench", 1, "DyHPO-costs", [0.008, 0.012, 0.16], **one)
    long = pd.DataFrame(rows)
    assert results.CATASTROPHE_MARGIN == 0.01
    ratio_alone = results.worst_tasks(long).set_index("method")
    assert ratio_alone.loc["DyHPO-costs", "anytime > 1.5x"] == "3/3"
    table = results.worst_tasks(long, margin=results.CATASTROPHE_MARGIN).set_index("method")
    assert table.loc["DyHPO-costs", "anytime > 1.5x and +0.01"] == "1/3"
    assert ratio_alone.loc["DyHPO-costs", "anytime worst"] == "infx (t1: 0.008 vs 0.000)"
    # with the margin, a task over the target ranks above any ratio that is not over it
    assert table.loc["DyHPO-costs", "anytime worst"] == "1.60x (t3: 0.160 vs 0.100)"
    # with none over, the worst is the task nearest the target, not an inf far under the margin
    t4 = dict(tasks=("t4",), seeds=(0,))  # DyHPO-costs 1.4x ASHA's 0.1 and 0.04 above it
    t4_rows = _rows("LCBench", 1, "DyHPO-costs", 0.14, **t4) + _rows("LCBench", 1, "ASHA", 0.1, **t4)
    t4_rows += _rows("LCBench", 1, "BOHB", 0.2, **t4)
    near = pd.concat([long[long["task"] != "t3"], pd.DataFrame(t4_rows)], ignore_index=True)
    assert results.worst_tasks(near).set_index("method").loc["DyHPO-costs", "anytime worst"] == (
        "infx (t1: 0.008 vs 0.000)")
    near_table = results.worst_tasks(near, margin=results.CATASTROPHE_MARGIN).set_index("method")
    assert near_table.loc["DyHPO-costs", "anytime > 1.5x and +0.01"] == "0/3"
    assert near_table.loc["DyHPO-costs", "anytime worst"] == "1.40x (t4: 0.140 vs 0.100)"
    timed = long.assign(start_delay=1.0, epochs=100, starts_per_epoch=0.2)
    sections = "\n\n".join(results.wallclock_sections(timed, "R"))
    assert "| LCBench | 1 | DyHPO-costs | 1.60x (t3: 0.160 vs 0.100) | 1/3 |" in sections


def test_the_wallclock_tasks_over_its_target_are_listed_per_delay_and_compared_again_on_more_seeds():
    grid = dict(tasks=("t1", "t2", "t3"), seeds=(0, 1))
    # per task: ASHA 0.1, 0.0, 0.1; BOHB 0.2 everywhere
    rows = _rows("LCBench", 1, "ASHA", [0.1, 0.1, 0.0, 0.0, 0.1, 0.1], **grid)
    rows += _rows("LCBench", 1, "BOHB", 0.2, **grid)
    # DyHPO-costs: 2x ASHA on t1 (0.1 above it); 0.008 above ASHA's 0 on t2 (inf, under the
    # margin); level on t3
    rows += _rows("LCBench", 1, "DyHPO-costs", [0.2, 0.2, 0.008, 0.008, 0.1, 0.1], **grid)
    # the default at delay 0 only: over on t3 (0.3 against 0.1)
    rows += _rows("LCBench", 1, "DyHPO", [0.1, 0.1, 0.0, 0.0, 0.3, 0.3], **grid)
    delay_0 = pd.DataFrame(rows).assign(start_delay=0.0, epochs=100, starts_per_epoch=0.2)
    # delay 1: every method level with ASHA
    level = _rows("LCBench", 1, "ASHA", 0.1, **grid) + _rows("LCBench", 1, "BOHB", 0.2, **grid)
    level += _rows("LCBench", 1, "DyHPO-costs", 0.1, **grid)
    delay_1 = pd.DataFrame(level).assign(start_delay=1.0, epochs=100, starts_per_epoch=0.2)
    timed = pd.concat([delay_0, delay_1], ignore_index=True)
    # the ratio alone would list t2 too; the default is held as the variants are
    assert results.tasks_over(delay_0, methods=["DyHPO-costs"]) == ["t1", "t2"]
    assert results.wallclock_tasks_over(timed) == ["t1", "t3"]
    assert results.wallclock_tasks_over(timed, [1.0]) == []
    assert results.wallclock_tasks_over(timed, [0.0]) == ["t1", "t3"]
    # seeds 2-4 at delay 0 on t1: DyHPO-costs level with ASHA there
    more = _rows("LCBench", 1, "DyHPO-costs", 0.1, tasks=("t1",), seeds=(2, 3, 4))
    more += _rows("LCBench", 1, "ASHA", 0.1, tasks=("t1",), seeds=(2, 3, 4))
    more += _rows("LCBench", 1, "BOHB", 0.2, tasks=("t1",), seeds=(2, 3, 4))
    more = pd.DataFrame(more).assign(start_delay=0.0, epochs=100, starts_per_epoch=0.2)
    text = "\n\n".join(results.wallclock_sections(timed, "R", ("R-more", more)))
    delay_0_text, delay_1_text = text.split("### Start delay 1 x")
    assert "under `R-more`" in delay_0_text and "under `R-more`" not in delay_1_text
    # t1 on 5 seeds: (0.2 + 0.2 + 3 x 0.1) / 5 = 0.14 against ASHA's 0.1; 2 losses, 3 ties
    assert (
        "| LCBench | 1 | DyHPO-costs | anytime | t1 | 2.00x (0.200 vs 0.100) | 5 | 1.40x (0.140 vs ASHA 0.100) "
        "| 0/3/2, p 0.5 | no |" in delay_0_text
    )
    # the default on t3 has no more seeds: compared on the grid's two again, still over
    assert (
        "| LCBench | 1 | DyHPO | anytime | t3 | 3.00x (0.300 vs 0.100) | 2 | 3.00x (0.300 vs ASHA 0.100)"
        in delay_0_text
    )
    assert "| over 1.5x and +0.01 |" in delay_0_text


def test_a_reference_run_again_is_held_to_the_same_target():
    one = dict(tasks=("t1", "t2", "t3"), seeds=(0, 1))
    # means per task: ASHA 0.1, 0.1, 0.3; BOHB 0.2, 0.05, 0.3
    long = pd.DataFrame(_rows("LCBench", 1, "ASHA", [0.1, 0.1, 0.0, 0.2, 0.3, 0.3], **one)
                        + _rows("LCBench", 1, "BOHB", [0.2, 0.2, 0.05, 0.05, 0.3, 0.3], **one)
                        + _rows("LCBench", 1, "DyHPO", 0.0, **one))
    # ASHA run again with seeds 5-6: 0.2 on t1 (2x ASHA's 0.1), 0.1 on t2 (2x BOHB's 0.05), 0.3 on t3
    again = pd.DataFrame(_rows("LCBench", 1, "ASHA", [0.2, 0.2, 0.1, 0.1, 0.3, 0.3],
                               tasks=("t1", "t2", "t3"), seeds=(5, 6)))
    again = results.reseeded_long_from(again)
    assert set(again["method"]) == {"ASHA, seeds 5-6"} and set(again["reference"]) == {"ASHA"}
    table = results.worst_tasks(long, candidates=again).set_index("method")
    assert list(table.index) == ["ASHA, seeds 5-6"]
    # equal ratios: the larger mean
    assert table.loc["ASHA, seeds 5-6", "anytime worst"] == "2.00x (t1: 0.200 vs 0.100)"
    assert table.loc["ASHA, seeds 5-6", "anytime > 1.5x"] == "2/3"
    # without candidates: ours only, the references' other seeds do not enter their means
    assert list(results.worst_tasks(long)["method"]) == ["DyHPO"]
    # against the better reference, then against ASHA's own seeds alone (the noise floor): t1 only
    both = results.reseeded_worst_tasks(long, again)
    assert list(both["against"]) == ["better of ASHA, BOHB", "ASHA alone"]
    assert list(both["anytime > 1.5x"]) == ["2/3", "1/3"]
    assert both.iloc[1]["anytime worst"] == "2.00x (t1: 0.200 vs 0.100)"


def test_each_method_is_held_to_the_target_against_its_own_other_seeds():
    # ASHA seeds 0-3 on t1: 0.1, 0.1 | 0.2, 0.2 (2x itself); on t2: 0.0, 0.0 | 0.0, 0.0; seed 4 left out
    rows = _rows("LCBench", 1, "ASHA", [0.1, 0.1, 0.2, 0.2, 0.9, 0.0, 0.0, 0.0, 0.0, 0.9], seeds=(0, 1, 2, 3, 4))
    # DyHPO seeds 0-1: t1 0.1 | 0.12 (1.2x), t2 0.0 | 0.01 (inf)
    rows += _rows("LCBench", 1, "DyHPO", [0.1, 0.12, 0.0, 0.01], seeds=(0, 1))
    rows += _rows("LCBench", 1, "BOHB", 0.3, seeds=(0,))  # one seed: no halves, no row
    table = results.split_seed_worst_tasks(pd.DataFrame(rows)).set_index("method")
    assert list(table.index) == ["DyHPO, seeds 1-1 against 0-0", "ASHA, seeds 2-3 against 0-1"]
    assert table.loc["ASHA, seeds 2-3 against 0-1", "anytime worst"] == "2.00x (t1: 0.200 vs 0.100)"
    assert table.loc["ASHA, seeds 2-3 against 0-1", "anytime > 1.5x"] == "1/2"
    assert table.loc["DyHPO, seeds 1-1 against 0-0", "anytime worst"] == "infx (t2: 0.010 vs 0.000)"
    assert table.loc["DyHPO, seeds 1-1 against 0-0", "anytime > 1.5x"] == "1/2"


def test_leave_one_task_out_names_the_task_that_flips_the_choice():
    one = dict(tasks=("t1", "t2", "t3"), seeds=(0, 1))
    # per task, default / variant: t1 0.1 / 0.3, t2 0.2 / 0.1, t3 0.2 / 0.15 (seed 1 of t3: 0.25 / 0.10)
    rows = _rows("LCBench", 4, "DyHPO", [0.1, 0.1, 0.2, 0.2, 0.15, 0.25], trained=0.4, **one)
    rows += _rows("LCBench", 4, "DyHPO-cap", [0.3, 0.3, 0.1, 0.1, 0.2, 0.1], trained=0.4, **one)
    rows += _rows("LCBench", 4, "DyHPO", 0.9, tasks=("t4",))  # no variant there: not paired
    rows += _rows("TaskSet", 1, "DyHPO", 0.1, tasks=("t1",), seeds=(0,))
    rows += _rows("TaskSet", 1, "DyHPO-cap", 0.2, tasks=("t1",), seeds=(0,))
    table = results.leave_one_task_out(pd.DataFrame(rows), "DyHPO", "DyHPO-cap")
    assert list(table.columns) == [
        "family",
        "workers",
        "regret",
        "chosen on all",
        "same with each task left out",
        "flipped by",
    ]
    rows = {(r.family, r.workers, r.regret): r for r in table.itertuples(index=False)}
    anytime = rows[("LCBench", 4, "anytime")]
    # all: 0.5 / 3 = 0.167 against 0.55 / 3 = 0.183; without t1: 0.2 against 0.125
    assert anytime[3:] == ("DyHPO (0.167 / 0.183)", "2/3", "t1 (DyHPO-cap)")
    assert rows[("LCBench", 4, "fully-trained")][3:] == ("tie (0.400 / 0.400)", "3/3", "-")
    # a single task: nothing to leave out
    assert rows[("TaskSet", 1, "anytime")][3:] == ("DyHPO (0.100 / 0.200)", "0/0", "-")


def test_speed_and_means_tables(long):
    speed = results.speed_table(long)
    assert list(speed.columns) == ["family", "workers", "DyHPO", "DyHPO-no-completion", "ASHA", "BOHB"]
    assert speed.iloc[0]["DyHPO"] == "1.50"
    means = results.means_table(long).set_index("method")
    assert means.loc["BOHB", "anytime 100 %"] == "0.200" and means.loc["BOHB", "fully-trained 25 %"] == "0.500"
    assert means.loc["DyHPO", "runs"] == 6 and means.loc["DyHPO", "trained"] == "2.0"


@pytest.mark.slow  # starts a Tuner
def test_results_md_from_a_partial_folder_names_the_missing_cells(tmp_path, capsys):
    from syne_tune.blackbox_repository.blackbox_tabular import serialize

    data = tmp_path / "data" / "tinybench"
    data.parent.mkdir()
    serialize(
        {"taskA": tiny_blackbox(12, 5), "taskB": tiny_blackbox(12, 5, seed=1)},
        str(data),
        metadata={"default_metric": "error", "time_attr": "epoch", "metric_elapsed_time": "time"},
    )
    runs = tmp_path / "runs"
    for method in ("RandomSearch", "ASHA", "BOHB"):
        run_one(RunSpec(method, str(data), "taskA", 0, 20), runs)
    out, figures = tmp_path / "doc" / "RESULTS.md", tmp_path / "doc" / "figures"
    figures.mkdir(parents=True)
    (figures / "regret_old.png").write_bytes(b"x")  # a figure of an earlier report
    argv = [str(runs), "--out", str(out), "--figures", str(figures)]
    assert results.main(argv) == 0
    text = out.read_text()
    assert text.startswith("# Benchmark results\n\nWritten by `PYTHONPATH=. python -m benchmarks.results")
    assert "benchmarks/run_benchmarks.py --data $DEV/lcbench" in text  # the grid's command
    # taskB (in the data folder) and our methods have no runs: the cells say so
    from benchmarks.runner import VARIANTS

    ours = len(VARIANTS) - 3  # every method of the runner but RandomSearch, ASHA and BOHB
    assert "| tinybench | 1 | " + "0/2 | " * ours + "1/2 | 1/2 | 1/2 |" in text
    assert "- tinybench, 1 worker, DyHPO: no runs" in text
    assert "- tinybench, 1 worker, ASHA: 1 runs missing; no run on taskB" in text
    assert "(no runs of both DyHPO and DyHPO-no-completion)" in text
    assert sorted(p.name for p in figures.iterdir()) == ["regret_tinybench.png", "trained_regret_tinybench.png"]
    assert "[`regret_tinybench.png`](figures/regret_tinybench.png)" in text
    assert results.main(argv) == 0 and out.read_text() == text  # the same runs, the same file
    with pytest.raises(SystemExit):
        results.main([str(tmp_path / "data")])  # no runs there
    assert "The same target for a reference run again" not in text
    # ASHA run again with another seed (its own folder): a section holds it to the target
    again = tmp_path / "again"
    run_one(RunSpec("ASHA", str(data), "taskA", 7, 20), again)
    assert results.main(argv + ["--reseeded", str(again)]) == 0
    section = out.read_text().split("### The same target for a reference run again")[1].split("\n## ")[0]
    assert "| tinybench | 1 | ASHA, seeds 7-7 | " in section
    # the tasks to run with more seeds: none, our methods did not run
    capsys.readouterr()
    assert results.main([str(runs), "--list-tasks-over"]) == 0 and capsys.readouterr().out == "\n"
    assert results.main(argv + ["--more-seeds", str(again)]) == 0
    assert "### The tasks over the target, on more seeds\n\n" in out.read_text()
    assert "(no task is over the target)" in out.read_text()
    assert f"--more-seeds {again}`" in out.read_text()  # in the command the file names
    run_one(RunSpec("RandomSearch", str(data), "taskA", 7, 20), again)  # not a reference
    with pytest.raises(SystemExit):
        results.main(argv + ["--reseeded", str(again)])


def test_every_deviation_section_gets_its_leave_one_task_out_check(long, monkeypatch, tmp_path):
    monkeypatch.setattr(
        results, "DEVIATIONS", (("DyHPO", "DyHPO-no-completion", "the completion off"), ("DyHPO", "DyHPO-cap", "a cap"))
    )
    rows = _rows("LCBench", 1, "DyHPO-cap", [0.2, 0.2, 0.2, 0.0, 0.0, 0.0], trained=0.4)
    text = results.render("runs", [], pd.concat([long, pd.DataFrame(rows)]), [], tmp_path / "R.md", "cmd")
    section = text.split("## DyHPO against DyHPO-cap")[1].split("\n## ")[0]
    # DyHPO 0.1025 (mean of 0.100-0.105) against 0.1: the variant; without t2 (DyHPO 0.104
    # against 0 there) DyHPO's 0.101 on t1 against 0.2
    assert "| LCBench | 1 | anytime | DyHPO-cap (0.102 / 0.100) | 1/2 | t2 (DyHPO) |" in section
    assert "| LCBench | 1 | fully-trained | tie (0.400 / 0.400) | 2/2 | - |" in section
    # without t1, the two tie on t2 (the same regrets within TIE_TOLERANCE)
    assert "| LCBench | 1 | anytime | DyHPO (0.102 / 0.202) | 1/2 | t1 (tie) |" in text
    # each setting over its cells: the completion's two cells, then the cap's
    settings = text.split("## Each setting with each task left out")[1].split("\n## ")[0]
    assert "| DyHPO-no-completion | the completion off | 2 | " in settings
    assert "| DyHPO-cap | a cap | 2 | " in settings
    assert "(no run with a decision log)" in text


def test_a_reference_mean_within_float_noise_of_zero_is_zero_in_the_ratio():
    assert results._ratio(0.035, 2.6e-9) == float("inf")
    assert results._ratio(3e-9, 2.6e-9) == 1.0
    assert results._ratio(0.03, 0.01) == pytest.approx(3.0)


def test_a_setting_is_held_to_its_choice_with_each_task_left_out_over_all_its_cells(long, monkeypatch):
    rows = _rows("TaskSet", 4, "DeepPowerLaw", 0.2, tasks=("t3", "t4"))
    # the variant: 0.1 on t3 (better than the default by 0.1), 0.3 on t4 (worse by 0.1)
    rows += _rows("TaskSet", 4, "DeepPowerLaw-no-completion", [0.1, 0.1, 0.1, 0.3, 0.3, 0.3], tasks=("t3", "t4"))
    long = pd.concat([long, pd.DataFrame(rows)])
    r = results.setting_left_out(
        long, [("DyHPO", "DyHPO-no-completion"), ("DeepPowerLaw", "DeepPowerLaw-no-completion")]
    )
    # 4 cells: DyHPO LCBench anytime -0.0995 (t1 -0.199, t2 0), fully trained 0; DeepPowerLaw
    # TaskSet +0.1 on t3 and -0.1 on t4 in both regrets, 0 each
    assert r["cells"] == 4 and r["tasks"] == 4
    assert r["diff"] == pytest.approx(-0.0995 / 4)
    # without t4 DeepPowerLaw's cells are +0.1 each: (-0.0995 + 0.2) / 4; without t3, -0.1 each
    assert r["largest"] == (pytest.approx(0.1005 / 4), "t4")
    assert r["smallest"] == (pytest.approx(-0.2995 / 4), "t3")
    monkeypatch.setattr(
        results,
        "DEVIATIONS",
        (
            ("DyHPO", "DyHPO-no-completion", "the completion off"),
            ("DeepPowerLaw", "DeepPowerLaw-no-completion", "the completion off"),
            ("DyHPO", "DyHPO-cap", "a cap"),
        ),
    )
    table = results.settings_left_out_table(long)
    assert len(table) == 1  # no runs of DyHPO-cap
    row = table.iloc[0]
    assert row["variants"] == "DyHPO-no-completion, DeepPowerLaw-no-completion" and row["cells"] == 4
    assert (row["diff on all tasks"], row["one task left out: largest"], row["chosen in every case"]) == (
        "-0.0249",
        "+0.0251 (t4)",
        "no",
    )
    # only DyHPO's cells: leaving t1 out leaves a tie (0), never a positive diff: still no choice
    only_dyhpo = results.setting_left_out(long, [("DyHPO", "DyHPO-no-completion")])
    assert only_dyhpo["largest"] == (pytest.approx(0.0), "t1")
    assert only_dyhpo["smallest"] == (pytest.approx(-0.199 / 2), "t2")


def test_the_tasks_over_the_target_are_compared_again_on_more_seeds():
    grid = dict(tasks=("t1", "t2", "t3"), seeds=(0, 1))
    rows = _rows("LCBench", 1, "ASHA", 0.1, **grid) + _rows("LCBench", 1, "BOHB", 0.2, **grid)
    # DyHPO: 2x ASHA on t1 (both regrets), level on t2, 3x on t3 fully trained only
    rows += _rows("LCBench", 1, "DyHPO", [0.2, 0.2, 0.1, 0.1, 0.1, 0.1], trained=[0.2, 0.2, 0.1, 0.1, 0.3, 0.3], **grid)
    rows += _rows("LCBench", 1, "DeepPowerLaw", 0.1, **grid)  # never over
    rows += _rows("LCBench", 1, "DyHPO-no-depth-gate", 0.9, **grid)  # a variant: not held here
    long = pd.DataFrame(rows)
    assert results.tasks_over(long) == ["t1", "t3"]
    # seeds 2-3 on t1 only: DyHPO level with ASHA there
    more = pd.DataFrame(
        _rows("LCBench", 1, "DyHPO", 0.1, tasks=("t1",), seeds=(2, 3))
        + _rows("LCBench", 1, "ASHA", 0.1, tasks=("t1",), seeds=(2, 3))
        + _rows("LCBench", 1, "BOHB", 0.2, tasks=("t1",), seeds=(2, 3))
    )
    table = results.tasks_over_on_more_seeds(long, more)
    assert list(zip(table["method"], table["regret"], table["task"], table["seeds"])) == [
        ("DyHPO", "anytime", "t1", 4),
        ("DyHPO", "fully-trained", "t1", 4),
        ("DyHPO", "fully-trained", "t3", 2),
    ]
    first = table.iloc[0]
    assert first["grid"] == "2.00x (0.200 vs 0.100)"
    # 0.2, 0.2, 0.1, 0.1 against ASHA's 0.1: 1.5x exactly is not over; 2 losses, 2 ties
    assert first["all seeds"] == "1.50x (0.150 vs ASHA 0.100)"
    assert first["W/T/L, p"] == "0/2/2, p 0.5"
    assert first["over 1.5x"] == "no"
    assert table.iloc[2]["all seeds"] == "3.00x (0.300 vs ASHA 0.100)" and table.iloc[2]["over 1.5x"] == "yes"
    with pytest.raises(ValueError, match="already in the grid"):
        results.tasks_over_on_more_seeds(
            long, pd.DataFrame(_rows("LCBench", 1, "DyHPO", 0.1, tasks=("t1",), seeds=(1,)))
        )
