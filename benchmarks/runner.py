"""Running schedulers on tabular benchmarks with Syne Tune's simulator.

One run = (method, benchmark source, task, seed, epoch budget, n_workers).
Each finished run leaves two files in its folder under the results dir:
``results.csv.gz`` (the SimulatorCallback dataframe, one row per epoch the
scheduler saw) and ``run.json`` (written last; its presence marks the run as
finished, so grids are resumable).
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
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from syne_tune.backend.trial_status import Trial
from syne_tune.optimizer.scheduler import TrialScheduler, TrialSuggestion
from syne_tune.stopping_criterion import StoppingCriterion
from syne_tune.tuning_status import TuningStatus

from benchmarks.blackboxes import BenchmarkDefinition, load_benchmark
from benchmarks.defaults import default_changed
from benchmarks.metrics import incumbent_trajectory, regret_at_fractions
from benchmarks.table import TableRestricted, metric_bounds, table_configs

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.csv.gz"
RUN_FILE = "run.json"

MethodFactory = Callable[
    [BenchmarkDefinition, dict[str, Any], list[dict[str, Any]], int], TrialScheduler
]
"""``(definition, config_space, table_configs, seed) -> scheduler``"""

METHODS: dict[str, MethodFactory] = {}


def register_method(name: str, factory: MethodFactory) -> None:
    """
    :param name: Method name used in results and on the command line
    :param factory: See :data:`MethodFactory`
    """
    METHODS[name] = factory


# Random draws (RandomSearch, ASHA's searcher) become uniform draws over the table's unused rows:
# random search over the table, as our schedulers get it from ``candidate_configs``. The
# "-nearest" variants map each draw to its nearest row instead (kept to reproduce earlier tables;
# biased towards isolated rows, see TableRestricted).
def _random_search(sampling: str) -> MethodFactory:
    def factory(d, cs, configs, seed):
        from syne_tune.optimizer.baselines import RandomSearch

        rs = RandomSearch(cs, metrics=[d.metric], do_minimize=d.do_minimize, random_seed=seed)
        return TableRestricted(rs, configs, sampling=sampling)

    return factory


def _multi_fidelity(class_name: str, sampling: str) -> MethodFactory:
    """Syne Tune's ASHA or BOHB (same constructor arguments), restricted to the table."""

    def factory(d, cs, configs, seed):
        from syne_tune.optimizer import baselines

        sched = getattr(baselines, class_name)(
            cs, metric=d.metric, time_attr=d.time_attr, max_t=d.max_t,
            do_minimize=d.do_minimize, random_seed=seed,
        )
        return TableRestricted(sched, configs, sampling=sampling)

    return factory


#: Config key through which our schedulers tell a simulated job where its segment ends (their
#: ``max_resource_attr``; the simulator backend is created with it). Without it, a job with
#: epochs much shorter than the Tuner's simulated sleep time reports several epochs per Tuner
#: loop: the scheduler pauses it after the first, and the others are simulated, counted in the
#: epoch budget and dropped unseen (measured: up to 60 % of a run's budget on mfeat-factors).
SEGMENT_END_ATTR = "freeze_thaw_segment_end"


def _ours(class_name: str, variant: str = "default", **options: Any) -> MethodFactory:
    """DyHPO or DeepPowerLaw with the table as ``candidate_configs`` and exact segments
    (:data:`SEGMENT_END_ATTR`); ``variant``: "default", "paper" (the papers' decisions and the
    authors' surrogate training: slow) or "sh" (successive-halving promotions mixed in with
    probability 0.25, as Syne Tune's former DyHPO); ``options``: further scheduler arguments,
    ``power_law_base`` (DeepPowerLaw): fields of its default ``surrogate_config`` replaced when
    none is given (:data:`BN_FOUR_STEPS`: the ensemble training the variants measured before
    version 0.1's came back ran with), and ``power_law_batch_norm`` (DeepPowerLaw): the
    ``batch_norm`` of its ``surrogate_config`` (given or default)."""

    def factory(d, cs, configs, seed):
        import syne_dyhpo
        from syne_dyhpo.methods import deep_power_law, dyhpo

        kwargs = dict(options)
        batch_norm = kwargs.pop("power_law_batch_norm", None)
        power_law_base = kwargs.pop("power_law_base", None)
        if kwargs.get("fit_schedule") == "misfit":  # resolved here: the grid imports lazily
            kwargs["fit_schedule"] = dyhpo.MISFIT_FIT_SCHEDULE
        if variant == "paper":
            method, surrogate_config = {
                "DyHPO": (dyhpo, syne_dyhpo.DeepKernelGPConfig),
                "DeepPowerLaw": (deep_power_law, syne_dyhpo.PowerLawConfig),
            }[class_name]
            kwargs["fit_schedule"] = method.paper_fit_schedule()
            kwargs["surrogate_config"] = surrogate_config()
            kwargs["complete_incumbent"] = False
        elif variant == "sh":
            kwargs["sh_probability"] = 0.25
        if class_name == "DeepPowerLaw" and power_law_base and "surrogate_config" not in kwargs:
            kwargs["surrogate_config"] = replace(deep_power_law.DEFAULT_POWER_LAW_CONFIG, **power_law_base)
        if batch_norm is not None:
            config = kwargs.get("surrogate_config") or deep_power_law.DEFAULT_POWER_LAW_CONFIG
            kwargs["surrogate_config"] = replace(config, batch_norm=batch_norm)
        return getattr(syne_dyhpo, class_name)(
            cs, metric=d.metric, do_minimize=d.do_minimize, time_attr=d.time_attr,
            max_t=d.max_t, random_seed=seed, candidate_configs=configs,
            max_resource_attr=SEGMENT_END_ATTR, **kwargs,
        )

    return factory


#: DeepPowerLaw's ensemble training before version 0.1's came back (``surrogate_config``
#: fields: the paper's BatchNorm, 4 minibatch steps per refinement, fits from scratch capped at
#: 500): every DeepPowerLaw variant measured before pins it (``power_law_base``)
BN_FOUR_STEPS = dict(batch_norm=True, max_refine_steps=4, max_fit_steps=500, refine_steps_shrink_after=None)


def _measured(class_name: str, variant: str = "default", **options: Any) -> MethodFactory:
    """:func:`_ours` with the outcome normalisation fitted on every observed score
    (``normalisation_scores="epochs"``): the variants registered before ``"trials_if_alike"``
    became the default were measured so, and reproduce their runs with it (the two differ only
    where that normalisation collapses: on the development tasks, runs of the IRNN TaskSet task).
    DeepPowerLaw's also without BatchNorm, as they ran."""
    return _leaders_after_9(
        class_name, variant, **{"normalisation_scores": "epochs", **_no_batch_norm(class_name), **options}
    )


#: DyHPO's completion before its leader was chosen among 27 first epochs and committed to
#: (``complete_incumbent_after=27``, ``complete_incumbent_share=0``,
#: ``committed_completions=1``): two leaders with 4 workers, chosen once 9 configurations had
#: reported; DeepPowerLaw's defaults. The variants measured before pin it (with one worker it
#: decides alike unless the 27th first epoch comes after the wait of
#: ``complete_incumbent_delay``)
LEADERS_AFTER_9 = dict(complete_incumbent_after=9, complete_incumbent_share=0.5, committed_completions=0)


def _leaders_after_9(class_name: str, variant: str = "default", **options: Any) -> MethodFactory:
    """:func:`_ours` with the completion of :data:`LEADERS_AFTER_9` (and DeepPowerLaw's
    ensemble training of :data:`BN_FOUR_STEPS` unless ``power_law_base`` is given: None for
    today's)."""
    return _ours(class_name, variant, **{**LEADERS_AFTER_9, "power_law_base": BN_FOUR_STEPS, **options})


def _no_batch_norm(class_name: str) -> dict[str, Any]:
    """The pin of DeepPowerLaw's variants measured without BatchNorm in its members."""
    return {"power_law_batch_norm": False} if class_name == "DeepPowerLaw" else {}


register_method("RandomSearch", _random_search("uniform"))
register_method("ASHA", _multi_fidelity("ASHA", "uniform"))
register_method("RandomSearch-nearest", _random_search("nearest"))
register_method("ASHA-nearest", _multi_fidelity("ASHA", "nearest"))
# BOHB's proposals come from its model: keep them, mapped to the nearest unused row
register_method("BOHB", _multi_fidelity("BOHB", "nearest"))
register_method("DyHPO", _ours("DyHPO"))
register_method("DeepPowerLaw", _ours("DeepPowerLaw"))
register_method("DyHPO-paper", _measured("DyHPO", "paper"))
register_method("DeepPowerLaw-paper", _measured("DeepPowerLaw", "paper"))
register_method("DyHPO-SH", _measured("DyHPO", "sh"))
register_method("DeepPowerLaw-SH", _measured("DeepPowerLaw", "sh"))
# today's defaults with the GP conditioned on the running trials' pending results (the kriging
# believer, ``condition_on_running``); ``DyHPO-believer`` below measured it with one leader and
# the misfit-triggered schedule. With one worker nothing else is running: decisions are DyHPO's
register_method("DyHPO-condition-running", _measured("DyHPO", condition_on_running=True))
# today's defaults with the outcome normalisation fitted on each trial's best score
# (``normalisation_scores``), always or when every score would make it degenerate
register_method("DyHPO-per-trial", _leaders_after_9("DyHPO", normalisation_scores="trials"))
register_method("DeepPowerLaw-per-trial", _leaders_after_9("DeepPowerLaw", normalisation_scores="trials", power_law_batch_norm=False))
# (the default since these runs: the same as DyHPO and DeepPowerLaw)
register_method("DyHPO-per-trial-if-alike", _leaders_after_9("DyHPO", normalisation_scores="trials_if_alike"))
register_method("DeepPowerLaw-per-trial-if-alike", _leaders_after_9("DeepPowerLaw", normalisation_scores="trials_if_alike", power_law_batch_norm=False))
# the defaults before: the normalisation fitted on every observed score
register_method("DyHPO-every-score", _leaders_after_9("DyHPO", normalisation_scores="epochs"))
register_method("DeepPowerLaw-every-score", _leaders_after_9("DeepPowerLaw", normalisation_scores="epochs", power_law_batch_norm=False))
# The variants below were measured before a completed trial past half of max_t was finished
# (``commit_completion_after``; it changes decisions with several workers only): each pins
# that, and DyHPO's pin the schedule they ran with, the misfit-triggered one (now
# ``dyhpo.MISFIT_FIT_SCHEDULE``), except where the name says otherwise.
def _earlier(class_name: str, **options: Any) -> MethodFactory:
    return _measured(class_name, **{"commit_completion_after": None, **options})


def _dyhpo_misfit(**options: Any) -> MethodFactory:
    return _earlier("DyHPO", fit_schedule="misfit", **options)


# the defaults before this change, and before DyHPO refined every 15 observations
register_method("DyHPO-no-finish", _earlier("DyHPO"))
register_method("DeepPowerLaw-no-finish", _earlier("DeepPowerLaw"))
register_method("DyHPO-misfit", _dyhpo_misfit())
# the first two trials the completion chooses are trained to max_t even when overtaken
register_method("DyHPO-commit2", _earlier("DyHPO", committed_completions=2))
register_method("DeepPowerLaw-commit2", _earlier("DeepPowerLaw", committed_completions=2))
register_method("DyHPO-no-completion", _dyhpo_misfit(complete_incumbent=False))
register_method("DeepPowerLaw-no-completion", _earlier("DeepPowerLaw", complete_incumbent=False))
# measured before two leaders became the default: with one leader, as its runs were
register_method("DyHPO-believer", _dyhpo_misfit(condition_on_running=True, complete_incumbent_share=0.0))
register_method("DyHPO-one-leader", _dyhpo_misfit(complete_incumbent_share=0.0))
register_method("DeepPowerLaw-one-leader", _earlier("DeepPowerLaw", complete_incumbent_share=0.0))
register_method("DyHPO-leaders", _dyhpo_misfit(complete_leaders_until_trained=False))
register_method("DeepPowerLaw-leaders-first", _earlier("DeepPowerLaw", complete_leaders_until_trained=True))
register_method("DyHPO-three-leaders-first", _dyhpo_misfit(complete_incumbent_share=0.75))
# the completion waits for 50 first epochs (as many configurations as one completion costs
# epochs: max_t = 50 on every development benchmark) instead of 2 x max_t observed epochs
register_method("DyHPO-after50", _dyhpo_misfit(complete_incumbent_after=50, complete_incumbent_delay=0.0))
register_method("DeepPowerLaw-after50", _earlier("DeepPowerLaw", complete_incumbent_after=50, complete_incumbent_delay=0.0))
# no wait in observed epochs (version 0.2.0's completion)
register_method("DyHPO-no-delay", _dyhpo_misfit(complete_incumbent_delay=0.0))
register_method("DeepPowerLaw-no-delay", _earlier("DeepPowerLaw", complete_incumbent_delay=0.0))
# with 4 workers, a wait of 25 epochs (delay 2 divided by the workers rather than their square)
register_method("DyHPO-delay8", _dyhpo_misfit(complete_incumbent_delay=8.0))
register_method("DeepPowerLaw-delay8", _earlier("DeepPowerLaw", complete_incumbent_delay=8.0))


def _default_changed(
    class_name: str,
    argument: str,
    pinned: Callable[..., MethodFactory] = _measured,
    power_law_base: dict[str, Any] | None = BN_FOUR_STEPS,
    **changes: Any,
) -> MethodFactory:
    """``class_name`` with the default ``argument`` changed by ``changes`` (speed and schedule
    variants; :func:`default_changed`); ``pinned``: :func:`_measured` (the normalisation the
    variants registered before ``"trials_if_alike"`` ran with) or :func:`_ours` (today's);
    ``power_law_base``: DeepPowerLaw's ``surrogate_config`` fields the changes apply on top of
    (default :data:`BN_FOUR_STEPS`, as the variants measured before version 0.1's training came
    back; None: today's default)."""

    if class_name == "DeepPowerLaw" and argument == "surrogate_config" and power_law_base:
        changes = {**power_law_base, **changes}

    def factory(d, cs, configs, seed):
        return pinned(class_name, **{argument: default_changed(class_name, argument, **changes)})(d, cs, configs, seed)

    return factory


# cheaper training: the kernel trained on at most 64 observations; refines of at most 20 epochs
register_method("DyHPO-fit64", _default_changed("DyHPO", "surrogate_config", max_fit_points=64))
register_method("DyHPO-refine20", _default_changed("DyHPO", "surrogate_config", refine_iterations=20))
# the GP refined every 15 observations (version 0.1's interval and the default until refines
# became rarer than one decision in 20: ``dyhpo.DEFAULT_FIT_SCHEDULE``)
register_method("DyHPO-every15", _default_changed("DyHPO", "fit_schedule", refine_every=15))
# the posterior conditioned on at most about 1024 (the default until the sixth speed round) /
# 256 observations (default 512: every configuration's latest row, then the most recent ones)
register_method("DyHPO-cond1024", _default_changed("DyHPO", "surrogate_config", max_condition_points=1024))
register_method("DyHPO-cond256", _default_changed("DyHPO", "surrogate_config", max_condition_points=256))

# fewer new configurations scored per decision (default 256): the whitening of new candidates
# against the conditioning set is the largest share of a decision (docs/speed.md)
register_method("DyHPO-cand64", _measured("DyHPO", num_candidates=64))
# the 224 new configurations scored highest at one decision offered again at the next, with 32
# fresh draws (``num_kept_candidates``): 256 candidates per decision, an eighth of them new
register_method("DyHPO-keep224", _measured("DyHPO", num_kept_candidates=224))

# DPL carried over to a re-estimated outcome transform instead of trained from scratch
# (``FitSchedule.rescale_when_outdated``): measured worse (docs/speed.md), not the default
register_method("DeepPowerLaw-rescale", _default_changed("DeepPowerLaw", "fit_schedule", rescale_when_outdated=True))
# fewer minibatch steps per refinement (default 4), fits from scratch as they are (500 steps)
register_method("DeepPowerLaw-s2f500", _default_changed("DeepPowerLaw", "surrogate_config", max_refine_steps=2))
register_method("DeepPowerLaw-s1f500", _default_changed("DeepPowerLaw", "surrogate_config", max_refine_steps=1))
# the first speed round's DPL candidates (docs/speed.md, "Results on the development grid"):
# minibatch steps per refinement / per fit from scratch; 4 / 500 became (and are) the defaults
register_method("DPL-s4f500", _default_changed("DeepPowerLaw", "surrogate_config", max_refine_steps=4, max_fit_steps=500))
register_method("DPL-s2f250", _default_changed("DeepPowerLaw", "surrogate_config", max_refine_steps=2, max_fit_steps=250))
# narrower members (default: the paper's and the authors' d -> 128 -> 128 -> 3): a minibatch step
# of the 5-member ensemble costs about half at 64 units; measured worse (docs/speed.md)
register_method("DeepPowerLaw-h64", _default_changed("DeepPowerLaw", "surrogate_config", hidden=64))
# also trained from scratch after 1.2 x max_t observations without a new best score, as the
# authors' code does (``FitSchedule.refit_on_stall``, ``deep_power_law.paper_fit_schedule()``)
register_method("DeepPowerLaw-stall", _default_changed("DeepPowerLaw", "fit_schedule", refit_on_stall=1.2))

# the members fitted with the L1 loss of the authors' code instead of the paper's squared
# error (``PowerLawConfig(loss="l1")``): a median fit, less pulled by outlying points
register_method("DeepPowerLaw-l1", _default_changed("DeepPowerLaw", "surrogate_config", pinned=_leaders_after_9, loss="l1", batch_norm=False))

# BatchNorm in the members' hidden layers, as the paper's appendix has it (``PowerLawConfig``'s
# ``batch_norm``; the default since these runs: the same as DeepPowerLaw), and without, as the
# authors' code (the default before: the same as DeepPowerLaw-per-trial-if-alike)
register_method("DeepPowerLaw-batch-norm", _leaders_after_9("DeepPowerLaw", power_law_batch_norm=True))
register_method("DeepPowerLaw-no-batch-norm", _leaders_after_9("DeepPowerLaw", power_law_batch_norm=False))
# where today's DeepPowerLaw loses to version 0.1's on LCBench with one worker (anytime regret at
# 25 and 50 %; benchmarks/RESULTS.md): today's defaults without the incumbent completion, and
# with version 0.1's training caps (16 minibatch steps per refinement, fits from scratch uncapped)
register_method("DeepPowerLaw-bn-no-completion", _leaders_after_9("DeepPowerLaw", complete_incumbent=False))
register_method(
    "DeepPowerLaw-bn-refine16",
    _default_changed("DeepPowerLaw", "surrogate_config", pinned=_leaders_after_9, max_refine_steps=16, max_fit_steps=None),
)
# version 0.1's refinement cap with today's cap on fits from scratch (a fit from scratch bounded
# at 500 minibatch steps keeps the longest decision short)
register_method(
    "DeepPowerLaw-bn-r16f500", _default_changed("DeepPowerLaw", "surrogate_config", pinned=_leaders_after_9, max_refine_steps=16)
)
# halfway between today's refinement cap and version 0.1's: 8 minibatch steps per refinement
register_method(
    "DeepPowerLaw-bn-r8f500", _default_changed("DeepPowerLaw", "surrogate_config", pinned=_leaders_after_9, max_refine_steps=8)
)

# with several workers, the leaders chosen later: the completion waits for 27 first epochs (three
# rungs of successive halving with reduction factor 3) instead of 9. With 4 workers the default
# wait (``complete_incumbent_delay``) is 6 epochs, so 9 one-epoch results chose both leaders.
# ``-one-leader-after27`` also completes one leader only and commits to the first it chooses:
# DyHPO's default since these runs (the same as DyHPO); ``-leaders-after9`` the default before
register_method("DyHPO-leaders-after9", _leaders_after_9("DyHPO"))
register_method("DyHPO-after27", _leaders_after_9("DyHPO", complete_incumbent_after=27))
def _one_leader(after: int, committed: int = 1) -> dict[str, Any]:
    """The completion of one leader (``complete_incumbent_share=0``), chosen once ``after``
    configurations have reported their first epoch; the first ``committed`` it chooses are
    trained to max_t even when overtaken."""
    return dict(complete_incumbent_after=after, complete_incumbent_share=0.0, committed_completions=committed)


ONE_LEADER_AFTER_27 = _one_leader(27)
register_method("DyHPO-one-leader-after27", _ours("DyHPO", **ONE_LEADER_AFTER_27))
register_method("DeepPowerLaw-one-leader-after27", _ours("DeepPowerLaw", **ONE_LEADER_AFTER_27, power_law_base=BN_FOUR_STEPS))
# DeepPowerLaw's completion waiting twice as long (``complete_incumbent_delay=4``: with one worker
# 4 x max_t = 200 observed epochs, a fifth of the development budget, instead of 100): where
# DeepPowerLaw falls behind version 0.1 on LCBench with one worker, the gap opens after the
# completion starts (benchmarks/RESULTS.md)
register_method("DeepPowerLaw-delay4", _leaders_after_9("DeepPowerLaw", complete_incumbent_delay=4.0))
# DeepPowerLaw's completion choosing at most one / two trials over the run
# (``complete_incumbent_limit``): with one worker, every configuration that takes the lead is
# otherwise completed; with the limit, DeepPowerLaw's own acquisition (EI at max_t) decides after
register_method("DeepPowerLaw-limit1", _leaders_after_9("DeepPowerLaw", complete_incumbent_limit=1))
register_method("DeepPowerLaw-limit2", _leaders_after_9("DeepPowerLaw", complete_incumbent_limit=2))
# the completion (two leaders chosen among 9) with version 0.1's ensemble training (no BatchNorm,
# 16 minibatch steps per refinement, fits from scratch uncapped): the limits above leave
# DeepPowerLaw's breadth (trials started) where it was, so this separates the surrogate's share
# of the gap to version 0.1.
# DeepPowerLaw's ensemble training since these runs (its caps bind beyond 1024 observations only,
# so today's DeepPowerLaw reproduces these runs on the development grid)
register_method(
    "DeepPowerLaw-v0.1-surrogate",
    _default_changed(
        "DeepPowerLaw", "surrogate_config", pinned=_leaders_after_9, power_law_base=None,
        max_refine_steps=16, max_fit_steps=None, refine_steps_shrink_after=None, batch_norm=False,
    ),
)
# DeepPowerLaw's default before version 0.1's ensemble training came back (BatchNorm, 4 steps
# per refinement, fits from scratch capped at 500: ``BN_FOUR_STEPS``)
register_method("DeepPowerLaw-bn-four-steps", _leaders_after_9("DeepPowerLaw"))
# DyHPO's completion rule (one leader chosen among 27 first epochs, committed) with DeepPowerLaw's
# ensemble training of version 0.1 (its default since "DeepPowerLaw with version 0.1's ensemble
# training"): with 4 workers DeepPowerLaw's two leaders chosen among 9 are what is left of its
# gap to version 0.1
NO_BN_SIXTEEN_STEPS = dict(batch_norm=False, max_refine_steps=16, max_fit_steps=4000, refine_steps_shrink_after=2000)
register_method(
    "DeepPowerLaw-one-leader-after27-no-bn-r16",
    _ours("DeepPowerLaw", **ONE_LEADER_AFTER_27, power_law_base=NO_BN_SIXTEEN_STEPS),
)
# with 4 workers, DeepPowerLaw's 27th first epoch came after 82 observed epochs (median over the
# LCBench runs of the variant above), too late to train the leader by a quarter of the budget;
# its 18th came after 28, its 9th after 9. One leader chosen among 18 first epochs, committed to
# (``-committed``: ``committed_completions=1``) or completed while it leads (past half of max_t
# ``commit_completion_after`` commits it). With one worker the wait of 2 x max_t observed epochs
# comes after the 18th first epoch: only the commitment can change decisions there
register_method("DeepPowerLaw-one-leader-after18", _ours("DeepPowerLaw", **_one_leader(18, committed=0)))
# and the committed leader chosen earlier, among 12 / 15 first epochs: the committed one among 18
# left 7 % of the LCBench runs with 4 workers without a trained configuration at 25 % of the budget
for _after in (12, 15, 18):
    register_method(f"DeepPowerLaw-one-leader-after{_after}-committed", _ours("DeepPowerLaw", **_one_leader(_after)))

# today's defaults without the completion (``complete_incumbent=False``), nothing else changed:
# with 4 workers both methods are behind version 0.1 in anytime regret on LCBench; this separates
# the completion's share of that gap from the other deviations (fit schedule, normalisation,
# conditioning set, ensemble training)
register_method("DyHPO-default-no-completion", _ours("DyHPO", complete_incumbent=False))
register_method("DeepPowerLaw-default-no-completion", _ours("DeepPowerLaw", complete_incumbent=False))
# today's DyHPO with at most two trials chosen by the completion over the run
# (``complete_incumbent_limit=2``): with 4 workers its completion moves 90 of the first 500 epochs
# to trials trained to max_t beyond what the run without it does, where 50 could be given up
# within seed noise (benchmarks/RESULTS.md, "With 4 workers the gap to version 0.1 is the
# completion's")
register_method("DyHPO-default-limit2", _ours("DyHPO", complete_incumbent_limit=2))
# today's DyHPO with its leader chosen once 54 configurations reported a first epoch (instead
# of 27): with 4 workers about 125 epochs into the run, too late for a trained model by 250
# epochs in most runs, early enough by 500; ``-limit1`` also completes that leader only
# (``complete_incumbent_limit=1``). With 4 workers on LCBench the first was level with version
# 0.1 at 50 and 100 % and behind at 25 %, with 22 % of runs untrained at 25 %; the second was
# behind at all three (benchmarks/RESULTS.md, "Which leader would make the completion free")
register_method("DyHPO-default-after54", _ours("DyHPO", complete_incumbent_after=54))
register_method("DyHPO-default-after54-limit1", _ours("DyHPO", complete_incumbent_after=54, complete_incumbent_limit=1))

# two epochs per decision instead of one (``budget_step``; the papers: 1): half the decisions
# per epoch of budget; measured 0.57x (DPL) and 0.70x (DyHPO) the CPU, worse (docs/speed.md)
register_method("DyHPO-step2", _measured("DyHPO", budget_step=2))
register_method("DeepPowerLaw-step2", _measured("DeepPowerLaw", budget_step=2))

# today's defaults but the cheaper misfit-triggered fit schedule (``DyHPO-misfit`` pins the
# completion rules of the round it was measured in)
register_method("DyHPO-refine-on-misfit", _measured("DyHPO", fit_schedule="misfit"))


def _recorded(commit: str, method: str) -> MethodFactory:
    """Runs kept under this name were recorded by the code of ``commit``; today's code does
    not reproduce them (its decisions differ: by rounding, or by a fix such as the weights
    DyHPO's training keeps), so it does not run them: check out that commit and run
    ``method`` there."""

    def factory(d, cs, configs, seed):
        raise ValueError(f"runs under this name were recorded at commit {commit}: check it out and run {method!r} there")

    return factory


# the defaults before DyHPO's GP was trained with a closed-form gradient and Adam ran on torch's
# fused kernel (same objective and updates up to rounding, which training amplifies)
register_method("DyHPO-643b520", _recorded("643b520", "DyHPO"))
register_method("DeepPowerLaw-643b520", _recorded("643b520", "DeepPowerLaw"))
# DyHPO before its GP training kept the weights of the best loss seen (it kept those of the
# Adam step after it)
register_method("DyHPO-89e9055", _recorded("89e9055", "DyHPO"))


def _v01(class_name: str) -> MethodFactory:
    """The defaults of version 0.1 (when issues 12 and 15 were filed) on today's code."""

    def factory(d, cs, configs, seed):
        from syne_dyhpo import DeepKernelGPConfig, PowerLawConfig
        from syne_dyhpo.core.policy import FitSchedule

        options = {
            "DyHPO": dict(fit_schedule=FitSchedule(refine_every=15, refit_growth=4.0),
                          surrogate_config=DeepKernelGPConfig(max_iterations=300, max_fit_points=128)),
            "DeepPowerLaw": dict(surrogate_config=PowerLawConfig(max_refine_steps=16)),
        }[class_name]
        return _measured(class_name, complete_incumbent=False, **options)(d, cs, configs, seed)

    return factory


register_method("DyHPO-v0.1", _v01("DyHPO"))
register_method("DeepPowerLaw-v0.1", _v01("DeepPowerLaw"))


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
        except Exception:
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
    :param budget_epochs: Epoch budget
    :param n_workers: Number of simulated workers
    """

    method: str
    source: str
    task: str
    seed: int
    budget_epochs: int
    n_workers: int = 1

    def key(self, benchmark: str) -> str:
        """Relative folder of this run inside a results dir."""
        safe_task = self.task.replace("/", "_")
        return (
            f"{benchmark}/{safe_task}/{self.method}/"
            f"seed{self.seed}-budget{self.budget_epochs}-w{self.n_workers}"
        )


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
        of the table's median epoch duration
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
    backend = simulator_backend_class(
        charge_scheduler_time, padded_metric=definition.metric if definition.nan_padded else None
    )(
        blackbox=bb,
        elapsed_time_attr=definition.elapsed_time_attr,
        tuner_sleep_time=tuner_sleep_time,
        seed=spec.seed % bb.num_seeds,
        max_resource_attr=SEGMENT_END_ATTR,  # used by jobs whose config has it (ours)
    )
    callback = SimulatorCallback()
    out.mkdir(parents=True, exist_ok=True)
    st_root = Path(tempfile.mkdtemp(prefix="st-", dir=out))
    os.environ["SYNETUNE_FOLDER"] = str(st_root)
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=SimulatedEpochsBudget(max_epochs=spec.budget_epochs),
        n_workers=spec.n_workers,
        sleep_time=0,
        callbacks=[callback],
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
        "n_results": int(len(df)),
        "n_trials": int(df["trial_id"].nunique()) if len(df) else 0,
        "simulated_time": float(df["st_tuner_time"].max()) if len(df) else 0.0,
        "final_incumbent": float(traj["incumbent"].iloc[-1]) if len(traj) else None,
        "regret": {str(k): v for k, v in regrets.items()},
        "scheduler_metadata": scheduler.metadata(),
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
    except Exception as ex:  # report, keep the grid going
        import traceback

        return spec, f"{type(ex).__name__}: {ex}\n{traceback.format_exc()}"


def make_grid(
    sources_tasks: Sequence[tuple[str, str]],
    methods: Sequence[str],
    seeds: Sequence[int],
    budget_epochs: int | dict[tuple[str, str], int],
    n_workers: int = 1,
) -> list[RunSpec]:
    """
    :param sources_tasks: ``(source, task)`` pairs
    :param methods: Method names
    :param seeds: Seeds
    :param budget_epochs: One budget, or a budget per ``(source, task)``
    :param n_workers: Simulated workers
    :return: All runs, the cross product
    """
    specs = []
    for source, task in sources_tasks:
        b = budget_epochs if isinstance(budget_epochs, int) else budget_epochs[(source, task)]
        for method in methods:
            for seed in seeds:
                specs.append(RunSpec(method, str(source), task, int(seed), int(b), n_workers))
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
    seconds, not runs, and library warnings go to ``warnings.log`` in ``results_dir`` (see
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
