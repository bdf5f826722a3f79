"""Schedulers side by side on a real backend, for the same wall-clock time.

Each method tunes the digits MLP (``launch/train_mlp.py``, real PyTorch training) on Syne
Tune's ``LocalBackend``: every job start and resume is a new process (Python, torch, data,
checkpoint), and every epoch takes ``--epoch-seconds`` of wall-clock time (the script's
``--epoch_seconds``, a constant of the config space). Each method runs in its own Tuner, one
after the other, with ``--n-workers`` workers and ``StoppingCriterion(max_wallclock_time=
--budget)``, its experiment folder under ``--out``::

    PYTHONPATH=. python benchmarks/real_wallclock.py --out /tmp/real-wallclock
    PYTHONPATH=. python benchmarks/real_wallclock.py --methods DyHPO DeepPowerLaw ASHA \\
        DyHPO-costs DeepPowerLaw-costs --budget 600 --out /tmp/real-wallclock
    PYTHONPATH=. python benchmarks/real_wallclock.py --budget 40 --epoch-seconds 0.5 \\
        --methods DyHPO ASHA --out /tmp/real-smoke          # a smoke run, about 2 minutes

Timings are only meaningful on a machine with a free core per worker and one for the Tuner.

The methods (names of :data:`benchmarks.runner.VARIANTS`): DyHPO and DeepPowerLaw with
``max_resource_attr="epochs"`` (a job stops by itself at its segment end), and their variants
(``-costs``: ``FreezeThawOptions(job_costs=JobCosts())``, a winning trial keeps running);
Syne Tune's ASHA and BOHB as :mod:`benchmarks.runner` builds them: stopping-type, with no
``max_resource_attr`` in Syne Tune 0.16, so a job trains towards ``max_t`` until the scheduler
stops it; RandomSearch trains every trial to ``max_t``.

Accounting (:func:`summarize`), per method:

* **epochs**: results the jobs reported (parsed from every trial's ``std.out``, which the
  backend appends to on each resume) up to the end of the tuning loop, including those Syne
  Tune dropped after a pause or stop decision (the worker trained them); ``epochs_seen``: the
  results the scheduler saw.
* **job starts**: the Tuner's ``start_trial`` and ``resume_trial`` calls (a
  :class:`tune_local.SegmentLog` callback): every process the backend launched, also one that
  was stopped or exited before it reported anything.
* **epoch seconds**: the mean time between consecutive results of one job (a trial's results
  from one process: ``st_worker_iter`` counts from 0 in each process), from the workers'
  ``st_worker_timestamp``; the first epoch of a job is not measured (it includes the start).
  A method whose every job trains one epoch (ours with one-epoch segments) gives no such
  pair, so the share takes the mean over all methods' jobs of the run (the same machine and
  ``--epoch-seconds``), or ``--epoch-seconds`` itself if no job of any method trained two
  epochs; the table's "epoch s" is each method's own measurement.
* **share in epochs**: ``epochs x epoch seconds / (n_workers x wall-clock seconds)``, the
  wall-clock seconds of the Tuner's loop (from its start to its stop criterion).
* **best**: the best ``val_accuracy`` the scheduler saw at any epoch (anytime), and the best
  of a trial at ``max_t`` (None if no trial got there).

When ASHA is among the methods, each other method's share over ASHA's (the target: at
least 0.9) and its job starts per epoch over ASHA's (target: at most 1.5) are printed too. The
markdown table goes to stdout, everything to ``<out>/summary.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "launch"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from cli_args import positive_int, positive_number, seed  # noqa: E402
from mlp_config_space import MAX_RESOURCE_ATTR, METRIC, MODE, RESOURCE_ATTR, make_config_space  # noqa: E402
from syne_tune.constants import ST_WORKER_ITER, ST_WORKER_TIMESTAMP  # noqa: E402
from syne_tune.tuner_callback import TunerCallback  # noqa: E402

#: Config key (and script argument) that makes every epoch take this many seconds
EPOCH_SECONDS_ATTR = "epoch_seconds"

#: The reference the targets compare with
REFERENCE = "ASHA"

#: Presets of :data:`benchmarks.runner.VARIANTS` this script can build on a real backend
PRESETS = ("DyHPO", "DeepPowerLaw", "ASHA", "BOHB", "RandomSearch")

SUMMARY_FILE = "summary.json"

COLUMNS = (
    ("method", "method"),
    ("epochs", "epochs"),
    ("epochs_seen", "epochs seen"),
    ("job_starts", "job starts"),
    ("starts_per_epoch", "starts / epoch"),
    ("epoch_seconds", "epoch s"),
    ("share_in_epochs", "share in epochs"),
    ("best_anytime", "best val_accuracy"),
    ("best_at_max_t", "best at max_t"),
    ("trials_started", "trials started"),
    ("wall_seconds", "wall s"),
)


# ---------------------------------------------------------------------------------------------
# accounting (pure functions of the results)


def job_ids(results: pd.DataFrame) -> pd.Series:
    """
    :param results: Results with ``trial_id``, ``st_worker_iter`` and ``st_worker_timestamp``
    :return: For each row, the index of its job among its trial's jobs (0 for the first
        process of a trial): a new job begins at every ``st_worker_iter == 0``
    """
    ordered = results.sort_values(["trial_id", ST_WORKER_TIMESTAMP], kind="stable")
    new_job = (ordered[ST_WORKER_ITER] == 0).astype(int)
    jobs = new_job.groupby(ordered["trial_id"]).cumsum() - 1
    return jobs.reindex(results.index)


def epoch_gaps(results: pd.DataFrame) -> np.ndarray:
    """
    :param results: As for :func:`job_ids`
    :return: The seconds between consecutive results of one job (``st_worker_iter`` ``k`` and
        ``k + 1`` of the same process), each an epoch's wall-clock time
    """
    if len(results) == 0:
        return np.zeros(0)
    frame = results.assign(job=job_ids(results)).sort_values(["trial_id", "job", ST_WORKER_ITER])
    group = frame.groupby(["trial_id", "job"])
    gaps = group[ST_WORKER_TIMESTAMP].diff()
    consecutive = group[ST_WORKER_ITER].diff() == 1
    return gaps[consecutive].to_numpy(dtype=np.float64)


def mean_epoch_seconds(*results: pd.DataFrame) -> float:
    """
    :param results: Results of one or more runs, each as for :func:`job_ids`
    :return: The mean of their :func:`epoch_gaps`; NaN if no job reported two results
    """
    gaps = np.concatenate([epoch_gaps(r) for r in results]) if results else np.zeros(0)
    return float(gaps.mean()) if len(gaps) else math.nan


def best_value(results: pd.DataFrame, max_t: int | None = None) -> float | None:
    """
    :param results: Results with :data:`METRIC` and :data:`RESOURCE_ATTR`
    :param max_t: If given, only results at this epoch count
    :return: The best finite :data:`METRIC` (by :data:`MODE`), None if there is none
    """
    if len(results) == 0:
        return None
    rows = results if max_t is None else results[results[RESOURCE_ATTR] == max_t]
    values = pd.to_numeric(rows[METRIC], errors="coerce")
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    return float(values.max() if MODE == "max" else values.min())


def summarize(
    reported: pd.DataFrame,
    seen: pd.DataFrame,
    job_starts: int,
    n_workers: int,
    wall_seconds: float,
    max_t: int,
    epoch_seconds: float,
) -> dict[str, Any]:
    """One method's row (module docstring).

    :param reported: Every result the jobs reported within the wall-clock time
    :param seen: The results the scheduler saw
    :param job_starts: Jobs the Tuner started or resumed
    :param n_workers: Workers of the Tuner
    :param wall_seconds: Wall-clock seconds of the Tuner's loop
    :param max_t: Epochs of a fully trained trial
    :param epoch_seconds: Seconds of one epoch, for the share (the run's, :func:`run_epoch_seconds`)
    :return: ``epochs``, ``epochs_seen``, ``job_starts``, ``starts_per_epoch``,
        ``epoch_seconds`` (measured on this method's jobs alone), ``share_in_epochs`` (with the
        ``epoch_seconds`` given), ``best_anytime``, ``best_at_max_t``, ``trials`` (that
        reported), ``wall_seconds`` (NaN or None where not measurable)
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if not wall_seconds > 0:
        raise ValueError(f"wall_seconds must be > 0, got {wall_seconds}")
    epochs = len(reported)
    return {
        "epochs": epochs,
        "epochs_seen": len(seen),
        "job_starts": int(job_starts),
        "starts_per_epoch": job_starts / epochs if epochs else math.nan,
        "epoch_seconds": mean_epoch_seconds(reported),
        "share_in_epochs": epochs * epoch_seconds / (n_workers * wall_seconds) if epochs else 0.0,
        "best_anytime": best_value(seen),
        "best_at_max_t": best_value(seen, max_t),
        "trials": int(reported["trial_id"].nunique()) if epochs else 0,
        "wall_seconds": float(wall_seconds),
    }


def run_epoch_seconds(reported: Sequence[pd.DataFrame], configured: float) -> tuple[float, str]:
    """The seconds of one epoch every method's share is computed with (module docstring).

    :param reported: Every method's reported results
    :param configured: The epoch seconds the script was given (every epoch takes at least that)
    :return: ``(seconds, source)``: the mean over all methods' jobs of :func:`epoch_gaps`
        (source ``"measured"``), else ``configured`` (``"configured"``) where no job of any
        method reported two results
    """
    measured = mean_epoch_seconds(*reported)
    return (measured, "measured") if math.isfinite(measured) else (float(configured), "configured")


def ratios(rows: dict[str, dict[str, Any]], reference: str = REFERENCE) -> dict[str, dict[str, float]]:
    """
    :param rows: Method -> its :func:`summarize` row
    :param reference: The method the others are compared with
    :return: For every other method: ``share_ratio`` (its share in epochs over the
        reference's; target >= 0.9) and ``starts_per_epoch_ratio`` (its job starts per epoch
        over the reference's; target <= 1.5). Empty if the reference was not run
    """
    if reference not in rows:
        return {}
    ref = rows[reference]

    def ratio(a: float, b: float) -> float:
        return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan

    return {
        name: {
            "share_ratio": ratio(row["share_in_epochs"], ref["share_in_epochs"]),
            "starts_per_epoch_ratio": ratio(row["starts_per_epoch"], ref["starts_per_epoch"]),
        }
        for name, row in rows.items()
        if name != reference
    }


def json_ready(value: Any) -> Any:
    """:return: ``value`` with every NaN (in nested dicts and lists) replaced by None"""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def markdown(rows: dict[str, dict[str, Any]], reference: str = REFERENCE) -> str:
    """
    :param rows: Method -> its :func:`summarize` row
    :param reference: See :func:`ratios`
    :return: A markdown table of the rows, then one of the :func:`ratios` (if any)
    """
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for name, row in rows.items():
        lines.append("| " + " | ".join(_cell(name if key == "method" else row[key]) for key, _ in COLUMNS) + " |")
    compared = ratios(rows, reference)
    if compared:
        lines += [
            "",
            f"| method | share / {reference}'s (target >= 0.9) | starts per epoch / {reference}'s (target <= 1.5) |",
            "|---|---|---|",
        ]
        lines += [
            f"| {name} | {_cell(r['share_ratio'])} | {_cell(r['starts_per_epoch_ratio'])} |"
            for name, r in compared.items()
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the runs


def variants() -> dict[str, tuple[str, dict[str, Any]]]:
    """:return: The methods this script can run: :data:`benchmarks.runner.VARIANTS` with a
    preset in :data:`PRESETS` (imported here: the lab's runner needs Syne Tune's simulator,
    the accounting above does not)"""
    from benchmarks.runner import VARIANTS

    return {name: variant for name, variant in VARIANTS.items() if variant[0] in PRESETS}


def build_scheduler(method: str, config_space: dict[str, Any], max_t: int, random_seed: int):
    """
    :param method: A key of :data:`benchmarks.runner.VARIANTS` whose preset is in
        :data:`PRESETS`
    :param config_space: The config space of ``train_mlp.py``
    :param max_t: Epochs of a fully trained trial
    :param random_seed: Seed of the scheduler
    :return: The scheduler: ours with ``max_resource_attr``, Syne Tune's as the lab builds them
    """
    preset, overrides = variants()[method]
    if preset in ("DyHPO", "DeepPowerLaw"):
        import syne_dyhpo

        return getattr(syne_dyhpo, preset)(
            config_space, metric=METRIC, do_minimize=(MODE == "min"), time_attr=RESOURCE_ATTR,
            max_t=max_t, max_resource_attr=MAX_RESOURCE_ATTR, random_seed=random_seed, **overrides,
        )
    from syne_tune.optimizer import baselines

    if preset == "RandomSearch":
        return baselines.RandomSearch(
            config_space, metrics=[METRIC], do_minimize=(MODE == "min"), random_seed=random_seed, **overrides
        )
    return getattr(baselines, preset)(
        config_space, metric=METRIC, time_attr=RESOURCE_ATTR, max_t=max_t,
        do_minimize=(MODE == "min"), random_seed=random_seed, **overrides,
    )


class LoopClock(TunerCallback):
    """The ``time.time()`` at which the Tuner's loop began and ended."""

    def __init__(self):
        self.start: float | None = None
        self.end: float | None = None

    def on_tuning_start(self, tuner):
        self.start = time.time()

    def on_tuning_end(self):
        self.end = time.time()


def reported_results(backend, trial_ids: Sequence[int]) -> pd.DataFrame:
    """
    :param backend: The run's ``LocalBackend``
    :param trial_ids: Its trials
    :return: Every result the trials' jobs printed to their ``std.out`` (all processes of a
        trial append to it), with ``trial_id``
    """
    from syne_tune.report import retrieve

    rows = [
        {**result, "trial_id": trial_id}
        for trial_id in trial_ids
        for result in retrieve(backend.stdout(trial_id))
    ]
    columns = ["trial_id", RESOURCE_ATTR, METRIC, ST_WORKER_ITER, ST_WORKER_TIMESTAMP]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)


@contextlib.contextmanager
def syne_tune_folder(folder: Path) -> Iterator[None]:
    """Sets ``SYNETUNE_FOLDER`` (where a Tuner puts its experiment) for the block."""
    before = os.environ.get("SYNETUNE_FOLDER")
    os.environ["SYNETUNE_FOLDER"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SYNETUNE_FOLDER", None)
        else:
            os.environ["SYNETUNE_FOLDER"] = before


@dataclass
class MethodRun:
    """What one method's tuning left (:func:`run_method`)."""

    reported: pd.DataFrame  # every result its jobs reported within the wall-clock time
    seen: pd.DataFrame  # the results its scheduler saw
    job_starts: int  # jobs the Tuner started or resumed
    trials_started: int
    wall_seconds: float  # of the Tuner's loop
    experiment: str  # its folder


def run_method(method: str, args: argparse.Namespace, out: Path) -> MethodRun:
    """Tunes the MLP with one method for ``args.budget`` seconds (module docstring). The Tuner's
    console output goes to stderr."""
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend import LocalBackend
    from syne_tune.results_callback import StoreResultsCallback
    from tune_local import ENTRY_POINT, SegmentLog

    config_space = make_config_space(max_epochs=args.max_epochs, seed=args.seed)
    config_space[EPOCH_SECONDS_ATTR] = args.epoch_seconds
    scheduler = build_scheduler(method, config_space, args.max_epochs, args.seed)
    backend = LocalBackend(entry_point=str(ENTRY_POINT), delete_checkpoints=False)
    store, log, clock = StoreResultsCallback(), SegmentLog(), LoopClock()
    with syne_tune_folder(out), contextlib.redirect_stdout(sys.stderr):
        tuner = Tuner(
            trial_backend=backend,
            scheduler=scheduler,
            stop_criterion=StoppingCriterion(max_wallclock_time=args.budget),
            n_workers=args.n_workers,
            sleep_time=args.sleep_time,
            max_failures=args.max_failures,
            save_tuner=False,
            callbacks=[store, log, clock],
            tuner_name=f"real-wallclock-{method}",
            suffix_tuner_name=False,
            metadata={"benchmark": "benchmarks/real_wallclock.py", "method": method,
                      "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}},
        )
        tuner.run()
    seen = store.dataframe()
    if seen is None or len(seen) == 0:
        seen = pd.DataFrame(columns=["trial_id", RESOURCE_ATTR, METRIC])
    reported = reported_results(backend, sorted(backend._trial_dict))
    if len(reported):
        reported = reported[reported[ST_WORKER_TIMESTAMP] <= clock.end]
    return MethodRun(
        reported=reported, seen=seen, job_starts=log.num("start") + log.num("resume"),
        trials_started=log.num("start"), wall_seconds=clock.end - clock.start,
        experiment=str(tuner.tuner_path),
    )


def summary(runs: dict[str, MethodRun], args: argparse.Namespace) -> dict[str, Any]:
    """
    :param runs: Method -> its run
    :param args: The script's arguments
    :return: ``args``, ``epoch_seconds`` and ``epoch_seconds_source`` (:func:`run_epoch_seconds`),
        ``rows`` (method -> its :func:`summarize` row with ``trials_started`` and ``experiment``)
        and ``ratios`` (:func:`ratios`)
    """
    seconds, source = run_epoch_seconds([r.reported for r in runs.values()], args.epoch_seconds)
    rows = {
        method: {
            **summarize(r.reported, r.seen, r.job_starts, args.n_workers, r.wall_seconds, args.max_epochs, seconds),
            "trials_started": r.trials_started,
            "experiment": r.experiment,
        }
        for method, r in runs.items()
    }
    return {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "epoch_seconds": seconds,
        "epoch_seconds_source": source,
        "rows": rows,
        "ratios": ratios(rows),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--methods", nargs="+", default=["DyHPO", "DeepPowerLaw", REFERENCE],
                   help=f"names of benchmarks.runner.VARIANTS with a preset in {', '.join(PRESETS)}")
    p.add_argument("--budget", type=positive_number, default=240.0, help="wall-clock seconds per method")
    p.add_argument("--epoch-seconds", type=positive_number, default=1.0, help="wall-clock seconds of one epoch")
    p.add_argument("--n-workers", type=positive_int, default=2, help="jobs run in parallel")
    p.add_argument("--max-epochs", type=positive_int, default=10, help="max_t: epochs of a fully trained trial")
    p.add_argument("--sleep-time", type=positive_number, default=0.5, help="Tuner polling interval (s)")
    p.add_argument("--max-failures", type=positive_int, default=3,
                   help="stop a method's tuning after more failed trials than this")
    p.add_argument("--seed", type=seed, default=0, help="seed of every scheduler and of the model initialisation")
    p.add_argument("--out", type=Path, default=None,
                   help=f"folder of the experiments and {SUMMARY_FILE} (default: a new temporary folder)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status (2: bad arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    known = variants()
    unknown = [m for m in args.methods if m not in known]
    if unknown:
        parser.error(f"--methods: {unknown} not among {list(known)}")
    if len(set(args.methods)) != len(args.methods):
        parser.error(f"--methods: {args.methods} names a method twice")
    out = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="real-wallclock-"))
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("syne_tune").setLevel(logging.WARNING)
    runs: dict[str, MethodRun] = {}
    for method in args.methods:
        print(f"{method}: tuning for {args.budget:g} s ...", file=sys.stderr, flush=True)
        runs[method] = run_method(method, args, out)
    result = summary(runs, args)
    (out / SUMMARY_FILE).write_text(json.dumps(json_ready(result), indent=2, default=str) + "\n")
    print(markdown(result["rows"]))
    how = ("measured between consecutive results of one job, over all methods' jobs"
           if result["epoch_seconds_source"] == "measured"
           else "the --epoch-seconds given: no job of any method reported two epochs")
    print(f"\nShare in epochs with an epoch of {result['epoch_seconds']:.3f} s ({how}); "
          f"'epoch s' is each method's own measurement. Experiments and {SUMMARY_FILE} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
