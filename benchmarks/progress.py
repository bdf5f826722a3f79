"""Progress of a grid of runs: a remaining-time estimate that means something, and library
warnings kept out of the progress bar.

A grid mixes runs that cost 2 s (RandomSearch, ASHA) with runs that cost a minute (DyHPO,
DeepPowerLaw): counted in runs, the bar's rate swings with whichever finished last. Here each
run weighs its expected wall seconds, ``RUN_OVERHEAD_SECONDS + budget x seconds per epoch of its
method``, the bar's total is the sum, a finished run advances it by its own weight, and the rate
is averaged over the whole grid (no smoothing), so the estimate follows the work left. Seconds
per epoch are learned from the finished runs in the results folder (``wall_seconds`` /
``n_epochs_simulated`` of their ``run.json``, median per method), with a prior for methods that
have none yet. Weights stay fixed during a grid: the bar's total never jumps.

Library warnings (pandas and fastparquet deprecations when a table is loaded, torch ...) go to
``warnings.log`` in the results folder, in the grid's process and in its spawned workers; the
workers' logging goes there too (in-process runs, ``n_jobs=1``, keep the caller's logging, which
the runner already quiets to Syne Tune's warnings).
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

WARNINGS_LOG = "warnings.log"

RUN_OVERHEAD_SECONDS = 2.0
"""Per run, outside the Tuner: process start-up, loading the table."""

# Wall seconds per simulated epoch of 1000-epoch runs on 2 cores (benchmarks/RESULTS.md,
# "wall s/run" / 1000), first matching name prefix wins. Model-based methods are 5-30x dearer.
PRIOR_SECONDS_PER_EPOCH: tuple[tuple[str, float], ...] = (
    ("DyHPO", 0.06),
    ("DeepPowerLaw", 0.06),
    ("BOHB", 0.015),
    ("ASHA", 0.003),
    ("RandomSearch", 0.002),
)
UNKNOWN_SECONDS_PER_EPOCH = 0.03
"""Prior for a method matching no prefix: assume it is model-based."""


def prior_seconds_per_epoch(method: str) -> float:
    """
    :param method: Method name (variants such as "DyHPO-no-completion" match their base name)
    :return: Prior wall seconds per simulated epoch
    """
    for prefix, seconds in PRIOR_SECONDS_PER_EPOCH:
        if method.startswith(prefix):
            return seconds
    return UNKNOWN_SECONDS_PER_EPOCH


def learned_seconds_per_epoch(
    results_dir: str | Path, max_runs_per_method: int = 50
) -> dict[str, float]:
    """
    :param results_dir: Root folder of results (runs in ``<bench>/<task>/<method>/<run>/``)
    :param max_runs_per_method: Read at most this many ``run.json`` per method (the newest)
    :return: Median of ``wall_seconds / n_epochs_simulated`` per method with finished runs
    """
    from benchmarks.runner import RUN_FILE

    by_method: dict[str, list[Path]] = defaultdict(list)
    for path in Path(results_dir).glob(f"*/*/*/*/{RUN_FILE}"):
        by_method[path.parent.parent.name].append(path)
    out = {}
    for method, paths in by_method.items():
        paths = sorted(paths, key=lambda p: p.stat().st_mtime)[-max_runs_per_method:]
        rates = []
        for path in paths:
            try:
                s = json.loads(path.read_text())
                rates.append(s["wall_seconds"] / max(int(s["n_epochs_simulated"]), 1))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a run.json of another layout: no evidence
        if rates:
            out[method] = float(np.median(rates))
    return out


def expected_run_seconds(
    spec: Any, seconds_per_epoch: dict[str, float] | None = None
) -> float:
    """
    :param spec: :class:`~benchmarks.runner.RunSpec`
    :param seconds_per_epoch: Learned rates (:func:`learned_seconds_per_epoch`); methods not
        in it get :func:`prior_seconds_per_epoch`
    :return: Expected wall seconds of the run
    """
    rate = (seconds_per_epoch or {}).get(spec.method)
    if rate is None:
        rate = prior_seconds_per_epoch(spec.method)
    return RUN_OVERHEAD_SECONDS + spec.budget_epochs * rate


class GridProgress:
    """
    tqdm bar over a grid, in expected seconds (see the module docstring), showing runs done.

    :param specs: Runs still to do
    :param results_dir: Results folder the rates are learned from
    :param disable: No bar (weights are still computed)
    """

    BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"

    def __init__(self, specs: Sequence[Any], results_dir: str | Path, disable: bool = False):
        from tqdm import tqdm

        rates = learned_seconds_per_epoch(results_dir)
        self.weights = [expected_run_seconds(s, rates) for s in specs]
        self._weight = dict(zip(specs, self.weights))
        self.num_runs = len(specs)
        self.num_done = 0
        self.expected_seconds_done = 0.0
        self.bar = tqdm(
            total=sum(self.weights), desc=self._runs_text(), disable=disable, smoothing=0,
            bar_format=self.BAR_FORMAT,
        )

    def _runs_text(self) -> str:
        return f"runs {self.num_done}/{self.num_runs}"

    def finished(self, spec: Any) -> None:
        """Advances the bar by the finished run's weight."""
        self.num_done += 1
        self.expected_seconds_done += self._weight[spec]
        self.bar.set_description_str(self._runs_text(), refresh=False)
        self.bar.update(self._weight[spec])

    def close(self) -> None:
        self.bar.close()


def _file_handler(log_file: str | Path) -> logging.Handler:
    handler = logging.FileHandler(log_file, delay=True)
    handler.setFormatter(
        logging.Formatter("%(asctime)s pid %(process)d %(name)s %(levelname)s: %(message)s")
    )
    return handler


def _terminal_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The plain stream handlers of ``logger``: the one ``logging.basicConfig()`` adds on the
    terminal (Syne Tune calls it on import); file and capture handlers are subclasses."""
    return [h for h in logger.handlers if type(h) is logging.StreamHandler]


def route_worker_output(log_file: str) -> None:
    """
    Initializer of spawned grid workers: their warnings and log records go to ``log_file``
    instead of the terminal the bar is drawn on (the root logger's plain stream handlers are
    removed). For the worker's whole life.

    :param log_file: Path of the log
    """
    handler = _file_handler(log_file)
    logging.captureWarnings(True)
    warnings_logger = logging.getLogger("py.warnings")
    warnings_logger.addHandler(handler)
    warnings_logger.propagate = False
    root = logging.getLogger()
    for terminal in _terminal_handlers(root):
        root.removeHandler(terminal)
    root.addHandler(handler)


@contextlib.contextmanager
def warnings_to_log(log_file: str | Path) -> Iterator[None]:
    """
    In this process, while the context lasts, warnings and the log records that would reach
    the terminal (through the root logger's plain stream handlers) go to ``log_file`` instead.

    :param log_file: Path of the log
    """
    handler = _file_handler(log_file)
    warnings_logger = logging.getLogger("py.warnings")
    propagate = warnings_logger.propagate
    # someone captured warnings before us: leave that on when we are done
    captured = warnings.showwarning is getattr(logging, "_showwarning", None)
    logging.captureWarnings(True)
    warnings_logger.addHandler(handler)
    warnings_logger.propagate = False
    root = logging.getLogger()
    terminal = _terminal_handlers(root)
    for h in terminal:
        root.removeHandler(h)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for h in terminal:
            root.addHandler(h)
        warnings_logger.removeHandler(handler)
        warnings_logger.propagate = propagate
        if not captured:
            logging.captureWarnings(False)
        handler.close()
