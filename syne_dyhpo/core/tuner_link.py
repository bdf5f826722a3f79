"""What a freeze-thaw scheduler learns of the Syne Tune ``Tuner`` that runs it: the experiment
folder and clock of its decision log, the backend a loaded tuner's trials are restored in, and
the callback deleting the checkpoints of retired trials."""

from __future__ import annotations

import logging
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from syne_tune.tuner_callback import TunerCallback

if TYPE_CHECKING:
    from syne_tune import Tuner

logger = logging.getLogger(__name__)


def calling_tuner(depth: int = 11) -> Tuner | None:
    """The Syne Tune ``Tuner`` among the callers of the function calling this one (at most
    ``depth`` frames up, that function's own frame included), or None.

    This is how a scheduler finds the Tuner that runs it, and it is only called by
    ``FreezeThawScheduler.suggest``, once per session. Syne Tune 0.16 hands a scheduler no
    reference to its Tuner, nor the Tuner's experiment folder: the scheduler is made before the
    Tuner, which names the folder (from its ``tuner_name`` and a time stamp) in its own
    constructor; its callbacks get ``Trial`` objects (id, configuration, creation time) and
    result dicts (the metrics and Syne Tune's ``st_*`` keys, no path); ``metric_names()``,
    ``metric_mode()`` and ``metadata()`` are called without arguments; and ``Tuner.load``
    unpickles the scheduler without calling it. The one hook that receives the Tuner is a
    ``TunerCallback``'s ``on_tuning_start(tuner)``, and a scheduler can add a callback only
    through ``callback_for_checkpoint_removal``, which the Tuner calls only when its backend
    deletes checkpoints (``delete_checkpoints=True``, not the default). ``suggest()`` is
    called from ``Tuner._schedule_new_task`` (directly, or through a scheduler wrapping this
    one): the Tuner is the ``self`` of a caller's frame. Front ends that drive the scheduler
    themselves call ``attach_decision_log`` and ``restore`` instead.

    :param depth: frames looked at
    """
    tuner_cls = getattr(sys.modules.get("syne_tune.tuner"), "Tuner", None)
    if tuner_cls is None:  # syne_tune.tuner never imported: no Tuner runs
        return None
    frame: FrameType | None = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return None
        caller = frame.f_locals.get("self")
        if isinstance(caller, tuner_cls):
            return caller
        frame = frame.f_back
    return None


def log_folder(tuner: Tuner) -> dict[str, Any]:
    """Where and from when a scheduler run by ``tuner`` writes its decision log: the keyword
    arguments of ``FreezeThawScheduler.attach_decision_log`` (the experiment folder, the
    Tuner's start time stamp, its backend and its number of workers)."""
    from syne_tune.constants import ST_TUNER_START_TIMESTAMP

    return {
        "folder": str(tuner.tuner_path),
        "start_timestamp": tuner.metadata.get(ST_TUNER_START_TIMESTAMP),
        "backend": tuner.trial_backend,
        "n_workers": getattr(tuner, "n_workers", None),
    }


class RetiredCheckpointRemoval(TunerCallback):
    """Deletes the checkpoints of trials the scheduler retired (see ``PausedCheckpoints.max_kept``).

    :param scheduler: the scheduler (its ``pop_checkpoints_to_delete()`` says which)
    """

    def __init__(self, scheduler):
        self._scheduler = scheduler
        self._backend = None

    def on_tuning_start(self, tuner):
        self._backend = tuner.trial_backend

    def on_loop_end(self):
        for trial_id in self._scheduler.pop_checkpoints_to_delete():
            assert self._backend is not None  # set by on_tuning_start
            self._backend.delete_checkpoint(trial_id)
            logger.info(f"Deleted checkpoint of retired trial_id {trial_id}")
