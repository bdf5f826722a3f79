"""Ray Tune's results of an experiment folder, as the report reads Syne Tune's.

A Ray Tune experiment folder (``RunConfig(storage_path=..., name=...)``) holds one folder per
trial, ``<trainable>_<ray trial id>_<n>_<tag>_<date>``, with ``result.json`` (one JSON result a
line) and ``progress.csv`` (the same results as a table), ``params.json`` (the configuration) and
the trial's ``checkpoint_<k>`` folders; the freeze-thaw scheduler's front end
(:mod:`syne_dyhpo.ray_tune`) adds ``decision_log.csv`` and ``syne_dyhpo_run.json``.

What the rows become (the columns of Syne Tune's results the report reads):

- ``trial_id``: the scheduler's trial id, which is the order in which Ray created the trials:
  ``<n> - 1``, ``<n>`` the trial's number in its folder's name;
- ``st_tuner_time``: seconds since the decision log's clock started (``start_timestamp`` of
  ``syne_dyhpo_run.json``), else since the first result's job started. Ray stamps a result with
  whole seconds (``timestamp``) and counts the seconds since the job (re)started in floats
  (``time_since_restore``); a segment's results are placed at its start plus their
  ``time_since_restore``, the start chosen in the middle of what the whole-second stamps allow
  (within half a second);
- ``st_decision``: ``PAUSE`` on the last result before the trial's job restarted from its
  checkpoint (the next result has ``iterations_since_restore`` 1): a resume follows;
- ``config_<name>``: the configuration (``params.json``).

A trial's checkpoint (:attr:`~syne_dyhpo.report.loading.Run.trial_checkpoints`) is the folder
of the last result that had one (``checkpoint_dir_name``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syne_dyhpo.report.loading import RAY_RESULT_FILES, ray_trial_folders, valid_rows


def read_ray_results(path: Path, metric: str, time_attr: str, start_timestamp: float | None,
                     warnings: list[str]) -> tuple[pd.DataFrame, dict[int, str]]:
    """The results of the trial folders in ``path``, one row per result in the order of time
    (see the module docstring), and each trial's checkpoint folder.

    :param start_timestamp: ``time.time()`` at the start of the decision log's clock; None: the
        times count from the first job's start
    :param warnings: lines of what could not be read are appended
    """
    trials = []
    for folder in ray_trial_folders(path):
        frame = _trial_results(folder, metric, time_attr, warnings)
        if frame is not None and len(frame):
            trials.append((folder, frame))
    if not trials:
        return pd.DataFrame(columns=["trial_id", "st_tuner_time"]), {}
    named = [_trial_number(folder, frame) for folder, frame in trials]
    numbers = [n for n in named if n is not None]
    if len(numbers) < len(named) or len(set(numbers)) < len(numbers):
        warnings.append(f"{path}: trial folders without their trial number in the name: the trials are numbered by "
                        "their first result, which may differ from the decision log's trial ids")
        firsts = [float(frame["t_abs"].min()) for _, frame in trials]
        numbers = [int(rank) + 1 for rank in np.argsort(np.argsort(firsts, kind="stable"), kind="stable")]
    frames, checkpoints = [], {}
    for (folder, frame), number in zip(trials, numbers):
        trial_id = number - 1
        frame = frame.assign(trial_id=trial_id)
        for key, value in _config(folder, frame).items():
            frame[f"config_{key}"] = value
        if "checkpoint_dir_name" in frame:
            named = frame["checkpoint_dir_name"].dropna().astype(str)
            named = named[named.str.strip() != ""]
            if len(named):
                checkpoints[trial_id] = str(folder / named.iloc[-1])
        frames.append(frame.drop(columns=[c for c in ("config",) if c in frame]))
    results = pd.concat(frames, ignore_index=True)
    origin = start_timestamp if start_timestamp is not None else float(results["job_start_abs"].min())
    results["st_tuner_time"] = results["t_abs"] - origin
    results = results.sort_values(["st_tuner_time", "trial_id"], kind="stable").reset_index(drop=True)
    return results.drop(columns=["t_abs", "job_start_abs"]), checkpoints


def _trial_results(folder: Path, metric: str, time_attr: str, warnings: list[str]) -> pd.DataFrame | None:
    """One trial's results with ``t_abs`` (seconds since the epoch), ``job_start_abs`` (its
    segment's start) and ``st_decision``; None if it has none that can be read."""
    rows = _read_result_json(folder / RAY_RESULT_FILES[0], warnings)
    if rows is None:
        try:
            rows = pd.read_csv(folder / RAY_RESULT_FILES[1])
        except (OSError, ValueError, pd.errors.EmptyDataError, pd.errors.ParserError) as err:
            warnings.append(f"{folder / RAY_RESULT_FILES[1]}: unreadable ({err}); trial left out")
            return None
    if not len(rows):
        return None
    file = folder / (RAY_RESULT_FILES[0] if (folder / RAY_RESULT_FILES[0]).is_file() else RAY_RESULT_FILES[1])
    missing = [c for c in (time_attr, metric, "timestamp") if c not in rows]
    if missing:
        warnings.append(f"{file}: no column {' or '.join(map(repr, missing))}; trial left out")
        return None
    optional = [c for c in ("time_since_restore", "iterations_since_restore") if c in rows]
    rows, skipped, first = valid_rows(rows, integers=[time_attr], numbers=[metric], required_numbers=["timestamp"],
                                      optional_numbers=optional)
    if skipped:
        where = "" if first is None else f" (the first: result {first[0] + 1}, {first[1]!r} = {first[2]!r})"
        warnings.append(f"{file}: skipped {skipped} of {skipped + len(rows)} results with a bad value{where}")
    if not len(rows):
        return None
    since = rows["time_since_restore"] if "time_since_restore" in rows else pd.Series(np.nan, index=rows.index)
    since = since.fillna(0.0).to_numpy(dtype=float)
    restarts = (rows["iterations_since_restore"] == 1).to_numpy().copy() if "iterations_since_restore" in rows \
        else np.zeros(len(rows), dtype=bool)
    restarts[0] = True
    segment = np.cumsum(restarts)
    stamps = rows["timestamp"].to_numpy(dtype=float)
    starts = np.empty(len(rows))
    for s in np.unique(segment):
        mine = segment == s
        # the job started at `start`: each result came at start + since, stamped in whole seconds
        low = float(np.max(stamps[mine] - since[mine]))
        high = float(np.min(stamps[mine] + 1.0 - since[mine]))
        starts[mine] = (low + high) / 2 if low <= high else low
    rows = rows.assign(t_abs=starts + since, job_start_abs=starts)
    decision = np.where(np.append(restarts[1:], False), "PAUSE", "")
    return rows.assign(st_decision=decision)


def _read_result_json(path: Path, warnings: list[str]) -> pd.DataFrame | None:
    """``result.json``: a JSON result per line (a line cut by a crash or garbage is skipped and
    counted); None if the file is not there or unreadable."""
    if not path.is_file():
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as err:
        warnings.append(f"{path}: unreadable ({err})")
        return None
    rows, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    if bad:
        warnings.append(f"{path}: skipped {bad} of {bad + len(rows)} lines that are no JSON result")
    frame = pd.DataFrame(rows)
    return frame


def _trial_number(folder: Path, frame: pd.DataFrame) -> int | None:
    """The trial's number in its folder's name (``<trainable>_<ray trial id>_<n>_...``)."""
    ids = frame["trial_id"].dropna().astype(str).unique() if "trial_id" in frame else []
    for ray_id in ids:
        found = re.search(rf"_{re.escape(ray_id)}_(\d+)(?:_|$)", folder.name)
        if found:
            return int(found.group(1))
    return None


def _config(folder: Path, frame: pd.DataFrame) -> dict[str, Any]:
    """The trial's configuration: ``params.json``, else the results' ``config``."""
    try:
        config = json.loads((folder / "params.json").read_text())
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict):
        config = {}
        if "config" in frame and isinstance(frame["config"].iloc[-1], dict):
            config = frame["config"].iloc[-1]
        else:  # progress.csv: config/<name> columns
            config = {c[len("config/"):]: frame[c].iloc[-1] for c in frame.columns if c.startswith("config/")}
    return {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool)) and not (
        isinstance(v, float) and math.isnan(v))}
