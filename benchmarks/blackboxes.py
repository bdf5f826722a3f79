"""Loading tabular learning-curve benchmarks and describing them.

A benchmark is either a blackbox of Syne Tune's repository (``lcbench``,
``fcnet``, ``nasbench201``, ``pd1``), read offline from its local cache, or
any folder in Syne Tune's serialized tabular layout (written by
:func:`syne_tune.blackbox_repository.blackbox_tabular.serialize`).

Repository blackboxes are read from Syne Tune's folder (``~/.blackbox-repository``), or from
the folder named by the environment variable :data:`REPOSITORY_ENV` (tests, synthetic data;
``run_benchmarks.py --repository``). An environment variable rather than a module attribute,
so that the grid's worker processes (spawned, fresh interpreters) read the same folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular


class BlackboxNotAvailableError(RuntimeError):
    """Raised when a repository blackbox is not present locally (we never download)."""


@dataclass(frozen=True)
class BenchmarkDefinition:
    """
    Everything the runner needs to know about one task of a tabular benchmark.

    :param name: Benchmark family (repository name or folder name), e.g. "lcbench"
    :param task: Task (dataset) name inside the family
    :param metric: Objective optimised, a column of the blackbox
    :param do_minimize: Whether ``metric`` is minimised
    :param time_attr: Fidelity name (e.g. "epoch"), reported in every result
    :param max_t: Maximum fidelity value
    :param elapsed_time_attr: Objective holding cumulative training time
    :param source: Repository name or folder path the data came from
    :param nan_padded: Whether NaN at the end of a curve means "this configuration's run
        ended here" (PD1 pads each curve with NaN to the task's longest) rather than
        divergence (TaskSet, a real training job). The runner then ends a trial at its last
        real step, as if training finished, and never reports the padding
    """

    name: str
    task: str
    metric: str
    do_minimize: bool
    time_attr: str
    max_t: int
    elapsed_time_attr: str
    source: str
    nan_padded: bool = False


# Attribute names of Syne Tune's published blackboxes (from its conversion
# scripts: conversion_scripts/scripts/{lcbench/lcbench.py, fcnet_import.py,
# nasbench201_import.py, pd1_import.py}).
KNOWN_BLACKBOXES: dict[str, dict[str, Any]] = {
    "lcbench": dict(
        metric="val_accuracy", do_minimize=False, time_attr="epoch",
        elapsed_time_attr="time",
    ),
    "fcnet": dict(
        metric="metric_valid_loss", do_minimize=True, time_attr="hp_epoch",
        elapsed_time_attr="metric_elapsed_time",
    ),
    "nasbench201": dict(
        metric="metric_valid_error", do_minimize=True, time_attr="hp_epoch",
        elapsed_time_attr="metric_elapsed_time",
    ),
    "pd1": dict(
        # pd1's fidelity is "global_step" (index of the evaluation along the curve)
        metric="metric_valid_error_rate", do_minimize=True, time_attr="global_step",
        elapsed_time_attr="metric_elapsed_time", nan_padded=True,
    ),
}

_MAXIMISE_HINTS = ("accuracy", "acc", "auc", "f1", "precision", "recall", "score")
_MINIMISE_HINTS = ("loss", "error", "err", "rmse", "mse", "mae", "regret", "perplexity")


def infer_do_minimize(metric: str) -> bool:
    """
    Guesses the direction of a metric from its name.

    :param metric: Metric name
    :return: True for losses/errors, False for accuracies/scores
    :raises ValueError: if the name gives no hint (pass ``do_minimize`` then)
    """
    low = metric.lower()
    # Check minimise hints first: "balanced_error" must not match "acc" rules etc.
    if any(h in low for h in _MINIMISE_HINTS):
        return True
    if any(h in low for h in _MAXIMISE_HINTS):
        return False
    raise ValueError(f"Cannot infer the direction of metric '{metric}': pass do_minimize")


REPOSITORY_ENV = "SYNE_DYHPO_BLACKBOX_REPOSITORY"
"""Environment variable naming a folder to read repository blackboxes from instead of Syne
Tune's ``~/.blackbox-repository`` (same layout: ``<folder>/<name>/metadata.json``)."""


def repository_root() -> Path:
    """
    :return: Folder holding repository blackboxes: ``$SYNE_DYHPO_BLACKBOX_REPOSITORY`` if set,
        else Syne Tune's ``repository_path`` (``~/.blackbox-repository``)
    """
    folder = os.environ.get(REPOSITORY_ENV)
    if folder:
        return Path(folder).expanduser()
    from syne_tune.blackbox_repository.conversion_scripts.utils import repository_path

    return Path(repository_path)


def repository_cache_path(name: str) -> Path:
    """
    :param name: Repository blackbox name
    :return: Folder of that blackbox (``<repository_root()>/<name>``)
    """
    return repository_root() / name


@contextmanager
def _syne_tune_repository(root: Path) -> Iterator[None]:
    """Points Syne Tune's ``load_blackbox`` at ``root`` while it runs. Syne Tune fixes its
    folder at import (``conversion_scripts.utils.repository_path``, imported by name into
    ``repository``, which is where ``load_blackbox`` reads it): both are set, then restored."""
    from syne_tune.blackbox_repository import repository
    from syne_tune.blackbox_repository.conversion_scripts import utils

    saved = repository.repository_path, utils.repository_path
    repository.repository_path = utils.repository_path = Path(root)
    try:
        yield
    finally:
        repository.repository_path, utils.repository_path = saved


def _load_repository_blackbox(name: str) -> dict[str, BlackboxTabular]:
    path = repository_cache_path(name)
    # Checking the cache first (and forcing HF offline mode) guarantees we never
    # hang on a network call in a sandbox without internet.
    if not (path / "metadata.json").exists():
        elsewhere = (
            f" ({REPOSITORY_ENV} points at {path.parent}: unset it to read ~/.blackbox-repository, "
            f"or copy the downloaded folder there)"
            if os.environ.get(REPOSITORY_ENV) else ""
        )
        raise BlackboxNotAvailableError(
            f"Blackbox '{name}' is not in the local cache {path}. Obtain it once "
            f"with internet access (python -c \"from syne_tune.blackbox_repository "
            f"import load_blackbox; load_blackbox('{name}')\"; Syne Tune downloads it "
            f"into ~/.blackbox-repository/{name}){elsewhere}, or pass the path of "
            f"a folder in Syne Tune's serialized layout instead of the name. "
            f"Nothing is downloaded at run time."
        )
    os.environ["HF_HUB_OFFLINE"] = "1"
    from syne_tune.blackbox_repository import load_blackbox

    # offline, huggingface_hub warns on every load that it returns the local folder
    hf_logger = logging.getLogger("huggingface_hub")
    level = hf_logger.level
    hf_logger.setLevel(logging.ERROR)
    try:
        with _syne_tune_repository(path.parent):
            bbs = load_blackbox(name, local_files_only=True)
    except Exception as ex:  # e.g. incomplete cache
        raise BlackboxNotAvailableError(
            f"Could not load blackbox '{name}' offline from {path}: {ex}"
        ) from ex
    finally:
        hf_logger.setLevel(level)
    if not isinstance(bbs, dict):
        bbs = {name: bbs}
    return bbs


def _read_metadata(path: Path) -> dict[str, Any]:
    meta_file = path / "metadata.json"
    if meta_file.exists():
        with open(meta_file) as f:
            return json.load(f)
    return {}


def is_serialized_folder(path: str | Path) -> bool:
    """
    :param path: Any path
    :return: Whether it is a folder in Syne Tune's serialized tabular layout
    """
    p = Path(path)
    return p.is_dir() and (p / "hyperparameters.parquet").exists() and (
        p / "objectives_evaluations.npy"
    ).exists()


def load_benchmark(
    source: str | Path,
    task: str | None = None,
    metric: str | None = None,
    do_minimize: bool | None = None,
    time_attr: str | None = None,
    elapsed_time_attr: str | None = None,
    name: str | None = None,
) -> tuple[BenchmarkDefinition, BlackboxTabular]:
    """
    Loads one task of a benchmark with its definition.

    Attribute names are taken, in this order, from the arguments, from
    ``metadata.json`` of a folder (keys ``metric_default`` as Syne Tune's conversion
    scripts write it, or ``default_metric``; ``time_attr``, ``metric_elapsed_time``), or
    from :data:`KNOWN_BLACKBOXES`.

    :param source: Repository name (e.g. "lcbench") or serialized folder path
    :param task: Task name; may be omitted if the source has a single task
    :param metric: Override of the metric
    :param do_minimize: Override of the direction (else inferred from the name)
    :param time_attr: Override of the fidelity name
    :param elapsed_time_attr: Override of the cumulative time objective
    :param name: Family name used in results (default: repository name or folder name)
    :return: ``(definition, blackbox)``
    """
    bbs, defaults, family, src = _load_all(source)
    if task is None:
        if len(bbs) != 1:
            raise ValueError(f"{source} has several tasks, choose one of {list(bbs)}")
        task = next(iter(bbs))
    if task not in bbs:
        raise KeyError(f"Task '{task}' not in {source}; tasks: {list(bbs)}")
    bb = bbs[task]
    metric = metric or defaults.get("metric") or bb.objectives_names[0]
    if do_minimize is None:
        do_minimize = (
            defaults["do_minimize"]
            if "do_minimize" in defaults and metric == defaults.get("metric")
            else infer_do_minimize(metric)
        )
    time_attr = time_attr or defaults.get("time_attr") or bb.fidelity_name()
    elapsed = elapsed_time_attr or defaults.get("elapsed_time_attr")
    if elapsed is None:
        raise ValueError(f"{source}: no elapsed-time objective known, pass elapsed_time_attr")
    for attr in (metric, elapsed):
        if attr not in bb.objectives_names:
            raise ValueError(f"'{attr}' not among objectives {bb.objectives_names}")
    if time_attr != bb.fidelity_name():
        raise ValueError(f"time_attr '{time_attr}' != fidelity '{bb.fidelity_name()}'")
    definition = BenchmarkDefinition(
        name=name or family,
        task=task,
        metric=metric,
        do_minimize=bool(do_minimize),
        time_attr=time_attr,
        max_t=int(max(bb.fidelity_values)),
        elapsed_time_attr=elapsed,
        source=src,
        nan_padded=bool(defaults.get("nan_padded", False)),
    )
    return definition, bb


_CACHE: dict[str, tuple] = {}


def _load_all(source: str | Path) -> tuple[dict[str, BlackboxTabular], dict, str, str]:
    """Returns (blackboxes by task, default attribute names, family name, source string).

    Results are cached per process: a grid reuses the same folder many times. A repository
    name is cached under its folder, which :data:`REPOSITORY_ENV` may change.
    """
    key = str(source)
    cache_key = str(repository_cache_path(key)) if key in KNOWN_BLACKBOXES else key
    if cache_key in _CACHE:
        return _CACHE[cache_key]
    if is_serialized_folder(source):
        from syne_tune.blackbox_repository.blackbox_tabular import deserialize

        path = Path(source).resolve()
        meta = _read_metadata(path)
        defaults = {
            k_out: meta[k_in]
            for k_in, k_out in [
                ("metric_default", "metric"),  # the key Syne Tune's scripts write
                ("default_metric", "metric"),
                ("time_attr", "time_attr"),
                ("metric_elapsed_time", "elapsed_time_attr"),
            ]
            if k_in in meta
        }
        if "do_minimize" in meta:
            defaults["do_minimize"] = bool(meta["do_minimize"])
        out = (deserialize(str(path)), defaults, path.name, str(path))
    elif key in KNOWN_BLACKBOXES:
        out = (_load_repository_blackbox(key), dict(KNOWN_BLACKBOXES[key]), key, key)
    else:
        raise BlackboxNotAvailableError(
            f"'{source}' is neither a serialized blackbox folder nor one of the "
            f"known repository names {sorted(KNOWN_BLACKBOXES)}"
        )
    _CACHE[cache_key] = out
    return out


def list_tasks(source: str | Path) -> list[str]:
    """
    :param source: Repository name or serialized folder
    :return: Task names it contains
    """
    return list(_load_all(source)[0].keys())


def find_serialized_folders(root: str | Path) -> list[tuple[str, str]]:
    """
    Lists all ``(folder, task)`` pairs of serialized blackboxes under ``root``
    (the root itself included), reading task names from ``metadata.json`` so
    that nothing large is loaded.

    :param root: Folder to search recursively
    :return: Sorted list of ``(folder path, task name)``
    """
    pairs = []
    for meta_file in sorted(Path(root).rglob("metadata.json")):
        folder = meta_file.parent
        if not is_serialized_folder(folder):
            continue
        for task in _read_metadata(folder).get("task_names", []):
            pairs.append((str(folder), task))
    return pairs
