"""The wall-clock protocol's report (benchmarks/report.py wallclock_long_table,
benchmarks/results.py wallclock_table / wallclock_sections) on hand-made runs whose regrets and
job starts per epoch are known."""

import numpy as np
import pandas as pd
import pytest

from benchmarks import results
from benchmarks.metrics import epochs_until, incumbent_trajectory, regret_at_time_fractions
from benchmarks.report import RunRecord, wallclock_long_table

DEFINITION = {"metric": "acc", "do_minimize": False, "time_attr": "epoch", "max_t": 3}

#: DyHPO: (trial, epoch, acc, simulated time); the last result is past the 100 s budget
DYHPO_RESULTS = [(0, 1, 0.2, 10), (1, 1, 0.5, 20), (1, 2, 0.6, 30), (0, 2, 0.4, 40), (1, 3, 0.7, 60),
                 (2, 1, 0.9, 90), (2, 2, 0.95, 110)]
DYHPO_JOBS = [(0, 0, "start"), (12, 1, "start"), (22, 1, "resume"), (32, 0, "resume"), (50, 1, "resume"),
              (62, 2, "start"), (92, 2, "resume")]
#: ASHA: one trial in one job
ASHA_RESULTS = [(0, 1, 0.3, 30), (0, 2, 0.5, 60), (0, 3, 0.8, 90)]
ASHA_JOBS = [(0, 0, "start")]


def _run(method: str, rows, jobs, start_delay: float = 1.0) -> RunRecord:
    df = pd.DataFrame(rows, columns=["trial_id", "epoch", "acc", "st_tuner_time"])
    summary = dict(benchmark="LCBench", task="car", method=method, seed=0, budget_epochs=10, n_workers=1,
                   protocol="wallclock", start_delay=start_delay, budget_seconds=100.0,
                   bounds={"best_any": 1.0, "worst": 0.0}, definition=DEFINITION,
                   scheduler_seconds=0.5, wall_seconds=1.0)
    traj = incumbent_trajectory(df, "acc", False, time_attr="epoch", max_t=3)
    return RunRecord(summary, traj, pd.DataFrame(jobs, columns=["time", "trial_id", "kind"]))


@pytest.fixture
def long() -> pd.DataFrame:
    runs = [_run("DyHPO", DYHPO_RESULTS, DYHPO_JOBS), _run("ASHA", ASHA_RESULTS, ASHA_JOBS)]
    runs += [_run("DyHPO", DYHPO_RESULTS, DYHPO_JOBS, 10.0)]
    return wallclock_long_table(runs)


def test_regret_is_read_at_each_share_of_the_wall_clock_budget():
    traj = _run("DyHPO", DYHPO_RESULTS, DYHPO_JOBS).trajectory
    # 25 s: 0.5 seen; 50 s: 0.6; 100 s: 0.9 (0.95 at 110 s is past the budget)
    assert regret_at_time_fractions(traj, 100.0, 1.0, 0.0) == pytest.approx({0.25: 0.5, 0.5: 0.4, 1.0: 0.1})
    # fully trained: only trial 1 reaches epoch 3, at 60 s
    trained = regret_at_time_fractions(traj, 100.0, 1.0, 0.0, column="trained_incumbent")
    assert trained == pytest.approx({0.25: 1.0, 0.5: 1.0, 1.0: 0.3})
    assert list(epochs_until(traj, [9.9, 10.0, 100.0, 1e9])) == [0, 1, 6, 7]


def test_the_long_table_counts_job_starts_per_epoch_by_each_time(long):
    dyhpo = long[(long["method"] == "DyHPO") & (long["start_delay"] == 1.0)].set_index("budget_point")
    # by 25 s: 2 epochs, 3 jobs (0, 12, 22 s); by 50 s: 4 epochs, 5 jobs (one at 50 s); by 100 s: 6 epochs, 7 jobs
    assert list(dyhpo["epochs"]) == [2, 4, 6] and list(dyhpo["job_starts"]) == [3, 5, 7]
    assert list(dyhpo["starts_per_epoch"]) == pytest.approx([1.5, 1.25, 7 / 6])
    assert list(dyhpo["regret"]) == pytest.approx([0.5, 0.4, 0.1])
    assert list(dyhpo["trained_regret"]) == pytest.approx([1.0, 1.0, 0.3])
    assert list(dyhpo["trials_trained"]) == [0, 0, 1]
    asha = long[long["method"] == "ASHA"].set_index("budget_point")
    assert list(asha["epochs"]) == [0, 1, 3] and np.isnan(asha.loc[0.25, "starts_per_epoch"])
    assert asha.loc[1.0, "starts_per_epoch"] == pytest.approx(1 / 3)
    assert list(asha["regret"]) == pytest.approx([1.0, 0.7, 0.2])


def test_one_table_per_start_delay_with_ours_against_the_better_reference(long):
    table = results.wallclock_table(long[long["start_delay"] == 1.0]).set_index("method")
    assert list(table.index) == ["DyHPO", "ASHA"]
    assert [table.loc["DyHPO", f"anytime {p} %"] for p in (25, 50, 100)] == ["0.500", "0.400", "0.100"]
    assert table.loc["DyHPO", "fully-trained 100 %"] == "0.300" and table.loc["ASHA", "anytime 100 %"] == "0.200"
    assert table.loc["DyHPO", "epochs"] == "6" and table.loc["DyHPO", "job starts per epoch"] == "1.167"
    assert table.loc["ASHA", "job starts per epoch"] == "0.333"
    text = "\n\n".join(results.wallclock_sections(long, "results/wallclock"))
    assert "From the 3 finished runs under `results/wallclock`" in text
    assert text.index("### Start delay 1 x the median epoch time") < text.index(
        "### Start delay 10 x the median epoch time"
    )
    # delay 1: DyHPO - ASHA = 0.5 - 1.0, 0.4 - 0.7, 0.1 - 0.2 (anytime); 0, 0, 0.3 - 0.2 (trained)
    delay_1, delay_10 = text.split("### Start delay 10 x")
    assert (
        "| LCBench | 1 | DyHPO | anytime | -0.500 (1/0/0, p 1) vs ASHA | -0.300 (1/0/0, p 1) vs ASHA "
        "| -0.100 (1/0/0, p 1) vs ASHA |"
        in delay_1
    )
    assert (
        "| LCBench | 1 | DyHPO | fully-trained | +0.000 (0/1/0, p 1) vs ASHA | +0.000 (0/1/0, p 1) vs ASHA "
        "| +0.100 (0/0/1, p 1) vs ASHA |"
        in delay_1
    )
    # delay 10: DyHPO alone, no reference to compare with
    assert "| LCBench | 1 | DyHPO | 1 | 0.500 | 0.400 | 0.100 |" in delay_10 and "| ASHA |" not in delay_10
    assert "| LCBench | 1 | DyHPO | anytime | - | - | - |" in delay_10


def test_a_run_of_the_epoch_protocol_is_refused():
    run = _run("ASHA", ASHA_RESULTS, ASHA_JOBS)
    run.summary["protocol"] = "epochs"
    with pytest.raises(ValueError, match="not a wall-clock run"):
        wallclock_long_table([run])


def test_the_wall_clock_section_is_replaced_in_place_or_inserted_before_the_figures():
    doc = (
        "# R\n\n## Speed\n\nfast\n\n## Wall-clock protocol: old\n\nold\n\n### Start delay 1\n\nx\n\n"
        "## Figures\n\n- f\n"
    )
    spliced = results.splice_wallclock(doc, ["## Wall-clock protocol: new", "### Start delay 0", "t"])
    assert spliced == (
        "# R\n\n## Speed\n\nfast\n\n## Wall-clock protocol: new\n\n### Start delay 0\n\nt\n\n## Figures\n\n- f\n"
    )
    without = "# R\n\n## Speed\n\nfast\n\n## Figures\n\n- f\n"
    assert results.splice_wallclock(without, ["## Wall-clock protocol: new"]) == (
        "# R\n\n## Speed\n\nfast\n\n## Wall-clock protocol: new\n\n## Figures\n\n- f\n"
    )
    assert results.splice_wallclock("# R\n\n## Speed\n\nfast\n", ["## Wall-clock protocol: new"]) == (
        "# R\n\n## Speed\n\nfast\n\n## Wall-clock protocol: new\n"
    )
    last = "# R\n\n## Wall-clock protocol: old\n\nold\n"
    assert results.splice_wallclock(last, ["## Wall-clock protocol: new"]) == "# R\n\n## Wall-clock protocol: new\n"


def test_without_a_results_folder_only_the_wall_clock_section_is_rewritten_and_bad_calls_are_refused(tmp_path, capsys):
    out = tmp_path / "R.md"
    with pytest.raises(SystemExit):
        results.main(["--out", str(out)])  # neither results_dir nor --wallclock
    assert "results_dir is required unless --wallclock" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        results.main(["--wallclock", str(tmp_path), "--out", str(out)])  # no file to rewrite
    assert f"out {out}: not a file" in capsys.readouterr().err
    out.write_text("# R\n")
    with pytest.raises(SystemExit):
        results.main(["--wallclock", str(tmp_path), "--out", str(out)])  # no runs under it
    assert "no finished runs of the wall-clock protocol" in capsys.readouterr().err
    assert out.read_text() == "# R\n"
    # the wall-clock reseed's options only where they mean something
    with pytest.raises(SystemExit):
        results.main(["--wallclock-more-seeds", str(tmp_path), "--out", str(out)])
    assert "--wallclock-more-seeds needs --wallclock" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        results.main(["--wallclock", str(tmp_path), "--out", str(out), "--start-delay", "0"])
    assert "--start-delay goes with --wallclock --list-tasks-over" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        results.main(["--wallclock", str(tmp_path), "--list-tasks-over"])  # no runs under it
    assert "no finished runs of the wall-clock protocol" in capsys.readouterr().err
