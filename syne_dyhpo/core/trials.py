"""The trial life cycle: what a start, a result, a pause or an error does to a trial.

All state lives in the :class:`~syne_dyhpo.core.observations.TrialRecord` of each trial (its
curve, status and the epoch at which its current segment ends); this module holds the rules,
so that segment ends are computed in one place and the scheduler only translates Syne Tune's
callbacks. Results are keyed on the reported epoch, never on arrival order: repeated, stale
or skipped epochs never corrupt a curve, and late reports of trials that are no longer
running are kept as data without reviving the trial.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from enum import Enum

from syne_dyhpo.core.observations import Observations, TrialRecord, TrialStatus

logger = logging.getLogger(__name__)


class ResultAction(str, Enum):
    """What the scheduler does with the trial that reported a result."""

    CONTINUE = "continue"  # keep training: inside its segment, or nothing new was reported
    PAUSE = "pause"  # not running (a late report): keep it paused
    STOP = "stop"  # finished, diverged, failed or retired: never runs again
    DECIDE = "decide"  # its segment ended: the policy chooses who trains next


def check_epoch_within_max_t(record: TrialRecord, epoch: int, max_t: int, time_attr: str) -> None:
    """Raises a ValueError if a trial's first report is already past ``max_t``: ``time_attr``
    then counts something else than ``max_t`` does (steps against epochs), and every trial
    would stop with an empty curve.

    :param record: the reporting trial
    :param epoch: the value of ``time_attr`` it reported
    """
    if epoch > max_t and record.last_epoch == 0:
        raise ValueError(
            f"trial_id {record.trial_id} reported {time_attr}={epoch} first, beyond max_t={max_t}: "
            f"time_attr '{time_attr}' must count the same budget as max_t (epochs from 1 to max_t), "
            "e.g. not steps while max_t counts epochs"
        )


class TrialLifecycle:
    """Status transitions and segment ends of all trials in ``observations``.

    :param observations: the curves and records of all trials
    :param budget_step: epochs per segment (per decision)
    :param restart_if_lost: what a resumed trial that reports epoch 1 again (its
        checkpoint was missing or unreadable, the script started over) becomes: False marks it
        failed; True archives its earlier curve and lets it continue from scratch
    :param max_resource_attr: the scheduler's ``max_resource_attr`` (None: jobs are not told
        where their segment ends), named when epochs were lost (:meth:`lost_epochs`)
    :param jobs_run_on: jobs are told to run to ``max_t`` and paused when their trial loses a
        decision (:class:`~syne_dyhpo.core.job_costs.JobCosts`): the epochs a job trains
        between its report and its pause are an expected loss (:meth:`lost_epochs`)
    :param start_epochs: epochs a job started now trains at least, given whether it is a new
        trial's (:meth:`~syne_dyhpo.core.job_costs.JobTimer.start_segment_epochs`); None: one
        ``budget_step``
    """

    #: whether lost epochs were logged as an ERROR in this run (once per run)
    lost_epochs_logged = False
    max_resource_attr: str | None = None

    def __init__(
        self,
        observations: Observations,
        budget_step: int,
        restart_if_lost: bool = False,
        max_resource_attr: str | None = None,
        jobs_run_on: bool = False,
        start_epochs: Callable[[bool], int] | None = None,
    ):
        self.observations = observations
        self.jobs_run_on = jobs_run_on
        self.max_t = observations.max_t
        self.budget_step = budget_step
        self.restart_if_lost = restart_if_lost
        self.max_resource_attr = max_resource_attr
        self.start_epochs = start_epochs
        self._resumed: set[int] = set()  # resumed, no new report yet (lost-checkpoint detection)

    def segment_end(self, record: TrialRecord | None, starts: bool | None = None) -> int:
        """Epoch at which a (new, for None) trial would next be decided on: one ``budget_step``
        after its last epoch, or if a job starts for it the longer of that and ``start_epochs``;
        at most ``max_t``.

        :param starts: whether a job is started or resumed for it (None: unless the trial's
            job is running)
        """
        last = 0 if record is None else record.last_epoch
        if starts is None:
            starts = record is None or record.status is not TrialStatus.RUNNING
        step = self.budget_step
        if starts and self.start_epochs is not None:
            step = max(step, self.start_epochs(last == 0))
        return min(last + step, self.max_t)

    def start(self, record: TrialRecord) -> None:
        """The trial got a worker (a new trial, or one a front end adopted)."""
        record.status = TrialStatus.RUNNING
        record.segment_end = self.segment_end(record, starts=True)

    def resume(self, record: TrialRecord) -> None:
        """A paused trial gets a worker again."""
        self.start(record)
        self._resumed.add(record.trial_id)

    def extend(self, record: TrialRecord) -> None:
        """The running trial won the decision at its segment end: one more segment."""
        record.segment_end = self.segment_end(record, starts=False)

    def on_result(self, record: TrialRecord, epoch: int, value: float) -> ResultAction:
        """Records a result and says what the trial does next.

        :param record: the reporting trial
        :param epoch: reported epoch (>= 1)
        :param value: reported metric value (NaN/inf: diverged)
        """
        if record.status is not TrialStatus.RUNNING:
            return self._on_late_result(record, epoch, value)
        if epoch > self.max_t:
            logger.warning(f"trial_id {record.trial_id}: epoch {epoch} > max_t={self.max_t}; stopping it")
            record.status = TrialStatus.FINISHED
            return ResultAction.STOP
        if epoch == 1 and record.last_epoch >= 1 and record.trial_id in self._resumed:
            return self._on_restart(record, value)
        if record.trial_id in self._resumed and epoch > record.last_epoch + 1:
            self.lost_epochs(record, record.last_epoch + 1, epoch - 1, f"its resumed job reported epoch {epoch} first")
        self._resumed.discard(record.trial_id)
        if not self.observations.add_result(record.trial_id, epoch, value):
            return ResultAction.CONTINUE  # repeated or stale epoch: nothing new
        if not math.isfinite(value):
            logger.warning(
                f"trial_id {record.trial_id}: value {value} at epoch {epoch}; treated as diverged "
                "(worst value), stopped and never resumed"
            )
            record.status = TrialStatus.DIVERGED
            return ResultAction.STOP
        if epoch >= self.max_t:
            record.status = TrialStatus.FINISHED
            return ResultAction.STOP
        if epoch < record.segment_end:
            return ResultAction.CONTINUE
        return ResultAction.DECIDE

    def _on_late_result(self, record: TrialRecord, epoch: int, value: float) -> ResultAction:
        """A trial paused or stopped by us whose job reported once more before it ended
        (results are polled): the data is kept if new, and what it says about the trial holds
        (a diverged trial is never resumed, one that reached ``max_t`` is finished). A paused
        trial's job that reports past the end of its segment went on training: what it trained
        after this report is lost when it is killed (:meth:`lost_epochs`)."""
        if record.status is TrialStatus.PAUSED and record.segment_end < epoch <= self.max_t:
            self.lost_epochs(
                record,
                epoch + 1,
                None,
                f"its job was paused at epoch {record.segment_end} and still reported epoch {epoch}",
            )
        if self.observations.add_result(record.trial_id, epoch, value) and record.status in (
            TrialStatus.PAUSED,
            TrialStatus.RETIRED,
        ):
            if not math.isfinite(value):
                logger.warning(f"trial_id {record.trial_id}: late report of value {value}; treated as diverged")
                record.status = TrialStatus.DIVERGED
            elif epoch >= self.max_t:
                record.status = TrialStatus.FINISHED
        return ResultAction.PAUSE if record.status.resumable else ResultAction.STOP

    def lost_epochs(self, record: TrialRecord, first: int, last: int | None, evidence: str) -> None:
        """Results the trial's job trained were never seen: its job trained past the end of the
        segment it was paused at, and a backend that polls results (Syne Tune's
        ``LocalBackend``) drops those reported after a pause. They stay missing in the curve
        (NaN gaps, or its end), never moved to another epoch. Logged as an ERROR naming
        ``max_resource_attr`` the first time in a run, at INFO afterwards; at INFO always when
        jobs run on past their segments by design (``jobs_run_on``: a pause then kills a job
        that trains on, and what it trained after its last report seen is the price of not
        restarting a winning trial at every segment end).

        :param record: the trial
        :param first: first epoch lost
        :param last: last epoch lost (None: not known)
        :param evidence: what showed it, for the message
        """
        if last is None:
            epochs = f"epochs from {first} on"
        elif last == first:
            epochs = f"epoch {first}"
        else:
            epochs = f"epochs {first}-{last}"
        if self.jobs_run_on:
            logger.info(
                f"trial_id {record.trial_id}: lost {epochs} of its curve ({evidence}): its job runs to "
                "max_t and was paused when the trial lost a decision (JobCosts); what it trained after "
                "its last report seen is recorded as missing"
            )
            return
        if self.max_resource_attr is None:
            advice = (
                "Create the scheduler with max_resource_attr (a config key, e.g. "
                "max_resource_attr='epochs') and have the training script stop after the epoch it "
                "holds: a job then stops where the scheduler pauses it"
            )
        else:
            advice = (
                f"The training script must stop after the epoch in config['{self.max_resource_attr}'] "
                f"(max_resource_attr='{self.max_resource_attr}'), which is set on every start and resume"
            )
        message = (
            f"trial_id {record.trial_id}: lost {epochs} of its curve ({evidence}): its job trained past "
            f"the end of its segment, and results reported after a pause are dropped. They are recorded "
            f"as missing. {advice}"
        )
        if self.lost_epochs_logged:
            logger.info(message)
            return
        self.lost_epochs_logged = True
        logger.error(message + " (logged once per run; later losses at INFO)")

    def _on_restart(self, record: TrialRecord, value: float) -> ResultAction:
        """A resumed trial reported epoch 1: its checkpoint was lost and it started over."""
        tid = record.trial_id
        if not self.restart_if_lost:
            logger.warning(
                f"trial_id {tid} was resumed after epoch {record.last_epoch} but reported epoch 1: "
                "its checkpoint is missing or unreadable. Marked failed (pass options=FreezeThawOptions("
                "checkpoints=PausedCheckpoints(restart_if_lost=True)) to restart such trials from scratch)"
            )
            record.status = TrialStatus.FAILED
            return ResultAction.STOP
        logger.warning(
            f"trial_id {tid} lost its checkpoint after epoch {record.last_epoch} and restarts from "
            "scratch; its earlier curve is kept as an archived record"
        )
        exact_segment = record.job_end == record.segment_end
        self.observations.archive(tid)
        self._resumed.discard(tid)
        self.observations.add_result(tid, 1, value)
        if not exact_segment:
            self.extend(record)
        # else the segment end stays: the restarted job still runs to the segment end it was
        # told and stops itself there; pausing it earlier would kill it past its report and
        # leave a checkpoint ahead of what was seen
        return ResultAction.CONTINUE

    def on_removed(self, record: TrialRecord) -> None:
        """Syne Tune took the trial's worker away (after our PAUSE or STOP)."""
        if record.status is TrialStatus.RUNNING:
            record.status = TrialStatus.PAUSED if record.last_epoch < self.max_t else TrialStatus.FINISHED

    def on_job_completed(self, record: TrialRecord) -> None:
        """The trial's job ended by itself (:meth:`on_completed`). A job resumed after epoch
        ``e < max_t`` that ends without reporting anything had nothing left to train: its
        checkpoint was past ``e``, the epochs in between were lost (:meth:`lost_epochs`)."""
        if record.status is TrialStatus.RUNNING and record.trial_id in self._resumed and record.last_epoch < self.max_t:
            self.lost_epochs(record, record.last_epoch + 1, None, "its resumed job ended without reporting an epoch")
        self._resumed.discard(record.trial_id)
        self.on_completed(record)

    def on_completed(self, record: TrialRecord) -> None:
        """The trial's job ended by itself: it can never be resumed."""
        if record.status in (TrialStatus.RUNNING, TrialStatus.PAUSED):
            record.status = TrialStatus.FINISHED if record.last_epoch >= self.max_t else TrialStatus.COMPLETED

    def on_error(self, record: TrialRecord) -> None:
        """The trial's job crashed: its results are kept, it is never resumed."""
        logger.warning(
            f"trial_id {record.trial_id} failed after {record.last_epoch} epochs; it is never "
            "resumed, its results are kept"
        )
        record.status = TrialStatus.FAILED

    def retire(self, record: TrialRecord) -> None:
        """A paused trial ranked hopeless: never resumed, its checkpoint may be deleted."""
        record.status = TrialStatus.RETIRED
        logger.info(f"trial_id {record.trial_id} retired (ranked hopeless); its checkpoint may be deleted")

    def interrupt(self, record: TrialRecord) -> None:
        """The tuner holding this trial was saved while its job ran, and has been loaded from that
        save (Syne Tune's ``Tuner.load``): the job is gone, and the loaded tuner never polls it
        again. The trial is no longer running, but not resumable yet either: its backend still
        records it as running, and Syne Tune only resumes a trial its backend has paused (see
        :meth:`restore`)."""
        if record.status is TrialStatus.RUNNING:
            record.status = TrialStatus.INTERRUPTED
            self._resumed.discard(record.trial_id)

    def restore(self, record: TrialRecord) -> None:
        """The backend has an interrupted (or paused) trial paused again, and the results its
        jobs reported after the save were added: it is resumable at the epoch after its last
        one, unless its curve already reached ``max_t`` or diverged."""
        if record.status not in (TrialStatus.INTERRUPTED, TrialStatus.PAUSED):
            return
        if record.last_epoch >= self.max_t:
            record.status = TrialStatus.FINISHED
        elif record.scores and record.scores[-1] == -math.inf:
            record.status = TrialStatus.DIVERGED
        else:
            record.status = TrialStatus.PAUSED
