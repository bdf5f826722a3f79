"""benchmarks/depth.py: the completion's epochs from hand-made decision logs and results, and the
table of RESULTS.md from a hand-made results folder."""

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks import results
from benchmarks.depth import completion_depth, depth_per_run

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


def test_a_completed_leader_that_got_overtaken():
    depth = completion_depth(LOG, RESULTS, "loss", True, "epoch", 4)
    # 9 epochs; the completion gave trial 0 epochs 2 (resume), 3, 4 (continue) and trial 1 epochs
    # 3, 4 (resume; its epoch 2 is the acquisition's, trial 2's dropped row gives no epochs);
    # trial 1 is the best trained (0.1 < 0.3): trial 0's 3 epochs went elsewhere
    assert depth["best_trained"] == 1
    assert (depth["epochs"], depth["completion_epochs"], depth["completion_elsewhere"]) == (9, 5, 3)
    assert depth["completion_share"] == pytest.approx(5 / 9) and depth["elsewhere_share"] == pytest.approx(3 / 9)
    # maximised, trial 0 (0.3) is the best trained: trial 1's 2 epochs went elsewhere
    maximised = completion_depth(LOG, RESULTS, "loss", False, "epoch", 4)
    assert (maximised["best_trained"], maximised["completion_elsewhere"]) == (0, 2)


def test_no_trained_trial_every_completion_epoch_went_elsewhere():
    depth = completion_depth(LOG, RESULTS, "loss", True, "epoch", 5)
    assert depth["best_trained"] is None
    assert (depth["completion_epochs"], depth["completion_elsewhere"]) == (5, 5)


def test_of_tied_trials_the_first_is_the_best_trained():
    # the report's model to take home is one trial: of trials tied at max_t the smallest id.
    # (Every tied trial counted as the best trained before, and nothing went elsewhere here.)
    tied = _results([(0, [0.5, 0.4, 0.35, 0.1]), (1, [0.6, 0.3, 0.2, 0.1]), (2, [0.9, NAN, NAN, NAN])])
    depth = completion_depth(LOG, tied, "loss", True, "epoch", 4)
    # trial 0 is the best trained: trial 1's completion epochs 3, 4 went elsewhere
    assert (depth["best_trained"], depth["completion_epochs"], depth["completion_elsewhere"]) == (0, 5, 2)
    # a diverged value at max_t is never the best trained
    assert completion_depth(LOG, tied, "loss", False, "epoch", 4)["best_trained"] == 0


def test_the_reasons_of_all_trials_at_once_are_the_timelines():
    # depth.py reads the log once (reasons_by_trial); the timeline asks per trial (epoch_reasons)
    from syne_dyhpo.report.loading import run_from_frames
    from syne_dyhpo.report.summary import trial_histories
    from syne_dyhpo.report.timeline import epoch_reasons, reasons_by_trial

    for log in (LOG, LOG.iloc[[0, 1, 2, 6, 4, 3, 5, 7, 8, 9]], LOG.iloc[:0]):
        run = run_from_frames(RESULTS, log, "loss", "min", "epoch", 4)
        histories = trial_histories(run)
        expected = {tid: epoch_reasons(run, tid, h.epochs) for tid, h in histories.items()}
        assert reasons_by_trial(run, histories) == expected
    run = run_from_frames(RESULTS, LOG, "loss", "min", "epoch", 4)
    assert reasons_by_trial(run, trial_histories(run)) == {
        0: ["initial_random", "completion", "completion", "completion"],
        1: ["initial_random", "acquisition", "completion", "completion"],
        2: ["acquisition"],
    }


def test_the_order_of_the_log_rows_does_not_matter():
    shuffled = LOG.iloc[[0, 1, 2, 6, 4, 3, 5, 7, 8, 9]]  # rows written out of decision order
    assert completion_depth(shuffled, RESULTS, "loss", True, "epoch", 4) == completion_depth(
        LOG, RESULTS, "loss", True, "epoch", 4)


def test_a_repeated_log_row_counts_once_and_the_last_copy_stands():
    # a row written again by a continued run (same session and decision): the report keeps the
    # last copy; here the copy says the acquisition gave trial 1 its epochs 3, 4
    again = LOG.iloc[[6]].assign(reason="acquisition")
    depth = completion_depth(pd.concat([LOG, again]), RESULTS, "loss", True, "epoch", 4)
    assert (depth["completion_epochs"], depth["completion_elsewhere"]) == (3, 3)


def test_epochs_before_the_first_decision_of_a_trial_count_for_it():
    # the only decision the log has of trial 3 resumes it to epoch 4: every epoch up to 4 is
    # trained for its reason (the report's timeline draws them so). The results' clock is not
    # read (it was before: epochs 1, 2 reported by time 5 did not count, 2 of 4).
    results_ = _results([(3, [0.5, 0.4, 0.3, 0.2])], times=[1.0, 2.0, 6.0, 7.0])
    log = _log([(5.0, NAN, NAN, "", "resume", 3, 4, "completion")])
    assert completion_depth(log, results_, "loss", True, "epoch", 4)["completion_epochs"] == 4
    no_clock = results_.drop(columns="st_tuner_time")
    assert completion_depth(log, no_clock, "loss", True, "epoch", 4)["completion_epochs"] == 4
    # a later epoch than any decision's next_epoch has no reason ("unknown")
    longer = _results([(3, [0.5, 0.4, 0.3, 0.2, 0.1])])
    assert completion_depth(log, longer, "loss", True, "epoch", 5)["completion_epochs"] == 4
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
    # t1: the log above (5 and 3 of 9 epochs); t2: the completion's resume of trial 0 to epoch 2 is
    # the log's only decision of trial 0, so its epochs 1 and 2 are the completion's (2 of 9; 1 of 9
    # before, when epoch 1 was attributed to no decision)
    one = _log([(0.0, 0, 1, "PAUSE", "resume", 0, 2, "completion")])
    _run(tmp_path / "a", "DeepPowerLaw", "t1", 0, LOG)
    _run(tmp_path / "b", "DeepPowerLaw", "t2", 0, one)
    _run(tmp_path / "c", "DeepPowerLaw", "t3", 0)  # made before the runner kept the log
    _run(tmp_path / "d", "ASHA", "t1", 0)
    (tmp_path / "e").mkdir()
    LOG.to_csv(tmp_path / "e" / "decision_log.csv", index=False)  # a run still going: no run.json
    per_run = depth_per_run(tmp_path)
    assert sorted(per_run["task"]) == ["t1", "t2"]
    assert per_run.set_index("task").loc["t2", "completion_elsewhere"] == 2  # trial 1 is the best trained
    assert per_run["best_trained"].tolist() == [1, 1]
    per_run["benchmark"] = per_run["benchmark"].map(results.family_of)
    long = pd.DataFrame([
        dict(benchmark="LCBench", n_workers=4, method=m, task=t, seed=0, budget_point=f)
        for m, t in [("DeepPowerLaw", "t1"), ("DeepPowerLaw", "t2"), ("DeepPowerLaw", "t3"), ("ASHA", "t1")]
        for f in (0.25, 1.0)
    ])
    table = results.depth_table(per_run, long)
    assert table.values.tolist() == [
        # (5/9 + 2/9) / 2 = 0.389; (3/9 + 2/9) / 2 = 0.278
        ["LCBench", 4, "DeepPowerLaw", "2/3", "0.389", "0.278"],
    ]
    assert results.depth_table(per_run.iloc[:0], long).empty


def _reasons_by_time(log, res):
    """The reason each result row was trained for, read from the clock: that of the trial's latest
    decision giving it a segment made before the result (the simulator's ``st_tuner_time`` and
    the log's ``time`` are one clock; a "continue" is decided on the result before its epochs)."""
    given = log[log["next"].isin(["start", "resume", "continue"])]
    given = given.sort_values(["session", "decision"]).sort_values("time", kind="stable")
    reasons = []
    for row in res.itertuples(index=False):
        before = given[(given["next_trial_id"] == row.trial_id) & (given["time"] < row.st_tuner_time)]
        reasons.append(before["reason"].iloc[-1] if len(before) else "unknown")
    return pd.Series(reasons, index=res.index)


@pytest.mark.slow  # starts a Tuner
def test_depth_of_a_real_run_matches_the_clock_and_the_report(tmp_path):
    """A DyHPO run with 2 workers: the completion's epochs read by benchmarks/depth.py are those
    the decisions made before each result trained (read from the clock, not by next_epoch), its
    best trained configuration is the best value at max_t and the model the report of the run's
    folder takes home, and RESULTS.md shows the shares."""
    from conftest import tiny_blackbox
    from syne_tune.blackbox_repository.blackbox_tabular import serialize

    from benchmarks.runner import RunSpec, run_one
    from syne_dyhpo.report import make_report

    data = tmp_path / "data" / "tinybench"
    data.parent.mkdir()
    serialize({"taskA": tiny_blackbox(30, 8)}, str(data),
              metadata={"default_metric": "error", "time_attr": "epoch", "metric_elapsed_time": "time"})
    run_one(RunSpec("DyHPO", str(data), "taskA", 0, 80, 2), tmp_path / "runs")
    run_one(RunSpec("ASHA", str(data), "taskA", 0, 80, 2), tmp_path / "runs")
    (folder,) = [p.parent for p in (tmp_path / "runs").rglob("decision_log.csv")]
    log, res = pd.read_csv(folder / "decision_log.csv"), pd.read_csv(folder / "results.csv.gz")
    depth = completion_depth(log, res, "error", True, "epoch", 8)
    at_max = res[res["epoch"] == 8].sort_values("trial_id", kind="stable")
    best = at_max["trial_id"].iloc[at_max["error"].to_numpy().argmin()]
    assert depth["best_trained"] == best == make_report(folder, pictures=False).take_home.trial_id
    by_clock = _reasons_by_time(log, res) == "completion"
    assert depth["completion_epochs"] == by_clock.sum() > 0
    assert depth["completion_elsewhere"] == (by_clock & (res["trial_id"] != best)).sum() > 0
    assert depth["epochs"] == len(res)
    out = tmp_path / "RESULTS.md"
    assert results.main([str(tmp_path / "runs"), "--out", str(out), "--figures", ""]) == 0
    text = out.read_text()
    assert "From the decision logs (`decision_log.csv`) of 1 of the 2 runs" in text
    share, elsewhere = f"{depth['completion_share']:.3f}", f"{depth['elsewhere_share']:.3f}"
    assert f"| tinybench | 2 | DyHPO | 1/1 | {share} | {elsewhere} |" in text
