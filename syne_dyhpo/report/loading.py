"""Reading a run: Syne Tune's or Ray Tune's files in an experiment folder, and the decision log
beside them.

A Syne Tune experiment folder holds ``results.csv.zip`` (every result the Tuner saw, with
``st_tuner_time``, ``st_decision`` and the trial's ``config_*``; written every
``results_update_interval`` seconds while the run goes) and ``metadata.json`` (the
scheduler's metadata); a freeze-thaw scheduler adds ``decision_log.csv`` and
``syne_dyhpo_run.json`` (:mod:`syne_dyhpo.core.decision_log`). A finished run, a running one
and a run continued with ``Tuner.load`` read alike: ``st_tuner_time`` (and the log's ``time``)
restart at 0 in each session of a continued run, so times are shifted onto one axis
(:attr:`Run.results` column ``t``, :attr:`Run.log` column ``t``). A Ray Tune experiment folder
holds a folder per trial with Ray's results (:mod:`~syne_dyhpo.report.ray_results`) beside the
decision log.

Nothing read is trusted: a file that cannot be read (``results.csv.zip`` while Syne Tune rewrites
it is retried a few times first), a decision log without its header line, and rows with a value
that is not a number where one belongs are reported in :attr:`Run.warnings` (naming the file
and counting the rows skipped), and the report goes on with what could be read. A path that is
no experiment folder raises :class:`ReportInputError`.
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import re
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syne_dyhpo.core.decision_log import LOG_FILENAME
from syne_dyhpo.core.run_info import RUN_INFO_FILENAME

#: the files of a Ray Tune trial folder with its results (either will do)
RAY_RESULT_FILES = ("result.json", "progress.csv")

RESULTS_FILENAME = "results.csv.zip"
METADATA_FILENAME = "metadata.json"
#: reads of a results file that fails (Syne Tune rewrites it in place while a run goes), and the
#: pause between two of them
READ_TRIES = 5
READ_PAUSE_S = 0.1
#: config keys that are not hyperparameters (passed by the backend or the scheduler)
_NOT_HYPERPARAMETERS = ("st_checkpoint_dir",)


class ReportInputError(ValueError):
    """The path given to the report is no experiment folder, or says too little to report on;
    the message names the path."""


class ExperimentNotFoundError(ReportInputError, FileNotFoundError):
    """No experiment folder at the path or under the name given; the message names it."""


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
    :param n_workers: the number of workers (trials run at once), if the folder says
    :param start_timestamp: ``time.time()`` at the start of the decision log's clock, if known
    :param warnings: what could not be read, one line each (files named, rows counted)
    :param trial_checkpoints: a trial's checkpoint where no template says it (Ray Tune)
    :param source: "syne_tune" or "ray_tune": whose results the folder holds
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
    n_workers: int | None = None
    start_timestamp: float | None = None
    warnings: list[str] = field(default_factory=list)
    trial_checkpoints: dict[int, str] = field(default_factory=dict)
    source: str = "syne_tune"

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

    @property
    def clocks_aligned(self) -> bool:
        """Whether the results' times and the decision log's are on one clock (Ray Tune's
        results are only where the log's clock start is known)."""
        return not (self.source == "ray_tune" and self.start_timestamp is None)

    def checkpoint(self, trial_id: int) -> str | None:
        """Where the trial's checkpoint is (a folder or an S3 URI), None if there is none."""
        if trial_id in self.trial_checkpoints:
            return self.trial_checkpoints[trial_id]
        if self.checkpoint_template is None:
            return None
        return self.checkpoint_template.replace("{trial_id}", str(trial_id))


def ray_trial_folders(path: Path) -> list[Path]:
    """The trial folders of a Ray Tune experiment folder: those holding Ray's results."""
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and any((p / f).is_file() for f in RAY_RESULT_FILES))
    except OSError:
        return []


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def experiment_root() -> Path:
    """Syne Tune's experiment root: ``$SYNETUNE_FOLDER``, else ``~/syne-tune``."""
    from syne_tune.util import experiment_path

    return Path(experiment_path())


def resolve(path_or_name: str | os.PathLike) -> Path:
    """The experiment folder of ``path_or_name``: a folder holding Syne Tune's results, Ray
    Tune's trial folders or a decision log, or a tuner name under Syne Tune's experiment root
    (the full name, or the name given to the Tuner: its newest folder ``name-<time stamp>``).

    :raises ExperimentNotFoundError: naming the path and what was looked for
    """
    given = str(path_or_name)
    candidate = Path(path_or_name).expanduser()
    if candidate.is_file():
        raise ExperimentNotFoundError(
            f"{given!r} is a file; give the experiment folder (the folder holding {RESULTS_FILENAME}, "
            f"{LOG_FILENAME} or Ray Tune's trial folders)"
        )
    if _is_experiment(candidate):
        return candidate
    if candidate.is_dir():
        raise ExperimentNotFoundError(
            f"{given!r} is a folder but no experiment folder: it holds none of {RESULTS_FILENAME}, "
            f"{METADATA_FILENAME}, {LOG_FILENAME}, nor Ray Tune trial folders "
            f"(with {RAY_RESULT_FILES[0]} or {RAY_RESULT_FILES[1]})"
        )
    if candidate.is_absolute() or given.startswith(("~", ".")):
        raise ExperimentNotFoundError(f"{given!r}: no such folder")
    root = experiment_root()
    named = root / given
    if _is_experiment(named):
        return named
    # Syne Tune suffixes the tuner name with a time stamp: name-YYYY-MM-DD-HH-MM-SS-mmm
    stamped = re.compile(re.escape(given) + r"-\d{4}(-\d{2}){5}-\d{3}")
    try:
        found = list(root.glob(f"{glob.escape(given)}-*"))
    except (ValueError, NotImplementedError, OSError):  # a name no glob pattern can be made of
        found = []
    matches = sorted((p for p in found if stamped.fullmatch(p.name) and _is_experiment(p)), key=lambda p: p.name)
    if matches:
        return matches[-1]
    raise ExperimentNotFoundError(
        f"{given!r} is neither an experiment folder (with {RESULTS_FILENAME}, {METADATA_FILENAME}, {LOG_FILENAME} "
        f"or Ray Tune's trial folders) nor a tuner name under Syne Tune's experiment root {root}"
    )


def _is_experiment(path: Path) -> bool:
    try:
        return path.is_dir() and (
            any((path / f).exists() for f in (RESULTS_FILENAME, METADATA_FILENAME, LOG_FILENAME))
            or bool(ray_trial_folders(path))
        )
    except OSError:  # unreadable, or a name too long for the file system
        return False


def load_run(path_or_name: str | os.PathLike) -> Run:
    """Reads the run in ``path_or_name`` (see :func:`resolve`): Syne Tune's results if the
    folder has them, else Ray Tune's.

    :raises ReportInputError: if the path is no experiment folder, or the folder does not say
        which metric was tuned, or to which epoch
    """
    path = resolve(path_or_name)
    warnings: list[str] = []
    info = _read_json(path / RUN_INFO_FILENAME, warnings)
    metadata = _read_json(path / METADATA_FILENAME, warnings)
    metric = info.get("metric") or (metadata.get("metric_names") or [None])[0]
    mode = info.get("mode") or metadata.get("metric_mode") or "min"
    time_attr = info.get("time_attr") or metadata.get("time_attr") or "epoch"
    max_t = info.get("max_t") or metadata.get("max_t")
    if metric is None or max_t is None:
        raise ReportInputError(
            f"{path}: neither {RUN_INFO_FILENAME} nor {METADATA_FILENAME} says which metric was tuned and "
            "to which epoch (max_t); was it run with a freeze-thaw scheduler of syne_dyhpo?"
        )
    log = _read_log(path / LOG_FILENAME, warnings)
    start_timestamp = _number_or_none(info.get("start_timestamp"))
    trial_checkpoints: dict[int, str] = {}
    source = "syne_tune"
    if _results_file(path) is None and ray_trial_folders(path):
        from syne_dyhpo.report.ray_results import read_ray_results

        source = "ray_tune"
        sessions = set(log["session"]) if len(log) else set()
        aligned = start_timestamp if len(sessions) <= 1 else None  # one clock start known: one session
        results, trial_checkpoints = read_ray_results(path, metric, time_attr, aligned, warnings)
        if aligned is None:
            start_timestamp = None  # the results' times are not on the log's clock
    else:
        results = _read_results(path, metric, time_attr, warnings)
    n_workers = info.get("n_workers")
    return run_from_frames(
        results,
        log,
        metric=metric,
        mode=mode,
        time_attr=time_attr,
        max_t=max_t,
        path=path,
        checkpoint_template=info.get("checkpoint_template"),
        backend=info.get("backend") or metadata.get("backend") or ("Ray Tune" if source == "ray_tune" else None),
        max_resource_attr=info.get("max_resource_attr"),
        scheduler=info.get("scheduler") or metadata.get("scheduler_name"),
        info=info,
        n_workers=int(n_workers) if isinstance(n_workers, int) and n_workers > 0 else None,
        start_timestamp=start_timestamp,
        warnings=warnings,
        trial_checkpoints=trial_checkpoints,
        source=source,
    )


def run_from_frames(
    results: pd.DataFrame,
    log: pd.DataFrame | None,
    metric: str,
    mode: str,
    time_attr: str,
    max_t: int,
    path: str | os.PathLike = ".",
    **kwargs: Any,
) -> Run:
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
    :raises ReportInputError: if ``results`` has rows but no column ``trial_id``, ``metric`` or
        ``time_attr``
    """
    missing = [c for c in ("trial_id", time_attr, metric) if c not in results]
    if len(results) and missing:
        raise ReportInputError(f"{path}: the results have no column {' or '.join(map(repr, missing))}")
    results = results.copy()
    log = _distinct_decisions(log.copy()) if log is not None and len(log) else _empty_log()
    _one_time_axis(results, log)
    return Run(
        path=Path(path),
        metric=metric,
        mode=mode,
        time_attr=time_attr,
        max_t=int(max_t),
        results=results,
        log=log,
        **kwargs,
    )


def _read_json(path: Path, warnings: list[str]) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        warnings.append(f"{path}: unreadable ({err}); read without it")
        return {}
    if not isinstance(data, dict):
        warnings.append(f"{path}: not a JSON object; read without it")
        return {}
    return data


def _number_or_none(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _results_file(path: Path) -> Path | None:
    # results.csv.gz: the benchmark lab's runs (benchmarks/runner.py)
    for name in (RESULTS_FILENAME, RESULTS_FILENAME[: -len(".zip")], "results.csv.gz"):
        if (path / name).exists():
            return path / name
    return None


def _read_results(path: Path, metric: str, time_attr: str, warnings: list[str]) -> pd.DataFrame:
    """Syne Tune's results, their bad rows skipped (:func:`valid_rows`); a file that cannot be
    read after :data:`READ_TRIES` tries (written at this moment) gives no results and a
    warning."""
    empty = pd.DataFrame(columns=["trial_id", "st_tuner_time"])
    file = _results_file(path)
    if file is None:
        return empty
    error: Exception | None = None
    for attempt in range(READ_TRIES):
        if attempt:
            time.sleep(READ_PAUSE_S)
        try:
            df = pd.read_csv(file)
            break
        except (
            zipfile.BadZipFile,
            pd.errors.EmptyDataError,
            pd.errors.ParserError,
            EOFError,
            OSError,
            ValueError,
            UnicodeDecodeError,
        ) as err:  # being rewritten, or broken
            error = err
    else:
        warnings.append(
            f"{file}: unreadable after {READ_TRIES} tries ({type(error).__name__}: {error}); "
            "the report goes on without its results"
        )
        return empty
    if not len(df):
        return empty
    df, skipped, first = valid_rows(
        df,
        integers=[c for c in ("trial_id", time_attr) if c in df],
        numbers=[metric] if metric in df else [],
        required_numbers=[c for c in ("st_tuner_time",) if c in df],
    )
    if skipped:
        warnings.append(_skipped(file, skipped, skipped + len(df), first, offset=2))
    return df


def _skipped(file: str | os.PathLike, skipped: int, total: int, first: tuple[int, str, str] | None, offset: int) -> str:
    """The warning line of rows skipped (``first``: row, column and value of the first bad one;
    ``offset``: the line of the file of row 0)."""
    where = "" if first is None else f" (the first: line {first[0] + offset}, column {first[1]!r} = {first[2]!r})"
    return f"{file}: skipped {skipped} of {total} rows with a bad value{where}"


def valid_rows(
    df: pd.DataFrame,
    integers: Sequence[str] = (),
    numbers: Sequence[str] = (),
    required_numbers: Sequence[str] = (),
    optional_numbers: Sequence[str] = (),
) -> tuple[pd.DataFrame, int, tuple[int, str, str] | None]:
    """The rows of ``df`` whose values are what their columns need, those columns converted
    (the others left as they are).

    :param integers: columns of whole numbers (required)
    :param numbers: columns of numbers where NaN and inf are values too (required; an empty
        value is NaN, as pandas reads it)
    :param required_numbers: columns of finite numbers (required)
    :param optional_numbers: columns of numbers, NaN, inf or empty (empty is NaN)
    :return: (the good rows, the number of rows skipped, (row, column, value) of the first bad
        value or None)
    """
    df = df.reset_index(drop=True)
    good = np.ones(len(df), dtype=bool)
    first: tuple[int, str, str] | None = None
    out = df.copy()
    for kind, columns in (
        ("integer", integers),
        ("number", numbers),
        ("finite", required_numbers),
        ("optional", optional_numbers),
    ):
        for column in columns:
            raw = df[column]
            if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
                values = raw.astype(float)
                written_nan = values.isna()  # an empty cell, as pandas reads one
            else:
                values = pd.to_numeric(raw.astype(str).str.strip() if raw.dtype == object else raw, errors="coerce")
                written_nan = pd.Series(False, index=df.index)
                if values.isna().any():  # NaN where it is written as such (or missing), else a bad value
                    nans = values.isna()
                    text = raw[nans].astype(str).str.strip().str.lower()
                    written_nan[nans] = raw[nans].isna() | text.isin(["nan", "-nan", "+nan", "", "none"])
            if kind == "integer":
                ok = np.isfinite(values) & (values == np.round(values))
            elif kind == "finite":
                ok = np.isfinite(values)
            else:
                ok = values.notna() | written_nan
            ok = ok.to_numpy(dtype=bool)
            bad = good & ~ok
            if first is None and bad.any():
                i = int(np.argmax(bad))
                first = (i, column, str(raw.iloc[i]))
            good &= ok
            out[column] = values
    out = out[good].reset_index(drop=True)
    for column in integers:
        out[column] = out[column].astype(int)
    return out, int((~good).sum()), first


def _empty_log() -> pd.DataFrame:
    from syne_dyhpo.core.decision_log import COLUMNS

    return pd.DataFrame(columns=list(COLUMNS))


#: the decision log's columns by kind (see :data:`syne_dyhpo.core.decision_log.COLUMNS`)
_LOG_INTEGERS = ("session", "decision")
_LOG_TIMES = ("time",)
_LOG_TEXT = ("action", "next", "reason", "fit")


def _read_log(path: Path, warnings: list[str]) -> pd.DataFrame:
    """The decision log; a line cut by a crash, garbage, or a value that is not a number where
    one belongs is skipped and counted in a warning; a file that lost its header line is read
    in the order of the columns the scheduler writes, with a warning."""
    from syne_dyhpo.core.decision_log import COLUMNS

    if not path.exists() or path.stat().st_size == 0:
        return _empty_log()
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            lines = list(csv.reader(line.replace("\0", "") for line in f))
    except (OSError, csv.Error) as err:
        warnings.append(f"{path}: unreadable ({err}); the report goes on without the decision log")
        return _empty_log()
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line]
    if not numbered:
        return _empty_log()
    header = [c.strip() for c in numbered[0][1]]
    if {"session", "decision", "time"} <= set(header) and set(header) <= set(COLUMNS):
        numbered = numbered[1:]
    else:
        header = list(COLUMNS)
        warnings.append(f"{path}: no header line; read in the column order of the decision log ({', '.join(COLUMNS)})")
    numbered = [(n, line) for n, line in numbered if [c.strip() for c in line] != header]  # a header written again
    fits = [(n, line) for n, line in numbered if len(line) == len(header)]
    wrong = [n for n, line in numbered if len(line) != len(header)]
    frame = pd.DataFrame([line for _, line in fits], columns=header, dtype=str)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = ""
    log, skipped, first = valid_rows(
        frame,
        integers=list(_LOG_INTEGERS),
        required_numbers=list(_LOG_TIMES),
        optional_numbers=[c for c in COLUMNS if c not in _LOG_INTEGERS + _LOG_TIMES + _LOG_TEXT],
    )
    if skipped or wrong:
        bad_value = None if first is None else (fits[first[0]][0], f"column {first[1]!r} = {first[2]!r}")
        bad_width = None if not wrong else (wrong[0], "a wrong number of fields")
        line, what = min(b for b in (bad_value, bad_width) if b is not None)
        warnings.append(
            f"{path}: skipped {skipped + len(wrong)} of {len(numbered)} rows with a bad value or a wrong "
            f"number of fields (the first: line {line}, {what})"
        )
    for column in _LOG_TEXT:  # empty text is missing, as pandas reads it
        log[column] = log[column].where(log[column].str.strip() != "", np.nan)
    return log[list(COLUMNS)]


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
