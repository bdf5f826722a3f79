"""Running schedulers on tabular benchmarks with Syne Tune's simulator.

One run = (method, benchmark source, task, seed, epoch budget, n_workers, protocol, start
delay). Each finished run leaves two files in its folder under the results dir:
``results.csv.gz`` (the SimulatorCallback dataframe, one row per epoch the
scheduler saw) and ``run.json`` (written last; its presence marks the run as
finished, so grids are resumable). A run of the wall-clock protocol
(:mod:`benchmarks.wallclock`) lives under ``wallclock-d{delay}/`` of the results dir and
also leaves ``jobs.csv``, its job starts, resumes, pauses and stops.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from syne_tune.backend.trial_status import Trial
from syne_tune.optimizer.scheduler import TrialScheduler, TrialSuggestion
from syne_tune.stopping_criterion import StoppingCriterion
from syne_tune.tuning_status import TuningStatus

from benchmarks.blackboxes import BenchmarkDefinition, load_benchmark
from benchmarks.metrics import epochs_until, incumbent_trajectory, regret_at_fractions, regret_at_time_fractions
from benchmarks.provenance import environment
from benchmarks.table import TableRestricted, metric_bounds, table_configs
from benchmarks.wallclock import (
    EPOCHS,
    JOBS_FILE,
    PROTOCOLS,
    STOP_SECONDS,
    WALLCLOCK,
    EventDrivenSimulatorCallback,
    JobLog,
    epoch_times,
    job_starts_until,
    simulator_config,
)
from syne_dyhpo.core.candidates import CandidateOptions
from syne_dyhpo.core.job_costs import JobCosts
from syne_dyhpo.core.options import FreezeThawOptions

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.csv.gz"
RUN_FILE = "run.json"

MethodFactory = Callable[
    [BenchmarkDefinition, dict[str, Any], list[dict[str, Any]], int], TrialScheduler
]
"""``(definition, config_space, table_configs, seed) -> scheduler``"""

#: Config key through which our schedulers tell a simulated job where its segment ends (their
#: ``max_resource_attr``; the simulator backend is created with it). Without it, a job with
#: epochs much shorter than the Tuner's simulated sleep time reports several epochs per Tuner
#: loop: the scheduler pauses it after the first, and the others are simulated, counted in the
#: epoch budget and dropped unseen (measured: up to 60 % of a run's budget on mfeat-factors).
SEGMENT_END_ATTR = "freeze_thaw_segment_end"


# Random draws (RandomSearch, ASHA's searcher) become uniform draws over the table's unused rows:
# random search over the table, as our schedulers get it from ``CandidateOptions(configs=...)``. BOHB's
# proposals come from its model: they are kept, mapped to the nearest unused row (TableRestricted).
def _random_search(d, cs, configs, seed, **options: Any) -> TrialScheduler:
    """Syne Tune's RandomSearch restricted to the table."""
    from syne_tune.optimizer.baselines import RandomSearch

    rs = RandomSearch(cs, metrics=[d.metric], do_minimize=d.do_minimize, random_seed=seed, **options)
    return TableRestricted(rs, configs, sampling="uniform")


def _multi_fidelity(class_name: str, sampling: str) -> Callable[..., TrialScheduler]:
    """Syne Tune's ASHA or BOHB (same constructor arguments), restricted to the table."""

    def factory(d, cs, configs, seed, **options: Any) -> TrialScheduler:
        from syne_tune.optimizer import baselines

        sched = getattr(baselines, class_name)(
            cs, metric=d.metric, time_attr=d.time_attr, max_t=d.max_t,
            do_minimize=d.do_minimize, random_seed=seed, **options,
        )
        return TableRestricted(sched, configs, sampling=sampling)

    return factory


def _ours(class_name: str) -> Callable[..., TrialScheduler]:
    """DyHPO or DeepPowerLaw with the table as the candidates' ``configs`` (in the ``options``
    given, else the default ones) and exact segments (:data:`SEGMENT_END_ATTR`); ``arguments``:
    further constructor arguments."""

    def factory(d, cs, configs, seed, **arguments: Any) -> TrialScheduler:
        from dataclasses import replace

        import syne_dyhpo

        options = arguments.pop("options", syne_dyhpo.FreezeThawOptions())
        options = replace(options, candidates=replace(options.candidates, configs=configs))
        return getattr(syne_dyhpo, class_name)(
            cs, metric=d.metric, do_minimize=d.do_minimize, time_attr=d.time_attr,
            max_t=d.max_t, random_seed=seed, max_resource_attr=SEGMENT_END_ATTR, options=options, **arguments,
        )

    return factory


#: The schedulers a method starts from: ``(definition, config_space, table_configs, seed,
#: **overrides) -> scheduler``, each with its constructor's defaults
PRESETS: dict[str, Callable[..., TrialScheduler]] = {
    "RandomSearch": _random_search,
    "ASHA": _multi_fidelity("ASHA", "uniform"),
    "BOHB": _multi_fidelity("BOHB", "nearest"),
    "DyHPO": _ours("DyHPO"),
    "DeepPowerLaw": _ours("DeepPowerLaw"),
}

#: Our methods without the incumbent completion (on by default, not in the papers), every other
#: default kept
NO_COMPLETION: dict[str, Any] = {"completion": None}

#: Our methods without the depth gate (on by default, not in the papers), every other default kept
NO_DEPTH_GATE: dict[str, Any] = {"depth_gate": None}

#: Our methods deciding as the papers do: neither the completion nor the depth gate
PAPERS: dict[str, Any] = {"completion": None, "depth_gate": None}

#: Our methods paying for job starts (syne_dyhpo.core.job_costs): a winning trial keeps running,
#: the acquisition is weighed by each candidate's expected seconds, costs learned from the
#: results' timestamps; every other default kept
JOB_COSTS: dict[str, Any] = {"options": FreezeThawOptions(job_costs=JobCosts())}

#: The open lead of issue 50 (docs/deviations.md, "The open lead"): with ``JOB_COSTS``, ten
#: random configurations before the surrogate, divided by the workers and by a new trial's start
#: in epochs when it costs more than an epoch
JOB_COSTS_R10S: dict[str, Any] = {
    "options": FreezeThawOptions(
        candidates=CandidateOptions(
            num_initial_random=10, divide_initial_random=True, divide_initial_random_by_start=True
        ),
        job_costs=JobCosts(),
    )
}

#: Every method the lab runs: name -> (preset, constructor arguments overriding its defaults).
#: A variant of ours sets one deviation from the papers to the papers' setting, or all of them
#: (``-papers``)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "RandomSearch": ("RandomSearch", {}),
    "ASHA": ("ASHA", {}),
    "BOHB": ("BOHB", {}),
    "DyHPO": ("DyHPO", {}),
    "DeepPowerLaw": ("DeepPowerLaw", {}),
    "DyHPO-no-completion": ("DyHPO", NO_COMPLETION),
    "DeepPowerLaw-no-completion": ("DeepPowerLaw", NO_COMPLETION),
    "DyHPO-no-depth-gate": ("DyHPO", NO_DEPTH_GATE),
    "DeepPowerLaw-no-depth-gate": ("DeepPowerLaw", NO_DEPTH_GATE),
    "DyHPO-papers": ("DyHPO", PAPERS),
    "DeepPowerLaw-papers": ("DeepPowerLaw", PAPERS),
    "DyHPO-costs": ("DyHPO", JOB_COSTS),
    "DeepPowerLaw-costs": ("DeepPowerLaw", JOB_COSTS),
    "DyHPO-costs-r10s": ("DyHPO", JOB_COSTS_R10S),
    "DeepPowerLaw-costs-r10s": ("DeepPowerLaw", JOB_COSTS_R10S),
}


def method_factory(preset: str, overrides: dict[str, Any] | None = None) -> MethodFactory:
    """
    :param preset: Key of :data:`PRESETS`
    :param overrides: Constructor arguments replacing the preset's defaults
    :return: See :data:`MethodFactory`
    """
    if preset not in PRESETS:
        raise KeyError(f"preset={preset!r}: not one of {sorted(PRESETS)}")
    make, overrides = PRESETS[preset], dict(overrides or {})

    def factory(d, cs, configs, seed):
        return make(d, cs, configs, seed, **overrides)

    return factory


METHODS: dict[str, MethodFactory] = {
    name: method_factory(preset, overrides) for name, (preset, overrides) in VARIANTS.items()
}
"""Method name (as in results and on the command line) -> :data:`MethodFactory`"""


class TimedScheduler(TrialScheduler):
    """
    Proxy measuring the time spent inside a scheduler's calls: benchmarks simulate training
    time only (see :func:`run_one`), so the scheduler's compute is reported separately.

    :param scheduler: Scheduler to wrap
    """

    def __init__(self, scheduler: TrialScheduler):
        super().__init__(random_seed=getattr(scheduler, "random_seed", None))
        self.scheduler = scheduler
        self.wall_seconds = 0.0
        self.cpu_seconds = 0.0
        self.num_calls = 0

    def _timed(self, fn, *args):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*args)
        finally:
            self.wall_seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0
            self.num_calls += 1

    def suggest(self) -> TrialSuggestion | None:
        return self._timed(self.scheduler.suggest)

    def on_trial_add(self, trial: Trial):
        return self._timed(self.scheduler.on_trial_add, trial)

    def on_trial_error(self, trial: Trial):
        return self._timed(self.scheduler.on_trial_error, trial)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        return self._timed(self.scheduler.on_trial_result, trial, result)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]):
        return self._timed(self.scheduler.on_trial_complete, trial, result)

    def on_trial_remove(self, trial: Trial):
        return self._timed(self.scheduler.on_trial_remove, trial)

    def metric_names(self) -> list[str]:
        return self.scheduler.metric_names()

    def metric_mode(self) -> str | list[str]:
        return self.scheduler.metric_mode()

    def metadata(self) -> dict[str, Any]:
        try:
            meta = self.scheduler.metadata()
            json.dumps(meta)  # the Tuner JSON-dumps it; never let that crash a run
            return meta
        except Exception:  # noqa: BLE001 - whatever the scheduler's metadata does, the run goes on
            return {"scheduler": type(self.scheduler).__name__}


@dataclass
class SimulatedEpochsBudget(StoppingCriterion):
    """
    Stops once at least ``max_epochs`` results (= epochs, one result per
    fidelity step) have been reported by the backend. Counted on
    ``overall_metric_statistics``, which also counts results dropped after a
    PAUSE/STOP in the same batch: those epochs were simulated too. Checked once
    per Tuner loop, so runs can overshoot by a few epochs with several
    workers; metrics cut trajectories at the budget.
    Subclasses StoppingCriterion so that SimulatorCallback accepts it silently.

    :param max_epochs: Epoch budget
    """

    max_epochs: int = 0

    def __call__(self, status: TuningStatus) -> bool:
        return status.overall_metric_statistics.count >= self.max_epochs


@dataclass(frozen=True)
class RunSpec:
    """
    One benchmark run.

    :param method: Registered method name
    :param source: Repository name or serialized folder
    :param task: Task name
    :param seed: Seed (scheduler, numpy, and table seed ``seed % num_seeds``)
    :param budget_epochs: Epoch budget; of the wall-clock protocol: the budget is this many
        times the task's mean epoch time, divided by ``n_workers`` (:mod:`benchmarks.wallclock`)
    :param n_workers: Number of simulated workers
    :param protocol: ``"epochs"`` (the budget counts epochs) or ``"wallclock"`` (the budget is
        simulated time and every job start costs ``start_delay``)
    :param start_delay: Of the wall-clock protocol: the delay of every job start and resume,
        in multiples of the task's median epoch time; 0 for the epoch protocol
    """

    method: str
    source: str
    task: str
    seed: int
    budget_epochs: int
    n_workers: int = 1
    protocol: str = EPOCHS
    start_delay: float = 0.0

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol={self.protocol!r}: not one of {list(PROTOCOLS)}")
        if not np.isfinite(self.start_delay) or self.start_delay < 0:
            raise ValueError(f"start_delay={self.start_delay}: must be finite and >= 0")
        if self.protocol == EPOCHS and self.start_delay != 0:
            raise ValueError(f"start_delay={self.start_delay}: the epoch protocol has free job starts (0)")

    def key(self, benchmark: str) -> str:
        """Relative folder of this run inside a results dir (a wall-clock run's under
        ``wallclock-d{start_delay}/``)."""
        safe_task = self.task.replace("/", "_")
        key = (
            f"{benchmark}/{safe_task}/{self.method}/"
            f"seed{self.seed}-budget{self.budget_epochs}-w{self.n_workers}"
        )
        return f"{WALLCLOCK}-d{self.start_delay:g}/{key}" if self.protocol == WALLCLOCK else key


def run_dir(spec: RunSpec, results_dir: str | Path) -> Path:
    """
    :return: Folder of this run's results (benchmark name from the source)
    """
    from benchmarks.blackboxes import KNOWN_BLACKBOXES

    bench = spec.source if spec.source in KNOWN_BLACKBOXES else Path(spec.source).resolve().name
    return Path(results_dir) / spec.key(bench)


def is_done(spec: RunSpec, results_dir: str | Path) -> bool:
    """Whether this run's results exist already."""
    return (run_dir(spec, results_dir) / RUN_FILE).exists()


def simulator_backend_class(charge_scheduler_time: bool = False, padded_metric: str | None = None) -> type:
    """
    Syne Tune's simulator adds the real time spent outside the backend (mostly the
    scheduler's decisions) to simulated time. That makes runs depend on machine load (same
    seed, different trajectories) and charges model-based methods for their compute twice: in
    simulated time and, once results pile up while the scheduler thinks, in epochs that finish
    after a PAUSE and are dropped. Benchmarks therefore simulate training time only and report
    the scheduler's compute separately (``scheduler_seconds`` in ``run.json``).

    :param charge_scheduler_time: True returns Syne Tune's ``UserBlackboxBackend`` unchanged
    :param padded_metric: For a NaN-padded table (PD1), its metric: trials then end after their
        last real step instead of reporting the padding (see :mod:`benchmarks.padded`)
    :return: A ``UserBlackboxBackend`` class, to be constructed with its usual arguments
    """
    if padded_metric is not None:
        from benchmarks.padded import ends_at_last_real_step

        return ends_at_last_real_step(simulator_backend_class(charge_scheduler_time), padded_metric)
    from syne_tune.blackbox_repository.simulated_tabular_backend import (
        UserBlackboxBackend,
    )

    if charge_scheduler_time:
        return UserBlackboxBackend

    class TrainingTimeOnlyBackend(UserBlackboxBackend):
        def _advance_by_outside_time(self):
            pass  # simulated time advances by training time and tuner sleeps only

    if not callable(getattr(UserBlackboxBackend, "_advance_by_outside_time", None)):
        raise RuntimeError(
            "This Syne Tune version has no SimulatorBackend._advance_by_outside_time; "
            "pass charge_scheduler_time=True or update benchmarks.runner"
        )
    return TrainingTimeOnlyBackend


def _default_tuner_sleep_time(bb, definition: BenchmarkDefinition) -> float:
    # A tenth of the median epoch duration: the scheduler then sees each
    # epoch's result before the next epoch ends (1-epoch decisions stay exact)
    # without spending thousands of idle Tuner loops per simulated epoch.
    j = bb.objectives_names.index(definition.elapsed_time_attr)
    t = bb.objectives_evaluations[..., j].astype(np.float64)
    dt = np.diff(t, axis=-1)
    dt = dt[np.isfinite(dt) & (dt > 0)]
    return float(0.1 * np.median(dt)) if dt.size else 0.1


def run_one(
    spec: RunSpec,
    results_dir: str | Path,
    tuner_sleep_time: float | None = None,
    overwrite: bool = False,
    worst_quantile: float = 0.9,
    charge_scheduler_time: bool = False,
) -> dict[str, Any]:
    """
    Runs one benchmark run on the simulator and stores its results.

    :param spec: The run
    :param results_dir: Root folder of all results
    :param tuner_sleep_time: Simulated seconds per Tuner loop; default a tenth
        of the table's median epoch duration (the wall-clock protocol sleeps until the
        simulator's next event, this step only when none is pending)
    :param overwrite: Redo the run even if its results exist
    :param worst_quantile: See :func:`~benchmarks.table.metric_bounds`
    :param charge_scheduler_time: Add the scheduler's real compute time to simulated time
        (Syne Tune's default). False (default) simulates training time only, which makes a run
        reproducible from its seed; the compute is reported as ``scheduler_seconds``
    :return: The run's summary (content of ``run.json``)
    """
    out = run_dir(spec, results_dir)
    if not overwrite and (out / RUN_FILE).exists():
        with open(out / RUN_FILE) as f:
            return json.load(f)
    _quiet_logging()
    from syne_tune import Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback

    definition, bb = load_benchmark(spec.source, task=spec.task)
    if spec.method not in METHODS:
        raise KeyError(f"Unknown method {spec.method}; known: {sorted(METHODS)}")
    np.random.seed(spec.seed)
    random.seed(spec.seed)
    configs = table_configs(bb)
    if definition.nan_padded:
        from benchmarks.padded import rows_with_real_steps

        # a row whose curve is all padding (a run never evaluated) has nothing to simulate
        rows = rows_with_real_steps(bb, definition.metric, definition.elapsed_time_attr, spec.seed % bb.num_seeds)
        configs = [configs[i] for i in rows]
    scheduler = TimedScheduler(
        METHODS[spec.method](definition, bb.configuration_space, configs, spec.seed)
    )
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(spec.seed)
    if tuner_sleep_time is None:
        tuner_sleep_time = _default_tuner_sleep_time(bb, definition)
    wallclock = spec.protocol == WALLCLOCK
    protocol_summary: dict[str, Any] = {}
    backend_kwargs: dict[str, Any] = {}
    if wallclock:
        times = epoch_times(bb, definition.elapsed_time_attr)
        budget_seconds = spec.budget_epochs * times.mean / spec.n_workers
        delay_seconds = spec.start_delay * times.median
        backend_kwargs["simulator_config"] = simulator_config(delay_seconds)
        stop_criterion = StoppingCriterion(max_wallclock_time=budget_seconds)  # simulated time
        callback, job_log = EventDrivenSimulatorCallback(), JobLog()
        callbacks = [callback, job_log]
        protocol_summary = {
            "epoch_time_median": times.median, "epoch_time_mean": times.mean,
            "budget_seconds": budget_seconds, "start_delay_seconds": delay_seconds,
        }
    else:
        stop_criterion = SimulatedEpochsBudget(max_epochs=spec.budget_epochs)
        callback = SimulatorCallback()
        callbacks = [callback]
    backend = simulator_backend_class(
        charge_scheduler_time, padded_metric=definition.metric if definition.nan_padded else None
    )(
        blackbox=bb,
        elapsed_time_attr=definition.elapsed_time_attr,
        tuner_sleep_time=tuner_sleep_time,
        seed=spec.seed % bb.num_seeds,
        max_resource_attr=SEGMENT_END_ATTR,  # used by jobs whose config has it (ours)
        **backend_kwargs,
    )
    out.mkdir(parents=True, exist_ok=True)
    st_root = Path(tempfile.mkdtemp(prefix="st-", dir=out))
    os.environ["SYNETUNE_FOLDER"] = str(st_root)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=stop_criterion,
        n_workers=spec.n_workers,
        sleep_time=0,
        callbacks=callbacks,
        tuner_name=f"bench-{uuid.uuid4().hex[:8]}",
        results_update_interval=1e9,
        print_update_interval=1e9,
        save_tuner=False,
        suffix_tuner_name=False,
        metadata={"method": spec.method, "task": spec.task, "seed": spec.seed},
        output_logger=_quiet_tuner_logger(),
    )
    t0 = time.perf_counter()
    # The Tuner prints a trial table at the end (plain print): swallow it
    with contextlib.redirect_stdout(io.StringIO()):
        tuner.run()
    wall = time.perf_counter() - t0
    n_simulated = int(tuner.tuning_status.overall_metric_statistics.count)
    for name in ("decision_log.csv", "syne_dyhpo_run.json"):  # a freeze-thaw scheduler's decision log
        if (tuner.tuner_path / name).exists():
            shutil.copy(tuner.tuner_path / name, out / name)
    shutil.rmtree(st_root, ignore_errors=True)  # Syne Tune's own output folders

    df = callback.dataframe()
    df.to_csv(out / RESULTS_FILE, index=False)
    bounds = metric_bounds(
        bb, definition.metric, definition.do_minimize, worst_quantile, padded=definition.nan_padded
    )
    traj = incumbent_trajectory(df, definition.metric, definition.do_minimize)
    if wallclock:
        regrets = regret_at_time_fractions(traj, budget_seconds, bounds.best_any, bounds.worst)
        jobs = job_log.frame()
        jobs.to_csv(out / JOBS_FILE, index=False)
        in_budget = jobs[jobs["time"] <= budget_seconds]
        epochs = int(epochs_until(traj, [budget_seconds])[0])
        starts = int(job_starts_until(jobs, [budget_seconds])[0])
        protocol_summary.update({
            "epochs_in_budget": epochs,
            "job_starts": starts,
            "starts_per_epoch": starts / epochs if epochs else None,
            "pauses_and_stops": int(in_budget["kind"].isin(["pause", "stop"]).sum()),
            "stop_seconds": STOP_SECONDS,
        })
    else:
        regrets = regret_at_fractions(traj, spec.budget_epochs, bounds.best_any, bounds.worst)
    summary = {
        **asdict(spec),
        "benchmark": definition.name,
        "definition": asdict(definition),
        "bounds": asdict(bounds),
        "tuner_sleep_time": tuner_sleep_time,
        "charge_scheduler_time": charge_scheduler_time,
        "scheduler_seconds": scheduler.wall_seconds,
        "scheduler_cpu_seconds": scheduler.cpu_seconds,
        "scheduler_calls": scheduler.num_calls,
        "wall_seconds": wall,
        "n_epochs_simulated": n_simulated,
        "n_results": len(df),
        "n_trials": int(df["trial_id"].nunique()) if len(df) else 0,
        "simulated_time": float(df["st_tuner_time"].max()) if len(df) else 0.0,
        "final_incumbent": float(traj["incumbent"].iloc[-1]) if len(traj) else None,
        "regret": {str(k): v for k, v in regrets.items()},
        **protocol_summary,
        "scheduler_metadata": scheduler.metadata(),
        **environment(),
    }
    tmp = out / (RUN_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1, default=float)
    tmp.replace(out / RUN_FILE)  # atomic: run.json exists only for finished runs
    return summary


def _quiet_tuner_logger():
    from syne_tune.tuner_logger import TunerLogger

    class QuietTunerLogger(TunerLogger):
        """Drops the Tuner's banner/status prints (thousands of runs), keeps errors."""

        def __getattribute__(self, name: str):
            if name.startswith("print_") and name not in ("print_error", "print_warning"):
                return lambda *args, **kwargs: None
            return super().__getattribute__(name)

    return QuietTunerLogger(use_colors=False, use_emojis=False)


def _quiet_logging() -> None:
    logging.getLogger("syne_tune").setLevel(logging.WARNING)
    # ASHA/BOHB always pass points_to_evaluate=None and get a harmless warning per run
    logging.getLogger(
        "syne_tune.optimizer.schedulers.searchers.last_value_multi_fidelity_searcher"
    ).setLevel(logging.ERROR)


def _run_one_safe(spec: RunSpec, results_dir: str, kwargs: dict) -> tuple[RunSpec, Any]:
    try:
        return spec, run_one(spec, results_dir, **kwargs)
    except Exception as ex:  # noqa: BLE001 - report, keep the grid going
        import traceback

        return spec, f"{type(ex).__name__}: {ex}\n{traceback.format_exc()}"


def make_grid(
    sources_tasks: Sequence[tuple[str, str]],
    methods: Sequence[str],
    seeds: Sequence[int],
    budget_epochs: int | dict[tuple[str, str], int],
    n_workers: int = 1,
    protocol: str = EPOCHS,
    start_delays: Sequence[float] = (0.0,),
) -> list[RunSpec]:
    """
    :param sources_tasks: ``(source, task)`` pairs
    :param methods: Method names
    :param seeds: Seeds
    :param budget_epochs: One budget, or a budget per ``(source, task)``
    :param n_workers: Simulated workers
    :param protocol: See :class:`RunSpec`
    :param start_delays: See :class:`RunSpec`; one run each
    :return: All runs, the cross product
    """
    specs = []
    for delay in start_delays:
        for source, task in sources_tasks:
            b = budget_epochs if isinstance(budget_epochs, int) else budget_epochs[(source, task)]
            for method in methods:
                for seed in seeds:
                    specs.append(RunSpec(method, str(source), task, int(seed), int(b), n_workers,
                                         protocol, float(delay)))
    return specs


def run_grid(
    specs: Sequence[RunSpec],
    results_dir: str | Path,
    n_jobs: int | None = None,
    progress: bool = True,
    **run_kwargs,
) -> tuple[list[dict[str, Any]], list[tuple[RunSpec, str]]]:
    """
    Runs all specs not finished yet in parallel processes. The progress bar counts expected
    seconds, not runs (the dearest runs start first), and library warnings and log records go
    to ``warnings.log`` in ``results_dir`` (see
    :mod:`benchmarks.progress`).

    :param specs: Runs
    :param results_dir: Root folder of results
    :param n_jobs: Processes (default: number of cores); 1 runs in-process
    :param progress: Show a tqdm progress bar
    :param run_kwargs: Passed to :func:`run_one`
    :return: ``(summaries of finished runs, [(spec, error message)])``
    """
    from benchmarks.progress import WARNINGS_LOG, GridProgress, route_worker_output, warnings_to_log

    results_dir = str(results_dir)
    todo = [s for s in specs if not is_done(s, results_dir)]
    done = [run_one(s, results_dir) for s in specs if is_done(s, results_dir)]
    errors = []
    n_jobs = n_jobs or os.cpu_count() or 1
    Path(results_dir).mkdir(parents=True, exist_ok=True)
    log_file = Path(results_dir) / WARNINGS_LOG
    log_size = log_file.stat().st_size if log_file.exists() else 0
    bar = GridProgress(todo, results_dir, disable=not progress)
    # the dearest runs first: the grid ends on short runs, with every process busy until then
    todo = [s for _, s in sorted(zip(bar.weights, todo), key=lambda ws: -ws[0])]

    def collect(spec: RunSpec, res: Any) -> None:
        (errors.append((spec, res)) if isinstance(res, str) else done.append(res))
        bar.finished(spec)

    with warnings_to_log(log_file):
        if n_jobs == 1 or len(todo) <= 1:
            for s in todo:
                collect(*_run_one_safe(s, results_dir, run_kwargs))
        else:
            # spawn: a fresh interpreter per worker, safe with torch threads; the initializer
            # sends the worker's warnings and logging to the log file, away from the bar
            with ProcessPoolExecutor(
                n_jobs, mp_context=get_context("spawn"),
                initializer=route_worker_output, initargs=(str(log_file),),
            ) as ex:
                futures = [ex.submit(_run_one_safe, s, results_dir, run_kwargs) for s in todo]
                for fut in as_completed(futures):
                    collect(*fut.result())
    bar.close()
    if progress and log_file.exists() and log_file.stat().st_size > log_size:
        print(f"Library warnings of this grid are in {log_file}", file=sys.stderr)
    for spec, msg in errors:
        logger.error(f"Run {spec} failed: {msg}")
    return done, errors
