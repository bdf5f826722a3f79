"""Decision latency of the schedulers as observations grow (a benchmark, not a test).

Drives each scheduler directly, call by call as Syne Tune's ``Tuner`` does (``suggest``,
``on_trial_add``, ``on_trial_result``, ``on_trial_remove``, ``on_trial_complete``), on a
synthetic benchmark: power-law learning curves ``loss = a(x) + b(x) * t^-c(x) + noise`` over a
random 6-dimensional config space (continuous, log-scaled, integer and categorical
hyperparameters; no table, so new configurations are sampled), ``max_t`` epochs per trial.
Workers finish epochs at config-dependent speeds; the next report is always the earliest.

It prints the milliseconds of scheduler compute per decision (all scheduler calls between two
observations) in bins of observations, mean, 95th and 99th percentile and maximum, for DyHPO, DeepPowerLaw and
Syne Tune's BOHB in the same process, then the ratios of the means to BOHB's: first in CPU
time of the process (the compute itself, also on a busy machine), then in wall time (which on
an idle core is the same, and on a busy one also counts waiting for a core)::

    PYTHONPATH=. python benchmarks/latency.py                      # 10,000 observations, 1 worker
    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO BOHB --max-obs 3000 --bin 500
    PYTHONPATH=. python benchmarks/latency.py --bins 1-500 4501-5000 9501-10000 --n-workers 4
    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO --scheduler-arg options.candidates.num_kept=224
    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO DeepPowerLaw --scheduler-arg completion=None
    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO --scheduler-arg surrogate.model.max_condition_points=1024

``--start-delay SECONDS`` makes every job start or resume take that long in simulated time and
puts the simulated time into every result, so that ``JobCosts`` learns its costs::

    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO DeepPowerLaw --start-delay 2.5 \
        --scheduler-arg options.job_costs.segment_factor=3

``--split`` also reports where each scheduler's time goes (candidate sampling/encoding,
training-data building, fit from scratch, refine, conditioning/Cholesky, prediction,
acquisition, other: exclusive time of the package's functions, see :data:`SPLIT_TARGETS`).
``--simulator SOURCE TASK`` measures that split on one simulated run of the benchmark grid
instead (``benchmarks/runner.py``, 1 worker, budget 20 x max_t)::

    PYTHONPATH=. python benchmarks/latency.py --split --simulator ../shared/data/lcbench Australian

``--scheduler-arg KEY=VALUE`` (repeatable) passes an argument to DyHPO and DeepPowerLaw (not
to BOHB); ``ARGUMENT.FIELD=VALUE`` changes one field of the method's default ARGUMENT, one of
``surrogate``, ``completion``, ``depth_gate``, ``options``, FIELD a path through its settings
objects (e.g. ``completion.after=54``, ``surrogate.fit_schedule.refine_every=15``,
``options.candidates.num_kept=224``, ``options.promotion.probability=0.25``: the promotion,
off by default, starts from ``SuccessiveHalvingPromotion()``); ``completion=None`` turns the
completion off. With ``--simulator``, ``--methods`` also takes the runner's variant
names (``benchmarks/runner.py``, e.g. ``DyHPO-no-completion``).

``--log-overhead`` measures what the decision log costs (DyHPO and DeepPowerLaw): each method is
run with its log written to a CSV file, timing the log's own code inside the scheduler calls,
and again with ``FreezeThawOptions.log_decisions=False``; it prints the log's share of the decision time and the
ratio of the two runs' mean ms per decision::

    PYTHONPATH=. python benchmarks/latency.py --methods DyHPO DeepPowerLaw --max-obs 2000 --log-overhead

A method that exceeds ``--time-limit`` seconds of scheduler compute stops there; its later bins
are reported as not reached. Torch runs on one thread (``--threads``), as on one core.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "benchmarks"]

from benchmarks.defaults import FIELD_ARGUMENTS, changed_argument  # noqa: E402 (after the path fix)

METHODS = ("DyHPO", "DeepPowerLaw", "BOHB")

# ----- the synthetic benchmark -------------------------------------------------------------


def config_space() -> dict[str, Any]:
    from syne_tune.config_space import choice, loguniform, randint, uniform

    return {
        "lr": loguniform(1e-4, 1.0),
        "wd": loguniform(1e-6, 1e-2),
        "momentum": uniform(0.0, 0.99),
        "dropout": uniform(0.0, 0.6),
        "width": randint(16, 512),
        "act": choice(["relu", "tanh", "gelu"]),
    }


class PowerLawTask:
    """Losses ``a(x) + b(x) * (t / max_t)^-c(x)`` with Gaussian noise, smooth in the encoded
    config ``x``; the config-to-coefficient maps are random (seeded) so the best region is
    somewhere in the interior. Epoch durations vary 4x across configurations.

    :param max_t: epochs per trial
    :param seed: seed of the task and of the noise
    """

    def __init__(self, max_t: int = 50, seed: int = 0):
        from syne_dyhpo.search_space import ConfigEncoder

        self.max_t = max_t
        self.encoder = ConfigEncoder(config_space())
        rng = np.random.RandomState(seed)
        d = self.encoder.dim
        self.centre = rng.uniform(0.2, 0.8, size=d)
        self.w = rng.normal(size=(3, d))
        self.noise = 0.005
        self.rng = np.random.RandomState(seed + 1)

    def _coefficients(self, config: dict) -> tuple[float, float, float, float]:
        x = self.encoder.encode(config)
        dist = float(np.sum((x - self.centre) ** 2))
        a = 0.1 + 0.5 * dist + 0.05 * np.tanh(self.w[0] @ x)
        b = 0.1 + 0.05 * (1 + np.tanh(self.w[1] @ x))
        c = 0.3 + 0.3 * (1 + np.tanh(self.w[2] @ x))
        duration = 1.0 + 3.0 / (1 + np.exp(-self.w[0] @ x))
        return a, b, c, duration

    def loss(self, config: dict, epoch: int) -> float:
        a, b, c, _ = self._coefficients(config)
        return float(a + b * (epoch / self.max_t) ** (-c) + self.noise * self.rng.normal())

    def duration(self, config: dict) -> float:
        return self._coefficients(config)[3]


def make_scheduler(method: str, max_t: int, seed: int, **options: Any):
    """:param options: further arguments of DyHPO or DeepPowerLaw (ignored for BOHB); a key
        ``"ARGUMENT.FIELD"`` (ARGUMENT one of ``benchmarks.defaults.FIELD_ARGUMENTS``, FIELD a
        dotted path, e.g. ``"completion.after"``, ``"options.candidates.num_kept"``) changes
        that field of the method's default ARGUMENT"""
    space = config_space()
    if method == "BOHB":
        from syne_tune.optimizer.baselines import BOHB

        return BOHB(space, metric="loss", time_attr="epoch", max_t=max_t, do_minimize=True, random_seed=seed)
    import syne_dyhpo

    arguments: dict[str, Any] = {}
    fields: dict[str, dict[str, Any]] = {}
    for key, value in options.items():
        argument, dot, field = key.partition(".")
        if dot:
            fields.setdefault(argument, {})[field] = value
        else:
            arguments[key] = value
    arguments.update({argument: changed_argument(method, argument, changes) for argument, changes in fields.items()})
    return getattr(syne_dyhpo, method)(space, metric="loss", do_minimize=True, time_attr="epoch", max_t=max_t,
                                       random_seed=seed, **arguments)


# ----- the driver: Syne Tune's Tuner, call by call ------------------------------------------


def driver_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of :func:`drive` that the command line sets, but for the method, the
    observations and ``cpu``."""
    return {
        "n_workers": args.n_workers,
        "max_t": args.max_t,
        "seed": args.seed,
        "time_limit": args.time_limit,
        "options": args.options,
        "start_delay": args.start_delay,
    }


def drive(method: str, max_obs: int, n_workers: int = 1, max_t: int = 50, seed: int = 0,
          time_limit: float = math.inf, cpu: list | None = None, options: dict[str, Any] | None = None,
          start_delay: float | None = None) -> np.ndarray:
    """Runs one scheduler on the synthetic task until ``max_obs`` observations.

    :param options: further scheduler arguments (:func:`make_scheduler`)
    :param start_delay: simulated seconds a job started or resumed takes before its first epoch
        (an epoch takes 1-4 s, :meth:`PowerLawTask.duration`); every result then carries
        the simulated time (``st_tuner_time``, as on Syne Tune's simulator), from which
        ``JobCosts`` learns what an epoch and a start cost. None (default): results carry no
        time and starts are free
    :param cpu: if given, receives the CPU seconds of the same calls (process time: on a busy
        machine, the compute itself; wall time also counts waiting for a core)
    :return: wall seconds of scheduler compute before each observation (all calls since the
        previous one), shape (number of observations reached,)
    """
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision

    task = PowerLawTask(max_t=max_t, seed=seed)
    scheduler = make_scheduler(method, max_t, seed, **(options or {}))
    trials: dict[int, Trial] = {}
    epochs: dict[int, int] = {}  # last reported epoch per trial
    running: dict[int, float] = {}  # trial id -> simulated time of its next report
    clock, spent, spent_cpu, total = 0.0, 0.0, 0.0, 0.0
    costs = []

    def timed(fn, *args):
        nonlocal spent, spent_cpu
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*args)
        finally:
            spent += time.perf_counter() - t0
            spent_cpu += time.process_time() - c0

    while len(costs) < max_obs and total + spent < time_limit:
        while len(running) < n_workers:
            suggestion = timed(scheduler.suggest)
            if suggestion is None:
                break
            if suggestion.spawn_new_trial_id:
                trial_id = len(trials)
                trials[trial_id] = Trial(trial_id=trial_id, config=suggestion.config, creation_time=datetime.now())
                epochs[trial_id] = 0
                timed(scheduler.on_trial_add, trials[trial_id])
            else:
                trial_id = suggestion.checkpoint_trial_id
                if suggestion.config is not None:
                    trials[trial_id].config = suggestion.config
            running[trial_id] = clock + (start_delay or 0.0) + task.duration(trials[trial_id].config)
        if not running:
            break
        trial_id = min(running, key=running.get)
        clock = running[trial_id]
        trial = trials[trial_id]
        epochs[trial_id] += 1
        epoch = epochs[trial_id]
        result = {"epoch": epoch, "loss": task.loss(trial.config, epoch)}
        if start_delay is not None:
            result["st_tuner_time"] = clock
        decision = timed(scheduler.on_trial_result, trial, result)
        if decision in (SchedulerDecision.STOP, SchedulerDecision.PAUSE):
            del running[trial_id]
            timed(scheduler.on_trial_remove, trial)
        elif epoch >= max_t:  # the job ends by itself
            del running[trial_id]
            timed(scheduler.on_trial_complete, trial, result)
        else:
            running[trial_id] = clock + task.duration(trial.config)
        costs.append(spent)
        if cpu is not None:
            cpu.append(spent_cpu)
        total += spent
        spent, spent_cpu = 0.0, 0.0
    return np.array(costs)


# ----- where the time goes ------------------------------------------------------------------

SPLIT_CATEGORIES = ("sampling", "data", "fit_scratch", "refine", "condition", "predict", "acquisition", "other")

#: (module, qualified attribute, category): exclusive time inside these functions is charged
#: to the category; scheduler time outside all of them is "other". Attributes missing in a
#: version of the package are skipped. "fit" is split into fit_scratch / refine by its
#: ``from_scratch`` argument.
SPLIT_TARGETS = [
    ("syne_dyhpo.search_space", "CandidateSampler.propose", "sampling"),
    ("syne_dyhpo.search_space", "CandidateSampler.propose_with_keys", "sampling"),
    ("syne_dyhpo.search_space", "ConfigEncoder.encode", "sampling"),
    ("syne_dyhpo.search_space", "ConfigEncoder.encode_many", "sampling"),
    ("syne_dyhpo.search_space", "ConfigEncoder.sample", "sampling"),
    ("syne_dyhpo.core.decision", "make_candidates", "sampling"),
    ("syne_dyhpo.core.observations", "Observations.training_data", "data"),
    ("syne_dyhpo.core.observations", "Observations.all_scores", "data"),
    ("syne_dyhpo.core.policy", "SurrogatePolicy._training_data", "data"),
    ("syne_dyhpo.surrogates.outcome_transform", "ScoreTransform.outdated", "data"),
    ("syne_dyhpo.surrogates.deep_kernel_gp", "DeepKernelGP.fit", "fit"),
    ("syne_dyhpo.surrogates.power_law", "PowerLawEnsemble.fit", "fit"),
    ("syne_dyhpo.surrogates.deep_kernel_gp", "DeepKernelGP.condition", "condition"),
    ("syne_dyhpo.surrogates.deep_kernel_gp", "DeepKernelGP._train_factor", "condition"),
    ("syne_dyhpo.surrogates.deep_kernel_gp", "DeepKernelGP._factorise", "condition"),
    ("syne_dyhpo.surrogates.power_law", "PowerLawEnsemble.condition", "condition"),
    ("syne_dyhpo.surrogates.deep_kernel_gp", "DeepKernelGP.predict", "predict"),
    ("syne_dyhpo.surrogates.power_law", "PowerLawEnsemble.predict", "predict"),
    ("syne_dyhpo.acquisition", "LogExpectedImprovement.evaluate", "acquisition"),
    ("syne_dyhpo.acquisition", "log_expected_improvement", "acquisition"),
    ("syne_dyhpo.core.observations", "Observations.best_score_per_budget", "acquisition"),
    ("syne_dyhpo.core.observations", "Observations.best_score", "acquisition"),
]


class Split:
    """Exclusive CPU seconds (process time: the compute, also on a busy machine) and wall
    seconds per category while :meth:`instrument` is active."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)  # CPU
        self.wall_seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [category, cpu start, wall start, child cpu, child wall]
        self._patched: list[tuple[Any, str, Any]] = []

    def _enter(self, category: str) -> None:
        self._stack.append([category, time.process_time(), time.perf_counter(), 0.0, 0.0])

    def _exit(self) -> None:
        category, cpu_start, wall_start, cpu_children, wall_children = self._stack.pop()
        cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
        self.seconds[category] += cpu - cpu_children
        self.wall_seconds[category] += wall - wall_children
        if self._stack:
            self._stack[-1][3] += cpu
            self._stack[-1][4] += wall

    def wrap(self, fn, category: str):
        split = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            cat = category
            if cat == "fit":
                scratch = kwargs.get("from_scratch", args[2] if len(args) > 2 else True)
                cat = "fit_scratch" if scratch else "refine"
            split._enter(cat)
            try:
                return fn(*args, **kwargs)
            finally:
                split._exit()

        return wrapper

    def instrument(self) -> None:
        import importlib

        for module_name, qualname, category in SPLIT_TARGETS:
            owner = importlib.import_module(module_name)
            parts = qualname.split(".")
            for part in parts[:-1]:
                owner = getattr(owner, part, None)
            if owner is None or not hasattr(owner, parts[-1]):
                continue
            name = parts[-1]
            original = owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
            self._patched.append((owner, parts[-1], original))
            setattr(owner, parts[-1], self.wrap(original, category))

    def restore(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched = []

    def root(self, fn):
        """Wraps a scheduler entry point: time not charged elsewhere is "other"."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self._enter("other")
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()

        return wrapper

    def table(self, wall: bool = False) -> str:
        seconds = self.wall_seconds if wall else self.seconds
        total = sum(seconds.values())
        cells = [f"{c} {100 * seconds.get(c, 0.0) / max(total, 1e-12):.0f}%" for c in SPLIT_CATEGORIES]
        return f"{total:.1f} s {'wall' if wall else 'CPU'}: " + ", ".join(cells)


def _rooted(scheduler, split: Split):
    for name in (
        "suggest",
        "on_trial_add",
        "on_trial_result",
        "on_trial_remove",
        "on_trial_complete",
        "on_trial_error",
    ):
        setattr(scheduler, name, split.root(getattr(scheduler, name)))
    return scheduler


def split_of_simulator_run(method: str, source: str, task: str, seed: int = 0) -> tuple[Split, dict]:
    """Split of one simulated benchmark run (budget 20 x max_t, 1 worker)."""
    import tempfile

    from benchmarks import runner
    from benchmarks.blackboxes import load_benchmark

    definition, _ = load_benchmark(source, task=task)
    split = Split()
    factory = runner.METHODS[method]
    runner.METHODS[method] = lambda *a: _rooted(factory(*a), split)
    split.instrument()
    try:
        spec = runner.RunSpec(method, source, task, seed, int(20 * definition.max_t), 1)
        summary = runner.run_one(spec, tempfile.mkdtemp(prefix="latency-split-"), overwrite=True)
    finally:
        split.restore()
        runner.METHODS[method] = factory
    return split, summary


# ----- report --------------------------------------------------------------------------------


def parse_bins(specs: list[str] | None, max_obs: int, width: int) -> list[tuple[int, int]]:
    if specs:
        return [tuple(int(v) for v in s.split("-")) for s in specs]
    return [(lo, min(lo + width - 1, max_obs)) for lo in range(1, max_obs + 1, width)]


def bin_stats(costs: np.ndarray, bins: list[tuple[int, int]]) -> list[tuple[float, float, float, float] | None]:
    """(mean, p95, p99, max) milliseconds per bin of observations (None: bin not reached)."""
    out = []
    for lo, hi in bins:
        if len(costs) < hi:
            out.append(None)
            continue
        ms = 1e3 * costs[lo - 1 : hi]
        out.append((float(ms.mean()), float(np.percentile(ms, 95)), float(np.percentile(ms, 99)), float(ms.max())))
    return out


def format_table(methods: list[str], stats: dict[str, list], bins: list[tuple[int, int]]) -> str:
    lines = [
        "| observations | " + " | ".join(f"{m} mean / p95 / p99 / max ms" for m in methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for i, (lo, hi) in enumerate(bins):
        cells = []
        for m in methods:
            s = stats[m][i]
            cells.append("not reached" if s is None else " / ".join(f"{v:.1f}" for v in s))
        lines.append(f"| {lo}-{hi} | " + " | ".join(cells) + " |")
    if "BOHB" in methods and len(methods) > 1:
        others = [m for m in methods if m != "BOHB"]
        lines += [
            "",
            "| observations | " + " | ".join(f"{m} / BOHB (mean)" for m in others) + " |",
            "|---|" + "---|" * len(others),
        ]
        for i, (lo, hi) in enumerate(bins):
            ref = stats["BOHB"][i]
            cells = []
            for m in others:
                s = stats[m][i]
                cells.append("-" if s is None or ref is None or ref[0] <= 0 else f"{s[0] / ref[0]:.1f}x")
            lines.append(f"| {lo}-{hi} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        help=f"of {', '.join(METHODS)} (with --simulator also the runner's variant names)",
    )
    p.add_argument(
        "--scheduler-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an argument of DyHPO and DeepPowerLaw, VALUE a Python literal (repeatable); "
        "ARGUMENT.FIELD=VALUE changes a field (a dotted path) of its default ARGUMENT "
        f"(one of {', '.join(FIELD_ARGUMENTS)})",
    )
    p.add_argument("--max-obs", type=int, default=10_000, help="observations per method")
    p.add_argument("--bin", type=int, default=500, help="bin width (observations)")
    p.add_argument("--bins", nargs="*", default=None, help="explicit bins LO-HI (1-based, inclusive)")
    p.add_argument("--n-workers", type=int, default=1)
    p.add_argument("--max-t", type=int, default=50, help="epochs per trial")
    p.add_argument(
        "--start-delay",
        type=float,
        default=None,
        help="simulated seconds of each job start or resume (an epoch takes 1-4 s); results "
        "then carry the simulated time, for options.job_costs (default: free starts, no time)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one core)")
    p.add_argument("--time-limit", type=float, default=900.0, help="seconds of scheduler compute per method")
    p.add_argument("--split", action="store_true", help="also report where the time goes")
    p.add_argument(
        "--log-overhead",
        action="store_true",
        help="the decision log's cost: its share of the decision time, and a run without it",
    )
    p.add_argument(
        "--simulator",
        nargs=2,
        metavar=("SOURCE", "TASK"),
        default=None,
        help="only the split, on one simulated run of this benchmark task",
    )
    args = p.parse_args(argv)
    if args.simulator:
        from benchmarks.runner import METHODS as runner_methods

        known = set(runner_methods)
    else:
        known = set(METHODS)
    unknown = [m for m in args.methods if m not in known]
    if unknown:
        p.error(f"--methods: unknown {unknown}; choose from {sorted(known)}")
    try:
        args.options = dict(scheduler_arg(text) for text in args.scheduler_arg)
    except argparse.ArgumentTypeError as err:
        p.error(str(err))
    if args.options and args.simulator:
        p.error("--scheduler-arg applies to the synthetic task; with --simulator name a runner variant")
    return args


def scheduler_arg(text: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` -> ``(KEY, VALUE)``, VALUE a Python literal (a bare word stays a string);
    KEY may be ``ARGUMENT.FIELD`` with ARGUMENT one of ``benchmarks.defaults.FIELD_ARGUMENTS`` and
    FIELD a dotted path through its settings objects."""
    import ast

    key, sep, value = text.partition("=")
    argument, dot, field = key.partition(".")
    valid = argument.isidentifier() and (
        not dot or (argument in FIELD_ARGUMENTS and all(part.isidentifier() for part in field.split(".")))
    )
    if not sep or not valid:
        raise argparse.ArgumentTypeError(
            f"--scheduler-arg must be KEY=VALUE or ARGUMENT.FIELD=VALUE with ARGUMENT one of {FIELD_ARGUMENTS}, "
            f"got {text!r}"
        )
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def main(argv=None) -> int:
    import logging

    import torch

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    if args.simulator:
        for method in [m for m in args.methods if m != "BOHB"]:
            split, summary = split_of_simulator_run(method, args.simulator[0], args.simulator[1], args.seed)
            print(
                f"{method} on {args.simulator[1]} seed {args.seed}: scheduler {summary['scheduler_seconds']:.1f} s "
                f"wall, {summary['scheduler_cpu_seconds']:.1f} s CPU; split of {split.table()}; "
                f"of {split.table(wall=True)}",
                flush=True,
            )
        return 0
    if args.log_overhead:
        for method in [m for m in args.methods if m != "BOHB"]:
            print(log_overhead_line(method, args), flush=True)
        return 0
    bins = parse_bins(args.bins, args.max_obs, args.bin)
    max_obs = max(hi for _, hi in bins)
    stats, cpu_stats, splits = {}, {}, {}
    for method in args.methods:
        split = Split() if args.split else None
        if split is not None:
            split.instrument()
        t0, c0 = time.perf_counter(), time.process_time()
        cpu: list[float] = []
        try:
            costs = (
                drive(
                    method,
                    max_obs,
                    cpu=cpu,
                    **driver_settings(args),
                )
                if split is None
                else _drive_split(method, max_obs, args, split, cpu)
            )
        finally:
            if split is not None:
                split.restore()
        stats[method] = bin_stats(costs, bins)
        cpu_stats[method] = bin_stats(np.array(cpu), bins)
        splits[method] = split
        print(
            f"{method}: {len(costs)} observations, {costs.sum():.1f} s wall / {sum(cpu):.1f} s CPU in scheduler "
            f"calls ({time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU in all)",
            flush=True,
        )
    print()
    setting = f"{args.n_workers} worker(s), max_t={args.max_t}, seed {args.seed}, torch threads {args.threads}"
    if args.options:
        setting += f", DyHPO/DeepPowerLaw with {args.options}"
    print(f"CPU ms per decision (process time of the scheduler calls between two observations), {setting}")
    print(format_table(args.methods, cpu_stats, bins))
    print()
    print(f"wall ms per decision (the same calls; also counts waiting for a core on a busy machine), {setting}")
    print(format_table(args.methods, stats, bins))
    if args.split:
        print()
        for method in args.methods:
            print(f"split {method}: {splits[method].table()}; {splits[method].table(wall=True)}")
    return 0


#: the decision log's code inside the scheduler calls (outermost calls timed, nested ones not)
LOG_TARGETS = [
    ("syne_dyhpo.core.decision_log", "DecisionLog.decided"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.answered"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.trial_ended"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.result_arrived"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.now"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.carried_out"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.started"),
    ("syne_dyhpo.core.decision_log", "DecisionLog.dropped"),
]


def log_overhead_line(method: str, args) -> str:
    """Runs ``method`` with its decision log written to a CSV file, timing the log's code (CPU
    time), then without the log; the line says the log's share and the ratio of the runs."""
    import importlib
    import tempfile

    spent = [0.0]
    depth = [0]
    originals = []

    def timed(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            depth[0] += 1
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[0] += time.process_time() - c0

        return wrapper

    for module_name, attribute in LOG_TARGETS:
        owner = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, timed(getattr(owner, name)))
    original_make = make_scheduler.__globals__["make_scheduler"]
    with tempfile.TemporaryDirectory() as folder:

        def with_csv(*a, **k):
            scheduler = original_make(*a, **k)
            scheduler.attach_decision_log(folder)
            return scheduler

        globals()["make_scheduler"] = with_csv
        cpu_on: list[float] = []
        try:
            drive(
                method,
                args.max_obs,
                cpu=cpu_on,
                **driver_settings(args),
            )
        finally:
            globals()["make_scheduler"] = original_make
            for owner, name, fn in originals:
                setattr(owner, name, fn)
    cpu_off: list[float] = []
    drive(
        method,
        len(cpu_on),
        cpu=cpu_off,
        **{**driver_settings(args), "options": {**args.options, "options.log_decisions": False}},
    )
    on, off = sum(cpu_on), sum(cpu_off)
    return (
        f"{method}: decision log {1000 * spent[0] / len(cpu_on):.3f} ms of {1000 * on / len(cpu_on):.2f} ms CPU "
        f"per decision ({100 * spent[0] / on:.2f} %), {len(cpu_on)} observations; without the log "
        f"{1000 * off / len(cpu_off):.2f} ms (with / without: {on / off:.3f})"
    )


def _drive_split(method: str, max_obs: int, args, split: Split, cpu: list) -> np.ndarray:
    original = make_scheduler.__globals__["make_scheduler"]

    def rooted(*a, **k):
        return _rooted(original(*a, **k), split)

    globals()["make_scheduler"] = rooted
    try:
        return drive(
            method,
            max_obs,
            cpu=cpu,
            **driver_settings(args),
        )
    finally:
        globals()["make_scheduler"] = original


if __name__ == "__main__":
    sys.exit(main())
