"""``syne-dyhpo report`` on hand-made experiment folders (no tuning): the model to take home,
the summary, sessions of a continued run, name resolution, the pictures at 500 trials, and the
text alone without matplotlib."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import tomllib

from syne_dyhpo.core.decision_log import COLUMNS, LOG_FILENAME
from syne_dyhpo.core.reasons import CHOICE_REASONS, DECISION_REASONS, REASONS
from syne_dyhpo.core.run_info import RUN_INFO_FILENAME, checkpoint_template
from syne_dyhpo.report import cli, make_report
from syne_dyhpo.report.loading import load_run, resolve
from syne_dyhpo.report.timeline import MAX_ROWS, REASON_COLOURS, select_rows

REPO = Path(__file__).resolve().parents[2]
MAX_T = 4


def write_run(folder: Path, curves: dict[int, list[float]], times: list[float] | None = None,
              log_rows: list[dict] | None = None, checkpoints: bool = True) -> Path:
    """An experiment folder: results of ``curves`` (trial -> values at epochs 1, 2, ...), paused
    after every epoch, reported in turn."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for epoch in range(1, MAX_T + 1):
        for tid, values in curves.items():
            if epoch <= len(values):
                rows.append({"loss": values[epoch - 1], "epoch": epoch, "trial_id": tid, "st_decision": "PAUSE",
                             "st_status": "InProgress", "config_x": tid / 10, "config_epochs": MAX_T})
    for i, row in enumerate(rows):
        row["st_tuner_time"] = float(i + 1) if times is None else times[i]
    pd.DataFrame(rows).to_csv(folder / "results.csv.zip", index=False)
    info = {"scheduler": "DyHPO", "metric": "loss", "mode": "min", "time_attr": "epoch", "max_t": MAX_T,
            "max_resource_attr": "epochs", "hyperparameters": ["x"], "backend": "LocalBackend",
            "checkpoint_template": str(folder / "{trial_id}" / "checkpoints") if checkpoints else None}
    (folder / RUN_INFO_FILENAME).write_text(json.dumps(info))
    log = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in (log_rows or [])], columns=list(COLUMNS))
    log.to_csv(folder / LOG_FILENAME, index=False)
    return folder


def test_take_home_is_the_best_trained_to_max_t(tmp_path):
    folder = write_run(tmp_path / "run", {0: [0.9, 0.7, 0.6, 0.5], 1: [0.8, 0.3], 2: [0.95, 0.8, 0.6, 0.45]})
    (folder / "2" / "checkpoints").mkdir(parents=True)
    report = make_report(folder, pictures=False)
    home = report.take_home
    assert home.trial_id == 2 and home.value == 0.45 and home.config == {"x": 0.2}
    assert home.checkpoint == str(folder / "2" / "checkpoints") and home.checkpoint_exists
    # a partly trained trial is better: said plainly
    assert home.partial_is_better and home.best_any == (1, 2, 0.3)
    text = "\n".join(report.lines)
    assert "Model to take home: trial 2, loss=0.45 at epoch 4 (max_t)" in text
    assert "Better value seen: trial 1, loss=0.3 at epoch 2, but trial 1 was not trained to max_t" in text
    s = report.summary
    assert (s.started, s.resumed, s.resumes, s.trained, s.diverged, s.failed) == (3, 3, 7, 2, 0, 0)
    assert (s.epochs, s.first_epochs) == (10, 3) and s.epochs_per_trained_model == 5.0
    assert report.text_path.read_text().startswith(f"Run {folder}")


def test_no_trial_trained_to_max_t_and_a_diverged_one(tmp_path):
    folder = write_run(tmp_path / "run", {0: [0.9, 0.7], 1: [float("nan")], 2: [0.8, 0.6, 0.5]},
                       checkpoints=False)
    report = make_report(folder, pictures=False)
    assert report.take_home.trial_id is None
    assert f"Model to take home: none: no trial trained to max_t={MAX_T}" in report.lines
    assert report.summary.diverged == 1 and report.histories[1].diverged
    assert "Epochs per trained model: n/a (no trial trained to max_t)" in report.lines


def test_a_continued_run_is_on_one_time_axis(tmp_path):
    # the Tuner's clock restarts at 0 after Tuner.load: 4 results in the first session, 3 after
    times = [1.0, 2.0, 3.0, 4.0, 0.5, 1.5, 2.5]
    log_rows = [
        {"session": 0, "decision": 0, "time": 0.0, "next": "start", "next_trial_id": 0, "next_epoch": 1,
         "reason": "points_to_evaluate", "ms": 1.0},
        {"session": 1, "decision": 0, "time": 0.1, "trial_id": 0, "epoch": 2, "next": "nothing",
         "reason": "restored"},
        {"session": 1, "decision": 1, "time": 0.2, "next": "resume", "next_trial_id": 0, "next_epoch": 3,
         "reason": "completion", "ms": 2.0},
    ]
    folder = write_run(tmp_path / "run", {0: [0.9, 0.7, 0.6, 0.5], 1: [0.8, 0.6, 0.55]}, times=times,
                       log_rows=log_rows)
    run = load_run(folder)
    assert run.results["t"].tolist() == [1.0, 2.0, 3.0, 4.0, 4.5, 5.5, 6.5]
    assert run.log["t"].tolist() == [0.0, 4.1, 4.2]
    report = make_report(folder, pictures=False)
    assert report.summary.reasons == {"points_to_evaluate": 1, "completion": 1}
    assert report.summary.scheduler_seconds == pytest.approx(0.003)


def test_names_resolve_like_syne_tune(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path / "st"))
    old = write_run(tmp_path / "st" / "my-run-2026-01-01-10-00-00-000", {0: [0.5]})
    new = write_run(tmp_path / "st" / "my-run-2026-01-02-10-00-00-000", {0: [0.5]})
    other = write_run(tmp_path / "st" / "my-run-other-2026-01-03-10-00-00-000", {0: [0.5]})  # another name
    assert resolve(str(old)) == old
    assert resolve("my-run-2026-01-01-10-00-00-000") == old
    assert resolve("my-run") == new  # the newest run of that name, not of another one
    assert resolve("my-run-other") == other
    with pytest.raises(FileNotFoundError, match="experiment root"):
        resolve("nothing-like-it")
    assert cli.main(["report", "nothing-like-it"]) == 2


def test_without_matplotlib_the_text_names_the_extra(tmp_path, monkeypatch, capsys):
    folder = write_run(tmp_path / "run", {0: [0.9, 0.7, 0.6, 0.5]})
    monkeypatch.setattr(cli, "_has_matplotlib", lambda: False)
    assert cli.main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Model to take home: trial 0" in out
    assert "No pictures: they need matplotlib (pip install 'syne-dyhpo[report]')" in out
    assert not (folder / "report" / "timeline.png").exists()


def test_timeline_readable_at_500_trials(tmp_path):
    pytest.importorskip("matplotlib", reason="the pictures need the extra syne-dyhpo[report]")
    from PIL import Image

    curves = {tid: [1.0 - tid / 1000] for tid in range(500)}  # 500 first epochs ...
    curves.update({tid: [0.5, 0.4, 0.3, 0.2] for tid in range(0, 500, 50)})  # ... 10 trained to max_t
    curves[7] = [0.6, 0.5]  # resumed once
    folder = write_run(tmp_path / "run", curves)
    report = make_report(folder)
    own, grouped = select_rows(report.histories, report.take_home)
    assert len(own) == 11 and len(grouped) == 489  # the trained ones and the resumed one
    assert report.take_home.trial_id in own
    with Image.open(report.timeline) as image:
        assert image.size == (990, 180 + 20 * 12)  # 11 trials and the row of the others
    many = {tid: [0.5, 0.4] for tid in range(200)}  # more notable trials than rows
    histories = make_report(write_run(tmp_path / "many", many), pictures=False).histories
    own, grouped = select_rows(histories, make_report(tmp_path / "many", pictures=False).take_home)
    assert len(own) == MAX_ROWS - 1 and len(grouped) == 200 - MAX_ROWS + 1


def test_checkpoint_locations_of_the_backends(tmp_path):
    from syne_tune.backend import LocalBackend, PythonBackend

    local = LocalBackend(entry_point=__file__)
    local.set_path(results_root=str(tmp_path), tuner_name="t")
    assert checkpoint_template(local) == str(tmp_path / "{trial_id}" / "checkpoints")

    def fn(x: float, st_checkpoint_dir: str):
        pass

    python = PythonBackend(tune_function=fn, config_space={"x": 1.0, "st_checkpoint_dir": "-"})
    python.set_path(results_root=str(tmp_path), tuner_name="t")
    assert checkpoint_template(python) == str(tmp_path / "{trial_id}" / "checkpoints")
    pytest.importorskip("boto3", reason="the SageMaker backend is the extra syne-dyhpo[sagemaker]")
    from syne_dyhpo.backends.sagemaker import SageMakerBackend

    (tmp_path / "train.py").write_text("")
    sagemaker = SageMakerBackend(
        entry_point="train.py",
        source_dir=str(tmp_path),
        role="arn:aws:iam::123456789012:role/MySageMakerRole",
        instance_type="ml.m5.large",
        s3_path="s3://bucket/runs/",
        region="us-east-1",
        framework_version="2.5.1",
    )
    sagemaker.set_path(tuner_name="my-tuner")
    template = checkpoint_template(sagemaker)
    assert template == sagemaker.checkpoint_location(3).uri.replace("/3", "/{trial_id}")
    assert template.startswith("s3://bucket/runs/") and template.endswith("/checkpoints/{trial_id}")


def test_console_script_is_declared():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["syne-dyhpo"] == "syne_dyhpo.report.cli:main"
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["report"] == ["matplotlib"]


def test_every_decision_reason_has_its_own_colour_and_every_choice_is_a_reason():
    assert set(DECISION_REASONS) <= set(REASON_COLOURS)
    colours = [REASON_COLOURS[r] for r in DECISION_REASONS]
    assert len(set(colours)) == len(colours) and REASON_COLOURS["unknown"] not in colours
    assert set(CHOICE_REASONS) <= set(REASONS) and set(CHOICE_REASONS) == {*DECISION_REASONS, "nothing_left"}
    assert "time_resume" in CHOICE_REASONS
