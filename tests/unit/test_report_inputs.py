"""``syne-dyhpo report`` on what users hand it: paths that are no experiment folder, an ``--out``
that is a file, files being rewritten, broken or holding garbage (a message naming the path and
exit status 2, or a report with warning lines, never a traceback); ``--no-pictures``; the
learning curves of one-epoch trials; job starts and their share of worker time; a Ray Tune
experiment folder (hand-made in Ray 2's layout; tests/e2e/test_report_ray.py reads a real one)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from syne_dyhpo.core.decision_log import COLUMNS, LOG_FILENAME, RUN_INFO_FILENAME
from syne_dyhpo.report import cli, loading, make_report
from syne_dyhpo.report.loading import load_run

MAX_T = 3


def info(**extra) -> dict:
    return {"scheduler": "DyHPO", "metric": "loss", "mode": "min", "time_attr": "epoch", "max_t": MAX_T,
            "max_resource_attr": "epochs", "hyperparameters": ["x"], "backend": "LocalBackend",
            "checkpoint_template": None, **extra}


def result(tid: int, epoch: int, loss: float, t: float, decision: str = "PAUSE") -> dict:
    return {"loss": loss, "epoch": epoch, "trial_id": tid, "st_decision": decision, "st_tuner_time": t,
            "config_x": tid / 10, "config_epochs": MAX_T}


def decision(n: int, t: float, next_: str, next_trial_id=None, next_epoch=None, reason="acquisition",
             **fields) -> dict:
    return {"session": 0, "decision": n, "time": t, "next": next_, "next_trial_id": next_trial_id,
            "next_epoch": next_epoch, "reason": reason, "ms": 1.0, **fields}


def write_folder(folder: Path, results: list[dict], log: list[dict], **run_info) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(results).to_csv(folder / "results.csv.zip", index=False)
    pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in log], columns=list(COLUMNS)).to_csv(
        folder / LOG_FILENAME, index=False)
    (folder / RUN_INFO_FILENAME).write_text(json.dumps(info(**run_info)))
    return folder


#: a run of 2 workers (its numbers are worked out in test_job_starts_and_their_share_of_worker_time)
RESULTS = [
    result(1, 1, 0.9, 2.5),  # trial 1: started at 0.5, one epoch
    result(0, 1, 0.8, 3.0, "CONTINUE"),  # trial 0: started at 0.0, a segment of 2 epochs
    result(0, 2, 0.6, 4.0),
    result(0, 3, 0.5, 7.5, "STOP"),  # resumed at 5.0
]
LOG = [
    decision(0, 0.0, "start", 0, 2, "points_to_evaluate"),
    decision(1, 0.5, "start", 1, 1, "points_to_evaluate"),
    decision(2, 2.5, "nothing", trial_id=1, epoch=1, action="PAUSE"),
    decision(3, 4.0, "nothing", trial_id=0, epoch=2, action="PAUSE"),
    decision(4, 5.0, "resume", 0, 3),
    decision(5, 6.0, "start", 2, 1),  # trial 2 never reports
    decision(6, 7.5, "nothing", trial_id=0, epoch=3, action="STOP", reason="max_t"),
    decision(7, 8.0, "nothing", reason="nothing_left"),
]


@pytest.fixture
def run_folder(tmp_path) -> Path:
    return write_folder(tmp_path / "run", RESULTS, LOG, n_workers=2)


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(loading, "READ_PAUSE_S", 0.001)


# ----- paths that are no experiment folder, and --out ------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "empty folder", "file", "missing relative to home"])
def test_a_path_that_is_no_experiment_folder_is_a_message_naming_it(kind, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "st"))
    path = {"missing": str(tmp_path / "no" / "such" / "path"), "empty folder": str(tmp_path / "empty"),
            "file": str(tmp_path / "a-file.txt"), "missing relative to home": "~/no/such/run-folder-x"}[kind]
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file.txt").write_text("not a run")
    assert cli.main(["report", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("syne-dyhpo report: ") and repr(path) in err and "Traceback" not in err
    expected = {"missing": "no such folder", "empty folder": "no experiment folder", "file": "is a file",
                "missing relative to home": "no such folder"}[kind]
    assert expected in err


def test_out_naming_a_file_is_a_message_naming_it(run_folder, tmp_path, capsys):
    a_file = tmp_path / "report.txt"
    a_file.write_text("mine")
    assert cli.main([str(run_folder), "--out", str(a_file)]) == 2
    assert f"--out {str(a_file)!r} is a file, not a folder" in capsys.readouterr().err
    assert a_file.read_text() == "mine"
    under = a_file / "sub"  # a folder under a file cannot be made
    assert cli.main([str(run_folder), "--out", str(under)]) == 2
    assert f"--out {str(under)!r} cannot be made" in capsys.readouterr().err


def test_no_pictures_says_so_and_not_that_matplotlib_is_missing(run_folder, capsys):
    pytest.importorskip("matplotlib", reason="checks the message where matplotlib is installed")
    assert cli.main([str(run_folder), "--no-pictures"]) == 0
    out = capsys.readouterr().out
    assert "No pictures: not asked for (--no-pictures)" in out and "matplotlib" not in out
    assert not (run_folder / "report" / "timeline.png").exists()


# ----- files broken, being rewritten, or holding bad values --------------------------------------


def test_a_decision_log_without_its_header_line_is_read_with_a_warning(run_folder):
    complete = make_report(run_folder, pictures=False).summary
    lines = (run_folder / LOG_FILENAME).read_text().splitlines()
    (run_folder / LOG_FILENAME).write_text("\n".join(lines[1:]) + "\n")
    report = make_report(run_folder, pictures=False)
    assert report.summary.reasons == complete.reasons == {"points_to_evaluate": 2, "acquisition": 4,
                                                          "nothing_left": 1}
    assert report.summary.jobs.count == complete.jobs.count == 4
    warning = f"Warning: {run_folder / LOG_FILENAME}: no header line; read in the column order of the decision log"
    assert any(line.startswith(warning) for line in report.lines)


def test_garbage_in_the_decision_log_is_skipped_and_counted(run_folder, capsys):
    path = run_folder / LOG_FILENAME
    lines = path.read_text().splitlines()
    garbage = ["\x00\x00garbage\x7f", "x" * 20 + "," * (len(COLUMNS) - 1), lines[3][: len(lines[3]) // 2]]
    path.write_text("\n".join(lines[:3] + garbage + lines[3:]) + "\n")  # 8 rows and 3 bad lines
    assert cli.main([str(run_folder), "--no-pictures"]) == 0
    out = capsys.readouterr().out
    assert (
        f"Warning: {path}: skipped 3 of 11 rows with a bad value or a wrong number of fields (the first: line 4" in out
    )
    report = make_report(run_folder, pictures=False)
    assert len(report.run.log) == len(LOG) and report.summary.jobs.count == 4


def test_a_bad_value_skips_its_row_and_names_the_file(run_folder, capsys):
    log_path, results_path = run_folder / LOG_FILENAME, run_folder / "results.csv.zip"
    log = pd.read_csv(log_path, dtype=str, keep_default_na=False)
    log.loc[2, "session"] = "x"  # the PAUSE of trial 1
    log.to_csv(log_path, index=False)
    results = pd.read_csv(results_path, dtype=str, keep_default_na=False)
    results.loc[1, "epoch"] = "one"
    results.to_csv(results_path, index=False)
    assert cli.main([str(run_folder), "--no-pictures"]) == 0
    out = capsys.readouterr().out
    assert (
        f"Warning: {log_path}: skipped 1 of 8 rows with a bad value or a wrong number of fields (the first: "
        f"line 4, column 'session' = 'x')" in out
    )
    assert (
        f"Warning: {results_path}: skipped 1 of 4 rows with a bad value (the first: line 3, column 'epoch' = "
        f"'one')" in out
    )
    report = make_report(run_folder, pictures=False)
    assert report.summary.epochs == 3 and len(report.run.log) == 7
    assert report.histories[0].epochs == [2, 3]


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 cut short"])
def test_an_empty_or_cut_results_file_is_a_warning_and_the_log_is_read(run_folder, content):
    (run_folder / "results.csv.zip").write_bytes(content)
    report = make_report(run_folder, pictures=False)
    warnings = [line for line in report.lines if line.startswith("Warning:")]
    assert (
        len(warnings) == 1
        and f"{run_folder / 'results.csv.zip'}: unreadable after {loading.READ_TRIES} tries" in warnings[0]
    )
    assert report.summary.epochs == 0
    assert report.summary.started == 3  # the starts of the decision log


def test_reads_while_syne_tune_rewrites_the_results_never_fail(tmp_path, monkeypatch):
    # Syne Tune's StoreResultsCallback rewrites results.csv.zip in place (DataFrame.to_csv)
    monkeypatch.setattr(loading, "READ_PAUSE_S", 0.01)
    rows = [result(tid, epoch, 1.0 / epoch, 10.0 * tid + epoch) for tid in range(80) for epoch in range(1, 4)]
    folder = write_folder(tmp_path / "run", rows, LOG[:2])
    frame = pd.DataFrame(rows)
    stop = threading.Event()

    def rewrite():
        while not stop.is_set():
            frame.to_csv(folder / "results.csv.zip", index=False)
            time.sleep(0.005)

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        runs = [load_run(folder) for _ in range(8)]
    finally:
        stop.set()
        writer.join()
    for run in runs:  # all results, or none and a warning: never a traceback, never a part
        assert (len(run.results), run.warnings) == (len(rows), []) or (
            len(run.results) == 0 and "unreadable after" in run.warnings[0]
        )
    assert any(len(run.results) for run in runs)


# ----- the learning curves -----------------------------------------------------------------------


def test_trials_of_one_epoch_are_dots_in_the_learning_curves(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the pictures need the extra syne-dyhpo[report]")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection

    ones = {tid: 1.0 - tid / 100 for tid in range(2, 8)}  # six trials of one epoch
    rows = [result(0, e, 1.0 / e, e) for e in (1, 2, 3)] + [result(1, e, 0.9 / e, 3 + e) for e in (1, 2)]
    rows += [result(tid, 1, value, 10 + tid) for tid, value in ones.items()]
    folder = write_folder(tmp_path / "run", rows, [])
    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)  # keep the figure to look at its artists
    report = make_report(folder)
    (number,) = plt.get_fignums()[-1:]
    ax = plt.figure(number).axes[0]
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 1
    assert sorted(map(tuple, dots[0].get_offsets().tolist())) == sorted((1.0, v) for v in ones.values())
    assert dots[0].get_label() == "6 trials of one result"
    lines = {tuple(line.get_xdata()) for line in ax.lines}
    assert lines == {(1, 2, 3), (1, 2)}  # the take-home trial and the curve of two epochs
    assert report.curves.exists()
    matplotlib.pyplot.close("all")


# ----- job starts -----------------------------------------------------------------------------


def test_job_starts_and_their_share_of_worker_time(run_folder):
    report = make_report(run_folder, pictures=False)
    jobs = report.summary.jobs
    # starts of trials 0, 1, 2 and the resume of trial 0
    assert (jobs.count, jobs.first_starts) == (4, 3)
    # epoch time: trial 0's results 3.0 -> 4.0 within a segment: 1 s, also the run's median (for trial 1)
    # trial 0: 3.0 - 0.0 - 1 = 2.0 and 7.5 - 5.0 - 1 = 1.5; trial 1: 2.5 - 0.5 - 1 = 1.0; trial 2 never reported
    assert jobs.epoch_seconds == 1.0 and jobs.measured == 3
    assert jobs.seconds == pytest.approx(4.5)
    # worker time: 2 workers x 8 s (the last decision)
    assert jobs.worker_seconds == pytest.approx(16.0) and jobs.share == pytest.approx(4.5 / 16.0)
    assert (
        "Time of job starts: 28.1 % of worker time: 4.5 s beyond the epoch time, of 16.0 s (2 workers x 8.0 s; "
        "measured for 3 of 4 job starts; epoch 1 s (median))"
    ) in report.lines
    assert "Job starts: 4 (3 first starts, 1 resumes; 1.0 epochs per job start)" in report.lines


def test_job_start_share_is_unknown_where_the_files_do_not_tell(run_folder, tmp_path):
    (run_folder / RUN_INFO_FILENAME).write_text(json.dumps(info()))  # n_workers not recorded
    report = make_report(run_folder, pictures=False)
    assert report.summary.jobs.share is None and report.summary.jobs.seconds == pytest.approx(4.5)
    assert any(
        line.startswith("Time of job starts: 4.5 s beyond the epoch time") and "give --n-workers" in line
        for line in report.lines
    )
    assert make_report(run_folder, pictures=False, n_workers=4).summary.jobs.share == pytest.approx(4.5 / 32.0)
    # every segment one epoch long: an epoch's time cannot be told apart from a start's
    ones = [result(0, 1, 0.9, 2.0), result(1, 1, 0.8, 2.5)]
    folder = write_folder(tmp_path / "ones", ones, LOG[:2], n_workers=2)
    report = make_report(folder, pictures=False)
    assert report.summary.jobs.count == 2 and report.summary.jobs.share is None
    assert (
        "Time of job starts: unknown: no segment of two or more epochs: an epoch's time cannot be told apart "
        "from a job start's" in report.lines
    )


# ----- a Ray Tune experiment folder --------------------------------------------------------------

RAY_START = 1_700_000_000.25  # time.time() when the decision log's clock started


def ray_trial(folder: Path, number: int, ray_id: str, x: float, segments: list[list[tuple[int, float, float]]]) -> Path:
    """A trial folder as Ray Tune 2 writes it: ``segments`` of (epoch, loss, seconds after
    RAY_START of the result); each segment is a job (re)started from the last checkpoint."""
    trial = folder / f"train_fn_{ray_id}_{number}_x={x:.4f}_2026-01-01_10-00-00"
    trial.mkdir(parents=True)
    (trial / "params.json").write_text(json.dumps({"x": x, "max_epochs": MAX_T}))
    lines, k, iteration = [], 0, 0
    for segment in segments:
        job_start = segment[0][2] - 0.4  # a 0.4 s epoch
        for i, (epoch, loss, t) in enumerate(segment):
            iteration += 1
            (trial / f"checkpoint_{k:06d}").mkdir()
            lines.append(
                json.dumps(
                    {
                        "epoch": epoch,
                        "loss": loss,
                        "timestamp": int(RAY_START + t),
                        "checkpoint_dir_name": f"checkpoint_{k:06d}",
                        "done": False,
                        "training_iteration": iteration,
                        "trial_id": ray_id,
                        "date": "2026-01-01_10-00-01",
                        "time_this_iter_s": 0.4,
                        "time_total_s": 0.4 * iteration,
                        "pid": 1,
                        "hostname": "h",
                        "node_ip": "1.2.3.4",
                        "config": {"x": x, "max_epochs": MAX_T},
                        "time_since_restore": t - job_start,
                        "iterations_since_restore": i + 1,
                    }
                )
            )
            k += 1
    (trial / "result.json").write_text("\n".join(lines) + "\n")
    return trial


def test_a_ray_tune_experiment_folder_is_read(tmp_path):
    folder = tmp_path / "ray_results" / "dyhpo"
    ray_trial(folder, 1, "aaaa0001", 0.3, [[(1, 1.0, 2.4)], [(2, 0.5, 6.4), (3, 0.33, 6.8)]])
    ray_trial(folder, 2, "ffff0002", 0.9, [[(1, 1.5, 2.4)]])
    ray_trial(folder, 3, "bbbb0003", 0.35, [[(1, 1.1, 4.4)], [(2, 0.6, 8.4)], [(3, 0.4, 10.4)]])
    (folder / "experiment_state-2026-01-01_10-00-00.json").write_text("{}")
    log = [
        decision(0, 0.0, "start", 0, 1, "points_to_evaluate"),
        decision(1, 0.0, "start", 1, 1, "points_to_evaluate"),
        decision(2, 2.5, "start", 2, 1, "initial_random"),
        decision(3, 4.0, "resume", 0, 2),
        decision(4, 4.5, "resume", 2, 2),
        decision(5, 6.5, "continue", 0, 3),
        decision(6, 7.0, "resume", 2, 3),
    ]
    pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in log], columns=list(COLUMNS)).to_csv(
        folder / LOG_FILENAME, index=False
    )
    (folder / RUN_INFO_FILENAME).write_text(
        json.dumps(info(max_resource_attr=None, backend=None, start_timestamp=RAY_START, n_workers=2))
    )

    report = make_report(folder, pictures=False)
    s = report.summary
    assert (s.started, s.resumed, s.resumes, s.trained, s.epochs, s.first_epochs) == (3, 2, 3, 2, 7, 3)
    assert report.run.source == "ray_tune" and report.run.warnings == []
    home = report.take_home
    assert (home.trial_id, home.value, home.config) == (0, 0.33, {"x": 0.3})
    trial_0 = folder / "train_fn_aaaa0001_1_x=0.3000_2026-01-01_10-00-00"
    assert home.checkpoint == str(trial_0 / "checkpoint_000002") and home.checkpoint_exists
    # times on the log's clock, within the half second that whole-second stamps allow
    times = report.histories[2].times
    assert np.allclose(times, [4.4, 8.4, 10.4], atol=0.5)
    assert report.histories[0].times[2] - report.histories[0].times[1] == pytest.approx(0.4)
    assert report.histories[0].segment_starts == [0, 1] and report.histories[2].segment_starts == [0, 1, 2]
    assert s.jobs.count == 6 and s.jobs.measured == 6
    text = "\n".join(report.lines)
    assert "DyHPO on Ray Tune" in text and "Trials: 3 started, 2 resumed (3 resumes), 2 trained to max_t" in text
    assert "Model to take home: trial 0, loss=0.33 at epoch 3 (max_t)" in text
