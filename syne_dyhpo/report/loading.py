"""Reading a run: Syne Tune's files in an experiment folder, and the decision log beside them.

A Syne Tune experiment folder holds ``results.csv.zip`` (every result the Tuner saw, with
``st_tuner_time``, ``st_decision`` and the trial's ``config_*``; written every
``results_update_interval`` seconds while the run goes) and ``metadata.json`` (the
scheduler's metadata); a freeze-thaw scheduler adds ``decision_log.csv`` and
``syne_dyhpo_run.json`` (:mod:`syne_dyhpo.core.decision_log`). A finished run, a running one
and a run continued with ``Tuner.load`` read alike: ``st_tuner_time`` (and the log's ``time``)
restart at 0 in each session of a continued run, so times are shifted onto one axis
(:attr:`Run.results` column ``t``, :attr:`Run.log` column ``t``).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syne_dyhpo.core.decision_log import LOG_FILENAME, RUN_INFO_FILENAME

RESULTS_FILENAME = "results.csv.zip"
METADATA_FILENAME = "metadata.json"
#: config keys that are not hyperparameters (passed by the backend or the scheduler)
_NOT_HYPERPARAMETERS = ("st_checkpoint_dir",)


@dataclass
class Run:
    """One tuning run, read from its folder.

    :param path: the experiment folder
    :param metric: the metric tuned
    :param mode: "min" or "max"
    :param time_attr: the epoch key of the results
    :param max_t: the maximum epoch
    :param results: Syne Tune's results, one row per result, in the order seen, with ``t``
        (seconds on one axis over all sessions)
    :param log: the decision log (empty if the run has none), with ``t``
    :param checkpoint_template: where a trial's checkpoint lives (``{trial_id}`` for its id),
        None if the backend keeps none (simulator) or did not say
    :param backend: the backend's class name, if known
    :param max_resource_attr: config key the scheduler sets per segment (not a hyperparameter)
    """

    path: Path
    metric: str
    mode: str
    time_attr: str
    max_t: int
    results: pd.DataFrame
    log: pd.DataFrame
    checkpoint_template: str | None = None
    backend: str | None = None
    max_resource_attr: str | None = None
    scheduler: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def config(self, trial_id: int) -> dict[str, Any]:
        """The hyperparameters of a trial, from its results' ``config_*`` columns."""
        rows = self.results[self.results["trial_id"] == trial_id]
        if rows.empty:
            return {}
        names = self.info.get("hyperparameters")  # the keys with a domain (not constants)
        skip = {*_NOT_HYPERPARAMETERS, self.max_resource_attr}
        last = rows.iloc[-1]
        return {
            c[len("config_"):]: _plain(last[c]) for c in rows.columns
            if c.startswith("config_") and c[len("config_"):] not in skip
            and (names is None or c[len("config_"):] in names)
        }

    def checkpoint(self, trial_id: int) -> str | None:
        """Where the trial's checkpoint is (a folder or an S3 URI), None if there is none."""
        if self.checkpoint_template is None:
            return None
        return self.checkpoint_template.replace("{trial_id}", str(trial_id))


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def experiment_root() -> Path:
    """Syne Tune's experiment root: ``$SYNETUNE_FOLDER``, else ``~/syne-tune``."""
    from syne_tune.util import experiment_path

    return Path(experiment_path())


def resolve(path_or_name: str | os.PathLike) -> Path:
    """The experiment folder of ``path_or_name``: a folder holding Syne Tune's results or a
    decision log, or a tuner name under Syne Tune's experiment root (the full name, or the name
    given to the Tuner: its newest folder ``name-<time stamp>``).

    :raises FileNotFoundError: naming what was looked for
    """
    candidate = Path(path_or_name).expanduser()
    if _is_experiment(candidate):
        return candidate
    root = experiment_root()
    named = root / str(path_or_name)
    if _is_experiment(named):
        return named
    # Syne Tune suffixes the tuner name with a time stamp: name-YYYY-MM-DD-HH-MM-SS-mmm
    stamped = re.compile(re.escape(str(path_or_name)) + r"-\d{4}(-\d{2}){5}-\d{3}")
    matches = sorted(
        (p for p in root.glob(f"{glob.escape(str(path_or_name))}-*") if stamped.fullmatch(p.name) and _is_experiment(p)),
        key=lambda p: p.name,
    )
    if matches:
        return matches[-1]
    raise FileNotFoundError(
        f"{str(path_or_name)!r} is neither an experiment folder (with {RESULTS_FILENAME}, {METADATA_FILENAME} "
        f"or {LOG_FILENAME}) nor a tuner name under Syne Tune's experiment root {root}"
    )


def _is_experiment(path: Path) -> bool:
    return path.is_dir() and any((path / f).exists() for f in (RESULTS_FILENAME, METADATA_FILENAME, LOG_FILENAME))


def load_run(path_or_name: str | os.PathLike) -> Run:
    """Reads the run in ``path_or_name`` (see :func:`resolve`).

    :raises ValueError: if the folder does not say which metric was tuned, or to which epoch
    """
    path = resolve(path_or_name)
    info = _read_json(path / RUN_INFO_FILENAME)
    metadata = _read_json(path / METADATA_FILENAME)
    metric = info.get("metric") or (metadata.get("metric_names") or [None])[0]
    mode = info.get("mode") or metadata.get("metric_mode") or "min"
    time_attr = info.get("time_attr") or metadata.get("time_attr") or "epoch"
    max_t = info.get("max_t") or metadata.get("max_t")
    if metric is None or max_t is None:
        raise ValueError(
            f"{path}: neither {RUN_INFO_FILENAME} nor {METADATA_FILENAME} says which metric was tuned and "
            "to which epoch (max_t); was it run with a freeze-thaw scheduler of syne_dyhpo?"
        )
    return run_from_frames(
        _read_results(path), _read_log(path / LOG_FILENAME), metric=metric, mode=mode, time_attr=time_attr,
        max_t=max_t, path=path, checkpoint_template=info.get("checkpoint_template"),
        backend=info.get("backend") or metadata.get("backend"), max_resource_attr=info.get("max_resource_attr"),
        scheduler=info.get("scheduler") or metadata.get("scheduler_name"), info=info,
    )


def run_from_frames(results: pd.DataFrame, log: pd.DataFrame | None, metric: str, mode: str, time_attr: str,
                    max_t: int, path: str | os.PathLike = ".", **kwargs: Any) -> Run:
    """A run from its results and decision log already read (what :func:`load_run` does after
    reading the folder): the log's repeated rows dropped (the last copy of each ``session``,
    ``decision`` stands), times put on one axis (column ``t``). The frames are copied.

    :param results: Syne Tune's results, one row per result in the order seen (``trial_id``,
        ``time_attr``, ``metric``; ``st_tuner_time``, ``st_decision`` where present)
    :param log: the decision log (columns :data:`syne_dyhpo.core.decision_log.COLUMNS`); None
        or empty if the run has none
    :param metric: the metric tuned
    :param mode: "min" or "max"
    :param time_attr: the epoch key of the results
    :param max_t: the maximum epoch
    :param path: the experiment folder, if any
    :param kwargs: the other fields of :class:`Run` (``checkpoint_template``, ``backend``, ...)
    :raises ValueError: if ``results`` has rows but no column ``metric`` or ``time_attr``
    """
    if len(results) and (metric not in results or time_attr not in results):
        raise ValueError(f"{path}: the results have no column {metric!r} or {time_attr!r}")
    results = results.copy()
    log = _distinct_decisions(log.copy()) if log is not None and len(log) else _empty_log()
    _one_time_axis(results, log)
    return Run(path=Path(path), metric=metric, mode=mode, time_attr=time_attr, max_t=int(max_t), results=results,
               log=log, **kwargs)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    with open(path) as f:
        return json.load(f)


def _read_results(path: Path) -> pd.DataFrame:
    # results.csv.gz: the benchmark lab's runs (benchmarks/runner.py)
    for name in (RESULTS_FILENAME, RESULTS_FILENAME[: -len(".zip")], "results.csv.gz"):
        if (path / name).exists():
            try:
                return pd.read_csv(path / name)
            except (pd.errors.EmptyDataError, EOFError, OSError, ValueError):
                break  # written at this moment, or empty: no results yet
    return pd.DataFrame(columns=["trial_id", "st_tuner_time"])


def _empty_log() -> pd.DataFrame:
    from syne_dyhpo.core.decision_log import COLUMNS

    return pd.DataFrame(columns=list(COLUMNS))


def _read_log(path: Path) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return _empty_log()
    return pd.read_csv(path, on_bad_lines="skip")  # a line cut by a crash is skipped


def _distinct_decisions(log: pd.DataFrame) -> pd.DataFrame:
    # a row written by a process that crashed after the tuner's last save may come again from
    # the continued run: the last copy of each (session, decision) stands
    return log.drop_duplicates(subset=["session", "decision"], keep="last").reset_index(drop=True)


def _one_time_axis(results: pd.DataFrame, log: pd.DataFrame) -> None:
    """Adds ``t``: the Tuner's clock restarts at 0 in each session of a continued run (Syne
    Tune's ``st_tuner_time`` and the log's ``time``); each session is shifted to start where the
    one before ended."""
    offsets = [0.0]
    if len(results) and "st_tuner_time" in results:
        times = results["st_tuner_time"].astype(float).to_numpy()
        t = np.empty_like(times)
        offset, last, ends = 0.0, -math.inf, []
        for i, time_ in enumerate(times):
            if time_ < last - 1e-9:  # the clock went back: a new session
                ends.append(last)
                offset += last
            t[i] = time_ + offset
            last = time_
        results["t"] = t
        offsets = list(np.cumsum([0.0, *ends]))
    elif len(results):
        results["t"] = np.arange(len(results), dtype=float)
    if len(log):
        sessions = log["session"].astype(int).to_numpy()
        shift = np.array([offsets[s] if s < len(offsets) else offsets[-1] for s in sessions])
        log["t"] = log["time"].astype(float).to_numpy() + shift
