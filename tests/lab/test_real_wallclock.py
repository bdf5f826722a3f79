"""The real-backend benchmark's accounting (benchmarks/real_wallclock.py) on hand-made results
whose epochs, job starts, epoch seconds and shares are known. The benchmark itself runs
real processes for minutes; its smoke command is in its docstring."""

import argparse
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import real_wallclock as rw

pytestmark = pytest.mark.slow  # imports the lab's runner (Syne Tune's simulator) for the CLI checks

#: (trial_id, epoch, val_accuracy, st_worker_iter, st_worker_timestamp). Trial 0: a job of epochs
#: 1-3 (1 s apart), then a resumed job of epochs 4-5 (1.5 s apart); trial 1: one job of one epoch,
#: reported between trial 0's two jobs. Epoch gaps: 1, 1, 1.5 (mean 7/6); the 8 s between trial 0's
#: jobs and the times across trials are not epochs.
REPORTED = [
    (0, 1, 0.50, 0, 10.0),
    (0, 2, 0.60, 1, 11.0),
    (0, 3, 0.70, 2, 12.0),
    (1, 1, 0.95, 0, 15.0),
    (0, 4, 0.80, 0, 20.0),
    (0, 5, 0.85, 1, 21.5),
]
COLUMNS = ["trial_id", "epoch", "val_accuracy", "st_worker_iter", "st_worker_timestamp"]


def _frame(rows) -> pd.DataFrame:
    # shuffled, with a non-default index: the functions must not rely on the order
    return pd.DataFrame(rows, columns=COLUMNS).iloc[[5, 3, 0, 4, 2, 1]].set_index(pd.Index([7, 3, 9, 1, 4, 8]))


def test_jobs_split_at_each_first_report_and_epoch_seconds_stay_within_a_job():
    reported = _frame(REPORTED)
    jobs = rw.job_ids(reported)
    assert list(jobs.index) == list(reported.index)
    assert {(t, e): j for t, e, j in zip(reported["trial_id"], reported["epoch"], jobs)} == {
        (0, 1): 0, (0, 2): 0, (0, 3): 0, (0, 4): 1, (0, 5): 1, (1, 1): 0,
    }
    assert sorted(rw.epoch_gaps(reported)) == [1.0, 1.0, 1.5]
    assert rw.mean_epoch_seconds(reported) == pytest.approx(3.5 / 3)
    # no job with two results: not measurable
    one_epoch_jobs = _frame(REPORTED).query("epoch in (1, 4)")
    assert math.isnan(rw.mean_epoch_seconds(one_epoch_jobs))
    assert math.isnan(rw.mean_epoch_seconds(pd.DataFrame(columns=COLUMNS)))
    # the run's epoch: pooled over the methods' jobs, else the configured one
    other = pd.DataFrame([(0, 1, 0.5, 0, 0.0), (0, 2, 0.6, 1, 2.5)], columns=COLUMNS)
    assert rw.mean_epoch_seconds(reported, other) == pytest.approx(6.0 / 4)
    assert rw.run_epoch_seconds([one_epoch_jobs, other], configured=1.0) == (2.5, "measured")
    assert rw.run_epoch_seconds([one_epoch_jobs], configured=1.0) == (1.0, "configured")


def test_summary_counts_epochs_starts_share_and_best():
    reported = _frame(REPORTED)
    seen = reported[reported["epoch"] != 2]  # one result Syne Tune dropped after a decision
    row = rw.summarize(reported, seen, job_starts=4, n_workers=2, wall_seconds=10.0, max_t=5, epoch_seconds=2.0)
    assert row["epochs"] == 6 and row["epochs_seen"] == 5 and row["job_starts"] == 4
    assert row["starts_per_epoch"] == pytest.approx(4 / 6)
    assert row["epoch_seconds"] == pytest.approx(3.5 / 3)
    assert row["share_in_epochs"] == pytest.approx(6 * 2.0 / (2 * 10.0))  # with the epoch given
    assert row["best_anytime"] == 0.95 and row["best_at_max_t"] == 0.85
    assert row["trials"] == 2 and row["wall_seconds"] == 10.0
    assert rw.summarize(reported, seen, 4, 2, 10.0, max_t=6, epoch_seconds=2.0)["best_at_max_t"] is None

    empty = pd.DataFrame(columns=COLUMNS)
    nothing = rw.summarize(empty, empty, job_starts=2, n_workers=2, wall_seconds=5.0, max_t=5, epoch_seconds=1.0)
    assert nothing["epochs"] == 0 and nothing["share_in_epochs"] == 0.0
    assert math.isnan(nothing["starts_per_epoch"]) and math.isnan(nothing["epoch_seconds"])
    assert nothing["best_anytime"] is None
    with pytest.raises(ValueError, match=r"wall_seconds must be > 0, got 0\.0"):
        rw.summarize(reported, seen, 4, 2, 0.0, 5, 1.0)


def test_ratios_against_asha_the_run_summary_and_the_table():
    rows = {
        "DyHPO": {"share_in_epochs": 0.45, "starts_per_epoch": 0.3},
        "ASHA": {"share_in_epochs": 0.5, "starts_per_epoch": 0.2},
        "DeepPowerLaw": {"share_in_epochs": math.nan, "starts_per_epoch": 0.1},
    }
    r = rw.ratios(rows)
    assert set(r) == {"DyHPO", "DeepPowerLaw"}
    assert r["DyHPO"]["share_ratio"] == pytest.approx(0.9)
    assert r["DyHPO"]["starts_per_epoch_ratio"] == pytest.approx(1.5)
    assert math.isnan(r["DeepPowerLaw"]["share_ratio"])
    assert r["DeepPowerLaw"]["starts_per_epoch_ratio"] == pytest.approx(0.5)
    assert rw.ratios({"DyHPO": rows["DyHPO"]}) == {}
    assert json.loads(json.dumps(rw.json_ready(r)))["DeepPowerLaw"]["share_ratio"] is None

    # the runs of two methods: ours trained one epoch per job, ASHA trained the hand-made jobs
    ours = pd.DataFrame([(t, 1, 0.5 + t / 10, 0, 30.0 + t) for t in range(4)], columns=COLUMNS)
    runs = {
        "DyHPO": rw.MethodRun(ours, ours, job_starts=6, trials_started=4, wall_seconds=10.0, experiment="d"),
        "ASHA": rw.MethodRun(_frame(REPORTED), _frame(REPORTED), 3, 2, 10.0, "a"),
    }
    args = argparse.Namespace(epoch_seconds=1.0, n_workers=2, max_epochs=5, out=Path("/x"))
    result = rw.summary(runs, args)
    assert (result["epoch_seconds"], result["epoch_seconds_source"]) == (pytest.approx(3.5 / 3), "measured")
    assert result["args"]["out"] == "/x" and result["rows"]["DyHPO"]["experiment"] == "d"
    assert result["rows"]["DyHPO"]["share_in_epochs"] == pytest.approx(4 * (3.5 / 3) / 20)
    assert result["ratios"]["DyHPO"]["share_ratio"] == pytest.approx(4 / 6)
    assert result["ratios"]["DyHPO"]["starts_per_epoch_ratio"] == pytest.approx((6 / 4) / (3 / 6))
    table = rw.markdown(result["rows"]).splitlines()
    assert table[0].startswith("| method | epochs | epochs seen | job starts | starts / epoch |")
    assert table[2] == "| DyHPO | 4 | 4 | 6 | 1.500 | nan | 0.233 | 0.800 | - | 4 | 10.000 |"
    assert table[3] == "| ASHA | 6 | 6 | 3 | 0.500 | 1.167 | 0.350 | 0.950 | 0.850 | 2 | 10.000 |"
    assert table[-1] == "| DyHPO | 0.667 | 3.000 |"


def test_reported_results_read_every_job_of_a_trial_from_its_stdout():
    class Backend:  # LocalBackend.stdout: the lines of the trial's std.out, every job appended
        def stdout(self, trial_id):
            lines = {
                0: [
                    '[tune-metric]: {"epoch": 1, "val_accuracy": 0.5, "st_worker_iter": 0, '
                    '"st_worker_timestamp": 1.0}\n',
                    "some log line\n",
                    '[tune-metric]: {"epoch": 2, "val_accuracy": 0.6, "st_worker_iter": 0, '
                    '"st_worker_timestamp": 9.0}\n',
                ],
                1: [],
            }
            return lines[trial_id]

    frame = rw.reported_results(Backend(), [0, 1])
    assert frame[["trial_id", "epoch", "st_worker_iter"]].values.tolist() == [[0, 1, 0], [0, 2, 0]]
    assert list(rw.job_ids(frame)) == [0, 1]
    assert len(rw.reported_results(Backend(), [1])) == 0


def test_schedulers_and_cli_errors(capsys):
    from syne_dyhpo.core.job_costs import JobCosts

    space = {**rw.make_config_space(max_epochs=4), rw.EPOCH_SECONDS_ATTR: 1.0}
    ours = rw.build_scheduler("DyHPO-costs", space, max_t=4, random_seed=0)
    assert ours.max_resource_attr == "epochs" and ours.options.job_costs == JobCosts()
    asha = rw.build_scheduler("ASHA", space, max_t=4, random_seed=0)
    assert type(asha).__name__ == "ASHA" and asha.max_t == 4
    assert "DeepPowerLaw-costs" in rw.variants() and "BOHB" in rw.variants()

    with pytest.raises(SystemExit) as exc_info:
        rw.main(["--methods", "DyHPO", "Hyperband"])
    assert exc_info.value.code == 2
    assert "--methods: ['Hyperband'] not among" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc_info:
        rw.main(["--budget", "0"])
    assert exc_info.value.code == 2
