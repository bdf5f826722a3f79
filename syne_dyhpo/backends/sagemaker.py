"""
:class:`SageMakerBackend`: a Syne Tune 0.16 trial backend that runs every segment of
a trial as an Amazon SageMaker training job, for pause-and-resume (freeze-thaw)
schedulers such as :class:`~syne_dyhpo.DyHPO` and :class:`~syne_dyhpo.DeepPowerLaw`.

One trial, many jobs:

* start: a job ``<tuner>-<trial>-0`` with the trial's config as hyperparameters, plus
  ``st_checkpoint_dir=/opt/ml/checkpoints``, the folder SageMaker syncs with the
  trial's own ``checkpoint_s3_uri`` (``<s3_path>/<tuner>/checkpoints/<trial>``);
* pause and stop: ``StopTrainingJob``; SageMaker uploads the checkpoint folder a last
  time while the job is ``Stopping``;
* resume: a new job ``<tuner>-<trial>-<n>`` on the same checkpoint URI. It is created
  only once the previous job has ended (``Stopped``, ``Completed`` or ``Failed``) and
  its log has been read to the end: before that, the checkpoint in S3 may still be
  replaced, and lines of the old job could arrive after lines of the new one. Until
  then the trial is reported ``InProgress``;
* results: the ``[tune-metric]`` lines :class:`~syne_tune.Reporter` printed, read
  incrementally from the jobs' CloudWatch log streams, job after job. The trial's
  result list only ever grows at its end, so Syne Tune's ``fetch_status_results``
  hands every result to the scheduler once, in order (results printed after a pause
  decision are delivered when the trial is resumed, as with ``LocalBackend``);
* failure: a ``Failed`` job, a job that completed without reporting anything, or a
  job SageMaker refused to create, marks the trial ``Failed`` (its reason is logged
  and is in :meth:`SageMakerBackend.stderr`); the tuner goes on, and results already
  read are kept.

Checkpoints (``delete_checkpoints=True``): S3 checkpoints are deleted for the trials the
scheduler retires (``PausedCheckpoints.max_kept``; its callback, which the Tuner adds when
the backend has ``delete_checkpoints=True``, calls :meth:`SageMakerBackend.delete_checkpoint`)
and, by Syne Tune's semantics (``TrialBackend.stop_trial``), for trials the Tuner stops
while their job still runs (the scheduler's STOP: finished at ``max_t``, diverged,
retired; never resumed). A deletion waits until the trial's job has ended, or
SageMaker's last upload would bring the files back. Paused trials, and trials still
running when tuning ends, keep theirs (unlike ``LocalBackend``, which deletes every
checkpoint at the end: pass ``delete_checkpoints_at_end=True`` for that).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError as _ex:  # pragma: no cover - depends on the install
    raise ImportError(
        "syne_dyhpo.backends.sagemaker needs boto3: pip install 'syne-dyhpo[sagemaker]'"
    ) from _ex

from syne_tune.backend.trial_backend import TrialBackend
from syne_tune.backend.trial_status import Status, TrialResult

from syne_dyhpo.backends.cloudwatch_logs import JobLogTail, metrics_from_log_lines
from syne_dyhpo.backends.s3 import S3Location, copy_prefix, delete_prefix
from syne_dyhpo.backends.sagemaker_job import (
    TrainingJobSettings,
    create_training_job_request,
    job_name_base,
    program_name,
    training_job_name,
)
from syne_dyhpo.backends.source_package import build_source_archive, check_sources
from syne_dyhpo.backends.trial_jobs import TERMINAL_JOB_STATUSES, SegmentJob, TrialJobs
from syne_dyhpo.checks import checked_number

logger = logging.getLogger(__name__)

_AWS_ERRORS = (ClientError, BotoCoreError)


class SageMakerBackend(TrialBackend):
    """
    Runs each trial segment as a SageMaker training job; see the module docstring for
    how starts, pauses, resumes, results, failures and checkpoints map to jobs.

    The training script must follow the protocol of ``LocalBackend`` scripts (see
    ``launch/train_mlp.py``): hyperparameters arrive as ``--key value``, the
    checkpoint folder as ``--st_checkpoint_dir`` (here ``/opt/ml/checkpoints``), and
    results are reported with :class:`syne_tune.Reporter` after the checkpoint is
    written.

    :param entry_point: The training script; relative to ``source_dir`` if given
    :param role: IAM role ARN the jobs run with (needs SageMaker, S3 and CloudWatch
        Logs access, e.g. ``AmazonSageMakerFullAccess``)
    :param instance_type: e.g. ``ml.m5.large``
    :param s3_path: ``s3://bucket/prefix`` under which each tuning run gets a folder
        ``<tuner name>/`` holding ``source/sourcedir.tar.gz``, ``checkpoints/<trial>/``
        and ``output/``
    :param region: AWS region; default: the region of ``boto_session`` (your AWS
        configuration)
    :param image_uri: Training image (a PyTorch framework image, or any image with the
        SageMaker training toolkit). Exactly one of ``image_uri`` and
        ``framework_version``
    :param framework_version: PyTorch version of AWS's Deep Learning Container, e.g.
        "2.5.1" (see :func:`~syne_dyhpo.backends.sagemaker_job.pytorch_training_image_uri`)
    :param py_version: Python of that container. Defaults to "py311"
    :param source_dir: Folder shipped with the script (unpacked to ``/opt/ml/code``)
    :param dependencies: Folders copied next to the script, e.g. a package of your own
        (``syne_dyhpo.__path__[0]`` for the checkpointing helpers)
    :param requirements: pip requirements the container installs before running the
        script, e.g. ``["syne-tune==0.16.0"]``
    :param volume_size_gb: see :class:`~syne_dyhpo.backends.sagemaker_job.TrainingJobSettings`
    :param max_run_seconds: see :class:`~syne_dyhpo.backends.sagemaker_job.TrainingJobSettings`
    :param keep_alive_period_seconds: see
        :class:`~syne_dyhpo.backends.sagemaker_job.TrainingJobSettings`
    :param environment: Environment variables of the jobs
    :param tags: Tags of the jobs
    :param delete_checkpoints: Syne Tune's flag: delete the checkpoints of stopped and
        retired trials (see the module docstring). Defaults to False
    :param delete_checkpoints_at_end: With ``delete_checkpoints``, also delete the
        checkpoints of paused and still running trials when tuning ends (what
        ``LocalBackend`` does). Defaults to False: they stay in S3
    :param log_grace_period: Seconds between seeing a job ended and the last read of
        its log (CloudWatch may receive the last lines after the job ended). Defaults
        to 10
    :param stop_timeout: Most seconds :meth:`stop_all` waits for stopping jobs whose
        checkpoints it must delete. Defaults to 900
    :param poll_interval: Seconds between polls while :meth:`stop_all` waits.
        Defaults to 5
    :param boto_session: boto3 session the clients are made from; default: a new one
        for ``region``. (Not pickled: a restored backend makes a new default session)
    """

    def __init__(
        self,
        entry_point: str,
        role: str,
        instance_type: str,
        s3_path: str,
        region: str | None = None,
        image_uri: str | None = None,
        framework_version: str | None = None,
        py_version: str = "py311",
        source_dir: str | None = None,
        dependencies: Sequence[str] = (),
        requirements: Sequence[str] = (),
        volume_size_gb: int = 30,
        max_run_seconds: int = 86400,
        keep_alive_period_seconds: int | None = None,
        environment: dict[str, str] | None = None,
        tags: dict[str, str] | None = None,
        delete_checkpoints: bool = False,
        delete_checkpoints_at_end: bool = False,
        log_grace_period: float = 10.0,
        stop_timeout: float = 900.0,
        poll_interval: float = 5.0,
        boto_session: Any | None = None,
    ):
        super().__init__(delete_checkpoints=delete_checkpoints, pass_args_as_json=False)
        if isinstance(dependencies, str) or isinstance(requirements, str):
            raise ValueError("dependencies and requirements must be lists of strings, not a single string")
        check_sources(entry_point, source_dir, dependencies)
        for name, value in (("log_grace_period", log_grace_period), ("stop_timeout", stop_timeout),
                            ("poll_interval", poll_interval)):
            checked_number(name, value, 0.0, sys.float_info.max, "a finite number >= 0")
        self._session = boto_session
        if region is None:
            region = (boto_session or boto3.Session()).region_name
        self.settings = TrainingJobSettings(
            role=role,
            instance_type=instance_type,
            region=region,
            image_uri=image_uri,
            framework_version=framework_version,
            py_version=py_version,
            volume_size_gb=volume_size_gb,
            max_run_seconds=max_run_seconds,
            keep_alive_period_seconds=keep_alive_period_seconds,
            environment=dict(environment or {}),
            tags=dict(tags or {}),
        )
        self.s3_root = S3Location.parse(s3_path, "s3_path")
        self.entry_point = str(entry_point)
        self.source_dir = None if source_dir is None else str(source_dir)
        self.dependencies = [str(d) for d in dependencies]
        self.requirements = [str(r) for r in requirements]
        self.delete_checkpoints_at_end = delete_checkpoints_at_end
        self.log_grace_period = float(log_grace_period)
        self.stop_timeout = float(stop_timeout)
        self.poll_interval = float(poll_interval)
        self.tuner_name: str | None = None
        self._source_uri: S3Location | None = None
        self._trials: dict[int, TrialJobs] = {}
        self._clients: dict[str, Any] = {}

    # ------------------------------------------------------------------ clients

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            if self._session is None:
                self._session = boto3.Session(region_name=self.settings.region)
            config = Config(retries={"max_attempts": 10, "mode": "standard"}, connect_timeout=10, read_timeout=60)
            self._clients[service] = self._session.client(service, region_name=self.settings.region, config=config)
        return self._clients[service]

    @property
    def sagemaker_client(self) -> Any:
        """boto3 SageMaker client the backend uses."""
        return self._client("sagemaker")

    @property
    def s3_client(self) -> Any:
        """boto3 S3 client the backend uses."""
        return self._client("s3")

    @property
    def logs_client(self) -> Any:
        """boto3 CloudWatch Logs client the backend uses."""
        return self._client("logs")

    def __getstate__(self) -> dict[str, Any]:
        # boto3 sessions and clients cannot be pickled (Tuner.save uses dill)
        state = dict(self.__dict__)
        state["_session"] = None
        state["_clients"] = {}
        return state

    # ------------------------------------------------------------------ paths

    def set_path(self, results_root: str | None = None, tuner_name: str | None = None):
        """Called by the Tuner: its name (with time stamp) names the S3 folder and the jobs."""
        if tuner_name is not None:
            self.tuner_name = tuner_name

    def _run_name(self) -> str:
        """The Tuner's name, or one with a time stamp if no Tuner named the run."""
        if self.tuner_name is None:
            self.tuner_name = f"syne-dyhpo-{datetime.now():%Y-%m-%d-%H-%M-%S}"
        return self.tuner_name

    def _run_location(self) -> S3Location:
        return self.s3_root.child(job_name_base(self._run_name()))

    def checkpoint_location(self, trial_id: int) -> S3Location:
        """
        :param trial_id: Trial ID
        :return: The trial's ``checkpoint_s3_uri`` (same for all its jobs)
        """
        return self._run_location().child("checkpoints", trial_id)

    def entrypoint_path(self) -> Path:
        return Path(self.entry_point)

    def set_entrypoint(self, entry_point: str):
        check_sources(entry_point, self.source_dir, self.dependencies)
        self.entry_point = entry_point
        self._source_uri = None  # upload again on the next job

    # ------------------------------------------------------------------ jobs

    def _trial(self, trial_id: int) -> TrialJobs:
        if trial_id not in self._trials:
            self._trials[trial_id] = TrialJobs(trial_id=trial_id, checkpoint=self.checkpoint_location(trial_id))
        return self._trials[trial_id]

    def _ensure_source_uploaded(self) -> S3Location:
        if self._source_uri is None:
            location = self._run_location().child("source", "sourcedir.tar.gz")
            archive = build_source_archive(self.entry_point, self.source_dir, self.dependencies, self.requirements)
            try:
                self.s3_client.put_object(Bucket=location.bucket, Key=location.key, Body=archive)
            except _AWS_ERRORS as ex:
                raise RuntimeError(
                    f"could not upload the training code to {location.uri} (s3_path={self.s3_root.uri!r}): {ex}"
                ) from ex
            logger.info(f"Uploaded the training code ({len(archive)} bytes) to {location.uri}")
            self._source_uri = location
        return self._source_uri

    def _schedule(self, trial_id: int, config: dict[str, Any]):
        trial = self._trial(trial_id)
        trial.requested = None
        if trial.job_active:
            # a resume right after a pause: the paused job may still upload its final
            # checkpoint and print its last lines; create the new job once it has ended
            trial.pending_config = dict(config)
            job = trial.job
            assert job is not None  # an active job exists
            logger.info(f"trial_id {trial_id}: resume waits for job {job.name} to end ({job.status})")
        else:
            self._create_job(trial, config)

    def _create_job(self, trial: TrialJobs, config: dict[str, Any]) -> None:
        trial.pending_config = None
        source_uri = self._ensure_source_uploaded()
        name = training_job_name(job_name_base(self._run_name()), trial.trial_id, len(trial.jobs))
        try:
            request = create_training_job_request(
                self.settings,
                job_name=name,
                config=config,
                program=program_name(self.entry_point, self.source_dir),
                source_uri=source_uri,
                checkpoint_uri=trial.checkpoint,
                output_uri=self._run_location().child("output"),
            )
        except ValueError as ex:
            trial.failure = f"training job {name} could not be created: {ex}"
            return
        try:
            self.sagemaker_client.create_training_job(**request)
        except _AWS_ERRORS as ex:
            if not self._job_exists(name):
                trial.failure = f"training job {name} could not be created: {ex}"
                return
            # botocore retried a request whose first attempt went through (a timeout, say):
            # the job is ours; failing the trial would leave it running unwatched
            logger.info(f"trial_id {trial.trial_id}: job {name} exists although creating it reported: {ex}")
        trial.jobs.append(SegmentJob(name=name, tail=JobLogTail(name)))
        logger.info(f"trial_id {trial.trial_id}: started training job {name} (checkpoints: {trial.checkpoint.uri})")

    def _job_exists(self, name: str) -> bool:
        try:
            self.sagemaker_client.describe_training_job(TrainingJobName=name)
            return True
        except _AWS_ERRORS:
            return False

    def _stop_job(self, trial: TrialJobs) -> None:
        trial.pending_config = None  # a resume not yet started is simply not started
        job = trial.job
        if job is None or job.final or job.status in TERMINAL_JOB_STATUSES or job.status == "Stopping":
            return
        try:
            self.sagemaker_client.stop_training_job(TrainingJobName=job.name)
            logger.info(f"trial_id {trial.trial_id}: stopping training job {job.name}")
        except ClientError as ex:
            # the job may have ended by itself since we last looked (a segment ends at
            # its last epoch): that is fine, anything else is worth a warning
            if ex.response.get("Error", {}).get("Code") != "ValidationException":
                logger.warning(f"trial_id {trial.trial_id}: could not stop job {job.name}: {ex}")
        except BotoCoreError as ex:
            logger.warning(f"trial_id {trial.trial_id}: could not stop job {job.name}: {ex}")

    def _pause_trial(self, trial_id: int, result: dict | None):
        trial = self._trial(trial_id)
        self._stop_job(trial)
        trial.requested = "pause"

    def _resume_trial(self, trial_id: int):
        trial = self._trial(trial_id)
        if trial.delete_requested:
            logger.warning(f"trial_id {trial_id} is resumed although its checkpoint is to be deleted")

    def _stop_trial(self, trial_id: int, result: dict | None):
        trial = self._trial(trial_id)
        self._stop_job(trial)
        trial.requested = "stop"

    # ------------------------------------------------------------------ polling

    def _poll_job(self, trial: TrialJobs) -> None:
        """Refreshes the status of the trial's last job and reads its new log lines."""
        job = trial.job
        if job is None or job.final:
            return
        if job.status not in TERMINAL_JOB_STATUSES:
            try:
                desc = self.sagemaker_client.describe_training_job(TrainingJobName=job.name)
            except _AWS_ERRORS as ex:
                logger.warning(f"trial_id {trial.trial_id}: could not describe job {job.name}: {ex}")
            else:
                job.status = desc["TrainingJobStatus"]
                job.failure_reason = desc.get("FailureReason")
                job.end_time = desc.get("TrainingEndTime")
                if job.status in TERMINAL_JOB_STATUSES:
                    job.terminal_since = time.monotonic()
        now = time.monotonic()
        last_read = job.terminal_since is not None and now - job.terminal_since >= self.log_grace_period
        try:
            new_lines = job.tail.read_new(self.logs_client, final=last_read)
        except _AWS_ERRORS as ex:
            logger.warning(f"trial_id {trial.trial_id}: could not read the log of job {job.name}: {ex}")
            return
        trial.lines += [line.message for line in new_lines]
        trial.metrics += metrics_from_log_lines(new_lines, job.name)
        if last_read:
            job.final = True  # this read started after the grace period: the log is complete

    def _housekeep(self, trial: TrialJobs) -> None:
        """Polls, then does what waited for the trial's job to end (deletion, resume)."""
        self._poll_job(trial)
        if trial.job_active:
            return
        if trial.delete_requested:
            self._delete_now(trial)
        if trial.pending_config is not None and trial.requested is None:
            self._create_job(trial, trial.pending_config)

    def failure_reason(self, trial_id: int) -> str | None:
        """
        :param trial_id: Trial ID
        :return: Why the trial failed (SageMaker's ``FailureReason`` of its job, or why
            no job could be created or it reported nothing), or None
        """
        trial = self._trials.get(trial_id)
        return None if trial is None else trial.failure_reason()

    def _trial_result(self, trial: TrialJobs) -> TrialResult:
        status = trial.status()
        if status == Status.failed and not trial.failure_logged:
            trial.failure_logged = True
            logger.warning(f"trial_id {trial.trial_id} failed: {self.failure_reason(trial.trial_id)}")
        job = trial.job
        return self._trial_dict[trial.trial_id].add_results(
            metrics=list(trial.metrics),
            status=status,
            training_end_time=job.end_time if job is not None else None,
        )

    def _all_trial_results(self, trial_ids: list[int]) -> list[TrialResult]:
        # trials the tuner no longer polls (paused, retired) may have a deletion waiting
        for trial in self._trials.values():
            if trial.delete_requested and trial.trial_id not in trial_ids:
                self._housekeep(trial)
        results = []
        for trial_id in trial_ids:
            trial = self._trial(trial_id)
            self._housekeep(trial)
            results.append(self._trial_result(trial))
        return results

    def busy_trial_ids(self) -> list[tuple[int, str]]:
        busy = []
        for trial in self._trials.values():
            if trial.requested is None and trial.failure is None and (trial.job_active or trial.pending_config):
                self._housekeep(trial)
                status = trial.status()
                if status in (Status.in_progress, Status.stopping):
                    busy.append((trial.trial_id, status))
        return busy

    def stdout(self, trial_id: int) -> list[str]:
        """Log lines of all the trial's jobs read so far (SageMaker merges stdout and stderr)."""
        trial = self._trials.get(trial_id)
        return [] if trial is None else [line + "\n" for line in trial.lines]

    def stderr(self, trial_id: int) -> list[str]:
        """Same lines as :meth:`stdout`, followed by the failure reason if the trial failed."""
        reason = self.failure_reason(trial_id)
        return self.stdout(trial_id) + ([f"FailureReason: {reason}\n"] if reason else [])

    def job_names(self, trial_id: int) -> list[str]:
        """
        :param trial_id: Trial ID
        :return: Names of the trial's training jobs, first segment first
        """
        trial = self._trials.get(trial_id)
        return [] if trial is None else [job.name for job in trial.jobs]

    # ------------------------------------------------------------------ checkpoints

    def _delete_now(self, trial: TrialJobs) -> None:
        try:
            count = delete_prefix(self.s3_client, trial.checkpoint)
        except (RuntimeError, *_AWS_ERRORS) as ex:
            logger.warning(f"trial_id {trial.trial_id}: deleting {trial.checkpoint.uri} failed, will retry: {ex}")
            return
        trial.delete_requested = False
        logger.info(f"trial_id {trial.trial_id}: deleted its checkpoint ({count} objects under {trial.checkpoint.uri})")

    def delete_checkpoint(self, trial_id: int):
        """
        Deletes the trial's checkpoint in S3, at once if its last job has ended, else as
        soon as it has (SageMaker uploads the checkpoint folder a last time while a job
        is stopping). Nothing to delete is fine.

        :param trial_id: Trial ID
        """
        trial = self._trial(trial_id)
        trial.delete_requested = True
        self._housekeep(trial)

    def copy_checkpoint(self, src_trial_id: int, tgt_trial_id: int):
        """
        Copies the checkpoint of one trial to another in S3 (for schedulers that start a
        new trial from an old one's checkpoint).

        :param src_trial_id: Source trial ID
        :param tgt_trial_id: Target trial ID
        """
        source = self._trial(src_trial_id)
        self._poll_job(source)
        if source.job_active:
            job = source.job
            assert job is not None  # an active job exists
            logger.warning(
                f"copying the checkpoint of trial_id {src_trial_id} while its job {job.name} is still "
                f"{job.status}: its last upload may be missing"
            )
        count = copy_prefix(self.s3_client, source.checkpoint, self._trial(tgt_trial_id).checkpoint)
        logger.info(f"Copied {count} checkpoint objects of trial_id {src_trial_id} to trial_id {tgt_trial_id}")

    def stop_all(self):
        """
        Called by the Tuner when tuning ends: stops every job still running (the trials
        keep their checkpoints, as paused ones do), then carries out the deletions still
        waiting for a job to end, waiting at most ``stop_timeout`` seconds. With
        ``delete_checkpoints`` and ``delete_checkpoints_at_end``, every trial's
        checkpoint is deleted too.
        """
        for trial in self._trials.values():
            self._poll_job(trial)
            if trial.requested is None and (trial.job_active or trial.pending_config is not None):
                self._stop_trial(trial.trial_id, None)
                self._trial_dict[trial.trial_id].status = Status.stopped
        if self.delete_checkpoints and self.delete_checkpoints_at_end:
            for trial in self._trials.values():
                trial.delete_requested = True
        deadline = time.monotonic() + self.stop_timeout
        while True:
            waiting = [t for t in self._trials.values() if t.delete_requested]
            for trial in waiting:
                self._housekeep(trial)
            waiting = [t for t in waiting if t.delete_requested]
            if not waiting:
                return
            if time.monotonic() >= deadline:
                logger.warning(
                    "Gave up waiting for the jobs of trials "
                    f"{[t.trial_id for t in waiting]} to end: their checkpoints were not deleted: "
                    + ", ".join(t.checkpoint.uri for t in waiting)
                )
                return
            time.sleep(self.poll_interval)

    def __str__(self) -> str:
        return f"SageMaker entry_point {Path(self.entry_point).name} on {self.settings.instance_type}"
