"""Tables whose curves are padded with NaN (PD1), and simulating them.

Syne Tune's PD1 import pads each configuration's curve with NaN up to the task's longest
(``pd1_import.convert_task``, ``pad_with_nans``): there, trailing NaN means "this run ended
here". Everywhere else (TaskSet, a real training job) NaN means divergence, and the freeze-thaw
schedulers stop such a trial and score it as the worst value. A scheduler cannot tell the two
apart from a reported NaN, so the benchmark layer, which knows the blackbox family
(:attr:`~benchmarks.blackboxes.BenchmarkDefinition.nan_padded`), keeps the padding from ever
being reported: the simulated training job ends after its last real step, as a job that
finished by itself (the scheduler sees ``on_trial_complete``).

A step is *real* when the metric and the elapsed time are both finite there; the padding is
everything after the last real step. A NaN before it is data (e.g. a diverged evaluation)
and is reported as recorded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from syne_tune.backend.trial_status import Status
from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular


def real_lengths(real: np.ndarray) -> np.ndarray:
    """
    :param real: Boolean array, last axis the fidelity steps (True where the step is real)
    :return: Per curve, the number of steps up to and including the last real one (0 if none)
    """
    real = np.asarray(real, dtype=bool)
    steps = real.shape[-1]
    last = steps - 1 - np.argmax(real[..., ::-1], axis=-1)
    return np.where(real.any(axis=-1), last + 1, 0)


def curve_lengths(blackbox: BlackboxTabular, metric: str, elapsed_time_attr: str) -> np.ndarray:
    """
    :param blackbox: Tabular blackbox
    :param metric: Metric whose NaN marks padding
    :param elapsed_time_attr: Cumulative time objective (padded alike)
    :return: Shape ``(num_configs, num_seeds)``: steps up to each curve's last real one
    """
    names = blackbox.objectives_names
    y = blackbox.objectives_evaluations
    real = np.isfinite(y[..., names.index(metric)]) & np.isfinite(y[..., names.index(elapsed_time_attr)])
    return real_lengths(real)


def last_real_values(values: np.ndarray) -> np.ndarray:
    """
    :param values: Array, last axis the fidelity steps, NaN-padded
    :return: Per curve, the value at its last finite step (NaN for a curve with none)
    """
    n = real_lengths(np.isfinite(values))
    idx = np.maximum(n - 1, 0)[..., None]
    last = np.take_along_axis(values, idx, axis=-1)[..., 0]
    return np.where(n > 0, last, np.nan)


def rows_with_real_steps(
    blackbox: BlackboxTabular, metric: str, elapsed_time_attr: str, seed: int
) -> np.ndarray:
    """
    :param blackbox: Tabular blackbox
    :param metric: See :func:`curve_lengths`
    :param elapsed_time_attr: See :func:`curve_lengths`
    :param seed: Seed slice the run reads
    :return: Indices of the rows with at least one real step for ``seed``: a configuration
        without any (PD1: a run never evaluated) has nothing to simulate
    """
    return np.flatnonzero(curve_lengths(blackbox, metric, elapsed_time_attr)[:, seed] > 0)


def ends_at_last_real_step(base: type, metric: str) -> type:
    """
    Simulator backend class ending each trial after its last real step.

    :param base: A ``UserBlackboxBackend`` class (see
        :func:`benchmarks.runner.simulator_backend_class`)
    :param metric: Metric whose NaN marks padding
    :return: Subclass of ``base``, constructed with the same arguments
    """

    class EndsAtLastRealStep(base):
        def last_real_fidelity(self, config: dict[str, Any], seed: int | None) -> int:
            """Fidelity of the last real step of ``config``'s whole curve (not just of the
            requested segment: a NaN at a segment's end with real steps after it is data)."""
            values = self.blackbox.objective_function(self._filter_config(config), seed=seed)
            names = self.blackbox.objectives_names
            real = np.isfinite(values[:, names.index(metric)]) & np.isfinite(
                values[:, names.index(self.elapsed_time_attr)]
            )
            n = int(real_lengths(real))
            if n == 0:
                raise ValueError(
                    f"Configuration {config} has no real step for seed {seed} (its curve is all "
                    f"NaN): nothing to simulate; leave it out of the candidates "
                    f"(benchmarks.padded.rows_with_real_steps)"
                )
            return int(self.blackbox.fidelity_values[n - 1])

        def config_objectives(self, config: dict[str, Any], seed: int) -> list[dict]:
            last = self.last_real_fidelity(config, seed)
            return [r for r in super().config_objectives(config, seed) if int(r[self.time_attr]) <= last]

        def _run_job_and_collect_results(self, trial_id: int, config: dict | None = None):
            # Resumed after a pause at its last real step (the scheduler paused it there):
            # nothing is left to train, the job ends at once. Syne Tune's implementation
            # would index the empty list of remaining results.
            paused_at = self._resource_paused_for_trial.get(trial_id)
            if paused_at is not None and self._support_checkpointing:
                cfg = self._trial_dict[trial_id].config if config is None else config
                seed = self._seed if self._seed is not None else self._seed_for_trial.get(trial_id)
                if self.last_real_fidelity(cfg, seed) <= paused_at:
                    return Status.completed, []
            return super()._run_job_and_collect_results(trial_id, config)

    EndsAtLastRealStep.__name__ = f"{base.__name__}EndsAtLastRealStep"
    EndsAtLastRealStep.__qualname__ = EndsAtLastRealStep.__name__
    return EndsAtLastRealStep
