"""
Runs ``launch/train_mlp.py`` as a real subprocess, as Syne Tune's LocalBackend does,
and parses its ``[tune-metric]: {...}`` lines with Syne Tune's own parser.

Independent runs are started in parallel (the machine has 2 cores; each process
spends ~4 s importing torch and scikit-learn).
"""

import itertools
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from syne_tune.report import retrieve

from syne_dyhpo.checkpointing import CHECKPOINT_FILENAME, load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "launch" / "train_mlp.py"
METRICS = ("epoch", "val_accuracy", "val_loss", "train_loss")
# small model; dropout > 0 so that resuming must restore the RNG state exactly
HP = [
    "--learning_rate",
    "0.05",
    "--momentum",
    "0.9",
    "--weight_decay",
    "0.0001",
    "--n_units",
    "32",
    "--n_layers",
    "2",
    "--dropout",
    "0.2",
    "--batch_size",
    "32",
    "--seed",
    "3",
]
TIMEOUT = 120


@dataclass
class Run:
    returncode: int
    reports: list
    stdout: str
    stderr: str

    @property
    def epochs(self):
        return [r["epoch"] for r in self.reports]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def start(ckpt_dir, *args, hp=HP):
    cmd = [sys.executable, str(SCRIPT), *hp, *args]
    if ckpt_dir is not None:
        cmd += ["--st_checkpoint_dir", str(ckpt_dir)]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )


def finish(proc, prefix: str = "") -> Run:
    out, err = proc.communicate(timeout=TIMEOUT)
    out = prefix + out
    reports = [{k: r[k] for k in METRICS} for r in retrieve(out.splitlines())]
    return Run(proc.returncode, reports, out, err)


def run_parallel(*procs):
    return [finish(p) for p in procs]


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_segments_resume_exactly(tmp_path, capsys):
    seg, fresh = tmp_path / "segments", tmp_path / "fresh"
    common = ["--max_epochs", "10"]
    first, reference = run_parallel(
        start(seg, "--epochs", "3", *common), start(fresh, "--epochs", "5", *common)
    )
    assert first.returncode == 0, first.stderr
    assert reference.returncode == 0, reference.stderr
    assert first.epochs == [1, 2, 3]
    assert reference.epochs == [1, 2, 3, 4, 5]
    assert load_checkpoint(seg).epoch == 3

    second = finish(start(seg, "--epochs", "5", *common))
    assert second.returncode == 0, second.stderr
    assert second.epochs == [4, 5]
    # bit-for-bit identical to the uninterrupted run (floats compared exactly)
    assert first.reports + second.reports == reference.reports
    assert load_checkpoint(seg).epoch == 5
    # it really learns: digits validation accuracy after 5 epochs
    assert reference.reports[-1]["val_accuracy"] > 0.9
    assert reference.reports[-1]["val_loss"] < reference.reports[0]["val_loss"]

    # checkpoint (epoch 5) already at/after --epochs: exit 0 without reporting
    # (in-process call of the script's main() to save a process start)
    from launch.train_mlp import main

    mtime = (fresh / CHECKPOINT_FILENAME).stat().st_mtime_ns
    argv = HP + ["--epochs", "4", *common, "--st_checkpoint_dir", str(fresh)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "[tune-metric]" not in captured.out
    assert "nothing to do" in captured.err
    assert (fresh / CHECKPOINT_FILENAME).stat().st_mtime_ns == mtime  # untouched


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_killed_run_resumes_from_its_checkpoint(tmp_path):
    """PAUSE in LocalBackend = SIGKILL at an arbitrary point, then a new process."""
    killed_dir, fresh = tmp_path / "killed", tmp_path / "fresh"
    n = 30  # long enough that the process is still training when it is killed
    common = ["--max_epochs", str(n), "--epochs", str(n)]
    ref_proc = start(fresh, *common)
    proc = start(killed_dir, *common)
    consumed, seen = [], []
    for line in proc.stdout:  # wait until epoch 2 has been reported, then kill
        consumed.append(line)
        seen += retrieve([line])
        if seen and seen[-1]["epoch"] >= 2:
            proc.kill()
            break
    killed = finish(proc, prefix="".join(consumed))
    reference = finish(ref_proc)
    assert reference.returncode == 0 and reference.epochs == list(range(1, n + 1))
    assert killed.returncode != 0
    last_reported = killed.epochs[-1]
    assert 2 <= last_reported < n
    ckpt_epoch = load_checkpoint(killed_dir).epoch
    # saved before reporting: checkpoint is at the last report or one epoch ahead
    assert ckpt_epoch in (last_reported, last_reported + 1)
    assert [f for f in os.listdir(killed_dir) if not f.startswith(".")] == [
        CHECKPOINT_FILENAME
    ]

    resumed = finish(start(killed_dir, *common))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.epochs == list(range(ckpt_epoch + 1, n + 1))
    assert killed.reports == reference.reports[:last_reported]
    assert resumed.reports == reference.reports[ckpt_epoch:]


@pytest.mark.slow  # starts a Tuner, Ray or a process
def test_corrupt_checkpoint_fails_loudly_or_restarts_on_request(tmp_path, capsys):
    strict, lenient, fresh = (
        tmp_path / "strict",
        tmp_path / "lenient",
        tmp_path / "fresh",
    )
    for d in (strict, lenient):
        d.mkdir()
        (d / CHECKPOINT_FILENAME).write_bytes(b"\x80\x02 truncated torch file")
    common = ["--max_epochs", "10", "--epochs", "2"]
    failed, restarted, reference = run_parallel(
        start(strict, *common),
        start(lenient, *common, "--on_checkpoint_error", "restart"),
        start(fresh, *common),
    )
    # default: non-zero exit, clear message naming the file, nothing reported
    assert failed.returncode == 1
    assert "CheckpointError" in failed.stderr
    assert str(strict / CHECKPOINT_FILENAME) in failed.stderr
    assert failed.reports == []
    assert (
        strict / CHECKPOINT_FILENAME
    ).read_bytes() == b"\x80\x02 truncated torch file"
    # restart: warning, trains from epoch 1 exactly like a fresh run, overwrites file
    assert restarted.returncode == 0, restarted.stderr
    assert "WARNING" in restarted.stderr
    assert str(lenient / CHECKPOINT_FILENAME) in restarted.stderr
    assert restarted.epochs == [1, 2]
    assert reference.returncode == 0, reference.stderr
    assert restarted.reports == reference.reports
    assert load_checkpoint(lenient).epoch == 2

    # a checkpoint written with other hyperparameters is refused as well
    # (in-process call of the script's main() to save a process start)
    from launch.train_mlp import main

    hp = list(HP)
    hp[hp.index("--learning_rate") + 1] = "0.01"
    argv = hp + [
        "--max_epochs",
        "10",
        "--epochs",
        "3",
        "--st_checkpoint_dir",
        str(fresh),
    ]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "different hyperparameters" in captured.err
    assert str(fresh / CHECKPOINT_FILENAME) in captured.err
    assert "[tune-metric]" not in captured.out
    assert load_checkpoint(fresh).epoch == 2  # untouched


def test_invalid_epochs_rejected(tmp_path, capsys):
    from launch.train_mlp import main

    argv = ["--max_epochs", "5", "--epochs", "6", "--st_checkpoint_dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exc_info:
        main(argv)
    assert exc_info.value.code == 2
    assert "epochs must be in [1, max_epochs=5]" in capsys.readouterr().err
    assert not (tmp_path / CHECKPOINT_FILENAME).exists()


def test_data_is_sklearn_digits_with_fixed_stratified_split():
    import numpy as np
    from sklearn.datasets import load_digits

    from launch.train_mlp import load_data, load_digits_arrays

    x, y = load_digits(return_X_y=True)
    xa, ya = load_digits_arrays()
    assert np.array_equal(x, xa) and np.array_equal(y, ya)
    x_tr, y_tr, x_va, y_va = load_data()
    assert (len(y_tr), len(y_va)) == (1347, 450)
    assert np.bincount(y_va.numpy()).min() >= 44  # stratified
    x_tr2, _, x_va2, _ = load_data()
    assert torch_equal(x_tr, x_tr2) and torch_equal(x_va, x_va2)  # fixed
    assert abs(float(x_tr.mean())) < 1e-6


def torch_equal(a, b):
    import torch

    return torch.equal(a, b)


def test_config_space_matches_script_cli():
    from syne_tune.config_space import Domain

    from launch import mlp_config_space as cs
    from launch.train_mlp import HYPERPARAMETERS, build_parser

    space = cs.make_config_space(max_epochs=12, seed=4)
    assert space[cs.MAX_RESOURCE_ATTR] == 12 and space["max_epochs"] == 12
    assert set(HYPERPARAMETERS) | {"epochs"} == set(space)
    config = {k: (v.sample() if isinstance(v, Domain) else v) for k, v in space.items()}
    argv = [x for k, v in config.items() for x in (f"--{k}", str(v))]
    args = build_parser().parse_args(argv + ["--st_checkpoint_dir", "/tmp/x"])
    for k, v in config.items():
        assert getattr(args, k) == v, k
    assert cs.config_space["max_epochs"] == cs.MAX_EPOCHS


@pytest.mark.slow
def test_python_backend_example_runs_random_search(tmp_path, monkeypatch):
    """End-to-end: a real Tuner with PythonBackend runs the training function."""
    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path))
    # syne_tune/num_gpu.py writes "std.out" into the current directory
    monkeypatch.chdir(tmp_path)
    from syne_tune.experiments import load_experiment

    from launch.python_backend_example import run

    tuner = run("python", trials=2, max_epochs=2, n_workers=2, seed=0)
    df = load_experiment(tuner.name, local_path=str(tmp_path)).results
    completed = df.groupby("trial_id")["epoch"].apply(list)
    assert len(completed) >= 2
    finished = [t for t, epochs in completed.items() if epochs == [1, 2]]
    assert len(finished) >= 2
    assert df["val_accuracy"].between(0, 1).all()
    for trial_id in finished:
        ckpt = load_checkpoint(tuner.tuner_path / str(trial_id) / "checkpoints")
        assert ckpt is not None and ckpt.epoch == 2


def test_epoch_seconds_slows_every_epoch_and_keeps_its_results(tmp_path, capsys):
    """``--epoch_seconds S``: consecutive reports of one job are at least S apart, the
    reported numbers and the checkpoint are those of a run without it (in-process calls of
    the script's main() and train() to save process starts)."""
    from launch.train_mlp import main, train

    slow_dir, fast_dir = tmp_path / "slow", tmp_path / "fast"
    common = ["--max_epochs", "10", "--epochs", "3"]
    assert main(HP + common + ["--epoch_seconds", "0.3", "--st_checkpoint_dir", str(slow_dir)]) == 0
    slow = retrieve(capsys.readouterr().out.splitlines())
    assert [r["epoch"] for r in slow] == [1, 2, 3]
    stamps = [r["st_worker_timestamp"] for r in slow]
    assert all(b - a >= 0.3 for a, b in itertools.pairwise(stamps)), stamps

    config = {  # HP's values
        "learning_rate": 0.05, "momentum": 0.9, "weight_decay": 0.0001, "n_units": 32,
        "n_layers": 2, "dropout": 0.2, "batch_size": 32, "seed": 3, "max_epochs": 10, "epochs": 3,
    }
    fast = train({**config, "st_checkpoint_dir": str(fast_dir)})
    assert [{k: r[k] for k in METRICS} for r in slow] == fast  # floats compared exactly
    assert load_checkpoint(slow_dir).epoch == load_checkpoint(fast_dir).epoch == 3

    # in-process: the first epoch takes at least S as well, and a resume with the option
    # continues a checkpoint written without it (not a hyperparameter)
    times = []
    t0 = time.perf_counter()
    resumed = train(
        {**config, "epochs": 4, "st_checkpoint_dir": str(fast_dir)},
        report=lambda **r: times.append(time.perf_counter()),
        epoch_seconds=0.3,
    )
    assert [r["epoch"] for r in resumed] == [4] and times[0] - t0 >= 0.3


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_invalid_epoch_seconds_rejected(tmp_path, capsys, value):
    from launch.train_mlp import main

    with pytest.raises(SystemExit) as exc_info:
        main(["--max_epochs", "2", "--epoch_seconds", value, "--st_checkpoint_dir", str(tmp_path)])
    assert exc_info.value.code == 2
    assert f"epoch_seconds must be a finite number > 0, got {float(value)}" in capsys.readouterr().err
    assert not (tmp_path / CHECKPOINT_FILENAME).exists()
