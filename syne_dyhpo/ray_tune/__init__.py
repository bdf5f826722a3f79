"""Ray Tune front end of the freeze-thaw schedulers (DyHPO, Deep Power Law).

One implementation of each method, two front ends: the policy logic (surrogate, acquisition,
config encoding, the decision "resume the best paused trial or start the best new config, one
budget step at a time") lives in one :class:`~syne_dyhpo.core.scheduler.FreezeThawScheduler`
instance (the *core*, e.g. :class:`~syne_dyhpo.DyHPO`). This module only translates Ray Tune
events into the core's Syne Tune calls:

* :class:`FreezeThawRayScheduler` (a Ray ``TrialScheduler``) forwards every result to the
  core and returns its CONTINUE / PAUSE / STOP. Whenever a slot is free (fewer than
  ``max_concurrent`` trials running) it asks the core for the next decision
  (``core.suggest()``). A resume decision is carried out by ``choose_trial_to_run``, which
  hands that PAUSED Ray trial back to Ray; Ray restarts it from the checkpoint it saved when
  it was paused (``ray.tune.get_checkpoint()`` in the trainable).
* :class:`FreezeThawRaySearcher` (a Ray ``Searcher``, paired with the scheduler) hands out
  the new configurations the core decided to start, and nothing else. Ray's searchers cannot
  resume trials and its schedulers cannot create them, hence the pair.

Ray pauses a function trainable right after the report the scheduler answered with PAUSE
(the trainable blocks in ``ray.tune.report`` until it is told to go on), so no epoch runs
past a decision and ``max_resource_attr`` is not needed (and not supported) here.

The trainable must report the core's ``metric`` and ``time_attr`` (default ``"epoch"``,
counting from 1) after every epoch, with a checkpoint, and resume from
``ray.tune.get_checkpoint()``::

    def train_fn(config):
        start = 1
        checkpoint = ray.tune.get_checkpoint()
        if checkpoint is not None:
            start = load(checkpoint) + 1  # last epoch done
        for epoch in range(start, max_epochs + 1):
            loss = train_one_epoch(...)
            with tempfile.TemporaryDirectory() as d:
                save(d, epoch)
                ray.tune.report({"epoch": epoch, "loss": loss},
                                checkpoint=ray.tune.Checkpoint.from_directory(d))

    ray_scheduler = ray_dyhpo(config_space, metric="loss", mode="min", max_t=max_epochs,
                              max_concurrent=4, max_num_trials=50)
    tuner = ray.tune.Tuner(train_fn, tune_config=ray_scheduler.tune_config())
    results = tuner.fit()

The config space is a Syne Tune one (``syne_tune.config_space``); Ray search-space domains
(``ray.tune.uniform`` ...) are converted by :func:`config_space_from_ray`. Ray is an optional
dependency: ``pip install syne-dyhpo[ray]``.

An interrupted run (Ctrl+C, a crashed driver) continues with ``ray.tune.Tuner.restore(path,
trainable)``: Ray saves the searcher with its experiment state, and the searcher saves the whole
scheduler, core included (:meth:`FreezeThawRayScheduler.save`). The restored scheduler resumes
the paused and interrupted trials from their last checkpoints, keeps counting ``max_num_trials``
and ``max_total_epochs`` over both runs, and its decision log continues with a new ``session``.

Modules: :mod:`.scheduler` (the Ray ``TrialScheduler``, with its experiment checkpoints),
:mod:`.searcher` (its paired Ray ``Searcher``), :mod:`.search_space` (Ray search spaces to Syne
Tune config spaces) and :mod:`.builders` (:func:`ray_scheduler` and the methods' shortcuts).
"""

try:
    import ray.tune  # noqa: F401
except ImportError as _err:  # pragma: no cover - exercised only without ray
    raise ImportError(
        "syne_dyhpo.ray_tune needs Ray Tune, an optional dependency: pip install syne-dyhpo[ray] "
        f"(or pip install 'ray[tune]'). Import failed with: {_err}"
    ) from _err

from syne_dyhpo.ray_tune.builders import ray_deep_power_law, ray_dyhpo, ray_scheduler
from syne_dyhpo.ray_tune.scheduler import FreezeThawRayScheduler
from syne_dyhpo.ray_tune.search_space import config_space_from_ray
from syne_dyhpo.ray_tune.searcher import FreezeThawRaySearcher

__all__ = [
    "FreezeThawRayScheduler",
    "FreezeThawRaySearcher",
    "config_space_from_ray",
    "ray_deep_power_law",
    "ray_dyhpo",
    "ray_scheduler",
]
