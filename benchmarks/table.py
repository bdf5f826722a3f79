"""Helpers on a tabular blackbox: its configurations, metric bounds for
regret normalisation, and restricting any scheduler to the table.

Why restrict by nearest-table-row mapping rather than Syne Tune's
``add_surrogate(bb, KNeighborsRegressor(n_neighbors=1))``: the surrogate path
goes through ``hyperparameter_objectives_values``, which imputes NaN values by
the previous fidelity and drops configurations whose curves are all NaN
(TaskSet has such curves), so diverged runs would silently look healthy or
vanish. Replacing each suggestion by a real, unused row keeps the table values
exactly as recorded (NaN included), gives every method the same candidate set
(the one our freeze-thaw schedulers get as ``CandidateOptions(configs=...)``), and never
evaluates the same row twice. Random draws become uniform draws over the rows
(``sampling="uniform"``), so that every method sees the same candidate
distribution; see :class:`TableRestricted`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from syne_tune.backend.trial_status import Trial
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
from syne_tune.config_space import (
    postprocess_config,
)
from syne_tune.optimizer.scheduler import TrialScheduler, TrialSuggestion

from benchmarks.padded import last_real_values
from syne_dyhpo.search_space import ConfigEncoder, to_native

logger = logging.getLogger(__name__)


def table_configs(blackbox: BlackboxTabular) -> list[dict[str, Any]]:
    """
    :param blackbox: Tabular blackbox
    :return: One dict per table row, native Python values, cast with
        ``postprocess_config`` (so constants of the space are included)
    """
    space = blackbox.configuration_space
    rows = blackbox.hyperparameters.to_dict("records")
    return [
        postprocess_config({k: to_native(v) for k, v in row.items()}, space)
        for row in rows
    ]


@dataclass(frozen=True)
class MetricBounds:
    """
    Best and worst values of a metric over a table (original units).

    :param best_any: Best finite value at any fidelity. Used as the regret's
        "best": the anytime incumbent is the best value seen at any epoch, so
        this keeps regret >= 0.
    :param best_final: Best finite value at the maximum fidelity; for a NaN-padded table
        (PD1), at each curve's last real step (see :func:`metric_bounds`)
    :param worst_any: Worst finite value at any fidelity (can be 1e19 on TaskSet)
    :param worst_final: Worst finite value at the maximum fidelity (padded: last real step)
    :param worst: The "worst" used for regret normalisation: the
        ``worst_quantile`` quantile (in "bad" direction) of the finite values
        at the maximum fidelity. Diverged (NaN/inf) values are left out of the
        quantile (counting them as +inf would make it infinite on TaskSet
        tasks where > 10 % of curves diverge), and a single 1e10 loss cannot
        squash all regrets to ~0. Regrets above 1 are clipped to 1.
    :param worst_quantile: The quantile used for ``worst``
    :param n_nonfinite: Number of NaN/inf entries in the metric table
    """

    best_any: float
    best_final: float
    worst_any: float
    worst_final: float
    worst: float
    worst_quantile: float
    n_nonfinite: int


def metric_bounds(
    blackbox: BlackboxTabular,
    metric: str,
    do_minimize: bool,
    worst_quantile: float = 0.9,
    padded: bool = False,
) -> MetricBounds:
    """
    Computes :class:`MetricBounds` over all configurations and seeds.

    :param blackbox: Tabular blackbox
    :param metric: Metric name
    :param do_minimize: Whether smaller is better
    :param worst_quantile: Quantile of final-fidelity values used as "worst"
        (1.0 gives the plain table worst at the maximum fidelity)
    :param padded: Whether trailing NaN is padding (PD1: the run ended there). The "final"
        value of a configuration is then the one at its last real step: at the maximum
        fidelity only the configurations with the longest curves have a value, often a small
        and unrepresentative subset (those trained longest), so a quantile over them says
        little about how bad a finished run can be
    :return: The bounds
    """
    j = blackbox.objectives_names.index(metric)
    # (configs, seeds, fidelities); work in "loss" orientation (smaller = better)
    y = blackbox.objectives_evaluations[..., j].astype(np.float64)
    sign = 1.0 if do_minimize else -1.0
    loss = sign * y
    finite = np.isfinite(loss)
    final = last_real_values(loss) if padded else loss[:, :, -1]
    final_finite = final[np.isfinite(final)]
    if not finite.any() or final_finite.size == 0:
        raise ValueError(f"No finite value of {metric} in the table")
    return MetricBounds(
        best_any=float(sign * loss[finite].min()),
        best_final=float(sign * final_finite.min()),
        worst_any=float(sign * loss[finite].max()),
        worst_final=float(sign * final_finite.max()),
        worst=float(sign * np.quantile(final_finite, worst_quantile)),
        worst_quantile=worst_quantile,
        n_nonfinite=int((~finite).sum()),
    )


TABLE_SAMPLING = ("uniform", "nearest")


class TableRestricted(TrialScheduler):
    """
    Wraps a scheduler sampling from a continuous space so that every new trial
    uses a not-yet-used configuration of the table. Resume suggestions pass
    through. Once all rows are used, ``suggest`` returns None (Syne Tune then
    stops scheduling). The backend stores the replaced config as
    ``trial.config``, so the wrapped scheduler learns from the configuration
    actually evaluated.

    Two ways to pick the row (``sampling``):

    * ``"uniform"``: a uniformly random unused row (seeded by ``random_seed``);
      the wrapped scheduler's config is ignored. For schedulers whose new
      configs are plain random draws (RandomSearch, ASHA), this is random
      search over the table, the candidate distribution our schedulers get
      from ``CandidateOptions(configs=...)``.
    * ``"nearest"``: the unused row nearest to the suggested config (Euclidean
      distance in the :class:`~syne_dyhpo.search_space.ConfigEncoder` space),
      for model-based proposals (BOHB). Rows are then drawn in proportion to
      their Voronoi cells under the space's sampling distribution, which is far
      from uniform when the declared space does not match how the table was
      sampled (TaskSet: ``beta1``/``beta2`` are declared uniform on [0, 1] but
      90 % of rows lie above 0.63, so the few low-beta rows soak up most draws).

    :param scheduler: Scheduler to wrap
    :param table_configs: Table rows, see :func:`table_configs`
    :param encoder: Encoder; default built from ``scheduler.config_space``
    :param sampling: ``"nearest"`` (default) or ``"uniform"``, see above
    :param random_seed: Seed of the uniform row draws; default: the wrapped
        scheduler's ``random_seed``
    """

    def __init__(
        self,
        scheduler: TrialScheduler,
        table_configs: list[dict[str, Any]],
        encoder: ConfigEncoder | None = None,
        sampling: str = "nearest",
        random_seed: int | None = None,
    ):
        if sampling not in TABLE_SAMPLING:
            raise ValueError(f"sampling must be one of {TABLE_SAMPLING}, got {sampling!r}")
        if random_seed is None:
            random_seed = getattr(scheduler, "random_seed", None)
        super().__init__(random_seed=random_seed)
        self.scheduler = scheduler
        self.table_configs = table_configs
        self.sampling = sampling
        if encoder is None:
            encoder = ConfigEncoder(scheduler.config_space)
        self.encoder = encoder
        self._X = encoder.encode_many(table_configs)
        self._used = np.zeros(len(table_configs), dtype=bool)
        self._rng = np.random.RandomState(self.random_seed)

    def _pick_unused(self, config: dict[str, Any]) -> int | None:
        """Index of the row replacing ``config`` (see ``sampling``), None once all are used."""
        free = np.flatnonzero(~self._used)
        if free.size == 0:
            return None
        if self.sampling == "uniform":
            return int(self._rng.choice(free))
        x = self.encoder.encode(config)
        d = ((self._X[free] - x) ** 2).sum(axis=1)
        return int(free[int(np.argmin(d))])

    def suggest(self) -> TrialSuggestion | None:
        suggestion = self.scheduler.suggest()
        if suggestion is None or not suggestion.spawn_new_trial_id:
            return suggestion
        if suggestion.config is None:
            return suggestion
        idx = self._pick_unused(suggestion.config)
        if idx is None:
            logger.info("All table configurations used, no more suggestions")
            return None
        self._used[idx] = True
        config = dict(self.table_configs[idx])
        # keep extra (non-hyperparameter) keys the scheduler may have added
        for k, v in suggestion.config.items():
            if k not in self.encoder.config_space:
                config[k] = v
        return TrialSuggestion.start_suggestion(
            config, checkpoint_trial_id=suggestion.checkpoint_trial_id
        )

    def on_trial_add(self, trial: Trial):
        self.scheduler.on_trial_add(trial)

    def on_trial_error(self, trial: Trial):
        self.scheduler.on_trial_error(trial)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        return self.scheduler.on_trial_result(trial, result)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]):
        self.scheduler.on_trial_complete(trial, result)

    def on_trial_remove(self, trial: Trial):
        self.scheduler.on_trial_remove(trial)

    def metric_names(self) -> list[str]:
        return self.scheduler.metric_names()

    def metric_mode(self) -> str | list[str]:
        return self.scheduler.metric_mode()

    def metadata(self) -> dict[str, Any]:
        return {
            "wrapper": "TableRestricted",
            "num_table_configs": len(self.table_configs),
            "scheduler": type(self.scheduler).__name__,
            "table_sampling": self.sampling,
        }
