"""What the report needs to read a run besides Syne Tune's files (the metric, its mode, ``max_t``,
where checkpoints are, the log's clock start and the number of workers), written by the decision
log into :data:`RUN_INFO_FILENAME` in the experiment folder when it is bound."""

from __future__ import annotations

from typing import Any

#: what the report needs besides Syne Tune's files: metric, mode, max_t, checkpoint locations
RUN_INFO_FILENAME = "syne_dyhpo_run.json"


def checkpoint_template(backend) -> str | None:
    """Where a trial's checkpoint lives, with ``{trial_id}`` in place of its id: a folder for
    ``LocalBackend`` and ``PythonBackend``, an S3 URI for the SageMaker backend; None for a
    simulator (no checkpoints) or a backend that does not say."""
    from syne_tune.backend.simulator_backend.simulator_backend import SimulatorBackend

    if isinstance(backend, SimulatorBackend):
        return None
    placeholder = "{trial_id}"
    try:
        if hasattr(backend, "checkpoint_location"):  # syne_dyhpo.backends.sagemaker
            return backend.checkpoint_location(placeholder).uri
        if hasattr(backend, "checkpoint_trial_path"):  # LocalBackend, PythonBackend
            return str(backend.checkpoint_trial_path(placeholder))
    except Exception:  # noqa: BLE001 - a location the report can do without
        return None
    return None


def run_info(scheduler, backend=None, start_timestamp: float | None = None,
             n_workers: int | None = None) -> dict[str, Any]:
    """What the report needs to read a run besides Syne Tune's files (read from the scheduler's
    public attributes).

    :param start_timestamp: ``time.time()`` when the log's clock started (Ray Tune's results
        carry only such stamps)
    :param n_workers: the number of trials run at once (the report's share of worker time)
    """
    from syne_tune.config_space import Domain

    return {
        "start_timestamp": start_timestamp,
        "n_workers": n_workers,
        "scheduler": type(scheduler).__name__,
        "metric": scheduler.metric,
        "mode": scheduler.metric_mode(),
        "time_attr": scheduler.time_attr,
        "max_t": scheduler.max_t,
        "max_resource_attr": scheduler.max_resource_attr,
        "hyperparameters": [name for name, value in scheduler.config_space.items() if isinstance(value, Domain)],
        "backend": None if backend is None else type(backend).__name__,
        "checkpoint_template": None if backend is None else checkpoint_template(backend),
    }
