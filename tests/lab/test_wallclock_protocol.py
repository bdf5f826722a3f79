"""The wall-clock protocol (benchmarks/wallclock.py) through the real runner on the shipped
tasks: what the simulated clock charges for epochs, job starts, resumes, pauses and stops, and
where the runs go.

With one worker, the k-th result (in time order) arrives at
``sum of the epoch times of results 1..k + d x (jobs begun by then) + 0.002 x (pauses and stops
before it)``. The jobs and the pauses are read here from Syne Tune's own results frame (a job
begins at a trial's first result and at its first result after a PAUSE; a pause or stop is a
PAUSE, or a STOP of a job not completed), not from the runner's job log, which is then checked
against them."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import data_folder

from benchmarks import run_benchmarks
from benchmarks.blackboxes import load_benchmark
from benchmarks.report import load_runs
from benchmarks.runner import RunSpec, run_dir, run_one
from benchmarks.wallclock import JOBS_FILE, STOP_SECONDS, epoch_times, simulator_config

GRU = "FixedTextRNNClassification_imdb_patch32_GRU64_avg_bs128"


def _run(spec: RunSpec, root) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    summary = run_one(spec, root)
    folder = run_dir(spec, root)
    df = pd.read_csv(folder / "results.csv.gz").sort_values("st_tuner_time", kind="stable").reset_index(drop=True)
    return summary, df, pd.read_csv(folder / JOBS_FILE)


def _jobs_and_stops(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per result row (time order): jobs begun up to and including it, and pauses or stops of
    the rows before it, from the results frame alone."""
    after_pause = df.groupby("trial_id")["st_decision"].shift().eq("PAUSE")
    begins = (~df["trial_id"].duplicated()) | after_pause
    ends = df["st_decision"].eq("PAUSE") | (df["st_decision"].eq("STOP") & ~df["st_status"].eq("Completed"))
    return begins.cumsum().to_numpy(), (ends.cumsum() - ends).to_numpy()


@pytest.mark.slow  # DeepPowerLaw fits its model at every decision (about 5 s)
def test_a_start_and_a_resume_each_cost_the_delay_on_taskset(tmp_path):
    """TaskSet's steps cost 1 s each: result k arrives at exactly k + 2.5 x jobs + 0.002 x pauses."""
    spec = RunSpec("DeepPowerLaw", str(data_folder("taskset")), GRU, 0, 60, 1, "wallclock", 2.5)
    summary, df, jobs = _run(spec, tmp_path)
    assert summary["epoch_time_median"] == 1.0 and summary["epoch_time_mean"] == 1.0
    assert summary["budget_seconds"] == 60.0 and summary["start_delay_seconds"] == 2.5
    jobs_begun, stops = _jobs_and_stops(df)
    # a job reports the time since it began: a resume from step s reports step s + 1 at 1 s
    began = np.r_[True, np.diff(jobs_begun) > 0]
    since = df["step"] - df.groupby("trial_id")["step"].shift().fillna(0)
    assert (df["time"][began] == since[began]).all() and (since == 1).all()
    k = np.arange(1, len(df) + 1)
    np.testing.assert_allclose(df["st_tuner_time"], k + 2.5 * jobs_begun + STOP_SECONDS * stops, rtol=0, atol=1e-9)
    assert df["st_decision"].eq("PAUSE").sum() >= 5  # one segment per job: every epoch a pause ...
    kinds = jobs["kind"].value_counts()
    assert kinds["resume"] >= 1  # ... and resumed trials among the jobs, charged like new ones
    # the runner's job log: one row per job begun, scheduled the delay before its first epoch ends
    assert kinds["start"] + kinds["resume"] == jobs_begun[-1] + 1  # + the job cut by the budget's end
    assert kinds["start"] == df["trial_id"].nunique() + (1 if jobs["kind"].iloc[-1] == "start" else 0)
    in_budget = df["st_tuner_time"] <= 60
    assert summary["epochs_in_budget"] == in_budget.sum()
    assert summary["job_starts"] == (jobs["kind"].isin(["start", "resume"]) & (jobs["time"] <= 60)).sum()
    assert summary["starts_per_epoch"] == summary["job_starts"] / summary["epochs_in_budget"]
    assert summary["starts_per_epoch"] > 0.9  # DeepPowerLaw: about a job per epoch


def test_a_trial_that_keeps_running_pays_no_start(tmp_path):
    """RandomSearch runs each trial to max_t (50 steps) in one job: 10 s before each trial only.
    Trial 0's steps end at 11..60, trial 1 is scheduled at 60 and ends at 71..120, trial 2 at
    120 reports at 131, past the 130 s budget, and the run ends."""
    spec = RunSpec("RandomSearch", str(data_folder("taskset")), GRU, 0, 130, 1, "wallclock", 10)
    summary, df, jobs = _run(spec, tmp_path)
    expected = np.r_[np.arange(11, 61), np.arange(71, 121), 131.0]
    np.testing.assert_array_equal(df["st_tuner_time"].to_numpy(), expected)
    assert jobs.to_dict("list") == {"time": [0.0, 60.0, 120.0], "trial_id": [0, 1, 2], "kind": ["start"] * 3}
    assert (summary["epochs_in_budget"], summary["job_starts"], summary["starts_per_epoch"]) == (100, 3, 0.03)
    assert summary["pauses_and_stops"] == 0


def test_asha_pays_a_start_per_trial_on_lcbench_epoch_times(tmp_path):
    """LCBench's epochs take the table's time; ASHA's trials run in one job each until stopped."""
    spec = RunSpec("ASHA", str(data_folder("lcbench")), "car", 0, 150, 1, "wallclock", 1)
    summary, df, jobs = _run(spec, tmp_path)
    _definition, bb = load_benchmark(data_folder("lcbench"), task="car")
    times = epoch_times(bb, "time")
    assert summary["start_delay_seconds"] == pytest.approx(times.median) and 0.5 < times.median < 0.7
    assert summary["budget_seconds"] == pytest.approx(150 * times.mean) and times.mean > 1.5 * times.median
    # each result's epoch time: the increase of the job's reported elapsed time (the table's)
    epoch = df.groupby("trial_id")["time"].diff().fillna(df["time"])
    jobs_begun, stops = _jobs_and_stops(df)
    assert jobs_begun[-1] == df["trial_id"].nunique() >= 5 and stops[-1] >= 3  # no resumes; some stopped
    expected = epoch.cumsum() + times.median * jobs_begun + STOP_SECONDS * stops
    np.testing.assert_allclose(df["st_tuner_time"], expected, rtol=0, atol=1e-4)  # float32 table times
    # a trial's first reported epoch time is the table's cumulative time at epoch 1
    row = bb.hyperparameters.reset_index(drop=True)
    first = df.drop_duplicates("trial_id").iloc[0]
    match = np.all([np.isclose(row[c], first[f"config_{c}"]) if np.issubdtype(row[c].dtype, np.number)
                    else row[c] == first[f"config_{c}"] for c in row.columns], axis=0)
    table_time = bb.objectives_evaluations[np.flatnonzero(match)[0], 0, 0, bb.objectives_names.index("time")]
    assert first["time"] == pytest.approx(max(float(table_time), 0.01), abs=1e-5)
    assert set(jobs["kind"]) == {"start", "stop"}


@pytest.mark.parametrize("method, in_budget", [("ASHA", 100), ("BOHB", 99)])
def test_with_free_starts_on_taskset_the_two_protocols_train_the_same_epochs(tmp_path, method, in_budget):
    """Delay 0, one worker, 1 s per step: the wall-clock budget is the epoch budget in seconds,
    and the scheduler sees the same results in the same order. ASHA trains two trials to the
    end, its 100th step ends at 100 s; BOHB stops trials, each stop takes 2 ms, and its 100th
    step ends just past the budget."""
    source = str(data_folder("taskset"))
    epochs = run_one(RunSpec(method, source, GRU, 0, 100, 1), tmp_path)
    wall = run_one(RunSpec(method, source, GRU, 0, 100, 1, "wallclock", 0), tmp_path)
    frames = [pd.read_csv(run_dir(RunSpec(method, source, GRU, 0, 100, 1, *p), tmp_path) / "results.csv.gz")
              for p in (("epochs", 0), ("wallclock", 0))]
    columns = ["trial_id", "step", "valid_loss", "st_decision"]
    assert epochs["n_results"] == 100 and len(frames[1]) >= 100  # a run ends at its first result past 100 s
    pd.testing.assert_frame_equal(frames[0][columns], frames[1][columns].iloc[:100])
    assert wall["epochs_in_budget"] == in_budget and (wall["pauses_and_stops"] > 0) == (in_budget == 99)


def test_wallclock_runs_have_their_folder_and_never_mix_with_the_epoch_protocol(tmp_path):
    source = str(data_folder("taskset"))
    epochs = RunSpec("ASHA", source, GRU, 0, 60, 1)
    wall = RunSpec("ASHA", source, GRU, 0, 60, 1, "wallclock", 1)
    assert run_dir(epochs, tmp_path) == tmp_path / f"taskset/{GRU}/ASHA/seed0-budget60-w1"  # unchanged
    assert run_dir(wall, tmp_path) == tmp_path / f"wallclock-d1/taskset/{GRU}/ASHA/seed0-budget60-w1"
    run_one(epochs, tmp_path)
    run_one(wall, tmp_path)
    on_epochs, on_wall = load_runs(tmp_path), load_runs(tmp_path, protocol="wallclock")
    assert [r.summary["protocol"] for r in on_epochs] == ["epochs"] and on_epochs[0].jobs is None
    assert [(r.summary["protocol"], r.summary["start_delay"]) for r in on_wall] == [("wallclock", 1.0)]
    assert list(on_wall[0].jobs.columns) == ["time", "trial_id", "kind"]
    # a run.json written before protocols existed reads as the epoch protocol
    run_file = run_dir(epochs, tmp_path) / "run.json"
    old = json.loads(run_file.read_text())
    del old["protocol"], old["start_delay"]
    run_file.write_text(json.dumps(old))
    assert len(load_runs(tmp_path)) == 1 and len(load_runs(tmp_path, protocol="wallclock")) == 1


def test_bad_protocol_settings_name_the_argument():
    with pytest.raises(ValueError, match="protocol='wall'"):
        RunSpec("ASHA", "x", "t", 0, 10, 1, "wall")
    with pytest.raises(ValueError, match="start_delay=-1"):
        RunSpec("ASHA", "x", "t", 0, 10, 1, "wallclock", -1)
    with pytest.raises(ValueError, match="start_delay=1"):
        RunSpec("ASHA", "x", "t", 0, 10, 1, "epochs", 1)
    with pytest.raises(ValueError, match=re.escape("start_delay_seconds=-0.5")):
        simulator_config(-0.5)
    config = simulator_config(3.0)
    assert config.delay_start == 3.0 and config.delay_stop == config.delay_on_trial_result == 0.0


def test_the_cli_runs_every_delay_and_writes_the_tables(tmp_path, capsys):
    argv = ["--protocol", "wallclock", "--start-delay", "0", "10", "--data", str(data_folder("lcbench")),
            "--tasks", "car", "--methods", "ASHA", "--seeds", "0", "--budget-factor", "2", "--n-jobs", "1",
            "--results-dir", str(tmp_path)]
    assert run_benchmarks.main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["wallclock-d0", "wallclock-d10"]
    text = (tmp_path / "wallclock.md").read_text()
    assert "### Start delay 0 x the median epoch time" in text and "### Start delay 10 x the median epoch time" in text
    assert text.count("| LCBench | 1 | ASHA | 1 |") == 2
    capsys.readouterr()
    assert run_benchmarks.main(["--start-delay", "1", "--results-dir", str(tmp_path)]) == 2
    assert "--start-delay 1: only with --protocol wallclock" in capsys.readouterr().err
    assert run_benchmarks.main(argv[:2] + ["--start-delay", "-1"] + argv[4:]) == 2
    assert "--start-delay -1: must be finite and >= 0" in capsys.readouterr().err


@pytest.mark.slow  # five Tuner runs and RESULTS.md three times
def test_results_md_gains_the_wallclock_section_and_keeps_the_epoch_sections(tmp_path, capsys):
    from benchmarks import results

    source = str(data_folder("lcbench"))
    for method in ("RandomSearch", "ASHA", "BOHB"):
        run_one(RunSpec(method, source, "car", 0, 30, 1), tmp_path / "runs")
    out = tmp_path / "RESULTS.md"
    argv = [str(tmp_path / "runs"), "--out", str(out), "--figures", ""]
    assert results.main(argv) == 0
    epochs_only = out.read_text()
    # wall-clock runs in the same folder: the epoch protocol's file is the same
    for method in ("ASHA", "BOHB"):
        run_one(RunSpec(method, source, "car", 0, 30, 1, "wallclock", 1), tmp_path / "runs")
    assert results.main(argv) == 0 and out.read_text() == epochs_only
    assert results.main(argv + ["--wallclock", str(tmp_path / "runs")]) == 0
    text = out.read_text()
    before, section = text.split("\n\n## Wall-clock protocol")
    assert before.replace(f" --wallclock {tmp_path / 'runs'}", "") + "\n" == epochs_only
    assert "### Start delay 1 x the median epoch time" in section
    assert "| LCBench | 1 | ASHA | 1 |" in section and "| LCBench | 1 | BOHB | 1 |" in section
    with pytest.raises(SystemExit):
        results.main(argv + ["--wallclock", str(tmp_path / "nothing")])
    # the tasks to run again: none without a run of ours; the variants of ours are held too
    capsys.readouterr()
    assert results.main(["--wallclock", str(tmp_path / "runs"), "--list-tasks-over"]) == 0
    assert capsys.readouterr().out == "\n"
    run_one(RunSpec("DyHPO-costs", source, "car", 0, 30, 1, "wallclock", 1), tmp_path / "runs")
    assert results.main(["--wallclock", str(tmp_path / "runs"), "--list-tasks-over", "--start-delay", "1"]) == 0
    listed = capsys.readouterr().out.split()
    assert results.main(argv + ["--wallclock", str(tmp_path / "runs")]) == 0
    worst = next(
        line
        for line in out.read_text().splitlines()
        if line.startswith("| LCBench | 1 | DyHPO-costs | ") and "x (car:" in line
    )
    over = {cell.strip() for cell in worst.split("|")[5::2]}  # the two "over / compared" cells
    assert listed == (["car"] if "1/1" in over else []) and over <= {"0/1", "1/1"}
