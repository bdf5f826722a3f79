"""
What :class:`~syne_dyhpo.backends.sagemaker.SageMakerBackend` knows about a trial: its
training jobs (one per segment), the results and log lines read from them so far, what
the tuner asked for, and the Syne Tune status all this amounts to. No AWS calls here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from syne_tune.backend.trial_status import Status

from syne_dyhpo.backends.cloudwatch_logs import JobLogTail
from syne_dyhpo.backends.s3 import S3Location

TERMINAL_JOB_STATUSES = ("Completed", "Failed", "Stopped")
"""SageMaker job statuses after which nothing changes any more."""


@dataclass
class SegmentJob:
    """
    One training job (one segment) of a trial, as last seen.

    :param name: Training job name
    :param tail: Reader of its log
    :param status: ``TrainingJobStatus`` last seen
    :param failure_reason: SageMaker's ``FailureReason``, if any
    :param end_time: ``TrainingEndTime``, if ended
    :param terminal_since: ``time.monotonic()`` when first seen ended
    :param final: Ended and its log read to the end: nothing more can come from it
    """

    name: str
    tail: JobLogTail
    status: str = "InProgress"
    failure_reason: str | None = None
    end_time: datetime | None = None
    terminal_since: float | None = None
    final: bool = False


@dataclass
class TrialJobs:
    """
    A trial's jobs and what was read from them. ``metrics`` and ``lines`` only grow at
    their end (job after job), which is what makes Syne Tune's delivery of results
    (by index of the last one seen) exactly-once and in order.

    :param trial_id: Trial ID
    :param checkpoint: The trial's ``checkpoint_s3_uri``, shared by all its jobs
    """

    trial_id: int
    checkpoint: S3Location
    jobs: list[SegmentJob] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    requested: str | None = None  # "pause" or "stop" once the tuner asked for it
    pending_config: dict[str, Any] | None = None  # a resume waiting for the last job to end
    delete_requested: bool = False  # the checkpoint goes once no job can write it
    failure: str | None = None  # a failure that is not a job's (creation refused, no results)
    failure_logged: bool = False

    @property
    def job(self) -> SegmentJob | None:
        """The latest job, or None if none was created."""
        return self.jobs[-1] if self.jobs else None

    @property
    def job_active(self) -> bool:
        """A job exists that may still write logs or checkpoints."""
        return self.job is not None and not self.job.final

    def status(self) -> str:
        """
        :return: Syne Tune status: what the tuner asked for (paused, stopped) wins; a
            trial waiting for its resumed job, or whose job has ended but whose log is
            not read out yet, is in progress; a job that completed without any result
            ever reported fails the trial (Syne Tune's Tuner would raise on it)
        """
        if self.requested == "pause":
            return Status.paused
        if self.requested == "stop":
            return Status.stopped
        if self.failure is not None:
            return Status.failed
        job = self.job
        if self.pending_config is not None or job is None:
            return Status.in_progress
        if not job.final:
            return Status.stopping if job.status == "Stopping" else Status.in_progress
        if job.status == "Completed":
            if not self.metrics:
                self.failure = (
                    f"training job {job.name} completed without reporting any result "
                    "(no '[tune-metric]' line in its log)"
                )
                return Status.failed
            return Status.completed
        if job.status == "Failed":
            return Status.failed
        return Status.stopped  # stopped by someone else (console, MaxRuntimeInSeconds)

    def failure_reason(self) -> str | None:
        """
        :return: Why the trial failed (SageMaker's ``FailureReason`` of its job, or why
            no job could be created or it reported nothing), or None
        """
        if self.failure is not None:
            return self.failure
        job = self.job
        if job is not None and job.final and job.status == "Failed":
            return f"training job {job.name} failed: {job.failure_reason or 'no reason given'}"
        return None
