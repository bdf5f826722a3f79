"""benchmarks/depth.py: the completion's epochs from hand-made decision logs and results, and the
table of RESULTS.md from a hand-made results folder."""

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks import results
from benchmarks.depth import best_trained_trials, completion_depth, completion_segments, depth_per_run

NAN = np.nan
LOG_COLUMNS = ["session", "decision", "time", "trial_id", "epoch", "action", "next", "next_trial_id",
               "next_epoch", "reason"]


def _log(rows):
    return pd.DataFrame([(0, i, *row) for i, row in enumerate(rows)], columns=LOG_COLUMNS)


def _results(curves, times=None):
    """``curves``: trial -> metric values at epochs 1, 2, ...; rows in the order given."""
    rows = [(trial, epoch, value) for trial, values in curves for epoch, value in enumerate(values, start=1)]
    df = pd.DataFrame(rows, columns=["trial_id", "epoch", "loss"])
    if times is not None:
        df["st_tuner_time"] = times
    return df


# trial 0: completed first (0.3 at max_t = 4), then overtaken by trial 1 (0.1 at max_t); trial 2: one epoch
RESULTS = _results([(0, [0.5, 0.4, 0.35, 0.3]), (1, [0.6, 0.3, 0.2, 0.1]), (2, [0.9])])
LOG = _log([
    (0.0, NAN, NAN, "", "start", 0, 1, "initial_random"),
    (0.0, NAN, NAN, "", "start", 1, 1, "initial_random"),
    (1.0, 0, 1, "PAUSE", "start", 2, 1, "acquisition"),
    (1.1, 1, 1, "PAUSE", "resume", 0, 2, "completion"),  # resume of trial 0 from its epoch 1: epoch 2
    (2.0, 2, 1, "PAUSE", "resume", 1, 2, "acquisition"),  # not the completion: epoch 2 of trial 1
    (2.1, 0, 2, "CONTINUE", "continue", 0, 4, "completion"),  # trial 0 goes on: epochs 3, 4
    (3.0, 1, 2, "PAUSE", "resume", 1, 4, "completion"),  # the reporting trial resumed: epochs 3, 4
    (3.1, NAN, NAN, "", "dropped", 2, 2, "completion"),  # given up: no epochs
    (4.0, 0, 4, "STOP", "nothing", NAN, NAN, "max_t"),
    (5.0, 1, 4, "STOP", "nothing", NAN, NAN, "max_t"),
])


def test_segments_of_resume_and_continue_rows():
    segments = completion_segments(LOG, RESULTS, "epoch")
    assert segments.values.tolist() == [[0, 1, 2], [0, 2, 4], [1, 2, 4]]


def test_a_completed_leader_that_got_overtaken():
    depth = completion_depth(LOG, RESULTS, "loss", True, "epoch", 4)
    # 9 epochs; the completion gave trial 0 epochs 2, 3, 4 and trial 1 epochs 3, 4; trial 1 is
    # the best trained (0.1 < 0.3): trial 0's 3 epochs went elsewhere
    assert depth["best_trained"] == [1]
    assert (depth["epochs"], depth["completion_epochs"], depth["completion_elsewhere"]) == (9, 5, 3)
    assert depth["completion_share"] == pytest.approx(5 / 9) and depth["elsewhere_share"] == pytest.approx(3 / 9)
    # maximised, trial 0 (0.3) is the best trained: trial 1's 2 epochs went elsewhere
    assert completion_depth(LOG, RESULTS, "loss", False, "epoch", 4)["completion_elsewhere"] == 2


def test_no_trained_trial_every_completion_epoch_went_elsewhere():
    depth = completion_depth(LOG, RESULTS, "loss", True, "epoch", 5)
    assert depth["best_trained"] == []
    assert (depth["completion_epochs"], depth["completion_elsewhere"]) == (5, 5)


def test_tied_best_trained_trials_are_all_the_best():
    tied = _results([(0, [0.5, 0.4, 0.35, 0.1]), (1, [0.6, 0.3, 0.2, 0.1]), (2, [0.9, NAN, NAN, NAN])])
    assert best_trained_trials(tied, "loss", True, "epoch", 4) == {0, 1}
    assert completion_depth(LOG, tied, "loss", True, "epoch", 4)["completion_elsewhere"] == 0
    # a diverged value at max_t is never the best trained
    assert best_trained_trials(tied, "loss", False, "epoch", 4) == {0, 1}


def test_the_log_is_read_in_decision_order():
    shuffled = LOG.iloc[[0, 1, 2, 6, 4, 3, 5, 7, 8, 9]]  # rows written out of decision order
    assert completion_segments(shuffled, RESULTS, "epoch").values.tolist() == [[0, 1, 2], [0, 2, 4], [1, 2, 4]]


def test_a_resume_of_a_trial_the_log_has_no_row_of_starts_at_its_last_result_before_it():
    results_ = _results([(3, [0.5, 0.4, 0.3, 0.2])], times=[1.0, 2.0, 6.0, 7.0])
    log = _log([(5.0, NAN, NAN, "", "resume", 3, 4, "completion")])
    # epochs 1, 2 were reported by time 5: the segment is (2, 4]
    assert completion_segments(log, results_, "epoch").values.tolist() == [[3, 2, 4]]
    assert completion_depth(log, results_, "loss", True, "epoch", 4)["completion_epochs"] == 2
    # without the results' clock: from epoch 0
    no_clock = results_.drop(columns="st_tuner_time")
    assert completion_depth(log, no_clock, "loss", True, "epoch", 4)["completion_epochs"] == 4
    assert completion_depth(log.iloc[:0], results_, "loss", True, "epoch", 4)["completion_epochs"] == 0


def _run(folder, method, task, seed, log=None):
    folder.mkdir(parents=True)
    definition = {"metric": "loss", "do_minimize": True, "time_attr": "epoch", "max_t": 4}
    summary = {"benchmark": "lcbench-extra", "task": task, "method": method, "seed": seed, "n_workers": 4,
               "definition": definition}
    (folder / "run.json").write_text(json.dumps(summary))
    RESULTS.to_csv(folder / "results.csv.gz", index=False)
    if log is not None:
        log.to_csv(folder / "decision_log.csv", index=False)


def test_depth_table_covers_the_runs_with_a_log(tmp_path):
    # t1: the log above (5 and 3 of 9 epochs); t2: the completion gave trial 0 its epoch 2 (1 of 9)
    one = _log([(0.0, 0, 1, "PAUSE", "resume", 0, 2, "completion")])
    _run(tmp_path / "a", "DeepPowerLaw", "t1", 0, LOG)
    _run(tmp_path / "b", "DeepPowerLaw", "t2", 0, one)
    _run(tmp_path / "c", "DeepPowerLaw", "t3", 0)  # made before the runner kept the log
    _run(tmp_path / "d", "ASHA", "t1", 0)
    (tmp_path / "e").mkdir()
    LOG.to_csv(tmp_path / "e" / "decision_log.csv", index=False)  # a run still going: no run.json
    per_run = depth_per_run(tmp_path)
    assert sorted(per_run["task"]) == ["t1", "t2"]
    assert per_run.set_index("task").loc["t2", "completion_elsewhere"] == 1  # trial 1 is the best trained
    per_run["benchmark"] = per_run["benchmark"].map(results.family_of)
    long = pd.DataFrame([
        dict(benchmark="LCBench", n_workers=4, method=m, task=t, seed=0, budget_point=f)
        for m, t in [("DeepPowerLaw", "t1"), ("DeepPowerLaw", "t2"), ("DeepPowerLaw", "t3"), ("ASHA", "t1")]
        for f in (0.25, 1.0)
    ])
    table = results.depth_table(per_run, long)
    assert table.values.tolist() == [
        # (5/9 + 1/9) / 2 = 0.333; (3/9 + 1/9) / 2 = 0.222
        ["LCBench", 4, "DeepPowerLaw", "2/3", "0.333", "0.222"],
    ]
    assert results.depth_table(per_run.iloc[:0], long).empty


@pytest.mark.slow  # starts a Tuner
def test_depth_of_a_real_run_matches_the_timeline_attribution(tmp_path):
    """A DyHPO run with 2 workers: the completion's epochs read by benchmarks/depth.py are those
    the trial timeline (syne_dyhpo.report.timeline) draws as the completion's, and RESULTS.md
    shows their shares."""
    from types import SimpleNamespace

    from syne_tune.blackbox_repository.blackbox_tabular import serialize

    from benchmarks.runner import RunSpec, run_one
    from conftest import tiny_blackbox
    from syne_dyhpo.report.timeline import epoch_reasons

    data = tmp_path / "data" / "tinybench"
    data.parent.mkdir()
    serialize({"taskA": tiny_blackbox(30, 8)}, str(data),
              metadata={"default_metric": "error", "time_attr": "epoch", "metric_elapsed_time": "time"})
    run_one(RunSpec("DyHPO", str(data), "taskA", 0, 80, 2), tmp_path / "runs")
    run_one(RunSpec("ASHA", str(data), "taskA", 0, 80, 2), tmp_path / "runs")
    (folder,) = [p.parent for p in (tmp_path / "runs").rglob("decision_log.csv")]
    log, res = pd.read_csv(folder / "decision_log.csv"), pd.read_csv(folder / "results.csv.gz")
    depth = completion_depth(log, res, "error", True, "epoch", 8)
    by_timeline = sum(
        reason == "completion"
        for trial, g in res.groupby("trial_id")
        for reason in epoch_reasons(SimpleNamespace(log=log), trial, list(g["epoch"]))
    )
    assert depth["completion_epochs"] == by_timeline > 0
    assert depth["epochs"] == len(res) and len(depth["best_trained"]) >= 1
    out = tmp_path / "RESULTS.md"
    assert results.main([str(tmp_path / "runs"), "--out", str(out), "--figures", ""]) == 0
    text = out.read_text()
    assert "From the decision logs (`decision_log.csv`) of 1 of the 2 runs" in text
    share, elsewhere = f"{depth['completion_share']:.3f}", f"{depth['elsewhere_share']:.3f}"
    assert f"| tinybench | 2 | DyHPO | 1/1 | {share} | {elsewhere} |" in text
