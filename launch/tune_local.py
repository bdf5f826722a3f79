"""
Tune the resumable digits MLP (``launch/train_mlp.py``, real PyTorch training on
scikit-learn's bundled handwritten digits, offline) with DyHPO or Deep Power Law on
Syne Tune's ``LocalBackend``: every trial is a real process that is paused (killed)
and resumed from its checkpoint, one epoch (``--budget-step``) at a time.

    python launch/tune_local.py --method dyhpo --n-workers 2 --max-epochs 10 \
        --budget-epochs 40

Tuning stops once the scheduler has seen ``--budget-epochs`` epochs in total (over
all trials), or after ``--max-wallclock-time`` seconds. At the end the best
configuration and its ``val_accuracy`` are printed. Results go to
``$SYNETUNE_FOLDER/<tuner name>`` (default ``~/syne-tune``).

Housekeeping: ``--max-paused-checkpoints N`` keeps at most N paused trials
resumable; the others (ranked hopeless by the surrogate) are retired and their
checkpoints deleted during the run. ``--delete-checkpoints`` (on by default when
``--max-paused-checkpoints`` is given) makes the backend also delete checkpoints
of stopped, finished and diverged trials, and all remaining checkpoints at the end.

Lost checkpoints: by default a trial whose checkpoint is missing or corrupt fails
(the script exits with status 1, Syne Tune marks the trial failed, the scheduler
never resumes it and tuning goes on). ``--restart-on-lost-checkpoint`` instead
restarts it from epoch 1 (script ``--on_checkpoint_error restart`` and scheduler
``options=FreezeThawOptions(checkpoints=PausedCheckpoints(restart_if_lost=True))``).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAUNCH_DIR = Path(__file__).resolve().parent
if str(LAUNCH_DIR.parent) not in sys.path:  # running from a source checkout
    sys.path.insert(0, str(LAUNCH_DIR.parent))
if str(LAUNCH_DIR) not in sys.path:
    sys.path.insert(0, str(LAUNCH_DIR))

from cli_args import non_negative_int, non_negative_number, positive_int, positive_number, seed  # noqa: E402
from mlp_config_space import (  # noqa: E402
    MAX_RESOURCE_ATTR,
    METRIC,
    MODE,
    RESOURCE_ATTR,
    make_config_space,
)
from syne_tune.optimizer.scheduler import SchedulerDecision  # noqa: E402
from syne_tune.tuner_callback import TunerCallback  # noqa: E402

logger = logging.getLogger("tune_local")

ENTRY_POINT = LAUNCH_DIR / "train_mlp.py"

#: keys of the config space that are not hyperparameters (not printed as "best config")
NON_HYPERPARAMETERS = (MAX_RESOURCE_ATTR, "max_epochs", "seed", "on_checkpoint_error")


class ObservedEpochsBudget:
    """Stop criterion: True once the scheduler has recorded ``max_epochs_total`` epochs
    (over all trials), or ``max_wallclock_time`` seconds have passed.

    Syne Tune's ``StoppingCriterion(max_num_evaluations=...)`` also counts results the
    scheduler never saw (dropped after a pause); this one counts what was learned.
    """

    def __init__(self, scheduler, max_epochs_total: int, max_wallclock_time: float | None = None):
        self.scheduler = scheduler
        self.max_epochs_total = max_epochs_total
        self.max_wallclock_time = max_wallclock_time
        self._start = None

    def __call__(self, status) -> bool:
        if self._start is None:
            self._start = time.monotonic()
        if self.max_wallclock_time is not None and time.monotonic() - self._start > self.max_wallclock_time:
            return True
        return self.scheduler.observations.num_observations >= self.max_epochs_total


@dataclass
class SegmentEvent:
    """One event of a trial as the Tuner saw it: "start", "resume" or "result"."""

    kind: str
    trial_id: int
    epoch: int | None = None
    decision: str | None = None
    time: float = field(default_factory=time.monotonic)


class SegmentLog(TunerCallback):
    """Records starts, resumes and (result, decision) pairs per trial, in order.

    :param backend: if given, ``checkpoint_present[trial_id]`` records for every resume
        whether the trial's checkpoint folder held a file at that moment
    """

    def __init__(self, backend=None):
        self.events: list[SegmentEvent] = []
        self.checkpoint_present: dict[int, list[bool]] = {}
        self._backend = backend

    def on_start_trial(self, trial):
        self.events.append(SegmentEvent("start", trial.trial_id))

    def on_resume_trial(self, trial):
        self.events.append(SegmentEvent("resume", trial.trial_id))
        if self._backend is not None:
            path = Path(self._backend.checkpoint_trial_path(trial.trial_id))
            present = path.is_dir() and any(path.iterdir())
            self.checkpoint_present.setdefault(trial.trial_id, []).append(present)

    def on_trial_result(self, trial, status, result, decision):
        self.events.append(SegmentEvent("result", trial.trial_id, int(result[RESOURCE_ATTR]), decision))

    def per_trial(self) -> dict[int, list[SegmentEvent]]:
        out: dict[int, list[SegmentEvent]] = {}
        for e in self.events:
            out.setdefault(e.trial_id, []).append(e)
        return out

    def num(self, kind: str, decision: str | None = None) -> int:
        return sum(e.kind == kind and (decision is None or e.decision == decision) for e in self.events)


def add_tuning_arguments(
    group: argparse._ActionsContainer,
    *,
    workers: str,
    budget_epochs: int,
    sleep_time: float,
    checkpoints: str,
    at_end: str,
) -> None:
    """Adds the tuning arguments every launcher takes (this one and ``tune_sagemaker.py``).

    :param group: Parser or argument group to add them to
    :param workers: What runs trials, for the help of ``--n-workers`` ("processes")
    :param budget_epochs: Default of ``--budget-epochs``
    :param sleep_time: Default of ``--sleep-time``, the Tuner's polling interval in seconds
    :param checkpoints: Where checkpoints live, for the help of the housekeeping arguments
    :param at_end: What becomes of the other checkpoints at the end, for the help of
        ``--delete-checkpoints``
    """
    group.add_argument("--method", choices=("dyhpo", "dpl"), default="dyhpo", help="DyHPO or Deep Power Law")
    group.add_argument("--n-workers", type=positive_int, default=2, help=f"trials run in parallel ({workers})")
    group.add_argument("--max-epochs", type=positive_int, default=10, help="max_t: epochs of a fully trained trial")
    group.add_argument(
        "--budget-epochs", type=positive_int, default=budget_epochs, help="stop after this many epochs in total"
    )
    group.add_argument(
        "--max-wallclock-time", type=positive_number, default=None, help="also stop after this many seconds"
    )
    group.add_argument(
        "--max-paused-checkpoints",
        dest="max_kept_paused",
        type=positive_int,
        default=None,
        help="keep at most this many paused trials resumable; retire (and delete the "
        f"checkpoints {checkpoints} of) those ranked hopeless",
    )
    group.add_argument(
        "--delete-checkpoints",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"delete the checkpoints {checkpoints} of stopped and retired trials{at_end} "
        "(default: on iff --max-paused-checkpoints is given)",
    )
    group.add_argument(
        "--max-failures", type=non_negative_int, default=3, help="stop tuning after more failed trials than this"
    )
    group.add_argument("--sleep-time", type=non_negative_number, default=sleep_time, help="Tuner polling interval (s)")
    group.add_argument("--seed", type=seed, default=0)
    group.add_argument("--tuner-name", type=str, default=None)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_tuning_arguments(
        p,
        workers="processes",
        budget_epochs=40,
        sleep_time=0.5,
        checkpoints="on this machine",
        at_end=", and all others at the end",
    )
    p.add_argument("--budget-step", type=positive_int, default=1, help="epochs per decision (segment length)")
    p.add_argument("--num-initial-random", type=non_negative_int, default=2, help="random trials before the surrogate")
    p.add_argument("--num-candidates", type=positive_int, default=64, help="new configs scored per decision")
    p.add_argument(
        "--restart-on-lost-checkpoint",
        dest="restart_if_lost",
        action="store_true",
        help="restart a trial whose checkpoint is missing/corrupt from epoch 1 instead of failing it",
    )
    return p


def build_scheduler(
    args: argparse.Namespace,
    config_space: dict[str, Any],
    restart_if_lost: bool = False,
    budget_step: int = 1,
    candidates: Any = None,
):
    """The scheduler ``args`` ask for (see :func:`add_tuning_arguments`) on the digits MLP.

    :param restart_if_lost: ``PausedCheckpoints.restart_if_lost`` (a resumed trial that lost
        its checkpoint restarts from scratch instead of failing)
    :param budget_step: ``FreezeThawOptions.budget_step`` (epochs per decision)
    :param candidates: ``FreezeThawOptions.candidates``; None: ``CandidateOptions()``
    """
    from syne_dyhpo import CandidateOptions, DeepPowerLaw, DyHPO, FreezeThawOptions, PausedCheckpoints

    cls = {"dyhpo": DyHPO, "dpl": DeepPowerLaw}[args.method]
    return cls(
        config_space,
        metric=METRIC,
        do_minimize=(MODE == "min"),
        time_attr=RESOURCE_ATTR,
        max_t=args.max_epochs,
        max_resource_attr=MAX_RESOURCE_ATTR,
        random_seed=args.seed,
        options=FreezeThawOptions(
            candidates=CandidateOptions() if candidates is None else candidates,
            budget_step=budget_step,
            checkpoints=PausedCheckpoints(max_kept=args.max_kept_paused, restart_if_lost=restart_if_lost),
        ),
    )


@dataclass
class TuningRun:
    """What :func:`run` returns."""

    tuner: Any
    scheduler: Any
    backend: Any
    log: SegmentLog
    results: Any  # pandas DataFrame of all results the scheduler saw
    best: dict[str, Any] | None


def run(args: argparse.Namespace, callbacks: list[TunerCallback] | None = None) -> TuningRun:
    """Builds backend, scheduler and Tuner from ``args`` (see :func:`build_parser`), runs
    tuning and returns the pieces (for tests and notebooks)."""
    from syne_tune import Tuner
    from syne_tune.backend import LocalBackend
    from syne_tune.results_callback import StoreResultsCallback

    from syne_dyhpo import CandidateOptions

    config_space = make_config_space(max_epochs=args.max_epochs, seed=args.seed)
    config_space["on_checkpoint_error"] = "restart" if args.restart_if_lost else "raise"
    delete = args.delete_checkpoints
    if delete is None:
        delete = args.max_kept_paused is not None
    backend = LocalBackend(entry_point=str(ENTRY_POINT), delete_checkpoints=delete)
    scheduler = build_scheduler(
        args,
        config_space,
        budget_step=args.budget_step,
        candidates=CandidateOptions(num_candidates=args.num_candidates, num_initial_random=args.num_initial_random),
        restart_if_lost=args.restart_if_lost,
    )
    store = StoreResultsCallback()
    log = SegmentLog(backend)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=ObservedEpochsBudget(scheduler, args.budget_epochs, args.max_wallclock_time),
        n_workers=args.n_workers,
        sleep_time=args.sleep_time,
        max_failures=args.max_failures,
        save_tuner=False,
        callbacks=[store, log] + list(callbacks or []),
        tuner_name=args.tuner_name or f"digits-mlp-{args.method}",
        metadata={"launcher": "launch/tune_local.py", "args": {k: v for k, v in vars(args).items()}},
    )
    tuner.run()
    results = store.dataframe()
    return TuningRun(tuner, scheduler, backend, log, results, best_result(results, backend))


def best_result(results, backend) -> dict[str, Any] | None:
    """Best reported ``val_accuracy`` (any trial, any epoch) with its trial's configuration."""
    if results is None or len(results) == 0 or METRIC not in results:
        return None
    finite = results[results[METRIC].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v))]
    if len(finite) == 0:
        return None
    row = finite.loc[finite[METRIC].idxmax() if MODE == "max" else finite[METRIC].idxmin()]
    trial_id = int(row["trial_id"])
    config = dict(backend._trial_dict[trial_id].config)
    return {
        "trial_id": trial_id,
        METRIC: float(row[METRIC]),
        "epoch": int(row[RESOURCE_ATTR]),
        "config": {k: v for k, v in config.items() if k not in NON_HYPERPARAMETERS},
    }


def summary_lines(tr: TuningRun) -> list[str]:
    status = {}
    for record in tr.scheduler.observations.trials.values():
        if record.trial_id >= 0:
            status[record.status.value] = status.get(record.status.value, 0) + 1
    lines = [
        f"Trials: {tr.log.num('start')} started, {tr.log.num('resume')} resumes, "
        f"{tr.log.num('result', SchedulerDecision.PAUSE)} pauses, "
        f"{tr.scheduler.observations.num_observations} epochs trained; "
        f"final status: {dict(sorted(status.items()))}",
    ]
    return lines + best_config_lines(tr.best)


def best_config_lines(best: dict[str, Any] | None) -> list[str]:
    """The best result's trial, value, epoch and configuration (one line if there is none)."""
    if best is None:
        return ["No finite result was reported."]
    lines = [f"Best configuration: trial_id {best['trial_id']}, {METRIC}={best[METRIC]:.4f} at epoch {best['epoch']}"]
    return lines + [f"  {k}: {v}" for k, v in best["config"].items()]


def report_lines(tuner) -> list[str]:
    """The run's report (``syne-dyhpo report``): the model to take home, the summary and where
    the report's files (timeline, learning curves) are."""
    from syne_dyhpo.report import make_report

    report = make_report(tuner.tuner_path)
    return ["", *report.lines, "", *report.paths_lines(), f"(again: syne-dyhpo report {tuner.tuner_path})"]


def log_to_console(*names: str) -> None:
    """Shows the INFO lines of these loggers (retired trials, deleted checkpoints, failed or
    restarted trials) on stderr; importing syne_tune configured the root logger at WARNING,
    and its own INFO lines stay hidden."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in names:
        named = logging.getLogger(name)
        named.setLevel(logging.INFO)
        named.addHandler(handler)
        named.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 if a best config was found)."""
    log_to_console("syne_dyhpo", "tune_local")
    args = build_parser().parse_args(argv)
    tr = run(args)
    print("\n".join(summary_lines(tr) + report_lines(tr.tuner)), flush=True)
    return 0 if tr.best is not None else 1


if __name__ == "__main__":
    sys.exit(main())
