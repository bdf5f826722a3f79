"""
Tune the resumable digits MLP (``launch/train_mlp.py``) with DyHPO or Deep Power Law,
every trial segment a SageMaker training job (``syne_dyhpo.backends.sagemaker``):
a pause stops the trial's job, a resume starts a new job that continues from the
checkpoint the paused one left in S3.

    python launch/tune_sagemaker.py --role arn:aws:iam::<account>:role/<role> \
        --s3-path s3://<bucket>/syne-dyhpo --region us-east-1 \
        --method dyhpo --n-workers 2 --max-epochs 10 --budget-epochs 30

The tuner runs here and polls AWS (``DescribeTrainingJob`` and the jobs' CloudWatch
logs) every ``--sleep-time`` seconds. Each job ships ``launch/`` and the
``syne_dyhpo`` package as its code and pip-installs ``syne-tune`` and ``gpytorch``
in AWS's PyTorch training container (``--framework-version``), or runs
``--image-uri``. See ``launch/README_sagemaker.md`` for the IAM role, the bucket
and costs. Tested against AWS mocks (moto) only.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

LAUNCH_DIR = Path(__file__).resolve().parent
if str(LAUNCH_DIR.parent) not in sys.path:  # running from a source checkout
    sys.path.insert(0, str(LAUNCH_DIR.parent))
if str(LAUNCH_DIR) not in sys.path:
    sys.path.insert(0, str(LAUNCH_DIR))

from cli_args import integer  # noqa: E402
from mlp_config_space import make_config_space  # noqa: E402
from syne_tune.tuner_callback import TunerCallback  # noqa: E402
from tune_local import (  # noqa: E402
    SegmentLog,
    TuningRun,
    add_tuning_arguments,
    best_config_lines,
    best_result,
    build_scheduler,
    log_to_console,
    report_lines,
)

import syne_dyhpo  # noqa: E402

logger = logging.getLogger("tune_sagemaker")

ENTRY_POINT = "train_mlp.py"
"""The script, relative to ``launch/`` (shipped whole as the jobs' code)."""

REQUIREMENTS = ["syne-tune==0.16.0", "gpytorch>=1.11", "scikit-learn"]
"""pip-installed in the container before the script runs (torch and numpy come with
AWS's PyTorch image; ``syne_dyhpo`` itself is shipped as code)."""


class ResultBudget:
    """Stop criterion: True once the scheduler has received ``max_results`` results
    (epochs, over all trials) or ``max_wallclock_time`` seconds have passed.

    :param log: Callback counting the results the scheduler received
    :param max_results: Budget in epochs
    :param max_wallclock_time: Optional time limit in seconds
    """

    def __init__(self, log: SegmentLog, max_results: int, max_wallclock_time: float | None = None):
        self.log = log
        self.max_results = max_results
        self.max_wallclock_time = max_wallclock_time
        self._start: float | None = None

    def __call__(self, status) -> bool:
        if self._start is None:
            self._start = time.monotonic()
        if self.max_wallclock_time is not None and time.monotonic() - self._start > self.max_wallclock_time:
            return True
        return self.log.num("result") >= self.max_results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    aws = p.add_argument_group("AWS")
    aws.add_argument("--role", required=True, help="IAM role ARN the training jobs run with")
    aws.add_argument("--s3-path", required=True, help="s3://bucket/prefix for code, checkpoints and output")
    aws.add_argument("--region", default=None, help="AWS region (default: your AWS configuration's)")
    aws.add_argument("--instance-type", default="ml.m5.large", help="training instance type")
    aws.add_argument("--framework-version", default="2.5.1",
                     help="PyTorch version of AWS's training container (ignored with --image-uri)")
    aws.add_argument("--py-version", default="py311", help="Python version of that container")
    aws.add_argument("--image-uri", default=None, help="training image to run instead of AWS's PyTorch image")
    aws.add_argument("--keep-alive-seconds", type=integer(0, 3600), default=None,
                     help="keep finished jobs' instances warm this long for the next job (warm pools; billed)")
    tune = p.add_argument_group("tuning")
    add_tuning_arguments(tune, workers="training jobs", budget_epochs=30, sleep_time=10.0, checkpoints="in S3",
                         at_end="; paused trials' stay unless --delete-checkpoints-at-end")
    tune.add_argument("--delete-checkpoints-at-end", action="store_true",
                      help="with --delete-checkpoints, also delete paused trials' checkpoints at the end")
    return p


def build_backend(args: argparse.Namespace, **overrides: Any):
    """
    :param args: Parsed arguments (:func:`build_parser`)
    :param overrides: Keyword arguments of
        :class:`~syne_dyhpo.backends.sagemaker.SageMakerBackend` replacing the defaults
        (tests pass shorter waits)
    :return: The backend
    """
    from syne_dyhpo.backends.sagemaker import SageMakerBackend

    delete = args.delete_checkpoints
    if delete is None:
        delete = args.max_kept_paused is not None
    kwargs: dict[str, Any] = dict(
        entry_point=ENTRY_POINT,
        source_dir=str(LAUNCH_DIR),
        dependencies=[syne_dyhpo.__path__[0]],
        requirements=REQUIREMENTS,
        role=args.role,
        instance_type=args.instance_type,
        s3_path=args.s3_path,
        region=args.region,
        image_uri=args.image_uri,
        framework_version=None if args.image_uri else args.framework_version,
        py_version=args.py_version,
        keep_alive_period_seconds=args.keep_alive_seconds,
        delete_checkpoints=delete,
        delete_checkpoints_at_end=args.delete_checkpoints_at_end,
    )
    kwargs.update(overrides)
    return SageMakerBackend(**kwargs)


def run(args: argparse.Namespace, backend=None, callbacks: list[TunerCallback] | None = None) -> TuningRun:
    """
    Builds the backend (unless given), scheduler and Tuner from ``args``, runs tuning
    and returns the pieces.

    :param args: Parsed arguments (:func:`build_parser`)
    :param backend: A backend from :func:`build_backend`, or None to build one
    :param callbacks: More Tuner callbacks
    :return: :class:`TuningRun`
    """
    from syne_tune import Tuner
    from syne_tune.results_callback import StoreResultsCallback

    config_space = make_config_space(max_epochs=args.max_epochs, seed=args.seed)
    backend = backend if backend is not None else build_backend(args)
    scheduler = build_scheduler(args, config_space)
    store = StoreResultsCallback()
    log = SegmentLog()
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=ResultBudget(log, args.budget_epochs, args.max_wallclock_time),
        n_workers=args.n_workers,
        sleep_time=args.sleep_time,
        max_failures=args.max_failures,
        save_tuner=False,
        callbacks=[store, log] + list(callbacks or []),
        tuner_name=args.tuner_name or f"digits-mlp-{args.method}-sm",
        metadata={"launcher": "launch/tune_sagemaker.py"},
    )
    tuner.run()
    results = store.dataframe()
    return TuningRun(tuner, scheduler, backend, log, results, best_result(results, backend))


def summary_lines(tr: TuningRun) -> list[str]:
    """Counts of starts, resumes and results, jobs created, and the best configuration."""
    jobs = sum(len(tr.backend.job_names(tid)) for tid in tr.backend.trial_ids)
    lines = [
        f"Trials: {tr.log.num('start')} started, {tr.log.num('resume')} resumes, {tr.log.num('result')} epochs "
        f"reported, {jobs} SageMaker training jobs, {tr.tuner.tuning_status.num_trials_failed} failed"
    ]
    return lines + best_config_lines(tr.best)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 if a best config was found)."""
    log_to_console("syne_dyhpo", "tune_sagemaker")
    args = build_parser().parse_args(argv)
    tr = run(args)
    print("\n".join(summary_lines(tr) + report_lines(tr.tuner)), flush=True)
    return 0 if tr.best is not None else 1


if __name__ == "__main__":
    sys.exit(main())
