"""The Ray Tune ``Searcher`` paired with the freeze-thaw ``TrialScheduler``: Ray's searchers
cannot resume trials and its schedulers cannot create them, hence the pair (see
:mod:`syne_dyhpo.ray_tune`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray.tune.search import Searcher as RaySearcher
from ray.tune.search import sample as ray_sample

from syne_dyhpo.core.scheduler import FreezeThawScheduler

if TYPE_CHECKING:
    from syne_dyhpo.ray_tune.scheduler import FreezeThawRayScheduler


class FreezeThawRaySearcher(RaySearcher):
    """Ray Tune ``Searcher`` paired with a :class:`FreezeThawRayScheduler`: suggests exactly
    the new configurations the scheduler's core decided to start. Create it through
    :attr:`FreezeThawRayScheduler.searcher`.

    :param scheduler: the paired scheduler
    """

    def __init__(self, scheduler: FreezeThawRayScheduler):
        super().__init__(metric=scheduler.core.metric, mode=scheduler.mode)
        self.scheduler = scheduler

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Called by Ray's ``ConcurrencyLimiter`` (``TuneConfig(max_concurrent_trials=...)``):
        the scheduler limits the trials running at once itself (``max_concurrent``), so the
        limiter stands aside (True). A different limit is refused: the limiter would count paused
        trials as running and block the run."""
        self.scheduler._check_max_concurrent_trials(max_concurrent)
        return True

    def save(self, checkpoint_path: str) -> None:
        """Ray's experiment checkpoint: the paired scheduler's state (:meth:`FreezeThawRayScheduler.save`)."""
        self.scheduler.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """``Tuner.restore``: the paired scheduler's state (:meth:`FreezeThawRayScheduler.restore`)."""
        self.scheduler.restore(checkpoint_path)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        _check_metric_mode(self.scheduler.core, metric, mode)
        unresolved = [k for k, v in (config or {}).items() if isinstance(v, ray_sample.Domain)]
        if unresolved:
            raise ValueError(
                f"param_space has search-space domains {unresolved}: the freeze-thaw searcher samples "
                "only from its own config space; pass them there (config_space_from_ray converts Ray "
                "domains) and keep only constants in param_space"
            )
        return True

    # Ray annotates Optional[Dict], yet documents (and takes) Searcher.FINISHED, a str, too
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        return self.scheduler.next_new_config(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass  # the scheduler receives the same event


def _check_metric_mode(core: FreezeThawScheduler, metric: str | None, mode: str | None) -> None:
    if metric is not None and metric != core.metric:
        raise ValueError(f"TuneConfig metric '{metric}' differs from the scheduler's metric '{core.metric}'")
    if mode is not None and mode != core.metric_mode():
        raise ValueError(f"TuneConfig mode '{mode}' differs from the scheduler's mode '{core.metric_mode()}'")
