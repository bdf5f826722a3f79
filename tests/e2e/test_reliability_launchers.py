"""The launchers under launch/ refuse a numeric argument out of range at once, naming it
(``--n-workers 0`` used to leave the Tuner waiting for a free worker for ever)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "launch"
if str(LAUNCH) not in sys.path:
    sys.path.insert(0, str(LAUNCH))

import tune_local  # noqa: E402
import tune_sagemaker  # noqa: E402

SAGEMAKER_REQUIRED = ["--role", "arn:aws:iam::1:role/r", "--s3-path", "s3://b/p"]

# (argument, a bad value) for every numeric argument of the launchers
TUNING_BAD = [
    ("--n-workers", "0"), ("--n-workers", "-2"), ("--n-workers", "1.5"), ("--max-epochs", "0"),
    ("--budget-epochs", "0"), ("--max-wallclock-time", "0"), ("--max-wallclock-time", "nan"),
    ("--max-paused-checkpoints", "0"), ("--max-failures", "-1"), ("--sleep-time", "-0.5"),
    ("--sleep-time", "inf"), ("--seed", "-1"), ("--seed", str(2**32)),
]
LOCAL_BAD = TUNING_BAD + [("--budget-step", "0"), ("--num-initial-random", "-1"), ("--num-candidates", "0")]
SAGEMAKER_BAD = TUNING_BAD + [("--keep-alive-seconds", "-1"), ("--keep-alive-seconds", "3601")]
RAY_BAD = [("--num-cpus", "0"), ("--num-samples", "0"), ("--max-epochs", "0"), ("--total-epochs", "0"),
           ("--max-concurrent", "0"), ("--cpus-per-trial", "0"), ("--seed", "-1")]
PYTHON_BACKEND_BAD = [("--trials", "0"), ("--max_epochs", "0"), ("--n_workers", "0"), ("--seed", "-1")]


def _refused(parser, argv, argument, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argument}" in err, err


@pytest.mark.parametrize("argument, value", LOCAL_BAD)
def test_tune_local_refuses_out_of_range_numbers(argument, value, capsys):
    _refused(tune_local.build_parser(), [argument, value], argument, capsys)


@pytest.mark.parametrize("argument, value", SAGEMAKER_BAD)
def test_tune_sagemaker_refuses_out_of_range_numbers(argument, value, capsys):
    _refused(tune_sagemaker.build_parser(), SAGEMAKER_REQUIRED + [argument, value], argument, capsys)


@pytest.mark.parametrize("argument, value", RAY_BAD)
def test_ray_example_refuses_out_of_range_numbers(argument, value, capsys):
    pytest.importorskip("ray", reason="Ray Tune is an optional extra: pip install syne-dyhpo[ray]")
    import ray_tune_example

    _refused(ray_tune_example.build_parser(), [argument, value], argument, capsys)


@pytest.mark.parametrize("argument, value", PYTHON_BACKEND_BAD)
def test_python_backend_example_refuses_out_of_range_numbers(argument, value, capsys):
    import python_backend_example

    _refused(python_backend_example.build_parser(), [argument, value], argument, capsys)


def test_the_defaults_and_good_values_parse():
    args = tune_local.build_parser().parse_args(["--n-workers", "1", "--max-wallclock-time", "2.5", "--seed", "0"])
    assert (args.n_workers, args.max_wallclock_time, args.seed, args.max_epochs) == (1, 2.5, 0, 10)
    args = tune_sagemaker.build_parser().parse_args(SAGEMAKER_REQUIRED + ["--keep-alive-seconds", "0"])
    assert args.keep_alive_seconds == 0 and args.n_workers == 2


def test_tune_local_with_no_worker_exits_at_once_naming_the_argument(tmp_path):
    proc = subprocess.run([sys.executable, str(LAUNCH / "tune_local.py"), "--n-workers", "0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "argument --n-workers: must be an integer >= 1, got '0'" in proc.stderr
