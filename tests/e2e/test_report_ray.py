"""``syne-dyhpo report`` on a real Ray Tune experiment folder: a local Ray (2 CPUs) runs DyHPO
through the Ray front end (syne_dyhpo/ray_tune/) on a tiny checkpointing trainable; the report
read from Ray's folder must agree with what the scheduler saw and with Ray's own results."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
from ray import tune  # noqa: E402
from syne_tune.config_space import uniform  # noqa: E402

from syne_dyhpo import CandidateOptions, FreezeThawOptions  # noqa: E402
from syne_dyhpo.core.observations import TrialStatus  # noqa: E402
from syne_dyhpo.ray_tune import ray_scheduler  # noqa: E402
from syne_dyhpo.report import make_report  # noqa: E402

pytestmark = pytest.mark.slow  # starts Ray

MAX_T = 2


def trainable(config: dict) -> None:
    """Loss (x - 0.3)^2 + 1/epoch, a report and a checkpoint per 0.2 s epoch, resumed from
    ``tune.get_checkpoint()``."""
    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            start = json.loads(Path(d, "state.json").read_text())["epoch"] + 1
    for epoch in range(start, config["max_epochs"] + 1):
        time.sleep(0.2)
        with tempfile.TemporaryDirectory() as d:
            Path(d, "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report({"epoch": epoch, "loss": (config["x"] - 0.3) ** 2 + 1.0 / epoch},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_report_of_a_ray_tune_experiment_folder(local_ray, tmp_path):
    from syne_dyhpo import DeepKernelGPConfig, DyHPOSurrogate

    sched = ray_scheduler("dyhpo", {"x": uniform(0.0, 1.0)}, metric="loss", mode="min", max_t=MAX_T, max_concurrent=2,
                          max_num_trials=2, max_total_epochs=4,
                          options=FreezeThawOptions(candidates=CandidateOptions(num_candidates=16)),
                          random_seed=1, points_to_evaluate=[{"x": 0.3}, {"x": 0.35}],
                          surrogate=DyHPOSurrogate(model=DeepKernelGPConfig(max_iterations=30, refine_iterations=5)))
    tuner = tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space={"max_epochs": MAX_T},
                       tune_config=sched.tune_config(),
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "ray_results"), name="dyhpo", verbose=0))
    results = tuner.fit()
    assert not results.errors
    folder = tmp_path / "ray_results" / "dyhpo"
    assert not (folder / "results.csv.zip").exists()  # Ray's results only

    report = make_report(folder, pictures=False)
    s, obs = report.summary, sched.core.observations
    trained = sorted(t for t, r in obs.trials.items() if r.status is TrialStatus.FINISHED)
    assert sched.num_resumes >= 1 and trained, "precondition: resumes and a trial trained to max_t"
    assert s.started == len(results) == len(obs.trials)
    # what Ray's own files hold: Ray copies a resumed trial's result.json back from its last
    # sync when the trial restarts, so results logged in between can be missing from its files
    in_ray_files = sum(len(r.metrics_dataframe) for r in results)
    assert s.epochs == in_ray_files <= obs.num_observations
    assert report.run.source == "ray_tune" and report.run.warnings == []
    assert s.trained == len(trained)
    if in_ray_files == obs.num_observations:  # nothing lost by Ray: the scheduler's run, exactly
        assert s.resumes == sched.num_resumes
    # the report's trial ids are the scheduler's: each trial's epochs and values are its own
    for tid, record in obs.trials.items():
        epochs = report.histories[tid].epochs
        assert set(epochs) <= set(range(1, record.last_epoch + 1)) and epochs == sorted(epochs)
        assert report.histories[tid].values == pytest.approx([-record.scores[e - 1] for e in epochs])
    home = report.take_home
    best = results.get_best_result(metric="loss", mode="min", scope="all")
    assert home.trial_id in trained and home.value == pytest.approx(best.metrics_dataframe["loss"].min())
    assert home.config == {"x": pytest.approx(best.config["x"])}
    assert json.loads((Path(home.checkpoint) / "state.json").read_text())["epoch"] == MAX_T
    # job starts: the first starts and resumes the scheduler carried out
    log = sched.core.decision_log()
    granted = log[log["next"].isin(["start", "resume"])]
    assert s.jobs.count == len(granted) and s.jobs.first_starts == s.started
    assert s.jobs.n_workers == 2 and s.jobs.share is not None and 0 < s.jobs.share <= 1
    # the results are on the log's clock: every epoch reported after the decision that gave it
    for tid, h in report.histories.items():
        first = granted.loc[granted["next_trial_id"] == tid, "time"].min()
        assert h.times[0] >= first - 0.5  # whole-second stamps: within half a second
    text = "\n".join(report.lines)
    assert f"Trials: {s.started} started, {s.resumed} resumed ({s.resumes} resumes), {s.trained} trained" in text

